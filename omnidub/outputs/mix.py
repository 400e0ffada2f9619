"""Stems, the dub mix and the mix over a bed, written block by block at the delivery rate and loudness.

Peak memory is one block plus the segments that overlap it, whatever the programme length: a two-hour
programme with a few lines costs about what a two-minute one does. Loudness needs the whole mix, so the mix
is computed twice: once to measure it (keeping only per-100 ms energies and per-millisecond peaks), once to
write it with the gain. With a bed, a third pass writes the mix over the bed.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from omnidub.files import atomic_path
from omnidub.outputs.loudness import MAKEUP_MAX, Level, Meter, plan_gain
from omnidub.outputs.patch import (
    MARGIN,
    MOST,
    MixState,
    Patched,
    Whole,
    changed_spans,
    check,
    identity,
    kept_gain,
    limiter_moved,
    merge,
    remeasure,
    rewrite,
    unit_of,
)

BLOCK_SECONDS = 10.0
FORMATS = {"wav": ("WAV", "PCM_24"), "flac": ("FLAC", "PCM_24"), "mp3": ("MP3", "MPEG_LAYER_III")}
# A RIFF header counts bytes in 32 bits: a WAV file holds at most 4 GiB, about 8 hours of 48 kHz 24-bit mono.
WAV_LIMIT_BYTES = 2**32 - 1
_WAV_HEADER_BYTES = 1024  # generous: fmt and other chunks before the samples
_SAMPLE_BYTES = {"PCM_16": 2, "PCM_24": 3, "PCM_32": 4, "FLOAT": 4}


@dataclass(frozen=True)
class Placement:
    """One segment file placed on the programme timeline (length and text for subtitles and timelines; the line's
    flags and its audio's hash for the timelines' markers)."""

    path: Path
    start: float
    speaker: str
    seconds: float = 0.0
    text: str = ""
    index: int = 0
    language: str | None = None
    flags: tuple[str, ...] = ()
    sha256: str | None = None


@dataclass(frozen=True)
class Bed:
    """A music-and-effects track (or the original programme audio) to mix under the dub, ducked while lines play."""

    path: Path
    duck: float = 12.0  # dB
    attack: float = 0.05  # seconds, ending when the first word starts
    release: float = 0.3  # seconds, starting when the last word ends


@dataclass(frozen=True)
class Mastered:
    """One written mix: the gain it got (dB), whether the limiter had to work, what it measures now, and a note
    when it could not reach its loudness target."""

    path: Path
    gain: float
    limited: bool
    level: Level
    note: str | None = None

    def as_dict(self) -> dict:
        note = {"note": self.note} if self.note else {}
        return {"gain": round(self.gain, 2), "limited": self.limited, **self.level.as_dict(), **note}


SHORT_OF_TARGET = 0.5  # LU under the loudness target worth a note: the limiter's own make-up is within this


def short_of_target(path: Path, level: Level, target: float | None, ceiling: float, limited: bool) -> str | None:
    """Why a mix measures noticeably under its loudness target, and by how much (None when it does not), for
    any reason: held down by the ceiling, or too quiet to measure at all (under the -70 LUFS gate)."""
    if target is None or (level.integrated is not None and target - level.integrated <= SHORT_OF_TARGET):
        return None
    why = (
        f"the {ceiling:g} dBTP true-peak ceiling holds it down (the limiter turns peaks down, and the level "
        f"rises at most {MAKEUP_MAX:g} dB to make up for it); raise --true-peak or lower --loudness"
        if limited or ceiling < target
        else "its level could not be raised further"
    )
    if level.integrated is None:
        return (
            f"{path.name} is too quiet to measure (under the -70 LUFS gate), not at the {target:g} LUFS target: "
            f"{why if limited else 'its lines are silent or nearly so; listen to the segments'}"
        )
    return (
        f"{path.name} measures {level.integrated:.1f} LUFS, {target - level.integrated:.1f} LU under the "
        f"{target:g} LUFS target: {why}"
    )


def container(fmt: str, frames: int, channels: int = 1) -> tuple[str, str]:
    """The soundfile (format, subtype) a file of ``frames`` is written with: WAV past its 4 GiB limit becomes
    RF64, the 64-bit WAV that ffmpeg and editors read, under the same .wav name."""
    major, subtype = FORMATS[fmt]
    if major == "WAV" and frames * channels * _SAMPLE_BYTES[subtype] + _WAV_HEADER_BYTES > WAV_LIMIT_BYTES:
        return "RF64", subtype
    return major, subtype


def assemble(
    placements: list[Placement], stems: dict[str, Path], mix: Path, seconds: float, **options
) -> tuple[Mastered, Mastered | None]:
    """Write one stem per speaker, the dub mix and (with a bed) the mix over the bed, ``seconds`` long, whole:
    :func:`deliver_audio` with nothing to patch (``options``: its sample_rate, fmt, loudness, true_peak, bed and
    bed_mix). Returns the dub mix and the mix over the bed (None without one)."""
    made = deliver_audio(placements, stems, mix, seconds, **options)
    return made.dub, made.over_bed


@dataclass
class Delivered:
    """What :func:`deliver_audio` wrote: the dub mix and the bed mix, the state the next delivery patches from
    (None with a bed), and how it was made (patched, or whole and why)."""

    dub: Mastered
    over_bed: Mastered | None
    state: MixState | None
    how: dict


def deliver_audio(
    placements: list[Placement],
    stems: dict[str, Path],
    mix: Path,
    seconds: float,
    *,
    sample_rate: int = 48000,
    fmt: str = "wav",
    loudness: float | None = -23.0,
    true_peak: float = -1.0,
    bed: Bed | None = None,
    bed_mix: Path | None = None,
    previous: MixState | None = None,
    frame: str = "",
    out_dir: Path | None = None,
    whole: str | None = None,
) -> Delivered:
    """Write one stem per speaker, the dub mix and (with a bed) the mix over the bed, ``seconds`` long, patching
    the last delivery (``previous``, checked against the files in ``out_dir``) where only lines changed since, else
    writing everything whole.

    The dub mix gets one gain (to ``loudness`` LUFS, None keeps the level) and, only where its true peak would
    pass ``true_peak`` dBTP, a look-ahead limiter; the stems get the same, so they still sum to the mix."""
    total = int(round(seconds * sample_rate))
    spans = _spans(placements, sample_rate)
    lines = {identity(p): (p.speaker, first, last) for first, last, _, p in spans}
    relatives = [path.relative_to(out_dir).as_posix() for path in [*stems.values(), mix]] if out_dir else []
    why = ""
    if out_dir is not None and previous is not None:
        try:
            if bed is not None:
                raise Whole("a bed is mixed under the dub (its mix is made whole)")
            if fmt != "wav":
                raise Whole(f"{fmt} files cannot be patched in place")
            check(previous, out_dir, frame, sample_rate, total, relatives)
            return _patch(previous, placements, spans, lines, stems, mix, out_dir, relatives, loudness, true_peak)
        except Whole as exc:
            why = str(exc)
    elif out_dir is not None:
        why = whole or "no earlier delivery recorded to patch"
    keep = lines if bed is None and out_dir is not None else None
    dub, over_bed, state = _whole(
        placements, stems, mix, total, sample_rate, fmt, loudness, true_peak, bed, bed_mix, keep
    )
    if state is not None and out_dir is not None:
        state.frame = frame
        state.stamp(out_dir, relatives)
    return Delivered(dub, over_bed, state, {"how": "whole", "why": why})


def _patch(previous, placements, spans, lines, stems, mix, out_dir, relatives, loudness, true_peak) -> Delivered:
    """Re-mix only the spans around lines that changed (see :mod:`omnidub.outputs.patch`)."""
    rate, total = previous.rate, previous.frames
    unit = unit_of(previous.raw)
    margin = int(MARGIN * rate)
    warm = -(-margin // unit) * unit
    dirty, speakers = changed_spans(previous, lines, unit, margin)
    if sum(hi - lo for lo, hi in dirty) > total * MOST:
        raise Whole("most of the programme changed")
    by_speaker = {speaker: path for speaker, path in stems.items()}

    def raw_signal(lo, hi):
        return _sum(_range(spans, lo, hi, rate), hi - lo)

    raw = remeasure(previous.raw, dirty, raw_signal, 1, warm)
    gain, old_gain, said = kept_gain(previous, raw, loudness, true_peak)
    moved = limiter_moved(gain, old_gain, len(raw.peaks))
    if moved:
        speakers = set(stems)  # the limiter works on every stem alike
    spans_out = merge([*dirty, *moved], unit, total)

    def written_signal(lo, hi):
        return raw_signal(lo, hi) * gain.curve(lo, hi - lo)

    written = remeasure(previous.written, spans_out, written_signal, 1, warm)
    targets = {mix: None, **{by_speaker[s]: s for s in sorted(speakers) if s in by_speaker}}

    def block(path, lo, hi):
        curve = gain.curve(lo, hi - lo)
        if targets[path] is None:
            return np.clip(raw_signal(lo, hi) * curve, -1.0, 1.0)
        part = _range(spans, lo, hi, rate).get(targets[path])
        return np.zeros(hi - lo, np.float32) if part is None else np.clip(part * curve, -1.0, 1.0)

    if spans_out:
        rewrite([(path, spans_out) for path in targets], block)
    rewritten = [path.relative_to(out_dir).as_posix() for path in targets] if spans_out else []
    state = MixState(previous.frame, rate, total, previous.gain_db, raw, written, lines, dict(previous.files))
    state.stamp(out_dir, rewritten)
    level = written.level()
    dub = Mastered(mix, gain.db, gain.limited, level, short_of_target(mix, level, loudness, true_peak, gain.limited))
    patched = Patched(
        tuple((lo / rate, hi / rate) for lo, hi in spans_out),
        tuple(rewritten),
        tuple(r for r in relatives if r not in rewritten),
        said,
    )
    return Delivered(dub, None, state, patched.as_dict())


def _whole(placements, stems, mix, total, sample_rate, fmt, loudness, true_peak, bed, bed_mix, lines):
    """Every file written whole: the dub mix, the stems and (with a bed) the mix over the bed."""
    # Pass 1: measure the dub mix.
    meter = Meter(sample_rate, 1)
    for _, frames, blocks in _program(placements, sample_rate, total):
        meter.feed(_sum(blocks, frames))
    raw = meter.finish()
    gain = plan_gain(raw, loudness, true_peak)
    if lines is None:  # no state to keep: the measurement is let go before the next pass builds its own
        raw = None
    dub_scale = 10 ** (gain.db / 20)  # the dub's level inside the bed mix: the gain without the limiter

    # Pass 2: write stems and mix with that gain; measure what is written, and the bed mix if there is one.
    speakers = sorted(stems)
    written = Meter(sample_rate, 1)
    over_bed = bed is not None and bed_mix is not None
    with contextlib.ExitStack() as stack:
        if over_bed:
            from omnidub.outputs.bed import BedReader, speech_spans

            spans = speech_spans(placements, bed.attack, bed.release)
            bed_meter, bed_source = Meter(sample_rate, 2), stack.enter_context(BedReader(bed.path, sample_rate))
        sinks = [
            _sink(stack, path, sample_rate, 1, *container(fmt, total)) for path in [*(stems[s] for s in speakers), mix]
        ]
        for start, frames, blocks in _program(placements, sample_rate, total):
            curve = gain.curve(start, frames)
            for speaker, sink in zip(speakers, sinks):
                part = blocks.get(speaker)
                sink.write(np.zeros(frames, np.float32) if part is None else np.clip(part * curve, -1.0, 1.0))
            dub = _sum(blocks, frames)
            out = dub * curve
            written.feed(out)
            sinks[-1].write(np.clip(out, -1.0, 1.0))
            if over_bed:
                bed_meter.feed(_over_bed(dub * dub_scale, bed_source.read(frames), spans, start, sample_rate, bed))
    measured = written.finish()
    level = measured.level()
    dub_result = Mastered(
        mix, gain.db, gain.limited, level, short_of_target(mix, level, loudness, true_peak, gain.limited)
    )
    state = MixState("", sample_rate, total, gain.db, raw, measured, lines) if lines is not None else None
    if not over_bed:
        return dub_result, None, state

    # Pass 3: the mix over the bed, with its own gain.
    bed_gain = plan_gain(bed_meter.finish(), loudness, true_peak)
    level, silenced = _write_over_bed(placements, bed, bed_mix, bed_gain, dub_scale, spans, sample_rate, fmt, total)
    notes = [
        short_of_target(bed_mix, level, loudness, true_peak, bed_gain.limited),
        f"the bed {bed.path} holds {silenced:,} samples that are not numbers (NaN or infinity): they are silence "
        "in the mix"
        if silenced
        else None,
    ]
    over = Mastered(bed_mix, bed_gain.db, bed_gain.limited, level, "; ".join(filter(None, notes)) or None)
    return dub_result, over, None


def _write_over_bed(
    placements: list[Placement],
    bed: Bed,
    path: Path,
    gain,
    dub_scale: float,
    spans,
    sample_rate: int,
    fmt: str,
    total: int,
):
    """Write the dub (at ``dub_scale``) over the ducked bed with ``gain``; returns the level written and how many
    of the bed's samples were not numbers (made silent)."""
    from omnidub.outputs.bed import BedReader

    written = Meter(sample_rate, 2)
    with contextlib.ExitStack() as stack:
        bed_source = stack.enter_context(BedReader(bed.path, sample_rate))
        sink = _sink(stack, path, sample_rate, 2, *container(fmt, total, 2))
        for start, frames, blocks in _program(placements, sample_rate, total):
            out = _over_bed(_sum(blocks, frames) * dub_scale, bed_source.read(frames), spans, start, sample_rate, bed)
            curve = gain.curve(start, frames)
            out = out * (curve[:, None] if isinstance(curve, np.ndarray) else curve)
            written.feed(out)
            sink.write(np.clip(out, -1.0, 1.0))
    return written.finish().level(), bed_source.silenced


