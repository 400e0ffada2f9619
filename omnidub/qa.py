"""Quality check of a rendered output folder: intelligibility, timing and level of every line."""

from __future__ import annotations

import dataclasses
import html
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from urllib.parse import quote

import jiwer
import numpy as np
import soundfile as sf

from omnidub.asr import Asr, whisper_language
from omnidub.errors import OmnidubError
from omnidub.files import write_text_atomic
from omnidub.config import QaOptions

# OmniVoice's evaluation scores these languages per character. Where spaces carry no meaning they are
# dropped; elsewhere they stay as a character of their own.
CER_LANGUAGES_WITHOUT_SPACES = frozenset({"zh", "yue", "ja"})
CER_LANGUAGES_WITH_SPACES = frozenset({"ko", "th", "ar", "vi", "hi", "el"})

FLAG_LABELS = {
    "wer": "too many word errors",
    "cer": "too many character errors",
    "overflow": "runs past its slot and the silence after it",
    "overlap": "runs into the speaker's next line",
    "clipping": "clipped samples",
    "silent": "mostly silent",
    "lead-silence": "long silence before speech",
    "trail-silence": "long silence after speech",
    "nan": "NaN or infinite samples",
    "render-failed": "render failed",
    "missing-file": "segment file missing",
}


@dataclass(frozen=True)
class QaSettings:
    """Thresholds a line is held to."""

    # The thresholds a render's preset sets, unless the caller gives others.
    max_wer: float = QaOptions().max_wer
    max_cer: float = QaOptions().max_cer
    clip_level: float = 0.999
    # A peak-normalised line touches full scale once or twice; clipping flattens runs of samples.
    clip_min_samples: int = 3
    silence_dbfs: float = -40.0
    frame_seconds: float = 0.02
    max_silent_fraction: float = 0.8
    max_edge_silence: float = 0.5
    # Half a 25 Hz codec frame: rounding, not a real overrun.
    timing_tolerance: float = 0.02


@dataclass(frozen=True)
class LineCheck:
    """What QA found for one line; `transcript` and `error_rate` are None when it was not transcribed.

    `diff` aligns the text with what was heard: (kind, text, heard) pieces, kind being equal, substitute,
    delete or insert."""

    index: int
    speaker: str
    text: str
    language: str | None
    file: str | None
    status: str
    transcript: str | None
    metric: str
    errors: int
    reference_units: int
    error_rate: float | None
    flags: tuple[str, ...]
    passed: bool
    note: str
    start: float
    slot: float
    duration: float
    overflow: float
    overlap: float
    peak: float
    rms: float
    clipped_samples: int
    silent_fraction: float
    leading_silence: float
    trailing_silence: float
    diff: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True)
class CorpusFigure:
    """Errors summed over every transcribed line scored with one metric, over their reference units."""

    metric: str
    errors: int
    units: int
    lines: int

    @property
    def rate(self) -> float | None:
        return self.errors / self.units if self.units else None


@dataclass(frozen=True)
class Report:
    """QA of one output folder."""

    out_dir: Path
    asr_model: str
    lines: tuple[LineCheck, ...]
    wer: CorpusFigure
    cer: CorpusFigure
    passed: bool
    failed: int
    settings: QaSettings


# --- scoring -------------------------------------------------------------------------------------


def metric_for(language: str | None) -> str:
    """The metric a language is scored with: "cer" where OmniVoice scores per character, else "wer"."""
    code = whisper_language(language)
    return "cer" if code in CER_LANGUAGES_WITHOUT_SPACES | CER_LANGUAGES_WITH_SPACES else "wer"


_normalizers: dict[str, Callable[[str], str]] = {}


def _normalize(text: str, code: str | None) -> str:
    kind = "en" if code == "en" else "basic"
    if kind not in _normalizers:
        if kind == "en":
            from whisper_normalizer.english import EnglishTextNormalizer

            _normalizers[kind] = EnglishTextNormalizer()
        else:
            from whisper_normalizer.basic import BasicTextNormalizer

            _normalizers[kind] = BasicTextNormalizer()
    return " ".join(_normalizers[kind](text).split())


@dataclass(frozen=True)
class _Score:
    metric: str
    diff: tuple[tuple[str, str, str], ...]
    errors: int
    units: int


