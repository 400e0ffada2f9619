"""From decoded waveform to the audio a line returns: upstream's volume rule, then exact length or upstream trimming."""

from __future__ import annotations

import numpy as np

EDGE_FADE_SECONDS = 0.005


def match_reference_volume(audio: np.ndarray, ref_rms: float | None) -> np.ndarray:
    """Upstream's volume rule: quiet references make quiet output; without a reference, peak to 0.5."""
    if ref_rms is not None and ref_rms < 0.1:
        return audio * (ref_rms / 0.1)
    if ref_rms is None:
        peak = float(np.abs(audio).max()) if audio.size else 0.0
        if peak > 1e-6:
            return audio / peak * 0.5
    return audio


def fit_exact(audio: np.ndarray, samples: int, sample_rate: int) -> np.ndarray:
    """Pad with silence or cut to exactly ``samples``, with a short fade at both edges against clicks."""
    out = np.zeros(samples, dtype=np.float32)
    n = min(samples, audio.shape[-1])
    out[:n] = audio[:n]
    fade = min(int(EDGE_FADE_SECONDS * sample_rate), samples // 2)
    if fade > 0:
        ramp = np.linspace(0.0, 1.0, fade, dtype=np.float32)
        out[:fade] *= ramp
        # The fade-out ends where the speech ends, so a cut never clicks and padding stays silent.
        if n >= fade:
            out[n - fade : n] *= ramp[::-1]
    return out
