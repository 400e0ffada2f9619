"""Delivery that redoes only what changed: the stems and the mix patched where lines changed since the last delivery.

Every delivery leaves, in the folder's state (``.omnidub/mix-state.npz``), what the next one needs to patch it: each
line as it was placed, the mix's loudness measurements before and after its gain (per-100 ms energies,
per-millisecond peaks), the gain, and each audio file's size and time as written. The next delivery re-mixes only
the spans whose lines changed (with a margin the loudness filters and the limiter settle in), measures those spans
again and splices them into the measurements. The loudness gain is global: the one delivered is kept while the
mix's gain as planned afresh moves less than ``GAIN_TOLERANCE``; past it, when anything but lines changed (format,
rate, options, speakers, length, a file not as written), or when most of the programme did, the delivery is made
whole. Patched files are copies written in full and renamed into place together at the end, so a crash leaves the
last delivery as it was.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile as sf

from omnidub.files import STATE, atomic_path
from omnidub.outputs.loudness import LIMIT_MARGIN, Gain, Measurement, Meter, limiter_stretches, plan_gain

STATE_FILE = f"{STATE}/mix-state.npz"
GAIN_TOLERANCE = 0.1  # dB: a kept gain this close to the planned one is well under what a listener or a meter notes
MARGIN = 0.5  # seconds re-mixed and measured around each changed line: the K-weighting filters settle well within it
MOST = 0.5  # past this share of the programme changed, writing it whole costs less than patching it
STATE_VERSION = 1


@dataclass
class MixState:
    """What a delivery of the dub mix leaves for the next one to patch it."""

    frame: str  # a key over everything but the lines (options, names, length, format)
    rate: int
    frames: int
    gain_db: float
    raw: Measurement  # the dub mix before its gain
    written: Measurement  # the mix as written (after the gain and the limiter, before clipping)
    lines: dict[str, tuple[str, int, int]]  # a line's identity -> (speaker, first frame, end frame)
    files: dict[str, tuple[int, int]] = field(default_factory=dict)  # relative path -> (size, mtime_ns) as written

    def save(self, out_dir: Path) -> None:
        meta = {
            "version": STATE_VERSION,
            "frame": self.frame,
            "rate": self.rate,
            "frames": self.frames,
            "gain_db": self.gain_db,
            "lines": self.lines,
            "files": self.files,
            "step": self.raw.step,
            "window": self.raw.window,
        }
        buffer = io.BytesIO()
        np.savez(
            buffer,
            meta=np.array(json.dumps(meta)),
            raw_energy=self.raw.energy,
            raw_peaks=self.raw.peaks,
            written_energy=self.written.energy,
            written_peaks=self.written.peaks,
        )
        path = out_dir / STATE_FILE
        path.parent.mkdir(exist_ok=True)
        with atomic_path(path) as temp:
            temp.write_bytes(buffer.getvalue())

    @classmethod
    def load(cls, out_dir: Path) -> MixState | None:
        """The last delivery's state, or None when there is none (or it cannot be read: a whole delivery then)."""
        try:
            with np.load(out_dir / STATE_FILE, allow_pickle=False) as data:
                meta = json.loads(str(data["meta"]))
                if meta.get("version") != STATE_VERSION:
                    return None
                rate, frames, step, window = meta["rate"], meta["frames"], meta["step"], meta["window"]

                def measured(name):
                    return Measurement(rate, step, window, frames, data[f"{name}_energy"], data[f"{name}_peaks"])

                return cls(
                    meta["frame"],
                    rate,
                    frames,
                    float(meta["gain_db"]),
                    measured("raw"),
                    measured("written"),
                    {k: tuple(v) for k, v in meta["lines"].items()},
                    {k: tuple(v) for k, v in meta["files"].items()},
                )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def stamp(self, out_dir: Path, relatives) -> None:
        """Record each written file's size and time (what the next delivery checks before patching it)."""
        for relative in relatives:
            stat = (out_dir / relative).stat()
            self.files[relative] = (stat.st_size, stat.st_mtime_ns)