def _score(text: str, transcript: str, language: str | None) -> _Score:
    code = whisper_language(language)
    metric = metric_for(code)
    reference, hypothesis = _normalize(text, code), _normalize(transcript, code)
    if code in CER_LANGUAGES_WITHOUT_SPACES:
        reference, hypothesis = reference.replace(" ", ""), hypothesis.replace(" ", "")
    if not reference and not hypothesis:
        return _Score(metric, (), 0, 0)
    if metric == "cer":
        out = jiwer.process_characters(reference, hypothesis)
    else:
        out = jiwer.process_words(reference, hypothesis)
    ref_units = out.references[0] if reference else []
    hyp_units = out.hypotheses[0] if hypothesis else []
    glue = "" if metric == "cer" else " "
    diff = tuple(
        (chunk.type, glue.join(ref_units[chunk.ref_start_idx : chunk.ref_end_idx]),
         glue.join(hyp_units[chunk.hyp_start_idx : chunk.hyp_end_idx]))
        for chunk in out.alignments[0]
    )
    errors = out.substitutions + out.deletions + out.insertions
    return _Score(metric, diff, errors, len(ref_units))


# --- audio ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Level:
    duration: float
    peak: float
    rms: float
    clipped_samples: int
    silent_fraction: float
    leading_silence: float
    trailing_silence: float
    finite: bool


def _read_segment(path: Path, index: int) -> tuple[np.ndarray, int]:
    try:
        data, rate = sf.read(str(path), dtype="float32", always_2d=True)
    except Exception as exc:  # libsndfile reports every decoding problem with its own exception types
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise OmnidubError(f"cannot read segment {path} (line {index}): {reason}") from None
    return data, int(rate)


def _measure(data: np.ndarray, rate: int, settings: QaSettings) -> tuple[_Level, np.ndarray]:
    finite = bool(np.isfinite(data).all())
    if not finite:
        data = np.nan_to_num(data, nan=0.0, posinf=0.0, neginf=0.0)
    mono = data.mean(axis=1) if data.ndim == 2 else data
    duration = len(mono) / rate if rate else 0.0
    if len(mono) == 0:
        return _Level(0.0, 0.0, 0.0, 0, 1.0, 0.0, 0.0, finite), mono.astype(np.float32)
    magnitude = np.abs(data)
    peak = float(magnitude.max())
    clipped = int((magnitude >= settings.clip_level).sum())
    rms = float(np.sqrt(np.mean(np.square(mono, dtype=np.float64))))
    frame = max(1, int(round(settings.frame_seconds * rate)))
    count = math.ceil(len(mono) / frame)
    padded = np.zeros(count * frame, dtype=np.float64)
    padded[: len(mono)] = mono
    frame_rms = np.sqrt(np.mean(np.square(padded.reshape(count, frame)), axis=1))
    silent = frame_rms < 10 ** (settings.silence_dbfs / 20)
    loud = np.flatnonzero(~silent)
    if len(loud):
        leading = min(duration, float(loud[0]) * frame / rate)
        trailing = max(0.0, duration - float(loud[-1] + 1) * frame / rate)
    else:
        leading = trailing = duration
    level = _Level(duration, peak, rms, clipped, float(silent.mean()), leading, trailing, finite)
    return level, mono.astype(np.float32)


# --- checking ------------------------------------------------------------------------------------


def _number(value, default: float = 0.0) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return number if math.isfinite(number) else default


def _next_start(entry: dict, neighbours: list[dict]) -> float | None:
    start, index = _number(entry.get("start")), entry.get("index")
    later = [
        _number(other.get("start"))
        for other in neighbours
        if other.get("speaker") == entry.get("speaker")
        and other.get("index") != index
        and (_number(other.get("start")), _number(other.get("index"))) > (start, _number(index))
    ]
    return min(later) if later else None


def _untranscribed(entry: dict, flag: str, note: str) -> LineCheck:
    start, end = _number(entry.get("start")), _number(entry.get("end"))
    return LineCheck(
        index=int(entry["index"]), speaker=str(entry.get("speaker", "")), text=str(entry.get("text", "")),
        language=entry.get("language"), file=entry.get("file"), status=str(entry.get("status", "")),
        transcript=None, metric=metric_for(entry.get("language")), errors=0, reference_units=0, error_rate=None,
        flags=(flag,), passed=False, note=note, start=start, slot=max(0.0, end - start), duration=0.0,
        overflow=0.0, overlap=0.0, peak=0.0, rms=0.0, clipped_samples=0, silent_fraction=0.0,
        leading_silence=0.0, trailing_silence=0.0,
    )


