"""What QA finds: settings a line is held to, the figures of each line, and the report of a folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omnidub.config import QaOptions
from omnidub.qa.verdict import PASSED, Tally, Verdict

# Flags fail a line.
FLAG_LABELS = {
    "wer": "too many word errors",
    "cer": "too many character errors",
    "voice": "does not sound like its speaker",
    "overflow": "runs past the last moment it may end",
    "overlap": "runs into a later line",
    "clipping": "clipped samples",
    "silent": "mostly silent",
    "lead-silence": "long silence before speech",
    "trail-silence": "long silence after speech",
    "nan": "NaN or infinite samples",
    "render-failed": "render failed",
    "missing-file": "segment file missing",
}
# Marks say something about a line without failing it (an unscored line that fails no check is unchecked).
MARK_LABELS = {
    "edited": "the file no longer matches the render",
    "unscored": "words not scored",
    "look-again": "the editor flagged it to look at again",
}


@dataclass(frozen=True)
class VoiceMatch:
    """A line's voice against the references: cosine similarity to its own speaker's, and to the nearest other's."""

    similarity: float
    nearest: str | None  # the other speaker whose reference is closest; None when the cast has one voice
    nearest_similarity: float | None
    margin: float | None  # similarity - nearest_similarity: negative when the line sounds like `nearest`
    speech_seconds: float  # what the encoder heard once long pauses were cut


@dataclass(frozen=True)
class QaSettings:
    """Thresholds a line is held to."""

    # The thresholds a render's preset sets, unless the caller gives others.
    max_wer: float = QaOptions().max_wer
    max_cer: float = QaOptions().max_cer
    min_voice_similarity: float = QaOptions().min_voice_similarity
    # Under this much speech the embedding is too noisy for the similarity threshold (docs/voice-check.md):
    # such a line fails only when it sounds closer to another speaker than to its own.
    min_voice_seconds: float = 1.0
    clip_level: float = 0.999
    # A peak-normalised line touches full scale once or twice; clipping flattens runs of samples.
    clip_min_samples: int = 3
    silence_dbfs: float = -40.0
    frame_seconds: float = 0.02
    max_silent_fraction: float = 0.8
    max_edge_silence: float = 0.5
    # Half a 25 Hz codec frame: rounding, not a real overrun.
    timing_tolerance: float = 0.02
    # The manifest keeps lengths to the millisecond; more than this is a different file.
    edit_tolerance: float = 0.01


@dataclass(frozen=True)
class LineCheck:
    """What QA found for one line; `transcript` and `error_rate` are None when it was not transcribed.

    `verdict` is passed, failed or unchecked, with its reasons (`flags`: the checks it failed). `diff` aligns the
    user's own text with the words as heard: (kind, text, heard) pieces, kind being equal, substitute, delete or
    insert. `marks` (edited, unscored) only inform; `note` says every reason and mark in a phrase. `end` is where
    the audio checked ends on the programme. `voice_skipped` says why a voice check that ran did not measure
    this line."""

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
    verdict: Verdict
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
    marks: tuple[str, ...] = ()
    overlap_line: int | None = None  # the later line it runs into
    voice: VoiceMatch | None = None
    start_tc: str | None = None  # SMPTE HH:MM:SS:FF at the render's frame rate, from the manifest
    end: float | None = None
    voice_skipped: str | None = None
    reference: dict | None = None  # where the line's voice came from (render --source): its clip, words, why
    sha256: str | None = None  # the hash of the audio judged, as the manifest recorded it
    # omnidub translate's checks of the line's text, when the render's input is its translation and the line still
    # says what it wrote: {"original", "flags", "checks" ({flag: why}), "back"}. They inform; they fail nothing.
    translation: dict | None = None

    @property
    def flags(self) -> tuple[str, ...]:
        """The checks the line failed."""
        return tuple(f.check for f in self.verdict.failures)

    @property
    def passed(self) -> bool:
        """Checked and passed: an unchecked line has not."""
        return self.verdict.outcome == PASSED


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
class SpeakerVoice:
    """How close one speaker's lines are to their reference; `reason` says why none was measured."""

    speaker: str
    lines: int  # lines whose voice was measured
    mean_similarity: float | None
    min_similarity: float | None
    failed: int  # lines flagged `voice`
    reason: str | None = None


@dataclass(frozen=True)
class Report:
    """QA of one output folder."""

    out_dir: Path
    asr_model: str
    lines: tuple[LineCheck, ...]
    wer: CorpusFigure
    cer: CorpusFigure
    settings: QaSettings
    speaker_model: str | None = None
    voices: tuple[SpeakerVoice, ...] = ()
    notes: tuple[str, ...] = ()
    render_model: str | None = None
    preset: str | None = None
    mix: str | None = None  # the mix file, relative to out_dir, when it exists
    program_seconds: float | None = None
    mix_seconds: float | None = None  # the mix file's length
    # the lines the render left without a voice (render --source: no voice of the source surely their own), as the
    # manifest records them: {"index", "speaker", "text", "start", "end", "why"}; nothing of theirs to hear
    unvoiced: tuple[dict, ...] = ()

    @property
    def tally(self) -> Tally:
        return Tally.of(c.verdict for c in self.lines)

    @property
    def passed(self) -> bool:
        """Every line was rendered, checked and passed."""
        return self.tally.all_passed and not self.unvoiced

    @property
    def exit_code(self) -> int:
        """The exit code of qa, render and dub (see :attr:`Tally.exit_code`); 1 too while a line has no voice."""
        return 1 if self.unvoiced else self.tally.exit_code

    def headline(self) -> str:
        """The folder's verdict in a phrase, and the lines not rendered for want of a voice."""
        said = self.tally.headline()
        if self.unvoiced:
            said += f"; {len(self.unvoiced)} line(s) not rendered: no voice of the source is surely their own"
        return said

    @property
    def failed(self) -> int:
        return self.tally.failed

    @property
    def unchecked(self) -> int:
        return self.tally.unchecked