def identity(placement) -> str:
    """A line as placed: its number, segment file (with its size and time), hash, start and speaker."""
    stat = os.stat(placement.path)
    fields = [placement.index, Path(placement.path).name, stat.st_size, stat.st_mtime_ns, placement.sha256]
    fields += [round(placement.start, 6), placement.speaker]
    return hashlib.sha256(json.dumps(fields).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Patched:
    """What a patch did: the spans re-mixed (seconds), the files rewritten and kept, and how the loudness was held."""

    spans: tuple[tuple[float, float], ...]
    rewritten: tuple[str, ...]
    kept: tuple[str, ...]
    loudness: str

    def as_dict(self) -> dict:
        return {
            "how": "patched",
            "spans": [[round(a, 3), round(b, 3)] for a, b in self.spans],
            "rewritten": list(self.rewritten),
            "kept": list(self.kept),
            "loudness": self.loudness,
        }


class Whole(Exception):
    """Why this delivery cannot patch the last one (it is made whole instead)."""


def check(state: MixState | None, out_dir: Path, frame: str, rate: int, frames: int, relatives) -> MixState:
    """The last delivery's state when this one may patch it; else :class:`Whole` says why not."""
    if state is None:
        raise Whole("no earlier delivery recorded to patch")
    if state.frame != frame or state.rate != rate or state.frames != frames:
        raise Whole("the delivery options, speakers or programme length changed")
    if set(state.files) != set(relatives):
        raise Whole("the outputs to write changed")
    for relative, (size, mtime) in state.files.items():
        try:
            stat = (out_dir / relative).stat()
        except OSError:
            raise Whole(f"{relative} is gone") from None
        if (stat.st_size, stat.st_mtime_ns) != (size, mtime):
            raise Whole(f"{relative} is not as the last delivery wrote it")
    return state


def changed_spans(state: MixState, lines: dict[str, tuple[str, int, int]], unit: int, margin: int):
    """The sample spans to re-mix (merged, on ``unit`` boundaries) and the speakers whose lines changed."""
    changed = [state.lines[k] for k in state.lines.keys() - lines.keys()]
    changed += [lines[k] for k in lines.keys() - state.lines.keys()]
    spans = [(first - margin, end + margin) for _, first, end in changed]
    return merge(spans, unit, state.frames), {speaker for speaker, _, _ in changed}


def merge(spans, unit: int, total: int) -> list[tuple[int, int]]:
    """Spans widened to ``unit`` boundaries, clipped to the programme and merged where they touch."""
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        lo, hi = max(0, lo // unit * unit), min(total, -(-hi // unit) * unit)
        if lo >= hi:
            continue
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def unit_of(measured: Measurement) -> int:
    """The smallest stretch of samples whole in both the energy steps and the peak windows."""
    return measured.step * measured.window // math.gcd(measured.step, measured.window)


def remeasure(measured: Measurement, spans, signal, channels: int, warm: int) -> Measurement:
    """``measured`` with the spans measured again from ``signal(first, end)``: each span is metered with ``warm``
    samples either side (aligned with the steps) so filters and oversampler start and end as in one pass."""
    energy, peaks = measured.energy.copy(), measured.peaks.copy()
    step, window, total = measured.step, measured.window, measured.frames
    for lo, hi in spans:
        a, b = max(0, lo - warm), min(total, hi + warm)
        meter = Meter(measured.rate, channels)
        meter.feed(signal(a, b))
        fresh = meter.finish()
        e0, e1 = lo // step, -(-hi // step)
        energy[e0:e1] = fresh.energy[e0 - a // step : e1 - a // step]
        p0, p1 = lo // window, -(-hi // window)
        peaks[p0:p1] = fresh.peaks[p0 - a // window : p1 - a // window]
    return Measurement(measured.rate, step, window, total, energy, peaks)


def kept_gain(state: MixState, raw: Measurement, loudness: float | None, true_peak: float) -> tuple[Gain, Gain, str]:
    """The gain this patch writes with (the delivered one, its limiter following the new peaks), the gain the last
    delivery wrote with, and what was decided; :class:`Whole` when the gain moved past the tolerance."""
    planned = plan_gain(raw, loudness, true_peak)
    moved = planned.db - state.gain_db
    if abs(moved) > GAIN_TOLERANCE:
        raise Whole(
            f"the changed lines move the mix's gain {moved:+.2f} dB (past {GAIN_TOLERANCE:g} dB): its loudness "
            "is made again whole"
        )

    def limits(peaks):
        if loudness is None or raw.integrated() is None:
            return ()
        return limiter_stretches(peaks, state.gain_db - (true_peak - LIMIT_MARGIN), raw.window / raw.rate)

    said = f"the delivered gain {state.gain_db:+.2f} dB kept: the gain planned afresh is {moved:+.2f} dB from it"
    old = Gain(state.gain_db, limits(state.raw.peaks), raw.window)
    return Gain(state.gain_db, limits(raw.peaks), raw.window), old, said


def limiter_moved(new: Gain, old: Gain, windows: int) -> list[tuple[int, int]]:
    """The sample spans where the limiter's curve differs between two gains (around changed peaks)."""

    def dense(gain):
        out = np.zeros(windows)
        for first, values in gain.limits:
            end = min(windows, first + len(values))
            out[first:end] = np.maximum(out[first:end], values[: end - first])
        return out

    differ = np.flatnonzero(np.abs(dense(new) - dense(old)) > 1e-9)
    if not differ.size:
        return []
    breaks = np.flatnonzero(np.diff(differ) > 1)
    starts = np.concatenate([[differ[0]], differ[breaks + 1]])
    ends = np.concatenate([differ[breaks], [differ[-1]]]) + 1
    w = new.window
    return [(int(s - 2) * w, int(e + 2) * w) for s, e in zip(starts, ends)]  # interpolation reaches a window aside


def rewrite(paths: list[tuple[Path, list[tuple[int, int]]]], blocks) -> None:
    """Each file copied, its spans overwritten from ``blocks(path, first, end)``, and all renamed into place together
    once every one is written (a failure leaves each as it was)."""
    with contextlib.ExitStack() as stack:
        for path, spans in paths:
            temp = stack.enter_context(atomic_path(path))
            shutil.copyfile(path, temp)
            with sf.SoundFile(temp, "r+") as sink:
                for lo, hi in spans:
                    sink.seek(lo)
                    sink.write(blocks(path, lo, hi))