def _validate_entry(entry, position: int) -> None:
    if not isinstance(entry, dict) or not isinstance(entry.get("index"), int) or not isinstance(entry.get("text"), str):
        raise OmnidubError(f"manifest line {position}: needs an integer 'index' and a 'text' string")


def check_lines(
    out_dir: Path,
    manifest_lines: list[dict],
    asr: Asr,
    *,
    max_wer: float,
    max_cer: float,
    progress: Callable[[int, int, int], None] | None = None,
    all_lines: list[dict] | None = None,
) -> list[LineCheck]:
    """Check the given manifest lines; `all_lines` (default: the same) supplies the next line of each speaker."""
    settings = QaSettings(max_wer=max_wer, max_cer=max_cer)
    return _check(Path(out_dir), manifest_lines, asr, settings, progress, all_lines)


def _check(out_dir, manifest_lines, asr, settings, progress, all_lines) -> list[LineCheck]:
    for position, entry in enumerate(manifest_lines, 1):
        _validate_entry(entry, position)
    neighbours = manifest_lines if all_lines is None else all_lines
    checks: list[LineCheck] = []
    for done, entry in enumerate(manifest_lines, 1):
        checks.append(_check_one(out_dir, entry, asr, settings, neighbours))
        if progress is not None:
            progress(done, len(manifest_lines), entry["index"])
    return checks


def _check_one(out_dir: Path, entry: dict, asr: Asr, settings: QaSettings, neighbours: list[dict]) -> LineCheck:
    index = entry["index"]
    if entry.get("status") == "failed":
        return _untranscribed(entry, "render-failed", str(entry.get("error") or "render failed"))
    file = entry.get("file")
    path = out_dir / file if file else None
    if path is None or not path.is_file():
        return _untranscribed(entry, "missing-file", f"no segment file {file or '(none named)'}")

    data, rate = _read_segment(path, index)
    level, mono = _measure(data, rate, settings)
    language = entry.get("language")
    code = whisper_language(language)
    try:
        heard = asr.transcribe(mono, rate, language=code)
    except ValueError:
        # A code this Whisper model lacks (yue before large-v3): let it detect one rather than refuse the line.
        heard = asr.transcribe(mono, rate, language=None)
    # An unlabelled line is scored in the language Whisper heard, and reported as such.
    language = language or heard.language or None
    score = _score(entry["text"], heard.text, language)
    error_rate = score.errors / max(score.units, 1)

    start, end = _number(entry.get("start")), _number(entry.get("end"), default=math.inf)
    slot = end - start if math.isfinite(end) else level.duration
    # A render may run a line into the silence after its slot, up to its limit; only past that is it late.
    key = "limit_at" if "limit_at" in entry else "limit"  # "limit" in manifests of omnidub 0.1
    room_end = _number(entry[key], default=math.inf) if key in entry else end
    overflow = max(0.0, start + level.duration - room_end) if math.isfinite(room_end) else 0.0
    next_start = _next_start(entry, neighbours)
    overlap = max(0.0, start + level.duration - next_start) if next_start is not None else 0.0

    flags: list[str] = []
    limit = settings.max_cer if score.metric == "cer" else settings.max_wer
    if error_rate > limit:
        flags.append(score.metric)
    if overflow > settings.timing_tolerance:
        flags.append("overflow")
    if overlap > settings.timing_tolerance:
        flags.append("overlap")
    if not level.finite:
        flags.append("nan")
    if level.clipped_samples >= settings.clip_min_samples:
        flags.append("clipping")
    if level.silent_fraction >= settings.max_silent_fraction:
        flags.append("silent")
    else:
        if level.leading_silence > settings.max_edge_silence:
            flags.append("lead-silence")
        if level.trailing_silence > settings.max_edge_silence:
            flags.append("trail-silence")

    return LineCheck(
        index=index, speaker=str(entry.get("speaker", "")), text=entry["text"], language=language, file=file,
        status=str(entry.get("status", "")), transcript=heard.text, metric=score.metric, errors=score.errors,
        reference_units=score.units, error_rate=error_rate, flags=tuple(flags), passed=not flags,
        note="; ".join(FLAG_LABELS[f] for f in flags), start=start, slot=slot, duration=level.duration,
        overflow=overflow, overlap=overlap, peak=level.peak, rms=level.rms, clipped_samples=level.clipped_samples,
        silent_fraction=level.silent_fraction, leading_silence=level.leading_silence,
        trailing_silence=level.trailing_silence, diff=score.diff,
    )


