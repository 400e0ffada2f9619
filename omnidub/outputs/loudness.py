"""Loudness (ITU-R BS.1770-4 / EBU R128) measured block by block, and the gain that brings a mix to a target.

A two-hour programme is never held whole: the meter keeps one K-weighted energy per 100 ms and one 4x
oversampled peak per millisecond (float16: about 15 MB for two hours), which is all that gating, loudness range
and a look-ahead true-peak limiter need; the limiter's curve exists only around the peaks it turns down.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

ABSOLUTE_GATE = -70.0  # LUFS
STEP = 0.1  # seconds: gating blocks (400 ms) and short-term blocks (3 s) both advance by 100 ms
LIMIT_MARGIN = 0.1  # dB under the ceiling the limiter aims for: inter-sample peaks move a little with the gain
LIMIT_LOOKAHEAD = 0.005  # seconds the limiter starts turning down before a peak
LIMIT_RELEASE = 24.0  # dB per second the limiter recovers at: slow enough not to pump
MAKEUP_MAX = 2.0  # dB the gain may rise above the plain gain to make up for what the limiter takes


@dataclass(frozen=True)
class Level:
    """What a mix measures: integrated loudness (LUFS), loudness range (LU), true peak (dBTP); None when silent."""

    integrated: float | None
    range: float | None
    true_peak: float | None

    def as_dict(self) -> dict:
        return {k: None if v is None else round(v, 2) for k, v in vars(self).items()}


class Meter:
    """Feed blocks of audio ([frames] or [frames, channels]) in order; read the Level at the end."""

    def __init__(self, sample_rate: int, channels: int):
        import pyloudnorm

        self.rate, self.channels = sample_rate, channels
        # pyloudnorm's K-weighting stages, run here with carried filter state so blocks chain seamlessly.
        self._stages = []
        for stage in pyloudnorm.Meter(sample_rate)._filters.values():
            b, a = stage.b, stage.a
            self._stages.append((b, a, stage.passband_gain, np.zeros((len(a) - 1, channels))))
        self._step = max(1, int(round(STEP * sample_rate)))
        self._window = max(1, sample_rate // 1000)
        # BS.1770-4 weights: L, R, C at 1.0; surrounds at 1.41 (only the first two are used here).
        self._weights = np.array([1.0, 1.0, 1.0, 1.41, 1.41][:channels])
        self._energy: list[float] = []  # weighted sum of squares per 100 ms step
        self._partial = 0.0
        self._partial_len = 0
        self._frames = 0
        self._oversampler = self._new_oversampler()
        self._peaks: list[np.ndarray] = []  # per-millisecond true peak (linear)
        self._over = np.zeros((0,), dtype=np.float32)  # oversampled magnitudes not yet in a full window
        self._samples = np.zeros((0,), dtype=np.float32)  # sample magnitudes not yet in a full window
        self._drain = sample_rate // 10  # zeros after which the oversampler holds nothing but zeros
        self._quiet = 0  # zeros fed since the last sound

    def feed(self, block: np.ndarray) -> None:
        from scipy.signal import lfilter

        block = np.asarray(block, dtype=np.float32).reshape(len(block), self.channels)
        n = len(block)
        if not n:
            return
        self._frames += n
        silent = not block.any()
        # Sparse programmes are mostly silence: once the filters and the oversampler hold nothing but (near)
        # zeros, silence is counted in without running them.
        if silent and all(np.abs(state).max() < 1e-12 for *_, state in self._stages):
            self._add_silent_energy(n)
        else:
            # A tiny offset keeps the filters' state out of denormal numbers as a sound dies away, where they
            # would run a hundred times slower; it is ~400 dB under any signal and does not move a reading.
            weighted = block.astype(np.float64) + 1e-20
            for i, (b, a, gain, state) in enumerate(self._stages):
                weighted, zf = lfilter(b, a, weighted, axis=0, zi=state)
                weighted = weighted * gain if gain != 1.0 else weighted
                self._stages[i] = (b, a, gain, zf)
            self._add_energy((weighted**2) @ self._weights)
        if not silent:
            self._quiet = 0
            self._add_peaks(_peak_per_frame(block), self._oversampler.resample_chunk(block))
            return
        if self._quiet < self._drain:
            take = min(n, self._drain - self._quiet)
            self._quiet += take
            drained = self._quiet >= self._drain
            self._add_peaks(np.zeros(take, np.float32), self._oversampler.resample_chunk(block[:take], last=drained))
            if drained:  # its history is all zeros: a fresh stream is the same, and both buffers line up again
                self._oversampler = self._new_oversampler()
            n -= take
        if n:
            self._add_silent_peaks(n)

    def _new_oversampler(self):
        import soxr

        return soxr.ResampleStream(self.rate, 4 * self.rate, self.channels, dtype="float32", quality="HQ")

    def _add_silent_energy(self, n: int) -> None:
        if self._partial_len:
            take = min(n, self._step - self._partial_len)
            self._partial_len += take
            n -= take
            if self._partial_len < self._step:
                return
            self._energy.append(self._partial)
            self._partial, self._partial_len = 0.0, 0
        whole = n // self._step
        self._energy.extend([0.0] * whole)
        self._partial, self._partial_len = 0.0, n - whole * self._step

    def _add_silent_peaks(self, n: int) -> None:
        """``n`` silent frames, with the oversampler drained (its output lines up with the samples)."""
        w = self._window
        pad = min(n, -len(self._samples) % w)
        if pad:  # finish the window in progress
            self._add_peaks(np.zeros(pad, np.float32), np.zeros(4 * pad, np.float32))
            n -= pad
        if len(self._samples):
            return
        whole = n // w
        if whole:
            self._peaks.append(np.zeros(whole, np.float16))
        rest = n - whole * w
        self._samples, self._over = np.zeros(rest, np.float32), np.zeros(4 * rest, np.float32)

    def _add_energy(self, power: np.ndarray) -> None:
        pos = 0
        if self._partial_len:
            take = min(len(power), self._step - self._partial_len)
            self._partial += float(power[:take].sum())
            self._partial_len += take
            pos = take
            if self._partial_len < self._step:
                return
            self._energy.append(self._partial)
            self._partial, self._partial_len = 0.0, 0
        whole = (len(power) - pos) // self._step
        if whole:
            self._energy.extend(power[pos : pos + whole * self._step].reshape(whole, self._step).sum(axis=1).tolist())
        rest = power[pos + whole * self._step :]
        self._partial, self._partial_len = float(rest.sum()), len(rest)

    def _add_peaks(self, samples: np.ndarray, oversampled: np.ndarray, last: bool = False) -> None:
        oversampled = np.asarray(oversampled, dtype=np.float32)
        over = _peak_per_frame(oversampled[:, None] if oversampled.ndim == 1 else oversampled)  # 1-D: already per frame
        self._samples = np.concatenate([self._samples, samples])
        self._over = np.concatenate([self._over, over])
        w = self._window
        ready = min(len(self._samples) // w, len(self._over) // (4 * w))
        if last:  # the tail: whatever is left forms one last, shorter window
            ready = -(-max(len(self._samples), len(self._over) // 4) // w)
        if ready <= 0:
            return
        s = np.zeros(ready * w, np.float32)
        o = np.zeros(ready * 4 * w, np.float32)
        s_n, o_n = min(len(self._samples), ready * w), min(len(self._over), ready * 4 * w)
        s[:s_n], o[:o_n] = self._samples[:s_n], self._over[:o_n]
        self._peaks.append(
            np.maximum(s.reshape(ready, w).max(axis=1), o.reshape(ready, 4 * w).max(axis=1)).astype(np.float16)
        )
        self._samples, self._over = self._samples[s_n:], self._over[o_n:]

    def finish(self) -> "Measurement":
        """Close the stream; the measurement keeps the per-step energies and per-millisecond peaks."""
        self._add_peaks(
            np.zeros(0, np.float32),
            self._oversampler.resample_chunk(np.zeros((0, self.channels), np.float32), last=True),
            last=True,
        )
        energy = self._energy + ([self._partial] if self._partial_len else [])
        peaks = np.concatenate(self._peaks) if self._peaks else np.zeros(0, np.float16)
        n_windows = -(-self._frames // self._window)
        return Measurement(self.rate, self._step, self._window, self._frames, np.array(energy), peaks[:n_windows])


def _peak_per_frame(audio: np.ndarray) -> np.ndarray:
    """The largest magnitude across channels at each frame (column by column: far faster than max(axis=1))."""
    peak = np.abs(audio[:, 0])
    for channel in range(1, audio.shape[1]):
        np.maximum(peak, np.abs(audio[:, channel]), out=peak)
    return peak


@dataclass(frozen=True)
class Measurement:
    """Per-step energies and per-millisecond peaks of one pass over a mix."""

    rate: int
    step: int
    window: int
    frames: int
    energy: np.ndarray
    peaks: np.ndarray

    def level(self) -> Level:
        peak = float(self.peaks.max()) if self.peaks.size else 0.0
        return Level(self.integrated(), self.loudness_range(), 20 * math.log10(peak) if peak > 0 else None)

    def _blocks(self, steps: int, energy: np.ndarray | None = None) -> np.ndarray:
        """Loudness of every block of ``steps`` 100 ms steps, advancing one step at a time."""
        energy = self.energy if energy is None else energy
        if len(energy) < steps:
            return np.zeros(0)
        sums = np.convolve(energy, np.ones(steps), mode="valid")
        with np.errstate(divide="ignore"):
            return -0.691 + 10 * np.log10(sums / (steps * self.step))

    def integrated(self, energy: np.ndarray | None = None) -> float | None:
        """Gated integrated loudness (BS.1770-4: 400 ms blocks, 75 % overlap, -70 LUFS and -10 LU gates)."""
        blocks = self._blocks(4, energy)
        blocks = blocks[blocks >= ABSOLUTE_GATE]
        if not blocks.size:
            return None
        relative = _mean_loudness(blocks) - 10.0
        gated = blocks[blocks > relative]
        return _mean_loudness(gated) if gated.size else None

    def loudness_range(self) -> float | None:
        """Loudness range (EBU Tech 3342: 3 s blocks every 100 ms, -70 LUFS and -20 LU gates, 10th-95th percentile)."""
        blocks = self._blocks(30)
        blocks = blocks[blocks >= ABSOLUTE_GATE]
        if not blocks.size:
            return None
        gated = blocks[blocks >= _mean_loudness(blocks) - 20.0]
        return float(np.percentile(gated, 95) - np.percentile(gated, 10))


def _mean_loudness(blocks: np.ndarray) -> float:
    return float(10 * np.log10(np.mean(10 ** (blocks / 10))))


@dataclass(frozen=True)
class Gain:
    """One gain for the whole mix (dB), plus the limiter's attenuation (dB per window) where peaks need it."""

    db: float
    limits: tuple[tuple[int, np.ndarray], ...]  # (first window, attenuation per window) for each stretch
    window: int  # samples per window

    @property
    def limited(self) -> bool:
        return bool(self.limits)

    def curve(self, start: int, frames: int) -> np.ndarray | float:
        """The linear gain for ``frames`` samples from ``start``: a scalar unless the limiter works here."""
        scalar = 10 ** (self.db / 20)
        end = start + frames
        touching = [
            (first, values)
            for first, values in self.limits
            if first * self.window < end + self.window and (first + len(values)) * self.window > start - self.window
        ]
        if not touching:
            return scalar
        db = np.zeros(frames)
        positions = np.arange(start, end) + 0.5
        for first, values in touching:
            # Between window centres the attenuation is interpolated; outside its stretch it is zero.
            centres = (first + np.arange(len(values)) + 0.5) * self.window
            db = np.maximum(db, np.interp(positions, centres, values, left=0.0, right=0.0))
        return (scalar * 10 ** (-db / 20)).astype(np.float32)


