"""How QA figures read, shared by the terminal report and the page: times, rates, voice figures."""

from __future__ import annotations

from omnidub.qa.results import CorpusFigure, LineCheck, SpeakerVoice


def timecode(seconds: float) -> str:
    """00:03.800 under an hour, 1:02:03.800 from an hour on."""
    millis = int(round(max(seconds, 0.0) * 1000))
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    text = f"{minutes:02d}:{rest // 1000:02d}.{rest % 1000:03d}"
    return f"{hours}:{text}" if hours else text


def line_end(check: LineCheck) -> float:
    """Where the line's audio ends on the programme (reports of older versions lack `end`)."""
    return check.end if check.end is not None else check.start + check.duration


def percent(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate:.1%}"


def corpus_text(figure: CorpusFigure) -> str:
    unit = "characters" if figure.metric == "cer" else "words"
    counts = f"{figure.errors} errors / {figure.units} {unit}, {figure.lines} lines"
    return f"{figure.metric.upper()} {percent(figure.rate)} ({counts})"


def rate_text(check: LineCheck) -> str:
    return "-" if check.error_rate is None else f"{check.metric.upper()} {check.error_rate:.0%}"


def similarity_text(check: LineCheck) -> str:
    """The line's voice similarity to its speaker, or why it was not measured; "" when no voice check ran."""
    if check.voice is not None:
        return f"{check.voice.similarity:.2f}"
    return f"not measured: {check.voice_skipped}" if check.voice_skipped else ""


def heard_text(check: LineCheck) -> str | None:
    """What the ASR model heard, quoted so it never reads as a note; None when the line was not transcribed."""
    if check.transcript is None:
        return None
    return f"\u201c{check.transcript.strip()}\u201d" if check.transcript.strip() else "nothing"


def speaker_voice_text(voice: SpeakerVoice) -> str:
    """One speaker's voice figures in a phrase, or why none was measured."""
    if not voice.lines:
        return f"{voice.speaker} not measured: {voice.reason or 'no line measured'}"
    failed = f", {voice.failed} off" if voice.failed else ""
    return (
        f"{voice.speaker} {voice.mean_similarity:.2f} (lowest {voice.min_similarity:.2f}, "
        f"{voice.lines} line{'s' if voice.lines > 1 else ''}{failed})"
    )