def _corpus(lines: tuple[LineCheck, ...], metric: str) -> CorpusFigure:
    scored = [c for c in lines if c.transcript is not None and c.metric == metric]
    return CorpusFigure(metric, sum(c.errors for c in scored), sum(c.reference_units for c in scored), len(scored))


def read_manifest(out_dir: Path) -> dict:
    """The render manifest of an output folder, checked to hold a `lines` array."""
    path = Path(out_dir) / "manifest.json"
    if not path.is_file():
        raise OmnidubError(f"no manifest.json in {out_dir}; render into this folder first")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise OmnidubError(f"cannot read {path}: {exc}") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("lines"), list):
        raise OmnidubError(f"{path} has no 'lines' array")
    return manifest


def _threshold(value, name: str) -> float:
    number = _number(value, default=-1.0)
    if number < 0:
        raise OmnidubError(f"{name} must be a number >= 0, got {value!r}")
    return number


def run_qa(
    out_dir: Path,
    *,
    asr: Asr,
    max_wer: float | None = None,
    max_cer: float | None = None,
    progress: Callable[[int, int, int], None] | None = None,
) -> Report:
    """Check every line of an output folder's manifest; thresholds default to the manifest's settings."""
    out_dir = Path(out_dir)
    manifest = read_manifest(out_dir)
    saved = manifest.get("settings") if isinstance(manifest.get("settings"), dict) else {}
    default = QaSettings()
    settings = QaSettings(
        max_wer=_threshold(max_wer if max_wer is not None else saved.get("max_wer", default.max_wer), "max_wer"),
        max_cer=_threshold(max_cer if max_cer is not None else saved.get("max_cer", default.max_cer), "max_cer"),
    )
    lines = tuple(_check(out_dir, manifest["lines"], asr, settings, progress, None))
    failed = sum(not c.passed for c in lines)
    return Report(
        out_dir=out_dir, asr_model=asr.name, lines=lines, wer=_corpus(lines, "wer"), cer=_corpus(lines, "cer"),
        passed=failed == 0, failed=failed, settings=settings,
    )


# --- outputs -------------------------------------------------------------------------------------


def _rounded(value):
    if isinstance(value, float):
        return round(value, 4) if math.isfinite(value) else None
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


def _corpus_json(figure: CorpusFigure) -> dict:
    return {"errors": figure.errors, "units": figure.units, "lines": figure.lines, "rate": _rounded(figure.rate)}


def report_json(report: Report) -> dict:
    """The qa.json object: settings, ASR model, corpus figures and a `lines` array."""
    return {
        "out_dir": str(report.out_dir),
        "asr_model": report.asr_model,
        "passed": report.passed,
        "failed": report.failed,
        "total": len(report.lines),
        "settings": {k: _rounded(v) for k, v in dataclasses.asdict(report.settings).items()},
        "corpus": {"wer": _corpus_json(report.wer), "cer": _corpus_json(report.cer)},
        "lines": [{k: _rounded(v) for k, v in dataclasses.asdict(c).items()} for c in report.lines],
    }


def write_reports(report: Report, out_dir: Path) -> tuple[Path, Path]:
    """Write qa.json and qa.html into the output folder, each atomically."""
    out_dir = Path(out_dir)
    json_path, html_path = out_dir / "qa.json", out_dir / "qa.html"
    write_text_atomic(json_path, json.dumps(report_json(report), ensure_ascii=False, indent=2) + "\n")
    write_text_atomic(html_path, render_html(report))
    return json_path, html_path


def _percent(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate:.1%}"


def _corpus_text(figure: CorpusFigure) -> str:
    unit = "characters" if figure.metric == "cer" else "words"
    return f"{figure.metric.upper()} {_percent(figure.rate)} ({figure.errors} errors / {figure.units} {unit}, {figure.lines} lines)"