def _over_bed(dub: np.ndarray, bed_audio: np.ndarray, spans, start: int, sample_rate: int, bed: Bed) -> np.ndarray:
    """The dub (mono, in both channels) over the ducked bed (stereo)."""
    from omnidub.outputs.bed import duck_curve

    duck = duck_curve(spans, start, len(dub), sample_rate, bed.duck, bed.attack, bed.release)
    return dub[:, None] + bed_audio * duck[:, None]


def _sink(
    stack: contextlib.ExitStack, path: Path, sample_rate: int, channels: int, major: str, subtype: str
) -> sf.SoundFile:
    """An output file written under a temporary name, in place once the whole stack closes without error."""
    temp = stack.enter_context(atomic_path(path))
    return stack.enter_context(sf.SoundFile(temp, "w", sample_rate, channels, format=major, subtype=subtype))


def _sum(blocks: dict[str, np.ndarray], frames: int) -> np.ndarray:
    out = np.zeros(frames, np.float32)
    for part in blocks.values():
        out += part
    return out


def _spans(placements: list[Placement], sample_rate: int) -> list[tuple[int, int, int, Placement]]:
    """(first frame, end frame, order, placement) of each segment at ``sample_rate``, in the order they start."""
    spans = []
    for i, placement in enumerate(placements):
        info = sf.info(str(placement.path))
        first = int(round(placement.start * sample_rate))
        frames = int(round(info.frames * sample_rate / info.samplerate))
        spans.append((first, first + frames, i, placement))
    spans.sort(key=lambda s: (s[0], s[2]))
    return spans


