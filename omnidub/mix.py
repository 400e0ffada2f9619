"""Assembling stems and the mix from segment files, block by block.

Peak memory is one block plus the segments that overlap it, whatever the program length: a two-hour
program with a few lines costs about what a two-minute one does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from omnidub.files import atomic_path

BLOCK_SECONDS = 10.0
# The mix is scaled down as a whole when overlapping speakers would clip; this is the peak it aims for.
MIX_PEAK = 0.98
FORMATS = {"wav": ("WAV", "PCM_24"), "flac": ("FLAC", "PCM_24"), "mp3": ("MP3", "MPEG_LAYER_III")}
# A RIFF header counts bytes in 32 bits: a WAV file holds at most 4 GiB, about 16.5 hours of 24 kHz 24-bit mono.
WAV_LIMIT_BYTES = 2**32 - 1
_WAV_HEADER_BYTES = 1024  # generous: fmt and other chunks before the samples
_SAMPLE_BYTES = {"PCM_16": 2, "PCM_24": 3, "PCM_32": 4, "FLOAT": 4}


@dataclass(frozen=True)
class Placement:
    """One segment file placed on the program timeline."""

    path: Path
    start: float
    speaker: str


def container(fmt: str, frames: int, channels: int = 1) -> tuple[str, str]:
    """The soundfile (format, subtype) a file of ``frames`` is written with: WAV past its 4 GiB limit becomes
    RF64, the 64-bit WAV that ffmpeg and editors read, under the same .wav name."""
    major, subtype = FORMATS[fmt]
    if major == "WAV" and frames * channels * _SAMPLE_BYTES[subtype] + _WAV_HEADER_BYTES > WAV_LIMIT_BYTES:
        return "RF64", subtype
    return major, subtype


def write_atomic(path: Path, audio: np.ndarray, sample_rate: int, fmt: str = "wav") -> None:
    """Write a whole audio file through a temporary name, so a crash never leaves a torn file."""
    major, subtype = container(fmt, len(audio))
    with atomic_path(path) as temp:
        sf.write(temp, np.asarray(audio, dtype=np.float32), sample_rate, format=major, subtype=subtype)


def assemble(placements: list[Placement], out: Path, sample_rate: int, total_seconds: float, fmt: str = "wav", gain: float = 1.0) -> None:
    """Sum the placed segments into one file of ``total_seconds``, streaming block by block."""
    total = int(round(total_seconds * sample_rate))
    major, subtype = container(fmt, total)
    with atomic_path(out) as temp, sf.SoundFile(temp, "w", sample_rate, 1, format=major, subtype=subtype) as sink:
        for _, block in _blocks(placements, sample_rate, total):
            sink.write(np.clip(block * gain, -1.0, 1.0))


def peak(placements: list[Placement], sample_rate: int, total_seconds: float) -> float:
    """The largest absolute sample of the summed placements (a first pass before writing the mix)."""
    total = int(round(total_seconds * sample_rate))
    highest = 0.0
    for _, block in _blocks(placements, sample_rate, total):
        if block.size:
            highest = max(highest, float(np.max(np.abs(block))))
    return highest


def mix_gain(placements: list[Placement], sample_rate: int, total_seconds: float) -> float:
    """1.0, or less when overlapping lines would go past MIX_PEAK."""
    highest = peak(placements, sample_rate, total_seconds)
    return 1.0 if highest <= MIX_PEAK else MIX_PEAK / highest


def _blocks(placements: list[Placement], sample_rate: int, total: int):
    block_len = int(BLOCK_SECONDS * sample_rate)
    spans = []
    for placement in placements:
        frames = sf.info(str(placement.path)).frames
        first = int(round(placement.start * sample_rate))
        spans.append((first, first + frames, placement.path))
    spans.sort()
    # The spans that can still reach the current block: each span enters once and leaves once, so the work
    # grows with the lines, not with lines times blocks.
    active: list[tuple[int, int, Path]] = []
    upcoming = 0
    for block_start in range(0, total, block_len):
        block_end = min(total, block_start + block_len)
        block = np.zeros(block_end - block_start, dtype=np.float32)
        while upcoming < len(spans) and spans[upcoming][0] < block_end:
            active.append(spans[upcoming])
            upcoming += 1
        active = [span for span in active if span[1] > block_start]
        for first, last, path in active:
            lo, hi = max(first, block_start), min(last, block_end)
            audio = sf.read(str(path), start=lo - first, stop=hi - first, dtype="float32", always_2d=True)[0]
            block[lo - block_start : hi - block_start] += audio.mean(axis=1)
        yield block_start, block