def _rate_text(check: LineCheck) -> str:
    return "-" if check.error_rate is None else f"{check.metric.upper()} {check.error_rate:.0%}"


def print_report(report: Report, console) -> None:
    """Print a table of the failing lines, then the totals."""
    from rich.markup import escape
    from rich.table import Table

    failing = [c for c in report.lines if not c.passed]
    if failing:
        table = Table(title=f"{len(failing)} failing line(s)", show_lines=False)
        table.add_column("#", justify="right")
        table.add_column("speaker")
        table.add_column("error", justify="right")
        table.add_column("flags")
        table.add_column("text / heard", overflow="fold")
        for c in failing:
            heard = c.note if c.transcript is None else f"heard: {c.transcript}"
            # Lines and transcripts may contain brackets that rich would read as markup.
            table.add_row(str(c.index), escape(c.speaker), _rate_text(c), ", ".join(c.flags), f"{escape(c.text)}\n[dim]{escape(heard)}[/dim]")
        console.print(table)
    scored = [_corpus_text(f) for f in (report.wer, report.cer) if f.lines]
    verdict = "[green]all passed[/green]" if report.passed else f"[red]{report.failed} failing[/red]"
    console.print(f"{len(report.lines)} lines, {verdict}; " + ("; ".join(scored) or "nothing transcribed"))
    console.print(f"ASR model: {escape(report.asr_model)}; max WER {report.settings.max_wer:.0%}, max CER {report.settings.max_cer:.0%}")