def plan_gain(measured: Measurement, target: float | None, ceiling: float, clip_peak: float = 0.98) -> Gain:
    """The gain to ``target`` LUFS with the true peak kept under ``ceiling`` dBTP.

    ``target`` None (loudness off) keeps the level and only scales down a mix whose samples would clip."""
    window = measured.window
    loudness = measured.integrated()
    peak = float(measured.peaks.max()) if measured.peaks.size else 0.0
    if target is None or loudness is None:
        return Gain(0.0 if peak <= clip_peak else 20 * math.log10(clip_peak / peak), (), window)
    db = target - loudness
    limits: tuple = ()
    # The limiter takes a little loudness away where it works; predict how much from the per-step energies
    # and raise the gain to match. A few rounds converge when it touches only peaks; a programme that would
    # need more than MAKEUP_MAX dB of it stays under the target rather than be squashed.
    linear = db
    for round_ in range(6):
        limits = limiter_stretches(measured.peaks, db - (ceiling - LIMIT_MARGIN), window / measured.rate)
        if not limits:
            break
        reached = _loudness_after(measured, db, limits)
        step = 0.0 if reached is None else min(target - reached, linear + MAKEUP_MAX - db)
        if round_ == 5 or abs(step) < 0.05:
            break
        db += step
    return Gain(db, limits, window)