def _segment(placement: Placement, frames: int, sample_rate: int) -> np.ndarray:
    """A segment's audio, mono at ``sample_rate`` (soxr), exactly ``frames`` long."""
    import soxr

    audio, rate = sf.read(str(placement.path), dtype="float32", always_2d=True)
    # A segment edited by hand may hold samples that are not numbers (QA flags them): silence in the mix.
    audio = np.nan_to_num(audio.mean(axis=1), nan=0.0, posinf=0.0, neginf=0.0)
    if rate != sample_rate:
        audio = soxr.resample(audio, rate, sample_rate, quality="HQ")
    return np.pad(audio, (0, max(0, frames - len(audio))))[:frames]


def _range(spans, lo: int, hi: int, sample_rate: int) -> dict[str, np.ndarray]:
    """{speaker: samples lo..hi} of the segments that reach into that stretch (speakers silent there left out)."""
    blocks: dict[str, np.ndarray] = {}
    for first, last, _, placement in spans:
        a, b = max(first, lo), min(last, hi)
        if a >= b:
            continue
        audio = _segment(placement, last - first, sample_rate)
        block = blocks.setdefault(placement.speaker, np.zeros(hi - lo, np.float32))
        block[a - lo : b - lo] += audio[a - first : b - first]
    return blocks


