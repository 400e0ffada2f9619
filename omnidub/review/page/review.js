// omnidub review: the page over one rendered folder. A list of every line (only the rows in view are in the
// page), the selected line in full beside it, the mix and the timeline below. Every control names what it does
// and to which line ("Approve line 3", "Text of line 3"), so a screen reader, or a script, finds it by name.
(function () {
  "use strict";
  const ROW = 48;  // a row's height in the list, in pixels (the stylesheet's .row)
  const LOST = "the review server is not answering; run omnidub review OUT_DIR again";
  const $ = (id) => document.getElementById(id);
  let state = null, byIndex = new Map(), view = [], at = new Map(), selected = null;
  let ruled = null, mixBusted = 0, done = "", drawn = false, lost = false;  // ruled: the shared timeline
  let playing = null;  // the media element heard now (the mix, a line's player): the picture and the playhead follow it
  const RATES = [0.5, 0.75, 0.9, 1, 1.1, 1.25, 1.5, 2];
  let rate = 1, looping = false;  // every player's playback rate; whether the selected line loops
  const OVER = 0.01;  // seconds a take may pass its slot before it is said to overflow (its length's rounding)
  const DRIFT = 0.08;  // seconds the picture may drift from the sound before it is put back (two frames at 25/s)
  // The mix player plays the delivered mix while it is the lines as they stand, else the programme as it stands,
  // assembled by the server a span at a time: mixFrom is where the span loaded in it starts in the programme.
  const PROGRAMME = 120;  // seconds of the programme a span holds (the server's limit)
  const NOT_DELIVERED = "the programme as it stands (not delivered)";
  const tracks = {dub: 1, original: 0, bed: 1};  // what the programme mixes in (1) or leaves out (0)
  // changes: lines changed here; waiting: the player asked to play before its audio was ready, and lastAsked:
  // the last player a key or button asked to play (start()), each by its name (a line's players are made again
  // when the line changes): "#mix", or a player's label; readied: how many times the desk said more is decoded
  let mixFrom = 0, changes = 0, waiting = null, lastAsked = null, readied = 0;

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
    for (const child of children) if (child !== null && child !== undefined && child !== false) node.append(child);
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
  // What the server answered that the editor must read (a refusal, what an undo took back, a note) stays on the
  // page until it is dismissed or the next answer replaces it.
  function say(id, text) {
    $(id).textContent = text;
    $(id + "-box").hidden = !text;
  }
  function showLost(yes) {
    lost = yes;
    if (yes) { say("error", LOST); $("status").textContent = "Not connected."; }
    else if ($("error").textContent === LOST) say("error", "");
  }
  async function post(path, body) {
    say("error", "");
    let response;
    try {
      response = await fetch(path, {method: "POST", headers: {"Content-Type": "application/json"},
                                    body: JSON.stringify(body || {}), credentials: "same-origin"});
    } catch (e) {
      showLost(true);
      return false;
    }
    if (!response.ok) {
      const data = await response.json().catch(() => ({}));
      say("error", data.error || ("refused: " + response.status));
      if (response.status === 409) reload();  // the line changed since this page showed it
      return false;
    }
    return true;
  }
  function lineAction(index, action, body) { return post("/api/lines/" + index + "/" + action, body); }
  // Undo takes back the last decision about the line in view (the page says which it took back); with no line
  // selected, the last decision of all.
  function undo() { return selected === null ? post("/api/undo") : lineAction(selected, "undo"); }
  function translationFlags(line) { return (line.translation && line.translation.flags) || []; }
  function deliver() {
    // Deliver names what an editor may not mean to deliver yet, and asks once; with nothing to name it delivers.
    if (!state) return;
    const lines = state.lines, ask = [];
    const open = lines.filter((l) => !l.approved).map((l) => l.index);
    const flagged = lines.filter((l) => l.look_again).map((l) => l.index);
    const translated = lines.filter((l) => translationFlags(l).length).map((l) => l.index);
    if (open.length) ask.push(open.length + " of " + lines.length + " lines not approved: " + ranges(open));
    if (flagged.length) ask.push(flagged.length + " flagged to look at again: " + ranges(flagged));
    if (translated.length) ask.push(translated.length + " with translation flags: " + ranges(translated));
    if (!ask.length) return post("/api/deliver");
    $("deliver-lines").replaceChildren(...ask.map((text) => el("li", {text})));
    $("deliver-ask").showModal();
  }
  function ranges(numbers) {
    // 1, 2, 3, 5 -> "1-3, 5", as the terminal says lines.
    const parts = [];
    for (const n of numbers) {
      const last = parts[parts.length - 1];
      if (last && n === last[1] + 1) last[1] = n; else parts.push([n, n]);
    }
    return parts.map(([a, b]) => a === b ? String(a) : a + "-" + b).join(", ");
  }
  function approve(line) { return lineAction(line.index, "approve", {approved: !line.approved, key: line.key ?? null}); }

  // -- unsent text ------------------------------------------------------------------------------------------------
  // What the editor typed into a line's text and has not rendered is the line's draft: kept in this browser by the
  // folder and the line's identity (its slot and its input text, which an edit leaves as it was), so moving to
  // another line, a reload or another tab's edit of the line never drops it silently. It ends when the line says it
  // (rendered), or when it is discarded.
  let drafts = {};  // identity -> {text, was (the line's text it was typed over), clash (text changed under it)}
  const sending = new Set();  // identities of drafts sent and not yet heard back
  function draftStore() { return "omnidub-drafts:" + state.title + ":" + state.input; }
  function identity(line) {  // the line as the input has it: its slot (before any move) and its text
    const [start, end] = line.input_slot || [line.start, line.end];
    return JSON.stringify([start, end, line.input_text]);
  }
  function draftOf(line) { return drafts[identity(line)] || null; }
  function draftMark(line) { return !draftOf(line) ? "" : sending.has(identity(line)) ? "sent" : "unsent"; }
  function loadDrafts() {
    try { drafts = JSON.parse(localStorage.getItem(draftStore()) || "{}") || {}; } catch (e) { drafts = {}; }
  }
  function saveDrafts() {
    try {
      if (Object.keys(drafts).length) localStorage.setItem(draftStore(), JSON.stringify(drafts));
      else localStorage.removeItem(draftStore());
    } catch (e) {
      $("status").textContent = "unsent text kept in this page only: the browser's storage refused it";
    }
  }
  function setDraft(line, text) {
    const key = identity(line), had = drafts[key];
    if (text === line.text) delete drafts[key];
    else drafts[key] = {text, was: had ? had.was : line.text, clash: had ? had.clash : null};
    sending.delete(key);
    saveDrafts();
    if (Boolean(had) !== Boolean(drafts[key])) drawRows();
    showDraft(line);
  }
  function discard(line) {
    delete drafts[identity(line)];
    sending.delete(identity(line));
    saveDrafts();
    const box = $("text-" + line.index);
    if (box) box.value = line.text;
    drawRows();
    showDraft(line);
    $("status").textContent = "line " + line.index + ": unsent text discarded";
  }
  function checkDrafts(lines) {
    // A line that now says its draft was rendered: the draft is done. A line changed under its draft (another
    // tab's edit, an undo) keeps the draft, and the page says so.
    if (!Object.keys(drafts).length) return;
    const said = [];
    let changed = false;
    for (const line of lines) {
      const key = identity(line), draft = drafts[key];
      if (!draft) continue;
      if (line.text === draft.text || (sending.has(key) && line.text !== draft.was)) {
        // Rendered: as typed, or as the server reads a cue's text (markup and sound descriptions dropped).
        if (line.text !== draft.text) said.push("line " + line.index + " was rendered as “" + line.text + "”");
        delete drafts[key];
        sending.delete(key);
        changed = true;
      } else if (line.text !== draft.was) {
        Object.assign(draft, {was: line.text, clash: line.text});
        sending.delete(key);
        changed = true;
        said.push("line " + line.index + " was changed elsewhere to “" + line.text + "” under your unsent text, " +
                  "which is kept: Render line " + line.index + " sends it over the change, or discard it");
      }
    }
    if (changed) saveDrafts();
    if (said.length) say("notice", said.join("; "));
  }
  function showDraft(line) {
    const box = $("draft-" + line.index), draft = draftOf(line);
    if (!box) return;
    if (!draft) { box.replaceChildren(); return; }
    box.replaceChildren(
      el("span", {text: (sending.has(identity(line)) ? "Sent, rendering" : "Unsent: not rendered yet (Ctrl+Enter renders it)") +
                        (draft.clash ? ". The line was changed elsewhere meanwhile to “" + draft.clash + "”." : ".")}),
      " ", el("button", {type: "button", onclick: () => discard(byIndex.get(line.index)),
                         text: "Discard unsent text of line " + line.index}));
  }

  // -- which lines are shown -------------------------------------------------------------------------------------
  function changed(line) {
    return Boolean(line.input_text !== line.text || line.speaker !== line.input_speaker || line.max_speedup ||
                   line.borrow || line.voice || (line.takes.length > 1 && !(line.takes[0] || {}).chosen));
  }
  const SHOW = {
    all: () => true,
    failed: (l) => l.verdict === "failed",
    unchecked: (l) => l.verdict === "unchecked",
    unapproved: (l) => !l.approved,
    flagged: (l) => l.look_again,
    translation: (l) => translationFlags(l).length > 0,
    reheard: (l) => Boolean(l.original_heard_again),
    changed,
    overflowing: (l) => overflow(l) > OVER,
    unsent: (l) => Boolean(draftOf(l)),
  };
  function overflow(line) {
    // How much longer the line's take is than its slot (seconds; 0 without a take or a slot).
    return line.duration && line.slot ? line.duration - line.slot : 0;
  }
  function filter() {
    const show = SHOW[$("show").value] || SHOW.all, speaker = $("speaker").value;
    const words = $("search").value.trim().toLowerCase();
    view = state.lines.filter((l) => show(l) && (!speaker || l.speaker === speaker) && (!words ||
      [l.text, l.input_text, l.original_text, l.note].some((t) => t && t.toLowerCase().includes(words))))
      .map((l) => l.index);
    at = new Map(view.map((index, k) => [index, k]));
    const lines = view.map((i) => byIndex.get(i));
    const failed = lines.filter((l) => l.verdict === "failed").length, open = lines.filter((l) => !l.approved).length;
    $("shown").textContent = view.length + " of " + state.lines.length + " lines shown · " + failed + " failed · " +
                             open + " unapproved";
    $("spacer").style.height = (view.length * ROW) + "px";
    drawRows();
  }

  // -- the list: only the rows in view are in the page -----------------------------------------------------------
  // A row whose line is unchanged keeps its node from one drawing to the next (moved, if the filter moved it): a
  // click pressed on a row is not lost to a drawing (a scroll, a filter) before the button is released.
  const inPage = new Map();  // line index -> {line, node}
  function drawRows() {
    const box = $("rows"), height = box.clientHeight || 600;
    const first = Math.max(0, Math.floor(box.scrollTop / ROW) - 4);
    const last = Math.min(view.length, Math.ceil((box.scrollTop + height) / ROW) + 4);
    const wanted = [];
    for (let k = first; k < last; k++) {
      const line = byIndex.get(view[k]), kept = inPage.get(line.index), draft = draftMark(line);
      if (kept && kept.line === line && kept.draft === draft) {
        kept.node.style.top = (k * ROW) + "px";
        wanted.push(kept);
      } else wanted.push({line, draft, node: row(line, k)});
    }
    const nodes = new Set(wanted.map((w) => w.node));
    for (const [index, kept] of inPage) if (!nodes.has(kept.node)) { kept.node.remove(); inPage.delete(index); }
    let before = $("spacer");  // in the page's order as on screen, moving no row already in its place
    for (const w of wanted) {
      inPage.set(w.line.index, w);
      w.node.setAttribute("aria-selected", selected === w.line.index ? "true" : "false");
      if (before.nextSibling !== w.node) box.insertBefore(w.node, before.nextSibling);
      before = w.node;
    }
    if (selected !== null && at.has(selected)) box.setAttribute("aria-activedescendant", "row-" + selected);
    else box.removeAttribute("aria-activedescendant");
  }
  function row(line, k) {
    const marks = [line.approved ? "approved" : "", line.look_again ? "look again" : "", line.note ? "note" : "",
                   translationFlags(line).length ? "translation: " + translationFlags(line).join(" ") : "",
                   line.original_heard_again ? "original heard again" : "",
                   overflow(line) > OVER ? "overflows its slot by " + seconds(overflow(line)) : "",
                   draftMark(line) ? draftMark(line) + " text" : ""]
      .filter(Boolean);
    const label = "Line " + line.index + ", " + line.speaker + ", " + verdictText(line) +
                  (marks.length ? ", " + marks.join(", ") : "") + ": " + line.text;
    const node = el("div", {role: "option", id: "row-" + line.index, class: "row " + (line.audio ? line.verdict : ""),
                            "aria-selected": selected === line.index ? "true" : "false", "aria-label": label,
                            style: {top: (k * ROW) + "px"}},
      el("span", {class: "n", text: String(line.index)}), el("span", {text: line.speaker}),
      el("span", {text: clock(line.start).replace(/\.\d\d$/, "")}),
      el("span", {class: "t", text: line.text}),
      el("span", {class: "v", text: verdictText(line) + (line.approved ? " ✓" : "") + (line.look_again ? " ⚑" : "")}),
      el("span", {class: "o", text: line.original_text || (line.input_text !== line.text ? line.input_text : "")}),
      el("span", {class: "over", title: "longer than its slot by",
                  text: overflow(line) > OVER ? "+" + overflow(line).toFixed(2) + " s" : ""}),
      el("span", {class: "unsent", text: draftMark(line)}));
    node.addEventListener("click", () => { select(line.index, true); $("rows").focus({preventScroll: true}); });
    return node;
  }
  function reveal(index) {
    const k = at.get(index);
    if (k === undefined) return;
    const box = $("rows"), top = k * ROW, height = box.clientHeight || 600;
    if (top < box.scrollTop) box.scrollTop = top;
    else if (top + ROW > box.scrollTop + height) box.scrollTop = top + ROW - height;
  }

  // -- the selected line, in full ---------------------------------------------------------------------------------
  function detail() {
    const line = selected === null ? null : byIndex.get(selected);
    fixTiming(line);
    const old = $("detail").querySelector("article");
    if (!line) { $("detail").replaceChildren(el("p", {class: "small", text: "Select a line."})); return; }
    // The players of the same audio stay as they are (one playing goes on playing while the line is approved).
    const keep = new Map();
    if (old && old.dataset.index === String(line.index))
      old.querySelectorAll("audio[data-keep]").forEach((a) => keep.set(a.dataset.keep, a));
    const focused = old && old.contains(document.activeElement) ? document.activeElement.id : null;
    const caret = focused && document.activeElement.tagName === "TEXTAREA"
      ? [document.activeElement.selectionStart, document.activeElement.selectionEnd] : null;
    // A note typed and not sent yet stays, unless the server's own value of it changed meanwhile (the text's
    // unsent typing is its draft).
    const typed = {};
    for (const id of ["note-" + line.index]) {
      const box = old && old.dataset.index === String(line.index) ? $(id) : null;
      if (box && box.value !== box.dataset.text) typed[id] = [box.value, box.dataset.text];
    }
    const article = lineArticle(line, keep);
    $("detail").replaceChildren(article);
    showDraft(line);
    for (const [id, [value, was]] of Object.entries(typed)) if ($(id).dataset.text === was) $(id).value = value;
    if (focused && document.getElementById(focused)) {
      const again = document.getElementById(focused);
      again.focus({preventScroll: true});
      if (caret && again.tagName === "TEXTAREA") again.setSelectionRange(...caret);  // typing goes on where it was
    }
    applyPlayers();
  }
  function lineArticle(line, keep) {
    const i = line.index, id = "line-" + i;
    const article = el("article", {class: "line selected " + line.verdict, id, "aria-labelledby": id + "-title",
                                   "data-index": i});
    article.append(el("h2", {id: id + "-title", text: "Line " + i + " · " + line.speaker + " · " + clock(line.start) +
                                                       " to " + clock(line.end)}));
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
    if (line.reasons.length)
      article.append(el("ul", {class: "reasons", "aria-label": "Why, line " + i},
                        ...line.reasons.map((r) => el("li", {text: r}))));
    if (line.heard !== null && line.heard !== undefined) article.append(heard(line));
    if (line.audio) {
      article.append(player("Dub of line " + i, line.audio, line.duration, keep, "", "", line.start));
      // The line among its neighbours as they stand now, over the bed: assembled by the server when played.
      const around = "/context/" + i + "?v=" + encodeURIComponent(line.audio);
      article.append(player("Line " + i + " in context", around, null, keep, " (2 s before and after, over the bed)",
                            "none", Math.max(0, line.start - 2)));
    }
    else article.append(el("p", {class: "small", text: "No audio: " + (line.missing || "not rendered yet")}));
    if (line.waveform) article.append(wave(i, line.waveform, line.duration, line.slot));
    if (line.own_original) {
      article.append(player("Original of line " + i, line.own_original, line.end - line.start, keep,
                            line.original_text ? " (" + line.original_text + ")" : "", "", line.own_start ?? line.start));
    }
    if (line.original_heard_again)
      article.append(el("p", {class: "small", text: "The original's words were heard only when their stretch of " +
                              "speech was heard again alone: hear them against the words translated."}));
    if (line.original && !(line.reference && line.reference.kind === "line" && line.own_original)) {
      article.append(player("Voice clip of line " + i, line.original, null, keep,
                            line.voice_from ? " (cloned from " + line.voice_from + ")" : ""));
    } else if (line.reference && line.reference.kind === "given") {  // no clip of the source: the user's own file
      article.append(el("p", {class: "small", text: "Voiced with " + line.voice_from + "."}));
    }
    const textId = "text-" + i;
    article.append(el("label", {for: textId, text: "Text of line " + i}));
    const text = el("textarea", {id: textId, rows: 2, "data-text": line.text});
    const draft = draftOf(line);
    text.value = draft ? draft.text : line.text;
    text.addEventListener("input", () => setDraft(byIndex.get(i), text.value));
    article.append(text, el("div", {id: "draft-" + i, class: "draft", "aria-live": "polite"}));
    if (line.input_text !== line.text) article.append(el("p", {class: "small", text: "Input: " + line.input_text}));
    if (overflow(line) > OVER)
      article.append(el("p", {class: "small", text: "The take is " + seconds(overflow(line)) + " longer than its slot."}));
    if (line.translated_from && !line.original_text)
      article.append(el("p", {class: "small", text: "Translated from: " + line.translated_from}));
    if (translationFlags(line).length) {
      const checks = line.translation.checks || {};
      article.append(el("ul", {class: "reasons translation", "aria-label": "Translation flags of line " + i},
        ...translationFlags(line).map((f) => el("li", {text: "translation: " + f + (checks[f] ? ": " + checks[f] : "")}))));
    }
    if (line.translation && line.translation.back && (translationFlags(line).length || line.translate_why))
      article.append(el("p", {class: "small", text: "Back-translation: " + line.translation.back}));
    if (line.translate_why)
      article.append(el("p", {class: "small", text: "Translate again: not offered (" + line.translate_why + ")"}));
    const cap = el("input", {type: "number", id: "cap-" + i, min: "1", max: "4", step: "0.05",
                             placeholder: String(state.max_speedup), value: line.max_speedup || ""});
    const borrow = el("input", {type: "checkbox", id: "borrow-" + i, checked: line.borrow});
    const voices = [...new Set([line.input_speaker, line.speaker, ...state.speakers])];
    const who = el("select", {id: "speaker-" + i, "data-speaker": line.speaker},
                   ...voices.map((v) => el("option", {value: v, text: v, selected: v === line.speaker})));
    article.append(el("div", {class: "line-row"}, el("label", {for: "speaker-" + i, text: "Speaker of line " + i}), who,
      line.speaker !== line.input_speaker ? el("span", {class: "small", text: "Input: " + line.input_speaker}) : null));
    article.append(el("div", {class: "line-row fit"},
      el("label", {for: "cap-" + i, text: "Speed cap of line " + i}), cap,
      borrow, el("label", {for: "borrow-" + i, text: "Line " + i + " may borrow the gap"}),
      el("span", {class: "small", text: "slot " + seconds(line.slot) + " · planned " + seconds(line.target)})));
    if (state.timed !== false) {
      const step = String(Math.round(1000 / (state.fps || 25)) / 1000);
      article.append(el("div", {class: "line-row slot-edges"},
        el("label", {for: "start-" + i, text: "Start of line " + i}),
        el("input", {type: "number", id: "start-" + i, min: "0", step, value: String(line.start),
                     "data-value": String(line.start)}),
        el("label", {for: "end-" + i, text: "End of line " + i}),
        el("input", {type: "number", id: "end-" + i, min: "0", step, value: String(line.end),
                     "data-value": String(line.end)}),
        el("span", {class: "small", text: "seconds, snapped to the video's frames (" + (state.fps || 25) + " a second)"})));
    }
    const buttons = [
      el("button", {type: "button", "aria-pressed": line.approved ? "true" : "false", onclick: () => approve(line),
                    text: "Approve line " + i}),
      el("button", {type: "button", onclick: () => lineAction(i, "retake"), text: "Retake line " + i}),
      el("button", {type: "button", onclick: () => renderLine(i), text: "Render line " + i}),
    ];
    if (line.translate_again)  // omnidub translate's next candidate for this line, rendered as an edit
      buttons.push(el("button", {type: "button", onclick: () => lineAction(i, "translate"),
                                 text: "Translate line " + i + " again"}));
    if (state.source) {
      buttons.push(el("button", {type: "button", onclick: () => lineAction(i, "edit", {voice: "line"}),
                                 text: "Retake line " + i + " from its own clip"}));
      buttons.push(el("button", {type: "button", onclick: () => lineAction(i, "edit", {voice: "speaker"}),
                                 text: "Retake line " + i + " from its speaker's clip"}));
    }
    article.append(el("div", {class: "line-row", role: "group", "aria-label": "Line " + i}, ...buttons));
    article.append(marks(line));
    if (line.takes.length > 1 || (line.takes.length === 1 && !line.takes[0].chosen)) article.append(...takes(line, keep));
    return article;
  }
  function heard(line) {
    // The words as QA heard them against the line's own: missing words struck, words heard instead underlined.
    const words = el("span", {});
    const glue = () => { if (words.childNodes.length) words.append(" "); };
    for (const [kind, said, got] of line.diff || []) {
      glue();
      if (kind === "equal") words.append(got);
      else if (kind === "insert") words.append(el("ins", {text: got}));
      else if (kind === "delete") words.append(el("del", {text: said}));
      else words.append(el("del", {text: said}), " ", el("ins", {text: got}));
    }
    if (!(line.diff || []).length) words.append(line.heard.trim() ? "“" + line.heard.trim() + "”" : "nothing");
    return el("p", {class: "heard", role: "note", "aria-label": "What QA heard in line " + line.index},
              el("span", {class: "small", text: "Heard: "}), words);
  }
  function marks(line) {
    const n = line.index;
    const note = el("textarea", {id: "note-" + n, rows: 1, "data-text": line.note || ""});
    note.value = line.note || "";
    note.addEventListener("change", () => lineAction(n, "mark", {note: note.value}));
    const look = el("input", {type: "checkbox", id: "look-" + n, checked: line.look_again});
    look.addEventListener("change", () => lineAction(n, "mark", {look_again: look.checked}));
    return el("div", {class: "marks"},
      el("label", {for: "note-" + n, text: "Note on line " + n}), note,
      el("div", {class: "line-row"}, look, el("label", {for: "look-" + n, text: "Look again at line " + n})));
  }
  function takes(line, keep) {
    const n = line.index, list = el("ol", {class: "takes", "aria-label": "Takes of line " + n});
    for (const take of line.takes) {
      list.append(el("li", {},
        el("span", {text: "Take " + take.number + " (seed " + take.seed + ", " + seconds(take.duration) + ", " +
                          (LABELS[take.verdict] || take.verdict) + (take.chosen ? ", in use" : "") + ")"}),
        take.text !== line.text ? el("span", {class: "small", text: " “" + take.text + "”"}) : null,
        take.chosen ? null : el("button", {type: "button", onclick: () => lineAction(n, "choose", {take: take.number}),
                                           text: "Use take " + take.number + " of line " + n})));
    }
    // A/B: one player whose take switches at the same position (the b key), the take in use against another.
    const inUse = line.takes.find((t) => t.chosen) || line.takes[line.takes.length - 1];
    const others = line.takes.filter((t) => t !== inUse);
    const other = el("select", {id: "compare-" + n},
                     ...others.map((t) => el("option", {value: String(t.number), text: "take " + t.number})));
    other.value = String(others[others.length - 1].number);
    const audio = keep.get("ab:" + n) || el("audio", {controls: true, preload: "metadata", src: inUse.audio,
                                                       "aria-label": "A/B player of line " + n, "data-keep": "ab:" + n,
                                                       "data-take": String(inUse.number), "data-at": line.start});
    const hearing = el("span", {id: "hearing-" + n, class: "small", "aria-live": "polite",
                                text: "Hearing take " + audio.dataset.take});
    const button = el("button", {type: "button", id: "ab-" + n, text: "Switch A/B of line " + n,
                                 "aria-pressed": audio.dataset.take === String(inUse.number) ? "false" : "true"});
    button.addEventListener("click", () => {
      const want = audio.dataset.take === String(inUse.number) ? Number(other.value) : inUse.number;
      const take = line.takes.find((t) => t.number === want);
      const position = audio.currentTime, going = !audio.paused;
      audio.dataset.take = String(want);
      audio.src = take.audio;
      audio.addEventListener("loadedmetadata", () => {
        audio.currentTime = Math.min(position, audio.duration || position);
        if (going) audio.play();
      }, {once: true});
      hearing.textContent = "Hearing take " + want;
      button.setAttribute("aria-pressed", want === inUse.number ? "false" : "true");
    });
    return [list, el("div", {class: "line-row"},
      el("label", {for: "compare-" + n, text: "Compare with"}), other, button, hearing), el("div", {class: "line-row"}, audio)];
  }
  function wave(n, form, duration, slot) {
    // One bar per stretch of the line's audio, its height the stretch's peak, against the line's slot (a frame
    // from 0 to the slot's end); the label says the peak level and how the audio's length meets the slot.
    const NS = "http://www.w3.org/2000/svg", bins = form.peaks.length;
    const full = form.peak_dbfs !== null && form.peak_dbfs >= -0.1;
    let level = form.peak_dbfs === null ? "silent" : "peak " + form.peak_dbfs.toFixed(1) + " dBFS" +
                (full ? ", at full scale: may clip" : "");
    const fits = duration && slot ? slot / duration : null;  // the slot's length in the audio's lengths
    if (fits) level += ", " + seconds(duration) + " in a slot of " + seconds(slot);
    const width = fits ? Math.max(bins, bins * fits) : bins;
    const svg = document.createElementNS(NS, "svg");
    for (const [k, v] of Object.entries({viewBox: "0 0 " + width + " 20", preserveAspectRatio: "none", role: "img",
                                         class: "wave" + (full ? " full" : ""),
                                         "aria-label": "Waveform of line " + n + ", " + level}))
      svg.setAttribute(k, v);
    if (fits) {
      const frame = document.createElementNS(NS, "rect");
      for (const [a, v] of Object.entries({x: 0, y: 0, width: bins * fits, height: 20, class: "slot-frame"}))
        frame.setAttribute(a, v);
      svg.append(frame);
    }
    form.peaks.forEach((p, k) => {
      // On a decibel scale from -60 dBFS: a line before the mix's loudness gain is often far under full scale.
      const db = p > 0 ? 20 * Math.log10(p) : -60, h = Math.max(0.3, 20 * Math.max(0, db + 60) / 60);
      const bar = document.createElementNS(NS, "rect");
      for (const [a, v] of Object.entries({x: k + 0.1, width: 0.8, y: (20 - h) / 2, height: h})) bar.setAttribute(a, v);
      svg.append(bar);
    });
    return svg;
  }
  function player(label, src, length, keep, extra, preload, at) {
    // `at`: where the player's 0 s is in the programme (the picture and the playhead follow it there).
    const shown = el("span", {class: "length", text: length ? seconds(length) : ""});
    let audio = keep.get(label);
    if (!audio || audio.getAttribute("src") !== src) {
      audio = el("audio", {controls: true, preload: preload || "metadata", src, "aria-label": label,
                           "data-keep": label, "data-at": at ?? null});
      audio.addEventListener("loadedmetadata", () => { shown.textContent = seconds(audio.duration); });
    } else if (audio.duration) shown.textContent = seconds(audio.duration);
    return el("div", {class: "line-row"}, el("span", {text: label + (extra || "")}), audio, shown);
  }
  function renderLine(n) {
    const line = byIndex.get(n);
    const text = $("text-" + n).value, capText = $("cap-" + n).value, borrow = $("borrow-" + n).checked;
    const cap = capText === "" ? null : Number(capText);
    const change = {};
    if (text !== line.text) { change.text = text; change.was = $("text-" + n).dataset.text; }
    if (cap !== (line.max_speedup || null)) change.max_speedup = cap;
    if (borrow !== line.borrow) change.borrow = borrow;
    const speaker = $("speaker-" + n).value;
    if (speaker !== line.speaker) { change.speaker = speaker; change.was_speaker = $("speaker-" + n).dataset.speaker; }
    for (const edge of ["start", "end"]) {
      const box = $(edge + "-" + n);
      // Only an edge the editor typed: a slot off the frames (an SRT's 8.5 s at 25 a second) stays where it is.
      if (box && box.value !== "" && box.value !== box.dataset.value) change[edge] = snapped(Number(box.value));
    }
    if (Object.keys(change).length) {
      // Marked sent before it is: the line's event may come back before the answer to the request does.
      const key = identity(line), sent = change.text !== undefined && Boolean(draftOf(line));
      if (sent) { sending.add(key); drawRows(); showDraft(line); }
      return lineAction(n, "edit", change).then((queued) => {
        if (!queued && sent && sending.delete(key)) { drawRows(); showDraft(line); }
        return queued;
      });
    }
    if (!line.audio) return lineAction(n, "render");
    $("status").textContent = "line " + n + ": nothing changed to render (Retake line " + n + " makes a new take)";
  }

  // -- the timeline: the blocks in view only, zoomable -------------------------------------------------------------
  function lanes() { return [...new Set([...state.speakers, ...state.lines.map((l) => l.speaker)])]; }
  function timeline() {
    // The lanes, ruler, zoom and playhead are omnidub's one timeline (timeline.js, shared with qa.html); the
    // blocks are drawn here, those in view only.
    const box = $("lanes"), program = Math.max(state.program_seconds, 1);
    box.querySelectorAll(".lane").forEach((n) => n.remove());
    $("names").replaceChildren(el("div", {text: ""}), ...lanes().map((s) => el("div", {text: s, title: s})));
    for (const speaker of lanes()) box.append(el("div", {class: "lane", "data-speaker": speaker}));
    if (ruled === null) {
      ruled = window.omnidubTimeline({program, pps: Number($("zoom").value), player: $("mix"), lanes: box,
                                      ruler: $("ruler"), playhead: $("playhead"), scroll: $("scroll"),
                                      offset: () => mixFrom, seek: (t, play) => seekMix(t, play),
                                      picked: pickBlock, onLayout: () => drawBlocks()});
      drawBlocks();
    } else ruled.setProgram(program);
    $("zoom-said").textContent = $("zoom").value + " pixels a second";
  }
  function pickBlock(e) {
    if (dragged) return true;
    const block = e.target.closest(".block");
    if (!block) return false;
    select(Number(block.dataset.index), true);
    seekMix(byIndex.get(selected).start);
    return true;
  }
  function drawBlocks() {
    if (!ruled || !state) return;
    const [from, to] = ruled.span().map((t, k) => t + (k ? 5 : -5));
    const byLane = new Map([...$("lanes").querySelectorAll(".lane")].map((n) => [n.dataset.speaker, []]));
    const program = Math.max(state.program_seconds, 1), share = (t) => (100 * t / program) + "%";
    for (const shown of state.lines) {
      // A slot being dragged is drawn where it is going, with what its words are predicted to take there.
      const moving = dragging && dragging.index === shown.index;
      const line = moving ? Object.assign({}, shown, {start: dragging.start, end: dragging.end}) : shown;
      if (line.end < from || line.start > to || !byLane.has(line.speaker)) continue;
      const left = share(line.start), length = moving && dragging.fit ? dragging.fit.length : line.duration || line.target;
      byLane.get(line.speaker).push(
        el("div", {class: "slot" + (moving ? " moving" : ""), id: "slot-" + line.index,
                   style: {left, width: share(Math.max(line.end - line.start, 0.04))},
                   text: moving ? slotSaid(dragging) : ""}),
        el("div", {class: "block " + (line.audio ? line.verdict : "none") + (line.approved ? " approved" : "") +
                          (line.look_again ? " flagged" : "") + (selected === line.index ? " selected" : ""),
                   id: "block-" + line.index, "data-index": line.index, title: "Line " + line.index,
                   style: {left, width: share(length)}, text: String(line.index)}));
      if (selected === line.index && state.timed !== false) {
        for (const edge of ["start", "end"])
          byLane.get(line.speaker).push(el("div", {class: "handle " + edge, id: edge + "-handle-" + line.index,
            "data-edge": edge, "data-index": line.index, style: {left: share(line[edge])},
            title: (edge === "start" ? "Drag the start of line " : "Drag the end of line ") + line.index}));
      }
    }
    for (const lane of $("lanes").querySelectorAll(".lane")) lane.replaceChildren(...byLane.get(lane.dataset.speaker));
  }
  // -- a line's slot dragged on the timeline: its start or end, snapped to the video's frames ---------------------
  // While a handle is dragged the slot is drawn where it goes, with its words' predicted length there (GET
  // /remedies/N?start&end, the plan's own fitting); on release one edit of start and end goes through the one door.
  let dragging = null;  // {index, edge, start, end, fit}
  let sizing = null;  // the pending prediction's timer
  function frame() { return 1 / (state.fps || 25); }
  function snapped(t) { const fps = state.fps || 25; return Math.round(Math.round(t * fps) / fps * 1000) / 1000; }
  function edgeLimits(line, edge) {
    // Never before the previous line's start nor after the next line's end in its lane, never a slot under a frame.
    const lane = state.lines.filter((l) => l.speaker === line.speaker && l.index !== line.index);
    const before = lane.filter((l) => l.start < line.start).map((l) => l.start);
    const after = lane.filter((l) => l.start > line.start).map((l) => l.end);
    const fps = state.fps || 25, up = (t) => Math.ceil(t * fps - 1e-6) / fps, down = (t) => Math.floor(t * fps + 1e-6) / fps;
    if (edge === "start") return [up(before.length ? Math.max(...before) + frame() : 0), down(dragging.end - frame())];
    return [up(dragging.start + frame()), down(Math.min(after.length ? Math.min(...after) : Infinity, state.program_seconds))];
  }
  function slotSaid(drag) {
    const where = drag.start.toFixed(2) + " to " + drag.end.toFixed(2) + " s";
    if (!drag.fit) return where;
    const speed = drag.fit.speed > 1.0005 ? " at " + drag.fit.speed.toFixed(2) + "×" : "";
    return where + " · " + seconds(drag.fit.length) + speed + (drag.fit.fits ? ": fits" : ": " + seconds(drag.fit.over) + " too late");
  }
  function sizeSlot() {
    clearTimeout(sizing);
    const drag = dragging;
    sizing = setTimeout(() => {
      fetch("/remedies/" + drag.index + "?start=" + drag.start + "&end=" + drag.end, {credentials: "same-origin"})
        .then((r) => r.ok ? r.json() : null)
        .then((fit) => {
          if (!fit || dragging !== drag || fit.start !== drag.start || fit.end !== drag.end) return;
          drag.fit = fit;
          drawBlocks();
          $("slot-said").textContent = "Line " + drag.index + ": " + slotSaid(drag);
        })
        .catch(() => {});
    }, 80);
  }
  function dragTo(e) {
    if (!dragging) return;
    const box = $("lanes").getBoundingClientRect(), program = Math.max(state.program_seconds, 1);
    const [low, high] = edgeLimits(byIndex.get(dragging.index), dragging.edge);
    const t = Math.min(Math.max(snapped(program * (e.clientX - box.left) / box.width), low), high);
    if (t === dragging[dragging.edge]) return;
    dragging[dragging.edge] = Math.round(t * 1000) / 1000;
    dragging.fit = null;
    drawBlocks();
    $("slot-said").textContent = "Line " + dragging.index + ": " + slotSaid(dragging);
    sizeSlot();
  }
  $("lanes").addEventListener("pointerdown", (e) => {
    const handle = e.target.closest(".handle");
    if (!handle || !state) return;
    e.preventDefault();
    const line = byIndex.get(Number(handle.dataset.index));
    dragging = {index: line.index, edge: handle.dataset.edge, start: line.start, end: line.end, fit: null};
    $("lanes").setPointerCapture(e.pointerId);
  });
  $("lanes").addEventListener("pointermove", dragTo);
  $("lanes").addEventListener("pointerup", (e) => {
    if (!dragging) return;
    dragTo(e);
    const drag = dragging, line = byIndex.get(drag.index);
    dragging = null;
    clearTimeout(sizing);
    dragged = true;  // the click that ends a drag is not a seek
    setTimeout(() => { dragged = false; }, 0);
    if (line && (drag.start !== line.start || drag.end !== line.end)) {
      $("slot-said").textContent = "Line " + drag.index + " moved to " + slotSaid(drag);
      lineAction(drag.index, "edit", {start: drag.start, end: drag.end});
    }
    drawBlocks();
  });
  let dragged = false;
  function follow(line) {
    if (ruled) ruled.show(line.start);
    drawBlocks();
  }

  // -- Fix timing: a line that failed on timing is offered what would make it fit ---------------------------------
  // A retake keeps a line's length (it is planned from its words and its voice's pace), so the panel offers what
  // changes it, each predicted as the render would make it (GET /remedies/N): omnidub translate's shorter
  // translations, the speed-up cap it would need, the gap after its slot, and words the editor types. A remedy is
  // sent as the edit it is, through the one door every action takes.
  let fixing = null, trying = null;  // the line (and its state) the panel was filled for; the words being tried
  function fixTiming(line) {
    // QA failed it on timing, or (a take QA has not judged) the plan says it runs past the last moment it may end.
    const panel = $("fix-timing");
    const planned = line && line.verdict === "unchecked" && (line.flags || []).includes("overflow");
    if (!line || !((line.timing_failures || []).length || planned)) {
      if (panel.contains(document.activeElement)) $("rows").focus({preventScroll: true});  // fixed: back to the list
      panel.hidden = true;
      fixing = null;
      return;
    }
    const asked = JSON.stringify([line.index, line.key, line.text, line.max_speedup, line.borrow]);
    if (asked === fixing) return;
    const moved = !fixing || JSON.parse(fixing)[0] !== line.index;
    fixing = asked;
    const n = line.index;
    panel.hidden = false;
    $("fix-timing-title").textContent = "Fix timing of line " + n;
    $("fix-timing-label").textContent = "Words to try on line " + n;
    $("fix-timing-say").textContent = "Say these words on line " + n;
    if (moved) { $("fix-timing-text").value = line.text; $("fix-timing-preview").textContent = ""; }
    $("fix-timing-said").textContent = "Working out what would make it fit…";
    $("fix-timing-remedies").replaceChildren();
    fetch("/remedies/" + n, {credentials: "same-origin"})
      .then((r) => r.json().catch(() => ({})).then((data) => [r.ok, data]))
      .then(([ok, data]) => {
        if (fixing !== asked) return;  // another line (or this one changed) since it was asked
        if (!ok) { $("fix-timing-said").textContent = data.error || "no remedy could be worked out"; return; }
        showRemedies(line, data);
      })
      .catch(() => showLost(true));
  }
  function predicted(found) {
    // "0.92 s: fits" or "1.60 s: 0.65 s too late", at the speed-up it would be said at.
    const speed = found.speed > 1.0005 ? " at " + found.speed.toFixed(2) + "×" : "";
    const verdict = found.fits ? ": fits" : ": " + seconds(found.over) + " too late";
    return el("span", {class: found.fits ? "fits" : "late", text: seconds(found.length) + speed + verdict});
  }
  function showRemedies(line, data) {
    const n = line.index;
    const room = data.room === null ? "" : " in the " + seconds(data.room) + " it may take (its " + seconds(data.slot) +
                 " slot and the silence after it)";
    $("fix-timing-said").textContent = "Its words take " + seconds(data.natural) + "; at its speed-up cap of " +
      data.cap + " it lasts " + seconds(data.length) + room + ". A retake keeps its length.";
    const send = (remedy) => {
      const args = Object.assign({}, remedy.args);
      if ("text" in args) args.was = line.text;
      return lineAction(n, remedy.action, args);
    };
    const items = data.remedies.map((remedy) => {
      let said, name;
      if (remedy.kind === "text") {
        said = "Shorter translation “" + remedy.text + "”: ";
        name = "Say “" + remedy.text + "” on line " + n;
      } else if (remedy.kind === "speed") {
        said = "Speed-up cap " + remedy.max_speedup + (remedy.needed > remedy.max_speedup ? " (it would need " +
               remedy.needed + ")" : "") + ": ";
        name = "Set the speed cap of line " + n + " to " + remedy.max_speedup;
      } else {
        said = "Borrow the " + seconds(remedy.gap) + " gap after its slot: ";
        name = "Let line " + n + " borrow the gap";
      }
      // A remedy that changes nothing says why, with no button.
      if (remedy.why)
        return el("li", {}, said, predicted(remedy), el("span", {class: "small", text: " (" + remedy.why + ")"}));
      const button = el("button", {type: "button", text: name, onclick: () => send(remedy)});
      return el("li", {}, said, predicted(remedy), " ", button);
    });
    if (!items.length)
      items.push(el("li", {text: "No shorter translation, cap or gap is on offer: try other words below."}));
    $("fix-timing-remedies").replaceChildren(...items);
    if ($("fix-timing-text").value !== line.text) tryWords();
  }
  function tryWords() {
    // The typed words' length in the line's voice, asked once typing pauses.
    if (selected === null) return;
    const n = selected, words = $("fix-timing-text").value;
    clearTimeout(trying);
    trying = setTimeout(() => {
      fetch("/remedies/" + n + "?text=" + encodeURIComponent(words), {credentials: "same-origin"})
        .then((r) => r.json().catch(() => ({})).then((data) => [r.ok, data]))
        .then(([ok, data]) => {
          if (selected !== n || $("fix-timing-text").value !== words) return;
          $("fix-timing-preview").replaceChildren(ok ? predicted(data) : data.error || "cannot be said");
        })
        .catch(() => showLost(true));
    }, 250);
  }
  $("fix-timing-text").addEventListener("input", tryWords);
  $("fix-timing-say").addEventListener("click", () => {
    const line = selected === null ? null : byIndex.get(selected);
    const words = $("fix-timing-text").value;
    if (!line) return;
    if (words === line.text) { $("fix-timing-preview").textContent = "these are the words it says now"; return; }
    lineAction(line.index, "edit", {text: words, was: line.text});
  });

  // -- the whole page ------------------------------------------------------------------------------------------
  function showCounts(counts) {
    const parts = [counts.failed + " failed", counts.unchecked + " unchecked", counts.passed + " passed",
                   counts.approved + " of " + counts.lines + " approved"];
    if (counts.unrendered) parts.push(counts.unrendered + " without audio");
    $("counts").textContent = parts.join(" · ");
  }
  function showUnvoiced(lines) {
    // The lines the source gave no voice surely their own: in no row (not rendered), each said with why, its place
    // in the programme heard with the original alone, and, once heard, voiced from the clip the editor chooses.
    $("unvoiced-box").hidden = !lines.length;
    $("unvoiced-title").textContent = lines.length + " line" + (lines.length === 1 ? "" : "s") +
                                      " not rendered: no voice surely their own";
    // A voice the user gave (--voice NAME=FILE) is offered by its file; a voice of the source by its clip.
    const given = (u, choice) => "the voice given for " + choice.speaker +
      ((u.given || {})[choice.speaker] ? " (" + u.given[choice.speaker] + ")" : "");
    // How like the line's own speech each voice is: a source voice's centroid, a given voice's file.
    const like = (u, name) => u.likeness && u.likeness[name] !== undefined && u.likeness[name] !== null ?
      " (" + u.likeness[name].toFixed(2) + " like it)" : "";
    const from = (u, choice) => choice.voice === "line" ? "its own speech" :
      (choice.voice === "given" ? given(u, choice) : choice.speaker + "'s clip") + like(u, choice.speaker);
    const heard = (u, choice) => choice.voice === "line" ? "its own speech" : choice.voice === "given" ?
      given(u, choice) : choice.speaker + "'s clip";
    $("unvoiced").replaceChildren(...lines.map((u) => el("li", {},
      el("span", {text: "Line " + u.index + " (" + u.speaker + ", " + clock(u.start) + "): " + u.text + ": " + u.why + " "}),
      el("button", {type: "button", "aria-label": "Hear the original of line " + u.index, text: "Hear the original",
                    onclick: () => { if (solo !== "original") setTrack("original", "solo"); hearProgramme(u.start, true); }}),
      ...(u.choices || []).map((choice, k) => el("span", {class: "choice"},
        // the clip itself, heard before it is chosen (played from the source's analysis as it would voice the line)
        // (a voice given with no sample has nothing to hear)
        ...(choice.voice === "given" && !(u.given || {})[choice.speaker] ? [] :
            [el("audio", {controls: true, preload: "none", src: "/voice-clip/" + u.index + "/" + k,
                          "aria-label": "Hear " + heard(u, choice) + ", for line " + u.index})]),
        el("button", {type: "button", text: "Voice line " + u.index + " from " + from(u, choice),
                      onclick: () => lineAction(u.index, "voice", choice)}))))));
  }
  function showStatus(status) {
    $("cancel").disabled = !(status.busy || status.queued);
    if (lost) return;
    if (status.busy) {
      done = "";
      $("status").textContent = "Working: " + status.busy + (status.queued ? " (" + status.queued + " more queued)" : "");
    } else $("status").textContent = status.queued ? status.queued + " queued" : (done || "Ready.");
  }
  function replaceLine(line) {
    const before = byIndex.get(line.index);
    if (!before) return;
    byIndex.set(line.index, line);
    state.lines[state.lines.indexOf(before)] = line;
    checkDrafts([line]);
    if (before.speaker !== line.speaker) timeline();
    filter();
    drawBlocks();
    if (selected === line.index) detail();
  }
  function select(index, scroll) {
    if (!byIndex.has(index)) return;
    selected = index;
    if (scroll) reveal(index);
    drawRows();
    detail();
    follow(byIndex.get(index));
    if (!playing || playing.paused) showPicture(byIndex.get(index).start);
  }
  // -- what is heard, and the picture with it ---------------------------------------------------------------------
  // Whichever plays (the mix, a line's dub, its original, its context, an A/B take) is what the picture and the
  // playhead follow: the picture waits for the sound to start (a context is assembled when asked for, which takes
  // a while), then plays from where the sound is in the programme, at its rate, put back when it drifts.
  function startOf(media) {
    // Where the media element's 0 s is in the programme, or null for one not of the programme (a voice clip).
    if (media === $("mix")) return mixFrom;  // the span of the programme loaded in it starts there (0: the mix)
    const at = media.dataset ? media.dataset.at : undefined;
    return at === undefined || at === "" ? null : Number(at);
  }
  function pictureOn() { return !$("picture-box").hidden; }
  function showPicture(t) {
    const picture = $("picture");
    if (pictureOn() && picture.readyState > 0) picture.currentTime = t;
  }
  function syncPicture(play) {
    const picture = $("picture");
    if (!playing || !pictureOn()) return;
    const t = startOf(playing) + playing.currentTime;
    if (Math.abs(picture.currentTime - t) > DRIFT / 2) picture.currentTime = t;
    picture.playbackRate = playing.playbackRate;
    if (play) picture.play().catch(() => {});
  }
  function hear(media) {
    playing = media;
    if (ruled) ruled.follow(media, () => startOf(media));
    const mixed = (media.getAttribute("src") || "").startsWith("/programme") ? "the programme" : "the mix";
    const name = media === $("mix") ? mixed : media.getAttribute("aria-label");
    $("picture-with").textContent = "Playing with " + name;
  }
  function tick() {
    // Ten times a second while something plays: the mix looped over the selected line, the picture kept in sync.
    if (!playing || playing.paused) return;
    const mix = $("mix"), line = selected === null ? null : byIndex.get(selected);
    if (looping && playing === mix && line) {
      const end = line.start + Math.max(line.duration || 0, line.end - line.start);
      if (startOf(mix) + mix.currentTime >= end) mix.currentTime = Math.max(0, line.start - startOf(mix));
    }
    const picture = $("picture");
    if (!pictureOn() || picture.paused || picture.seeking || playing.readyState < 3) return;
    const t = startOf(playing) + playing.currentTime;
    if (Math.abs(picture.currentTime - t) > DRIFT) picture.currentTime = t;
  }
  function applyPlayers() {
    // The rate to every player (kept over a new source by its default rate) and the loop to the line's players.
    for (const media of document.querySelectorAll("audio")) {
      media.defaultPlaybackRate = rate;
      if (media.playbackRate !== rate) media.playbackRate = rate;
    }
    for (const media of $("detail").querySelectorAll("audio")) media.loop = looping;
    $("picture").defaultPlaybackRate = rate;
    $("loop").setAttribute("aria-pressed", looping ? "true" : "false");
    $("rate").value = String(rate);
  }
  function setRate(to) {
    rate = Math.min(2, Math.max(0.5, to));
    applyPlayers();
    $("status").textContent = "playing at " + rate + "×";
  }
  function faster(by) {
    const k = RATES.findIndex((r) => r >= rate - 1e-9);
    setRate(RATES[Math.min(RATES.length - 1, Math.max(0, (k < 0 ? RATES.length - 1 : k) + by))]);
  }
  function loop() {
    looping = !looping;
    applyPlayers();
    $("status").textContent = looping ? "looping the selected line" : "not looping";
  }
  const SIZES = ["small", "medium", "large"];
  function pictureSize(size) {
    const box = $("picture-box");
    box.classList.remove(...SIZES);
    box.classList.add(size);
    box.style.width = box.style.height = "";  // a size dragged by its corner gives way to the one asked for
    $("picture-size").textContent = "Picture: " + size;
    try { localStorage.setItem("omnidub-picture-size", size); } catch (e) { /* kept for this page only */ }
  }
  function fullScreen() {
    const box = $("picture-box");
    if (box.hidden) { $("status").textContent = "no picture: the folder has no video"; return; }
    if (document.fullscreenElement) document.exitFullscreen().catch(() => {});
    else box.requestFullscreen().catch((e) => { $("status").textContent = "full screen refused: " + e.message; });
  }
  // -- editing by keyboard ----------------------------------------------------------------------------------------
  function editText(line) {
    const box = $("text-" + line.index);
    if (!box) return;
    box.focus();
    box.setSelectionRange(box.value.length, box.value.length);
  }
  function backToList() {
    const line = selected === null ? null : byIndex.get(selected);
    $("rows").focus({preventScroll: true});
    if (line) {
      reveal(line.index);
      drawRows();
      if (draftOf(line)) $("status").textContent = "line " + line.index + ": your text is kept, unsent (Enter goes back to it)";
    }
  }
  function stepTo(found) {
    if (found === undefined) { $("status").textContent = "no such line among those shown"; return; }
    select(found, true);
  }
  function step(by) {
    const k = selected === null || !at.has(selected) ? (by > 0 ? -1 : view.length) : at.get(selected);
    stepTo(view[Math.min(view.length - 1, Math.max(0, k + by))]);
  }
  function seek(by, test) {
    // The next (by 1) or previous (by -1) line shown that passes `test`, from the selected one.
    const k = selected === null || !at.has(selected) ? (by > 0 ? -1 : view.length) : at.get(selected);
    for (let j = k + by; j >= 0 && j < view.length; j += by) if (test(byIndex.get(view[j]))) return stepTo(view[j]);
    stepTo(undefined);
  }
  function programmeUrl(start) {
    // The span of the programme from `start`, as the lines stand now (`changes` makes a changed line heard).
    const end = Math.max(Math.min(start + PROGRAMME, state.program_seconds), start + 0.5);
    return "/programme?start=" + start.toFixed(3) + "&end=" + end.toFixed(3) + "&dub=" + tracks.dub +
           "&original=" + tracks.original + "&bed=" + tracks.bed + "&v=" + changes;
  }
  function hearProgramme(t, play) {
    // The programme from second t in the mix player (its picture follows from mixFrom + the player's time).
    const mix = $("mix");
    mixFrom = Math.max(0, t);
    mix.preload = play ? "auto" : "none";  // assembled when it is played, not when the page opens
    mix.src = programmeUrl(mixFrom);
    $("mix-length").textContent = NOT_DELIVERED;
    if (play) start(mix, "the programme");
  }
  // -- the programme's tracks: each of the dub, the original and the bed muted, or one heard alone ----------------
  const TRACKS = ["dub", "original", "bed"];
  const muted = {dub: false, original: true, bed: false};  // as the delivered mix has them: the dub over the bed
  let solo = null;  // the one track heard alone, or null
  function asMixed() { return tracks.dub === 1 && tracks.original === 0 && tracks.bed === 1; }
  function mixPlays() { return Boolean(state.mix) && asMixed(); }  // the delivered mix cannot be un-mixed
  function setTrack(track, how) {
    // Mute toggles a track; solo hears it alone (again: every track not muted). The span heard is loaded again
    // at the same second of the programme, playing on if it was playing.
    if (how === "solo") solo = solo === track ? null : track;
    else muted[track] = !muted[track];
    for (const t of TRACKS) tracks[t] = solo ? Number(t === solo) : Number(!muted[t]);
    for (const button of document.querySelectorAll("#tracks button")) {
      const on = button.dataset.how === "solo" ? solo === button.dataset.track : muted[button.dataset.track];
      button.setAttribute("aria-pressed", String(on));
    }
    const mix = $("mix"), loaded = Boolean(mix.getAttribute("src"));
    const t = loaded ? mixFrom + (mix.currentTime || 0) : selected === null ? 0 : byIndex.get(selected).start;
    const play = loaded && !mix.paused;
    const heard = TRACKS.filter((name) => tracks[name]);
    $("tracks-said").textContent = (heard.length ? "Heard: " + heard.join(", ") : "Every track muted") +
      (state.mix && !asMixed() ? "; the delivered mix cannot be un-mixed: the programme as it stands plays instead" : "");
    if (mixPlays()) {
      loadMix();
      const back = () => { mix.currentTime = t; if (play) mix.play().catch(() => {}); };
      if (mix.readyState >= 1) back(); else mix.addEventListener("loadedmetadata", back, {once: true});
    } else hearProgramme(t, play);
  }
  for (const button of document.querySelectorAll("#tracks button"))
    button.addEventListener("click", () => setTrack(button.dataset.track, button.dataset.how));
  function seekMix(t, play) {
    // Second t of the programme in the mix player: the delivered mix while it is current, else the programme.
    const mix = $("mix");
    if (!mixPlays()) {
      const loaded = mix.getAttribute("src") || "";
      const inside = loaded === programmeUrl(mixFrom) && t >= mixFrom && t < mixFrom + (mix.duration || 0);
      if (!inside) return hearProgramme(t, play);
      mix.currentTime = t - mixFrom;
    } else if (mix.getAttribute("src")) mix.currentTime = t;
    if (play) start(mix, "the mix");
  }
  function loadMix() {
    const mix = $("mix");
    if (!mixPlays()) {
      if (!(mix.getAttribute("src") || "").startsWith("/programme") || mix.paused)
        hearProgramme(selected === null ? 0 : byIndex.get(selected).start, false);
      return;
    }
    const src = state.mix + "?v=" + mixBusted;
    if (mix.getAttribute("src") === src) return;  // the same mix already loaded (and maybe playing)
    mixFrom = 0;
    mix.preload = "metadata";
    mix.src = src;
    mix.addEventListener("loadedmetadata", () => { $("mix-length").textContent = seconds(mix.duration); }, {once: true});
  }
  function mediaReady() {
    // The source or the bed is decoded: the players that asked before play now (one the editor played, again).
    readied += 1;
    for (const audio of document.querySelectorAll("audio")) {
      if (audio.error) audio.load();
    }
    // Only the last asked for: one asked since (heard at once, or waiting too) takes its place. It is loaded
    // again even without an error: its refusal may still be on its way.
    const wanted = waiting !== lastAsked ? null :
      waiting === "#mix" ? $("mix") : document.querySelector('audio[aria-label="' + waiting + '"]');
    const label = waiting;
    waiting = null;
    if (wanted) { wanted.load(); start(wanted, label === "#mix" ? "the programme" : label); }
  }
  function nameOf(audio) { return audio.id === "mix" ? "#mix" : audio.getAttribute("aria-label"); }
  function play(label) {
    const audio = document.querySelector('#detail audio[aria-label="' + label + '"]');
    if (!audio) return;
    if (audio.paused) start(audio, label); else audio.pause();
  }
  function start(audio, label) {
    // Play; a player the server could not answer yet (the source or the bed still being decoded) is played once
    // the desk says they are ready, unless another was asked for since (one stopped for another waits for nothing).
    // A refusal that comes after the desk said more is ready was for the audio before it: asked again at once.
    lastAsked = nameOf(audio);  // a player whose audio failed already is refused without a play event
    const asked = readied;
    audio.play().catch((e) => {
      if ((e && e.name === "AbortError") || lastAsked !== nameOf(audio)) return;
      if (readied !== asked) { audio.load(); start(audio, label); return; }
      if (state.media_ready) return;
      waiting = nameOf(audio);
      $("status").textContent = "the source is still being prepared: " + label + " plays once it is ready";
    });
  }

  // Keys never act inside a control that takes typing, a choice or a player's own keys.
  const OWN_KEYS = new Set(["input", "textarea", "select", "audio", "video", "dialog"]);
  document.addEventListener("keydown", (e) => {
    const tag = (e.target.tagName || "").toLowerCase();
    // In the selected line (its text box, any of its controls): Ctrl+Enter renders, Escape goes back to the list.
    const inLine = state && !$("help").open && e.target.closest ? e.target.closest("#detail article") : null;
    if (inLine && e.key === "Enter" && (e.ctrlKey || e.metaKey) && !e.altKey) {
      e.preventDefault();
      Promise.resolve(renderLine(Number(inLine.dataset.index))).finally(backToList);
      return;
    }
    // Escape from any control of the page (a player, the picture's, the timeline's) goes back to the list too; the
    // dialogs, the search box (Escape empties it) and full screen keep theirs.
    const away = state && e.key === "Escape" && !e.ctrlKey && !e.metaKey && !e.altKey && !document.fullscreenElement &&
                 !document.querySelector("dialog[open]") && e.target !== $("search") && e.target !== $("rows");
    if (away) {
      e.preventDefault();
      backToList();
      return;
    }
    if (OWN_KEYS.has(tag) || e.target.isContentEditable || e.ctrlKey || e.metaKey || e.altKey || !state) return;
    if ($("help").open) return;
    if ((tag === "button" || tag === "a") && (e.key === " " || e.key === "Enter")) return;
    const line = selected === null ? null : byIndex.get(selected);
    const keys = {
      j: () => step(1), ArrowDown: () => step(1), k: () => step(-1), ArrowUp: () => step(-1),
      f: () => seek(1, (l) => l.verdict === "failed"), F: () => seek(-1, (l) => l.verdict === "failed"),
      u: () => seek(1, (l) => !l.approved), U: () => seek(-1, (l) => !l.approved),
      "?": () => $("help").showModal(), "/": () => $("search").focus(), z: undo,
      "[": () => faster(-1), "]": () => faster(1), v: fullScreen,
    };
    const onLine = {
      p: () => play("Dub of line " + line.index), o: () => play("Original of line " + line.index),
      c: () => play("Line " + line.index + " in context"),
      b: () => { const ab = $("ab-" + line.index); if (ab) ab.click(); },
      a: () => approve(line), r: () => lineAction(line.index, "retake"),
      g: () => lineAction(line.index, "mark", {look_again: !line.look_again}),
      m: () => seekMix(line.start, true),
      Enter: () => editText(line), e: () => editText(line), l: loop,
    };
    const digit = /^Digit([123])$/.exec(e.code || "");
    if (digit) {  // 1, 2, 3: mute the dub, the original, the bed; with Shift, solo it
      e.preventDefault();
      setTrack(TRACKS[Number(digit[1]) - 1], e.shiftKey ? "solo" : "mute");
      return;
    }
    const run = keys[e.key] || (line && onLine[e.key]);
    if (!run) return;
    e.preventDefault();
    run();
  });
  $("rows").addEventListener("scroll", () => requestAnimationFrame(drawRows), {passive: true});
  $("scroll").addEventListener("scroll", () => requestAnimationFrame(drawBlocks), {passive: true});
  for (const id of ["show", "speaker"]) $(id).addEventListener("change", filter);
  let typing = null;
  $("search").addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(filter, 120); });
  $("zoom").addEventListener("input", () => {
    if (ruled) ruled.zoom(Number($("zoom").value));
    $("zoom-said").textContent = $("zoom").value + " pixels a second";
  });
  const picture = $("picture");
  picture.addEventListener("loadedmetadata", () => {
    $("picture-box").hidden = false;
    if (selected !== null) showPicture(byIndex.get(selected).start);
  });
  picture.src = "/picture";  // a folder without a video answers 404: the player stays hidden
  $("mix").addEventListener("ended", () => {  // the programme goes on with its next span
    const next = mixFrom + ($("mix").duration || PROGRAMME);
    if (!mixPlays() && next < state.program_seconds - 0.05) hearProgramme(next, true);
  });
  // Media events do not bubble: they are caught on their way down. One player heard at a time.
  document.addEventListener("play", (e) => {
    const media = e.target;
    if (media === picture || startOf(media) === null) return;
    for (const other of document.querySelectorAll("audio")) if (other !== media && !other.paused) other.pause();
    if (media.playbackRate !== rate) media.playbackRate = rate;
    hear(media);
    picture.pause();  // until the sound starts
  }, true);
  document.addEventListener("playing", (e) => {
    if (e.target === picture) return;
    if (e.target === playing) syncPicture(true);
  }, true);
  for (const type of ["waiting", "pause", "ended", "seeked"]) {
    document.addEventListener(type, (e) => {
      if (e.target !== playing || e.target === picture) return;
      if (playing.paused || type === "waiting") picture.pause();
      syncPicture(false);
    }, true);
  }
  document.addEventListener("ratechange", (e) => { if (e.target === playing) picture.playbackRate = playing.playbackRate; }, true);
  setInterval(tick, 100);
  $("loop").addEventListener("click", loop);
  $("rate").addEventListener("change", () => setRate(Number($("rate").value)));
  $("picture-size").addEventListener("click", () => {
    const now = SIZES.find((size) => $("picture-box").classList.contains(size)) || SIZES[0];
    pictureSize(SIZES[(SIZES.indexOf(now) + 1) % SIZES.length]);
  });
  $("picture-full").addEventListener("click", fullScreen);
  document.addEventListener("fullscreenchange", () => {
    $("picture-full").textContent = document.fullscreenElement ? "Leave full screen (v)" : "Full screen (v)";
  });
  try { pictureSize(SIZES.includes(localStorage.getItem("omnidub-picture-size")) ?
                    localStorage.getItem("omnidub-picture-size") : "small"); } catch (e) { pictureSize("small"); }
  $("undo").addEventListener("click", undo);
  $("error-close").addEventListener("click", () => say("error", ""));
  $("notice-close").addEventListener("click", () => say("notice", ""));
  $("retake-failed").addEventListener("click", () => post("/api/retake-failed"));
  $("approve-passed").addEventListener("click", () => post("/api/approve-passed"));
  $("deliver").addEventListener("click", deliver);
  $("deliver-yes").addEventListener("click", () => { $("deliver-ask").close(); post("/api/deliver"); });
  $("deliver-no").addEventListener("click", () => $("deliver-ask").close());
  $("cancel").addEventListener("click", () => post("/api/cancel"));
  $("help-open").addEventListener("click", () => $("help").showModal());
  $("help-close").addEventListener("click", () => $("help").close());

  async function reload() {
    // The whole state, once on opening and again whenever the event stream (re)connects: nothing is missed.
    let fresh;
    try {
      const response = await fetch("/api/state", {credentials: "same-origin"});
      if (!response.ok) throw new Error(String(response.status));
      fresh = await response.json();
    } catch (e) {
      showLost(true);
      return;
    }
    showLost(false);
    const first = state === null, unready = !first && !state.media_ready;
    state = fresh;
    byIndex = new Map(state.lines.map((l) => [l.index, l]));
    if (first) loadDrafts();
    checkDrafts(state.lines);
    document.title = "omnidub review: " + state.title;
    $("title").textContent = "Review of " + state.title + " (" + state.input + ")";
    const speaker = $("speaker").value;
    $("speaker").replaceChildren(el("option", {value: "", text: "every speaker"}),
                                 ...lanes().map((s) => el("option", {value: s, text: s})));
    $("speaker").value = lanes().includes(speaker) ? speaker : "";
    showCounts(state.counts);
    showUnvoiced(state.unvoiced || []);
    showStatus(state.status);
    if (selected !== null && !byIndex.has(selected)) selected = null;
    filter();
    timeline();
    detail();
    loadMix();
    applyPlayers();
    if (unready && state.media_ready) mediaReady();  // the event said while the stream was away
    if (!drawn) {
      drawn = true;
      document.body.dataset.ready = "true";
    }
  }
  // One event stream a page, and none while its tab is hidden: a browser opens at most six connections to the
  // server, so tabs in the background must not hold them from the one in front (it reads the state again when
  // it is shown).
  let events = null;
  function listen() {
    if (events) return;
    events = new EventSource("/api/events");
    events.onopen = () => reload();
    events.onerror = () => { if (events && events.readyState !== EventSource.OPEN) showLost(true); };
    events.onmessage = onEvent;
  }
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") listen();
    else if (events) { events.close(); events = null; }
  });
  listen();
  function onEvent(message) {
    const event = JSON.parse(message.data);
    if (!state) return;  // the state read on opening has it
    if (event.type === "media") { state.media_ready = event.ready === "all"; mediaReady(); }
    else if (event.type === "line") { changes += 1; replaceLine(event.line); }
    else if (event.type === "counts") showCounts(event.counts);
    else if (event.type === "lines") reload();  // a line voiced, or left without a voice again
    else if (event.type === "status") showStatus(event);
    else if (event.type === "error") {
      const line = event.index ? byIndex.get(event.index) : null;
      if (line && sending.delete(identity(line))) { drawRows(); showDraft(line); }
      say("error", (event.index && !event.text.startsWith("line ") ? "line " + event.index + ": " : "") + event.text);
    } else if (event.type === "note") say("notice", event.text);
    else if (event.type === "progress") $("status").textContent = event.text;
    else if (event.type === "mix" && event.mix !== state.mix) { state.mix = event.mix; loadMix(); }
    else if (event.type === "rendering") {
      const article = document.getElementById("line-" + event.index);
      if (article) article.classList.add("busy");
    } else if (event.type === "delivered") {
      mixBusted += 1;
      state.mix = null;
      fetch("/api/state", {credentials: "same-origin"}).then((r) => r.json()).then((fresh) => {
        state.mix = fresh.mix; state.program_seconds = fresh.program_seconds; loadMix();
      }).catch(() => showLost(true));
      done = "Delivered: " + (event.said || event.files.length + " files written.");
      $("status").textContent = done;
      $("delivered").replaceChildren(...event.files.map((f) =>
        el("li", {}, el("a", {href: "/files/" + f.split("/").map(encodeURIComponent).join("/"), target: "_blank",
                              rel: "noopener", text: f}))));
    }
  }
})();