def _loudness_after(measured: Measurement, db: float, limits) -> float | None:
    """Integrated loudness once the gain and the limiter are applied, from the per-step energies."""
    energy = measured.energy * 10 ** (db / 10)
    for first, values in limits:
        owner = ((first + np.arange(len(values))) * measured.window) // measured.step  # the step of each window
        keep = owner < len(energy)
        steps, inverse = np.unique(owner[keep], return_inverse=True)
        # Windows of a step outside the stretch keep full power: average over all the step's windows.
        per_step = measured.step / measured.window
        lost = np.bincount(inverse, 1 - 10 ** (-values[keep] / 10)) / per_step
        energy[steps] *= np.clip(1 - lost, 0.0, 1.0)
    return measured.integrated(energy)


def limiter_stretches(peaks: np.ndarray, offset_db: float, window_seconds: float) -> tuple[tuple[int, np.ndarray], ...]:
    """Where peaks (linear, per window) raised by ``offset_db`` pass 0 dB: (first window, attenuation in dB) per
    stretch, each covering the need, reached ahead of every peak and released slowly. Empty when none pass."""
    threshold = 10 ** (-offset_db / 20)
    over = np.flatnonzero(peaks > threshold)
    if not over.size:
        return ()
    need = 20 * np.log10(peaks[over].astype(np.float64)) + offset_db
    rate = LIMIT_RELEASE * window_seconds  # dB per window
    ahead = max(1, int(round(LIMIT_LOOKAHEAD / window_seconds)))
    # Each peak reaches from its look-ahead ramp to the end of its release; overlapping reaches form a stretch.
    lo = over - 2 * ahead - 2
    hi = over + np.ceil(need / rate).astype(int) + 2
    stretches = []
    start, end = lo[0], hi[0]
    for a, b in zip(lo[1:], hi[1:]):
        if a > end:
            stretches.append((start, end))
            start, end = a, b
        else:
            end = max(end, b)
    stretches.append((start, end))
    result = []
    for a, b in stretches:
        a, b = max(0, int(a)), min(len(peaks), int(b))
        local = np.zeros(b - a)
        inside = (over >= a) & (over < b)
        local[over[inside] - a] = need[inside]
        result.append((a, limiter_curve(local, window_seconds)))
    return tuple(result)


def limiter_curve(need: np.ndarray, window_seconds: float) -> np.ndarray:
    """Attenuation (dB) per window that covers ``need`` everywhere: reached ahead of each peak, released slowly."""
    from numpy.lib.stride_tricks import sliding_window_view
    from scipy.ndimage import maximum_filter1d

    n = len(need)
    # Release: after a peak the attenuation falls back linearly in dB, i.e. a running maximum of need[k] minus
    # the time since k.
    ramp = LIMIT_RELEASE * window_seconds * np.arange(n)
    released = np.maximum.accumulate(need + ramp) - ramp
    # Look-ahead: hold each value over the windows before it, then average as many: every window of the
    # average includes the peak's own value, so the peak stays covered and the turn-down is a ramp ahead of it.
    ahead = max(1, int(round(LIMIT_LOOKAHEAD / window_seconds)))
    held = sliding_window_view(np.concatenate([released, np.zeros(ahead)]), ahead + 1).max(axis=1)
    smooth = sliding_window_view(np.concatenate([np.zeros(ahead), held]), ahead + 1).mean(axis=1)
    # Guard for interpolating between window centres: each window takes its neighbours' value too.
    return maximum_filter1d(np.maximum(smooth, released), size=3, mode="constant")
