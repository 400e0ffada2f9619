"""qa.html: one self-contained page that leads the ear to the lines worth hearing: failed lines gravest first,
then unchecked ones, then the rest."""

from __future__ import annotations

import html
import json
import math
from importlib import resources
from urllib.parse import quote

from omnidub.asr import whisper_language
from omnidub.qa.formats import corpus_text, line_end, rate_text, similarity_text, timecode
from omnidub.qa.manifest import number
from omnidub.qa.results import FLAG_LABELS, MARK_LABELS, LineCheck, Report
from omnidub.qa.scoring import CER_LANGUAGES_WITHOUT_SPACES
from omnidub.qa.verdict import FAILED, PASSED, SEVERITIES, SEVERITY, SEVERITY_MEANING, UNCHECKED, hearing_order

# A row's and a bar's class, and the colour a verdict is written in.
_CLASS = {PASSED: "pass", FAILED: "fail", UNCHECKED: "unchecked"}
_TONE = {PASSED: "ok", FAILED: "bad", UNCHECKED: "warn"}

# Default zoom: the page's width, or this many pixels per second when that is wider (an hour scrolls).
PIXELS_PER_SECOND = 8

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.2em;color:#222}
h1{margin:.2em 0}.facts{color:#444;margin:.3em 0}.facts span{margin-right:1.2em}
table{border-collapse:collapse;width:100%}
td,th{border-bottom:1px solid #ddd;padding:.4em;vertical-align:top;text-align:left}
table.voices{width:auto}table.voices td,table.voices th{padding:.2em .8em}
tr.fail td:first-child{border-left:4px solid #c62828}tr.pass td:first-child{border-left:4px solid #2e7d32}
tr.unchecked td:first-child{border-left:4px solid #e0a000}
tr:target{background:#fff8c4}
del{background:#ffcdd2;text-decoration:line-through}ins{background:#c8e6c9;text-decoration:none}
.flag{display:inline-block;background:#c62828;color:#fff;border-radius:3px;padding:0 .3em;margin:1px;font-size:.85em}
.mark{display:inline-block;background:#757575;color:#fff;border-radius:3px;padding:0 .3em;margin:1px;font-size:.85em}
.ok{color:#2e7d32}.bad{color:#c62828}.warn{color:#9a6700}.small{font-size:.85em;color:#555}.notes li{color:#8a5a00}
.counts span{margin-right:1em}.length{font-family:ui-monospace,monospace;font-size:.85em;color:#444}
body.only-to-hear tr.pass{display:none}
.tflag{display:inline-block;background:#6a1b9a;color:#fff;border-radius:3px;padding:0 .3em;margin:1px;font-size:.85em}
.player{display:flex;gap:1em;align-items:center;flex-wrap:wrap;margin:.5em 0}.player audio{flex:1;min-width:300px}
.timeline{display:flex;border:1px solid #ccc;background:#fafafa}
.names{flex:none;width:8em;border-right:1px solid #ccc}
.names div{height:34px;line-height:34px;padding:0 .4em;overflow:hidden;white-space:nowrap;text-overflow:ellipsis}
.names div:first-child{height:20px}
.scroll{flex:1;overflow-x:auto;position:relative}
.lanes{position:relative;min-width:100%}
.ruler{position:relative;height:20px;border-bottom:1px solid #ddd;font-size:11px;color:#555;overflow:hidden}
.ruler span{position:absolute;top:3px;padding-left:2px;border-left:1px solid #bbb;white-space:nowrap}
.lane{position:relative;height:34px;border-bottom:1px solid #eee}
.slot{position:absolute;top:4px;height:26px;background:#e4e4e4;border:1px solid #b0b0b0;box-sizing:border-box}
.bar{position:absolute;top:10px;height:14px;min-width:2px;border-radius:2px;color:#fff;font-size:10px;
 line-height:14px;overflow:hidden;text-decoration:none;padding-left:2px;box-sizing:border-box}
.bar.pass{background:#4a7bd0}.bar.fail{background:#c62828}.bar.unchecked{background:#e0a000}
.bar.edited{outline:2px dashed #555}
.bar.look-again{border-top:3px solid #ffb300}
.bar:focus,.bar:hover{outline:2px solid #222;z-index:2}
.playhead{position:absolute;top:0;bottom:0;width:2px;background:#ff9800;pointer-events:none;left:0}
button.seek{font-family:ui-monospace,monospace;cursor:pointer}
"""

# qa.html's half of the timeline (its own bars, zoom buttons and row links); the rest is timeline.js, shared with
# the review page.
_SCRIPT = """
(function(){
  const mix = document.getElementById('mix');
  const timeline = omnidubTimeline({program: PROGRAM, fit: PPS, player: mix,
    lanes: document.getElementById('lanes'), ruler: document.getElementById('ruler'),
    playhead: document.getElementById('playhead'), scroll: document.getElementById('scroll'),
    picked: e => Boolean(e.target.closest('a.bar'))});
  const on = (selector, act) => document.querySelectorAll(selector)
    .forEach(b => b.addEventListener('click', () => act(b)));
  on('[data-zoom]', b => timeline.zoom(b.dataset.zoom));
  on('a.bar', a => timeline.seek(+a.dataset.start, false));
  on('button.seek', b => timeline.seek(+b.dataset.start, true));
})();
"""


def _src(path: str) -> str:
    return html.escape(quote(path), quote=True)


def _diff_html(check: LineCheck) -> tuple[str, str]:
    """The user's text with the words not heard struck, and the words as heard with the differences marked."""
    if check.transcript is None:
        return html.escape(check.text), ""
    glue = "" if whisper_language(check.language) in CER_LANGUAGES_WITHOUT_SPACES else " "
    ours, heard = [], []
    for kind, text, said in check.diff:
        mine, theirs = html.escape(text), html.escape(said)
        if kind == "equal":
            ours.append(mine)
            heard.append(theirs)
            continue
        if mine:
            ours.append(f"<del>{mine}</del>")
        if theirs:
            heard.append(f"<ins>{theirs}</ins>")
    return glue.join(p for p in ours if p), glue.join(p for p in heard if p)


def _timeline(report: Report) -> tuple[str, str]:
    """The timeline's lanes and the script that zooms it and drives the mix player."""
    lines = report.lines
    if not lines:
        return "", ""
    ends = [c.start + max(c.slot, c.duration) for c in lines]
    program = max([report.program_seconds or 0.0, *ends, 1.0])
    speakers = list(dict.fromkeys(c.speaker for c in sorted(lines, key=lambda c: (c.start, c.index))))

    def span(start: float, length: float) -> str:
        return f"left:{100 * start / program:.4f}%;width:{100 * max(length, 0.0) / program:.4f}%"

    names = ['<div class="names"><div></div>']
    lanes = [
        f'<div class="lanes" id="lanes" style="width:max(100%, {math.ceil(program * PIXELS_PER_SECOND)}px)">'
        '<div class="ruler" id="ruler"></div>'
    ]
    for speaker in speakers:
        names.append(f"<div>{html.escape(speaker)}</div>")
        lanes.append('<div class="lane">')
        for c in lines:
            if c.speaker != speaker:
                continue
            tip = (
                f"#{c.index} {timecode(c.start)}-{timecode(line_end(c))} {c.speaker}: {c.text} "
                f"(slot {c.slot:.2f} s, rendered {c.duration:.2f} s)"
            )
            tip += f" - {c.verdict.label}" + (": " + ", ".join(c.flags) if c.flags else "")
            classes = f"bar {_CLASS[c.verdict.outcome]}" + "".join(
                f" {mark}" for mark in ("edited", "look-again") if mark in c.marks
            )
            lanes.append(
                f'<div class="slot" style="{span(c.start, c.slot)}"></div>'
                f'<a class="{classes}" href="#line-{c.index}" data-start="{c.start:.3f}" '
                f'style="{span(c.start, c.duration)}" title="{html.escape(tip, quote=True)}">{c.index}</a>'
            )
        lanes.append("</div>")
    lanes.append('<div class="playhead" id="playhead"></div></div>')
    names.append("</div>")
    shared = resources.files("omnidub.qa").joinpath("timeline.js").read_text(encoding="utf-8")
    script = shared + _SCRIPT.replace("PROGRAM", json.dumps(round(program, 3))).replace("PPS", str(PIXELS_PER_SECOND))
    return (
        f'{"".join(names)}<div class="scroll" id="scroll">{"".join(lanes)}</div>',
        f"<script>{script}</script>",
    )


def _figures(c: LineCheck) -> list[str]:
    figures = [rate_text(c)]
    if c.transcript is not None:
        unit = "chars" if c.metric == "cer" else "words"
        figures.append(f"{c.errors} errors / {c.reference_units} {unit}")
    if c.voice is not None:
        voice = f"voice {c.voice.similarity:.2f} to {c.speaker}"
        if c.voice.nearest is not None:
            voice += f"; nearest other {c.voice.nearest} {c.voice.nearest_similarity:.2f}"
        figures.append(voice)
    elif c.voice_skipped:
        figures.append(f"voice {similarity_text(c)}")
    if c.file and not {"missing-file", "render-failed"} & set(c.flags):
        figures.append(f"{c.duration:.2f} s in a {c.slot:.2f} s slot")
        if c.overflow:
            figures.append(f"overflow {c.overflow:.2f} s")
        if c.overlap:
            figures.append(f"overlap {c.overlap:.2f} s into #{c.overlap_line}")
        peak_db = 20 * math.log10(c.peak) if c.peak > 0 else -math.inf
        figures.append(f"peak {peak_db:.1f} dBFS, {c.silent_fraction:.0%} silent")
        figures.append(f"silence {c.leading_silence:.2f} s before, {c.trailing_silence:.2f} s after")
    return figures


def _player(src: str, seconds: float | None, name: str, element_id: str = "") -> str:
    """An audio player with its length written beside it and in its name, so it shows before it is clicked
    (preload="metadata" lets the browser show it too, without loading the audio)."""
    length = None if seconds is None else timecode(seconds) if seconds >= 60 else f"{seconds:.2f} s"
    label = html.escape(f"{name}, {length}" if length else name, quote=True)
    ident = f' id="{element_id}"' if element_id else ""
    player = f'<audio{ident} controls preload="metadata" src="{_src(src)}" aria-label="{label}"></audio>'
    if length is None:
        return player
    return f'{player} <span class="length" data-seconds="{seconds:.3f}">{length}</span>'


def _verdict_html(c: LineCheck) -> str:
    verdict = c.verdict
    if verdict.outcome == FAILED:
        return f'<span class="bad">FAIL</span><br><span class=small>{html.escape(verdict.severity or "")}</span>'
    if verdict.outcome == UNCHECKED:
        return '<span class="warn">UNCHECKED</span>'
    return '<span class="ok">pass</span>'


def _row_html(c: LineCheck, has_mix: bool) -> str:
    flags = "".join(
        f'<span class="flag" title="{html.escape(FLAG_LABELS.get(f, f))}">{html.escape(f)}</span>' for f in c.flags
    )
    marks = "".join(
        f'<span class="mark" title="{html.escape(MARK_LABELS.get(m, m))}">{html.escape(m)}</span>' for m in c.marks
    )
    audio = ""
    if c.file and not {"missing-file", "render-failed"} & set(c.flags):
        audio = _player(c.file, c.duration, f"line {c.index}")
    audio += _original_html(c)
    start = (
        timecode(c.start)
        + f"<div class=small>to {timecode(line_end(c))}</div>"
        + (f"<div class=small>{html.escape(c.start_tc)}</div>" if c.start_tc else "")
    )
    when = (
        f'<button class="seek" data-start="{c.start:.3f}" title="play the mix from here">{start}</button>'
        if has_mix
        else start
    )
    text, heard = _diff_html(c)
    if c.transcript is None:
        heard_html = ""
    else:
        heard_html = f"<div class=small>heard: {heard if c.transcript.strip() else '<i>nothing</i>'}</div>"
    note = f"<div class=small>why: {html.escape(c.note)}</div>" if c.note else ""
    note += _translation_html(c)
    translated = " ".join((c.translation or {}).get("flags", []))
    return (
        f'<tr class="{_CLASS[c.verdict.outcome]}" id="line-{c.index}" data-verdict="{c.verdict.outcome}"'
        f' data-translation=" {html.escape(translated)} ">'
        f"<td>#{c.index}<br>{_verdict_html(c)}<br>{marks}</td>"
        f"<td>{when}<br>{html.escape(c.speaker)}<br><span class=small>{html.escape(c.language or '')}</span></td>"
        f"<td><div>{text}</div>{heard_html}</td>"
        f"<td class=small>{'<br>'.join(html.escape(f) for f in _figures(c))}</td>"
        f"<td>{flags}{note}</td><td>{audio}</td></tr>"
    )


def _translation_html(c: LineCheck) -> str:
    """The translation's own flags (omnidub translate's checks), what the line translates, and how it reads back."""
    found = c.translation
    if not found:
        return ""
    flags = "".join(
        f'<span class="tflag" title="{html.escape(str(found["checks"].get(f, "")))}">translation: {html.escape(f)}'
        "</span>"
        for f in found.get("flags", [])
    )
    why = "".join(f"<div class=small>{html.escape(f)}: {html.escape(w)}</div>" for f, w in found["checks"].items())
    original = found.get("original")
    said = f"<div class=small>translates: &ldquo;{html.escape(str(original))}&rdquo;</div>" if original else ""
    back = found.get("back") if found.get("flags") else None
    reads = f"<div class=small>reads back as: &ldquo;{html.escape(back)}&rdquo;</div>" if back else ""
    return f"<div>{flags}</div>{why}{said}{reads}"


def _translation_filter(report: Report) -> str:
    """A choice of translation flag that shows only the lines carrying it (none when no line was translated)."""
    flags = sorted({f for c in report.lines if c.translation for f in c.translation.get("flags", [])})
    if not any(c.translation for c in report.lines):
        return ""
    options = "".join(f'<option value="{html.escape(f)}">{html.escape(f)}</option>' for f in flags)
    script = (
        "const f=this.value; document.querySelectorAll('tr[data-translation]').forEach(r=>r.hidden=Boolean(f)&&"
        "!r.dataset.translation.includes(' '+f+' '))"
    )
    return (
        '<label>translation flag <select id="translation-flag" '
        f'onchange="{html.escape(script)}"><option value="">any line</option>{options}</select></label>\n'
    )


def _original_html(c: LineCheck) -> str:
    """The original line the dub was cloned from, to hear beside it (render --source), and why another clip
    stood in for it."""
    reference = c.reference or {}
    if not isinstance(reference.get("file"), str):
        return ""
    span, seconds = "", None
    parts = reference.get("parts")
    if isinstance(parts, list) and parts and all(isinstance(p, list) and len(p) == 2 for p in parts):
        from omnidub.source.clips import joined_seconds

        span = " " + ", ".join(f"{a:.2f}-{b:.2f}" for a, b in parts) + " s, joined"
        seconds = joined_seconds(parts)  # its pieces heard one after another, silence between
    elif isinstance(reference.get("start"), (int, float)) and isinstance(reference.get("end"), (int, float)):
        span = f" {reference['start']:.2f}-{reference['end']:.2f} s"
        seconds = max(0.0, reference["end"] - reference["start"])  # the clip is cut at that span
    whose = "its own line" if reference.get("kind") == "line" else f"{reference.get('speaker') or 'its speaker'}'s clip"
    why = (
        f"<div class=small>why not its own line: {html.escape(str(reference['fallback']))}</div>"
        if reference.get("fallback")
        else ""
    )
    said = f"<div class=small>&ldquo;{html.escape(str(reference.get('text') or ''))}&rdquo;</div>"
    return (
        f'<div class="small">original ({html.escape(whose)}, source{span}):</div>'
        f"{_player(reference['file'], seconds, f'original of line {c.index}')}{said}{why}"
    )


def _header(report: Report) -> str:
    tally = report.tally
    facts = [
        ("render model", report.render_model or "unknown"),
        ("preset", report.preset or "unknown"),
        ("ASR model", report.asr_model),
        ("speaker model", report.speaker_model or "none (no voice check)"),
    ]
    thresholds = f"WER \u2264 {report.settings.max_wer:.0%}, CER \u2264 {report.settings.max_cer:.0%}"
    if report.speaker_model:
        thresholds += (
            f", voice similarity \u2265 {report.settings.min_voice_similarity:.2f} and nearest to its own speaker"
        )
    facts.append(("thresholds", thresholds))
    if report.program_seconds:
        facts.append(("programme", timecode(report.program_seconds)))
    counts = tally.counts()
    tone = _TONE[next((outcome for outcome, n in counts.items() if n), PASSED)]  # the worst outcome found
    tone = _TONE[FAILED] if report.unvoiced else tone
    spans = "".join(
        f'<span class="{_TONE[outcome] if n else "small"}" data-verdict="{outcome}">{n} {outcome}</span>'
        for outcome, n in counts.items()
    )
    parts = [
        f'<p class="headline"><b class={tone}>{html.escape(report.headline())}</b></p>',
        f'<p class="counts">{spans}'
        + "".join(f"<span>{html.escape(corpus_text(f))}</span>" for f in (report.wer, report.cer) if f.lines)
        + "</p>",
        '<p class="facts">'
        + "".join(f"<span><b>{html.escape(k)}:</b> {html.escape(v)}</span>" for k, v in facts)
        + "</p>",
    ]
    if report.unvoiced:
        parts.append(_unvoiced_html(report.unvoiced))
    if report.voices:
        parts.append(_voices_table(report))
    if report.notes:
        parts.append('<ul class="notes">' + "".join(f"<li>{html.escape(n)}</li>" for n in report.notes) + "</ul>")
    return "\n".join(parts)


def _unvoiced_html(unvoiced: tuple[dict, ...]) -> str:
    """The lines left without a voice: nothing rendered to hear, each with why and what gives it a voice."""
    items = "".join(
        f"<li><b>line {int(u['index'])}</b> ({html.escape(str(u.get('speaker')))}, "
        f"{timecode(number(u.get('start')))}): “{html.escape(str(u.get('text') or ''))}” "
        f"<span class=small>{html.escape(str(u.get('why') or ''))}</span></li>"
        for u in unvoiced
    )
    return (
        f'<section id="unvoiced"><h2>{len(unvoiced)} line(s) not rendered: no voice of the source is surely their '
        f'own</h2><ul class="notes">{items}</ul></section>'
    )


def _order_html() -> str:
    """How the rows are ordered, and what each severity holds."""
    grades = "; ".join(
        f"<b>{grade}</b>: {html.escape(SEVERITY_MEANING[grade])} ("
        + ", ".join(html.escape(flag) for flag, g in SEVERITY.items() if g == grade)
        + ")"
        for grade in SEVERITIES
    )
    return (
        f"<p class=small>What to hear first: failed lines by severity ({grades}); within a severity, more "
        "failures first, then programme order. Then unchecked lines, whose words could not be scored; then "
        "passed lines.</p>"
    )


def _voices_table(report: Report) -> str:
    def figure(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    rows = "".join(
        f"<tr><td>{html.escape(v.speaker)}</td><td>{v.lines}</td><td>{figure(v.mean_similarity)}</td>"
        f"<td>{figure(v.min_similarity)}</td><td>{v.failed}</td><td class=small>{html.escape(v.reason or '')}</td></tr>"
        for v in report.voices
    )
    return (
        '<table class="voices"><thead><tr><th>speaker</th><th>lines measured</th><th>mean voice similarity</th>'
        f"<th>lowest</th><th>flagged voice</th><th>why not measured</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def render_html(report: Report) -> str:
    """The self-contained qa.html page: header, mix player and timeline, and a row per line in the order to hear
    them (failed lines gravest first, then unchecked, then passed)."""
    ordered = sorted(report.lines, key=hearing_order)
    title = f"omnidub QA: {report.out_dir.name}"
    timeline, script = _timeline(report)
    mix = (
        _player(report.mix, report.mix_seconds, "the mix", element_id="mix")
        if report.mix
        else "<span class=small>no mix in this folder</span>"
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8"><meta name="generator" content="omnidub">'
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head>\n"
        f"<body><h1>{html.escape(title)}</h1>\n{_header(report)}\n"
        "<h2>Timeline</h2>\n"
        f'<div class="player">{mix}<span>zoom <button data-zoom="out">\u2212</button> '
        '<button data-zoom="fit">fit</button> <button data-zoom="in">+</button></span></div>\n'
        "<p class=small>Grey: the line's slot. Bar: the rendered length (red when the line failed, amber when it "
        "is unchecked); a bar leads to its "
        "row and sets the mix there; a click elsewhere on the timeline seeks the mix.</p>\n"
        f'<div class="timeline">{timeline}</div>\n'
        f'<h2>Lines</h2>{_order_html()}<label><input type="checkbox" '
        "onchange=\"document.body.classList.toggle('only-to-hear', this.checked)\"> only lines to hear (failed and "
        "unchecked)</label>\n"
        + _translation_filter(report)
        + "<table><thead><tr><th>line</th><th>start, end / speaker</th><th>said / heard</th><th>figures</th>"
        "<th>flags / why</th><th>listen</th></tr></thead><tbody>\n"
        + "\n".join(_row_html(c, report.mix is not None) for c in ordered)
        + f"\n</tbody></table>\n{script}</body></html>\n"
    )