# --- html ----------------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #ddd;padding:.4em;vertical-align:top;text-align:left}
tr.fail td:first-child{border-left:4px solid #c62828}tr.pass td:first-child{border-left:4px solid #2e7d32}
del{background:#ffcdd2;text-decoration:line-through}ins{background:#c8e6c9;text-decoration:none}
.flag{display:inline-block;background:#c62828;color:#fff;border-radius:3px;padding:0 .3em;margin:1px;font-size:.85em}
.ok{color:#2e7d32}.bad{color:#c62828}.small{font-size:.85em;color:#555}
body.only-failing tr.pass{display:none}
"""


def _diff_html(check: LineCheck) -> str:
    if check.transcript is None:
        return f'<span class="bad">{html.escape(check.note)}</span>'
    glue = "" if check.metric == "cer" else " "
    parts: list[str] = []
    for kind, text, heard in check.diff:
        ref, hyp = html.escape(text), html.escape(heard)
        if kind == "equal":
            parts.append(ref)
        elif kind == "substitute":
            parts.append(f"<del>{ref}</del>{glue}<ins>{hyp}</ins>")
        elif kind == "delete":
            parts.append(f"<del>{ref}</del>")
        else:
            parts.append(f"<ins>{hyp}</ins>")
    return glue.join(parts)


def _timeline_svg(report: Report) -> str:
    lines = report.lines
    if not lines:
        return ""
    speakers = list(dict.fromkeys(c.speaker for c in sorted(lines, key=lambda c: (c.start, c.index))))
    program = max(max(c.start + max(c.slot, c.duration) for c in lines), 1.0)
    label_w, width, row_h = 120, 1000, 34
    scale = (width - label_w - 10) / program
    height = row_h * len(speakers) + 30
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'role="img" aria-label="timeline of slots and rendered lengths">'
    ]
    step = next(s for s in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600, math.inf) if program / s <= 12)
    tick = 0.0
    while step != math.inf and tick <= program:
        x = label_w + tick * scale
        out.append(f'<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{height - 20}" stroke="#eee"/>')
        out.append(f'<text x="{x:.1f}" y="{height - 6}" font-size="11" text-anchor="middle">{tick:g}s</text>')
        tick += step
    for row, speaker in enumerate(speakers):
        y = row * row_h + 4
        out.append(f'<text x="4" y="{y + 18}" font-size="12">{html.escape(speaker)}</text>')
        for c in lines:
            if c.speaker != speaker:
                continue
            x = label_w + c.start * scale
            tip = html.escape(f"#{c.index} {c.speaker}: {c.text} (slot {c.slot:.2f}s, rendered {c.duration:.2f}s)")
            colour = "#4a7bd0" if c.passed else "#c62828"
            out.append(
                f'<g><title>{tip}</title>'
                f'<rect x="{x:.1f}" y="{y}" width="{max(c.slot * scale, 1):.1f}" height="26" fill="#f2f2f2" stroke="#999"/>'
                f'<rect x="{x:.1f}" y="{y + 6}" width="{max(c.duration * scale, 1):.1f}" height="14" fill="{colour}" opacity="0.85"/>'
                f'<text x="{x + 2:.1f}" y="{y + 17}" font-size="10" fill="#fff">{c.index}</text></g>'
            )
    out.append("</svg>")
    return "".join(out)


def _row_html(c: LineCheck) -> str:
    flags = "".join(f'<span class="flag" title="{html.escape(FLAG_LABELS.get(f, f))}">{html.escape(f)}</span>' for f in c.flags)
    figures = [_rate_text(c)]
    if c.error_rate is not None:
        unit = "chars" if c.metric == "cer" else "words"
        figures.append(f"{c.errors} errors / {c.reference_units} {unit}")
        figures.append(f"{c.duration:.2f}s in a {c.slot:.2f}s slot")
        if c.overflow:
            figures.append(f"overflow {c.overflow:.2f}s")
        if c.overlap:
            figures.append(f"overlap {c.overlap:.2f}s")
        peak_db = 20 * math.log10(c.peak) if c.peak > 0 else -math.inf
        figures.append(f"peak {peak_db:.1f} dBFS, {c.silent_fraction:.0%} silent")
        figures.append(f"silence {c.leading_silence:.2f}s before, {c.trailing_silence:.2f}s after")
    audio = ""
    if c.file and "missing-file" not in c.flags:
        audio = f'<audio controls preload="none" src="{html.escape(quote(c.file), quote=True)}"></audio>'
    transcript = "" if c.transcript is None else html.escape(c.transcript)
    verdict = '<span class="ok">pass</span>' if c.passed else '<span class="bad">FAIL</span>'
    return (
        f'<tr class="{"pass" if c.passed else "fail"}" id="line-{c.index}">'
        f"<td>#{c.index}<br>{verdict}</td><td>{html.escape(c.speaker)}<br><span class=small>{html.escape(c.language or '')}</span></td>"
        f"<td><div>{html.escape(c.text)}</div><div class=small>heard: {transcript}</div><div>{_diff_html(c)}</div></td>"
        f'<td class=small>{"<br>".join(html.escape(f) for f in figures)}</td><td>{flags}</td><td>{audio}</td></tr>'
    )


def render_html(report: Report) -> str:
    """The self-contained qa.html page: summary, timeline, and a row per line, failing lines first."""
    ordered = sorted(report.lines, key=lambda c: (c.passed, c.index))
    scored = [_corpus_text(f) for f in (report.wer, report.cer) if f.lines]
    verdict = "all lines passed" if report.passed else f"{report.failed} of {len(report.lines)} lines failing"
    summary = [
        f"<li><b class={'ok' if report.passed else 'bad'}>{html.escape(verdict)}</b></li>",
        *(f"<li>{html.escape(s)}</li>" for s in scored),
        f"<li>ASR model: {html.escape(report.asr_model)}</li>",
        f"<li>thresholds: WER &le; {report.settings.max_wer:.0%}, CER &le; {report.settings.max_cer:.0%}</li>",
    ]
    title = f"omnidub QA: {report.out_dir.name}"
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title><style>{_CSS}</style></head>\n'
        f"<body><h1>{html.escape(title)}</h1><ul>{''.join(summary)}</ul>\n"
        "<h2>Timeline</h2><p class=small>Grey: the line's slot. Bar: the rendered length (red when the line fails).</p>\n"
        f"{_timeline_svg(report)}\n"
        '<h2>Lines</h2><label><input type="checkbox" '
        "onchange=\"document.body.classList.toggle('only-failing', this.checked)\"> only failing lines</label>\n"
        "<table><thead><tr><th>line</th><th>speaker</th><th>text / heard / difference</th><th>figures</th>"
        "<th>flags</th><th>listen</th></tr></thead><tbody>\n"
        + "\n".join(_row_html(c) for c in ordered)
        + "\n</tbody></table></body></html>\n"
    )