def _program(placements: list[Placement], sample_rate: int, total: int):
    """Yield (first frame, frames, {speaker: block}) over the programme at ``sample_rate``; speakers silent in a block
    are left out. Each segment is read and resampled once (soxr), when the first block it touches comes."""
    block_len = int(BLOCK_SECONDS * sample_rate)
    spans = _spans(placements, sample_rate)
    # The spans that can still reach the current block, with their audio: each span enters once (read and
    # resampled then) and leaves once, so the work grows with the lines, not with lines times blocks.
    active: list[tuple[int, int, Placement, np.ndarray]] = []
    upcoming = 0
    for block_start in range(0, total, block_len):
        block_end = min(total, block_start + block_len)
        while upcoming < len(spans) and spans[upcoming][0] < block_end:
            first, last, _, placement = spans[upcoming]
            upcoming += 1
            active.append((first, last, placement, _segment(placement, last - first, sample_rate)))
        active = [span for span in active if span[1] > block_start]
        blocks: dict[str, np.ndarray] = {}
        for first, last, placement, audio in active:
            lo, hi = max(first, block_start), min(last, block_end)
            if lo >= hi:
                continue
            block = blocks.setdefault(placement.speaker, np.zeros(block_end - block_start, np.float32))
            block[lo - block_start : hi - block_start] += audio[lo - first : hi - first]
        yield block_start, block_end - block_start, blocks
