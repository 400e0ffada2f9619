// omnidub review: the page over one rendered folder. Every control names what it does and to which line, so a
// screen reader (or a script) finds "Approve line 3", "Retake line 3", "Text of line 3" by name.
(function () {
  "use strict";
  const PPS = 12;  // timeline pixels per second
  const $ = (id) => document.getElementById(id);
  let state = null, selected = null, mixBusted = 0, done = "";  // done: what the last action came to

  // -- helpers -------------------------------------------------------------------------------------------------
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else if (k === "style") Object.assign(node.style, v);  // CSSOM: the page's policy allows no inline styles
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const child of children) if (child) node.append(child);
    return node;
  }
  function clock(t) {
    t = Math.max(0, t || 0);
    const h = Math.floor(t / 3600), m = Math.floor(t % 3600 / 60), s = (t % 60).toFixed(2).padStart(5, "0");
    return (h ? h + ":" + String(m).padStart(2, "0") : String(m).padStart(2, "0")) + ":" + s;
  }
  function seconds(t) { return t === null || t === undefined ? "" : t.toFixed(2) + " s"; }
  const LABELS = {passed: "Passed", failed: "Failed", unchecked: "Unchecked"};
  function verdictText(line) {
    let text = LABELS[line.verdict] || line.verdict;
    if (line.verdict === "failed" && line.severity) text += " (" + line.severity + ")";
    return text;
  }
  async function post(path, body) {
    $("error").textContent = "";
    try {
      const response = await fetch(path, {method: "POST", headers: {"Content-Type": "application/json"},
                                           body: JSON.stringify(body || {}), credentials: "same-origin"});
      if (!response.ok) {
        const data = await response.json().catch(() => ({}));
        $("error").textContent = data.error || ("refused: " + response.status);
      }
    } catch (e) {
      lost();
    }
  }
  function lineAction(index, action, body) { return post("/api/lines/" + index + "/" + action, body); }
  function approve(i) {  // names the audio the editor heard: a take made since is not approved unheard
    const line = state.lines.find((l) => l.index === i);
    return lineAction(i, "approve", line.approved ? {approved: false} : {approved: true, key: line.key});
  }

  // -- one line ------------------------------------------------------------------------------------------------
  function lineArticle(line) {
    const i = line.index, id = "line-" + i;
    const article = el("article", {class: "line " + line.verdict + (selected === i ? " selected" : ""), id,
                                   tabindex: "-1", "aria-labelledby": id + "-title", "data-index": i});
    article.addEventListener("click", () => select(i, false));
    article.append(el("h2", {id: id + "-title",
                             text: "Line " + i + " · " + line.speaker + " · " + clock(line.start) + " to " +
                                   clock(line.end)}));
    const figures = [];
    if (line.error_rate !== null && line.error_rate !== undefined)
      figures.push("error rate " + Math.round(line.error_rate * 100) + " %");
    if (line.voice_similarity !== null && line.voice_similarity !== undefined)
      figures.push("voice " + line.voice_similarity.toFixed(2));
    if (line.flags.length) figures.push(line.flags.join(", "));
    article.append(el("p", {},
      el("span", {class: "verdict " + line.verdict, text: verdictText(line)}),
      line.approved ? el("span", {class: "approved-badge", text: " · approved"}) : null,
      figures.length ? el("span", {class: "small", text: " · " + figures.join(" · ")}) : null));
    if (line.reasons.length) {
      article.append(el("ul", {class: "reasons", "aria-label": "Why, line " + i},
                        ...line.reasons.map((r) => el("li", {text: r}))));
    }
    article.append(player("Dub of line " + i, line.audio, line.duration));
    if (line.waveform) article.append(wave(i, line.waveform));
    if (line.original) {
      const said = line.reference && line.reference.text ? " (" + line.reference.text + ")" : "";
      article.append(player("Original of line " + i, line.original, null, said));
    }
    const textId = "text-" + i;
    article.append(el("label", {for: textId, text: "Text of line " + i}));
    const text = el("textarea", {id: textId, rows: 2, "data-text": line.text});
    text.value = line.text;
    article.append(text);
    if (line.input_text !== line.text) article.append(el("p", {class: "small", text: "Input: " + line.input_text}));
    const cap = el("input", {type: "number", id: "cap-" + i, min: "1", max: "4", step: "0.05",
                             placeholder: String(state.max_speedup), value: line.max_speedup || ""});
    const borrow = el("input", {type: "checkbox", id: "borrow-" + i, checked: line.borrow});
    // Who says it (and whose stem it is in): any voice of this render; the input's own speaker is always offered.
    const voices = [...new Set([line.input_speaker, line.speaker, ...state.speakers])];
    const who = el("select", {id: "speaker-" + i},
                   ...voices.map((v) => el("option", {value: v, text: v, selected: v === line.speaker})));
    article.append(el("div", {class: "row"}, el("label", {for: "speaker-" + i, text: "Speaker of line " + i}), who,
      line.speaker !== line.input_speaker ? el("span", {class: "small", text: "Input: " + line.input_speaker}) : null));
    article.append(el("div", {class: "row fit"},
      el("label", {for: "cap-" + i, text: "Speed cap of line " + i}), cap,
      borrow, el("label", {for: "borrow-" + i, text: "Line " + i + " may borrow the gap"}),
      el("span", {class: "small", text: "slot " + seconds(line.slot) + " · planned " + seconds(line.target)})));
    const buttons = [
      el("button", {type: "button", "aria-pressed": line.approved ? "true" : "false",
                    onclick: () => approve(i), text: "Approve line " + i}),
      el("button", {type: "button", onclick: () => lineAction(i, "retake"), text: "Retake line " + i}),
      el("button", {type: "button", onclick: () => renderLine(i), text: "Render line " + i}),
    ];
    if (state.source) {
      buttons.push(el("button", {type: "button", onclick: () => lineAction(i, "edit", {voice: "line"}),
                                 text: "Retake line " + i + " from its own clip"}));
      buttons.push(el("button", {type: "button", onclick: () => lineAction(i, "edit", {voice: "speaker"}),
                                 text: "Retake line " + i + " from its speaker's clip"}));
    }
    article.append(el("div", {class: "row", role: "group", "aria-label": "Line " + i}, ...buttons));
    if (line.takes.length > 1 || (line.takes.length === 1 && !line.takes[0].chosen)) {
      const takes = el("ol", {class: "takes", "aria-label": "Takes of line " + i});
      for (const take of line.takes) {
        const n = take.number;
        takes.append(el("li", {},
          el("span", {text: "Take " + n + " (seed " + take.seed + ", " + seconds(take.duration) + ", " +
                            (LABELS[take.verdict] || take.verdict) + (take.chosen ? ", in use" : "") + ")"}),
          take.text !== line.text ? el("span", {class: "small", text: " “" + take.text + "”"}) : null,
          el("audio", {controls: true, preload: "none", src: take.audio, "aria-label": "Take " + n + " of line " + i}),
          take.chosen ? null : el("button", {type: "button", onclick: () => lineAction(i, "choose", {take: n}),
                                             text: "Use take " + n + " of line " + i})));
      }
      article.append(takes);
    }
    return article;
  }
  function wave(i, form) {
    // One bar per stretch of the line's audio, its height the stretch's peak; the label says the peak level.
    const NS = "http://www.w3.org/2000/svg", bins = form.peaks.length;
    const full = form.peak_dbfs !== null && form.peak_dbfs >= -0.1;
    const level = form.peak_dbfs === null ? "silent" : "peak " + form.peak_dbfs.toFixed(1) + " dBFS" +
                  (full ? ", at full scale: may clip" : "");
    const svg = document.createElementNS(NS, "svg");
    for (const [k, v] of Object.entries({viewBox: "0 0 " + bins + " 20", preserveAspectRatio: "none", role: "img",
                                         class: "wave" + (full ? " full" : ""),
                                         "aria-label": "Waveform of line " + i + ", " + level}))
      svg.setAttribute(k, v);
    form.peaks.forEach((p, k) => {
      // On a decibel scale from -60 dBFS: a line before the mix's loudness gain is often far under full scale.
      const db = p > 0 ? 20 * Math.log10(p) : -60, h = Math.max(0.3, 20 * Math.max(0, db + 60) / 60);
      const bar = document.createElementNS(NS, "rect");
      for (const [a, v] of Object.entries({x: k + 0.1, width: 0.8, y: (20 - h) / 2, height: h})) bar.setAttribute(a, v);
      svg.append(bar);
    });
    return svg;
  }
  function player(label, src, length, extra) {
    const row = el("div", {class: "row"}, el("span", {text: label + (extra || "")}));
    if (src) {
      const audio = el("audio", {controls: true, preload: "metadata", src, "aria-label": label});
      const shown = el("span", {class: "length", text: length ? seconds(length) : ""});
      audio.addEventListener("loadedmetadata", () => { shown.textContent = seconds(audio.duration); });
      row.append(audio, shown);
    } else {
      row.append(el("span", {class: "small", text: "without audio: " + (line.missing || "not rendered yet")}));
    }
    return row;
  }
  function renderLine(i) {
    const line = state.lines.find((l) => l.index === i);
    const text = $("text-" + i).value, capText = $("cap-" + i).value, borrow = $("borrow-" + i).checked;
    const cap = capText === "" ? null : Number(capText);
    const change = {};
    const base = $("text-" + i).dataset.text;
    if (text !== base) { change.text = text; change.was = base; }
    if (cap !== (line.max_speedup || null)) change.max_speedup = cap;
    if (borrow !== line.borrow) change.borrow = borrow;
    const speaker = $("speaker-" + i).value;
    if (speaker !== line.speaker) change.speaker = speaker;
    if (Object.keys(change).length) return lineAction(i, "edit", change);
    if (!line.audio) return lineAction(i, "render");
    $("status").textContent = "line " + i + ": nothing changed to render (Retake line " + i + " makes a new take)";
  }

  // -- the whole page ------------------------------------------------------------------------------------------
  function showCounts(counts) {
    const parts = [counts.failed + " failed", counts.unchecked + " unchecked", counts.passed + " passed",
                   counts.approved + " of " + counts.lines + " approved"];
    if (counts.unrendered) parts.push(counts.unrendered + " without audio");
    $("counts").textContent = parts.join(" · ");
  }
  function showStatus(status) {
    if (status.busy) {
      done = "";
      $("status").textContent = "Working: " + status.busy + (status.queued ? " (" + status.queued + " more queued)" : "");
    } else $("status").textContent = status.queued ? status.queued + " queued" : (done || "Ready.");
  }
  function timeline() {
    const lanes = $("lanes"), names = $("names"), program = Math.max(state.program_seconds, 1);
    lanes.querySelectorAll(".lane").forEach((n) => n.remove());
    names.replaceChildren(el("div", {text: ""}));
    lanes.style.width = Math.max(lanes.parentElement.clientWidth, Math.ceil(program * PPS)) + "px";
    const ruler = $("ruler");
    ruler.replaceChildren();
    const step = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600].find((s) => s * PPS >= 60) || 600;
    for (let t = 0; t <= program; t += step)
      ruler.append(el("span", {text: clock(t).replace(/\.\d\d$/, ""), style: {left: (100 * t / program) + "%"}}));
    for (const speaker of new Set([...state.speakers, ...state.lines.map((l) => l.speaker)])) {
      names.append(el("div", {text: speaker, title: speaker}));
      const lane = el("div", {class: "lane", "data-speaker": speaker});
      for (const line of state.lines.filter((l) => l.speaker === speaker)) lane.append(...blocks(line, program));
      lanes.append(lane);
    }
  }
  function blocks(line, program) {
    const left = (100 * line.start / program) + "%";
    const slot = el("div", {class: "slot", style: {left,
                            width: (100 * Math.max(line.end - line.start, 0.04) / program) + "%"}});
    const length = line.duration || line.target;
    const block = el("button", {type: "button", class: "block " + (line.audio ? line.verdict : "none") +
                                (line.approved ? " approved" : "") + (selected === line.index ? " selected" : ""),
                                id: "block-" + line.index, "aria-label": "Select line " + line.index,
                                style: {left, width: (100 * length / program) + "%"},
                                text: String(line.index)});
    block.addEventListener("click", (e) => { e.stopPropagation(); select(line.index, true); seekMix(line.start); });
    return [slot, block];
  }
  function replaceLine(line) {
    const at = state.lines.findIndex((l) => l.index === line.index);
    if (at < 0) return;
    const old = document.getElementById("line-" + line.index);
    const editing = old && old.contains(document.activeElement) ? document.activeElement.id : null;
    const typed = old ? $("text-" + line.index).value : null;
    const base = old ? old.querySelector("textarea").dataset.text : null;  // the text the editor started from
    const dirty = old && typed !== base;
    const moved = state.lines[at].speaker !== line.speaker;  // its block goes to another lane
    state.lines[at] = line;
    const article = lineArticle(line);
    if (old) old.replaceWith(article); else $("lines").append(article);
    if (dirty && typed !== line.text) {  // unsaved typing stays; a Render of it names the text it started from
      const area = $("text-" + line.index);
      area.value = typed;
      area.dataset.text = base;
    }
    if (editing && document.getElementById(editing)) document.getElementById(editing).focus();
    const block = $("block-" + line.index);
    if (moved) timeline();
    else if (block) block.replaceWith(blocks(line, Math.max(state.program_seconds, 1))[1]);
  }
  function select(index, scroll) {
    if (!state.lines.some((l) => l.index === index)) return;
    const before = selected;
    selected = index;
    for (const i of [before, index]) {
      if (i === null) continue;
      const article = document.getElementById("line-" + i), block = $("block-" + i);
      if (article) article.classList.toggle("selected", i === index);
      if (block) block.classList.toggle("selected", i === index);
    }
    const article = document.getElementById("line-" + index);
    if (scroll && article) { article.scrollIntoView({block: "nearest"}); article.focus({preventScroll: true}); }
  }
  function step(by) {
    const order = state.lines.map((l) => l.index);
    const at = selected === null ? (by > 0 ? -1 : order.length) : order.indexOf(selected);
    const next = order[Math.min(order.length - 1, Math.max(0, at + by))];
    if (next !== undefined) select(next, true);
  }
  function seekMix(t) {
    const mix = $("mix");
    if (mix.src) { mix.currentTime = t; }
  }
  function loadMix() {
    const mix = $("mix");
    if (!state.mix) {
      mix.removeAttribute("src");
      $("mix-length").textContent = "not assembled from the lines as they are: Deliver assembles it";
      return;
    }
    const src = state.mix + "?v=" + mixBusted;
    if (mix.getAttribute("src") === src) return;  // the same mix already loaded (and maybe playing)
    mix.src = src;
    mix.addEventListener("loadedmetadata", () => { $("mix-length").textContent = seconds(mix.duration); },
                         {once: true});
  }

  document.addEventListener("keydown", (e) => {
    const tag = (e.target.tagName || "").toLowerCase();
    if (tag === "textarea" || tag === "input" || e.ctrlKey || e.metaKey || e.altKey) return;
    if (!state) return;
    if (e.key === "j" || e.key === "ArrowDown") { step(1); e.preventDefault(); }
    else if (e.key === "k" || e.key === "ArrowUp") { step(-1); e.preventDefault(); }
    else if (selected === null) return;
    else if (e.key === "p") {
      const audio = document.querySelector("#line-" + selected + " audio");
      if (audio) { if (audio.paused) audio.play(); else audio.pause(); }
    } else if (e.key === "a") {
      const line = state.lines.find((l) => l.index === selected);
      approve(selected);
    } else if (e.key === "r") lineAction(selected, "retake");
    else if (e.key === "m") {
      const line = state.lines.find((l) => l.index === selected);
      seekMix(line.start); $("mix").play();
    }
  });
  $("lanes").addEventListener("click", (e) => {
    const box = $("lanes").getBoundingClientRect();
    seekMix(Math.max(state.program_seconds, 1) * (e.clientX - box.left) / box.width);
  });
  $("mix").addEventListener("timeupdate", () => {
    const mix = $("mix"), program = Math.max(state.program_seconds, 1);
    $("playhead").style.left = (100 * mix.currentTime / program) + "%";
  });
  $("retake-failed").addEventListener("click", () => post("/api/retake-failed"));
  $("approve-passed").addEventListener("click", () => post("/api/approve-passed"));
  $("deliver").addEventListener("click", () => post("/api/deliver"));

  function lost() {
    $("status").textContent = "";
    $("error").textContent = "The review server is not answering: nothing more is saved from this page. Run " +
                             "omnidub review again on the folder, then reload (every decision so far is saved).";
  }
  async function refetch() {  // the whole state again: events missed while the stream was down are in it
    try {
      const fresh = await (await fetch("/api/state", {credentials: "same-origin"})).json();
      for (const line of fresh.lines) replaceLine(line);
      state.mix = fresh.mix; state.program_seconds = fresh.program_seconds;
      showCounts(fresh.counts); showStatus(fresh.status); loadMix();
      if ($("error").textContent.startsWith("The review server")) $("error").textContent = "";
    } catch (e) { lost(); }
  }
  async function start() {
    const response = await fetch("/api/state", {credentials: "same-origin"});
    state = await response.json();
    document.title = "omnidub review: " + state.title;
    $("title").textContent = "Review of " + state.title + " (" + state.input + ")";
    showCounts(state.counts);
    showStatus(state.status);
    $("lines").replaceChildren(...state.lines.map(lineArticle));
    timeline();
    loadMix();
    const events = new EventSource("/api/events");
    let opened = false;
    events.onopen = () => { if (opened) refetch(); opened = true; };
    events.onerror = () => { if (events.readyState !== EventSource.OPEN) lost(); };
    events.onmessage = (message) => {
      const event = JSON.parse(message.data);
      if (event.type === "line") replaceLine(event.line);
      else if (event.type === "counts") showCounts(event.counts);
      else if (event.type === "status") showStatus(event);
      else if (event.type === "error") $("error").textContent = (event.index ? "line " + event.index + ": " : "") +
                                                                event.text;
      else if (event.type === "progress" || event.type === "note") $("status").textContent = event.text;
      else if (event.type === "mix" && event.mix !== state.mix) { state.mix = event.mix; loadMix(); }
      else if (event.type === "rendering") {
        const article = document.getElementById("line-" + event.index);
        if (article) article.classList.add("busy");
      } else if (event.type === "delivered") {
        mixBusted += 1;
        fetch("/api/state", {credentials: "same-origin"}).then((r) => r.json()).then((fresh) => {
          state.mix = fresh.mix; state.program_seconds = fresh.program_seconds; loadMix();
        });
        done = "Delivered: " + event.files.length + " files written.";
        $("status").textContent = done;
      }
    };
    document.body.dataset.ready = "true";
  }
  start();
})();
