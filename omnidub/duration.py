"""OmniVoice's own length estimate for a line, at the pace of a reference (no torch, no model)."""

from __future__ import annotations

from functools import lru_cache

from omnidub.lightweight import omnivoice_module

FRAME_RATE = 25  # OmniVoice audio frames per second (24 kHz, hop 960)
# Upstream's fallback when there is no reference (voice design): a short sentence spoken in one second.
FALLBACK_REF_TEXT = "Nice to meet you."
FALLBACK_REF_FRAMES = 25


@lru_cache(maxsize=1)
def _estimator():
    return omnivoice_module("duration").RuleDurationEstimator()


def natural_frames(text: str, ref_text: str | None = None, ref_frames: float | None = None, speed: float = 1.0) -> int:
    """Frames upstream's ``_estimate_target_tokens`` gives ``text`` at a reference's pace (same rule, same rounding)."""
    if not ref_frames or not ref_text:
        ref_text, ref_frames = FALLBACK_REF_TEXT, FALLBACK_REF_FRAMES
    estimate = _estimator().estimate_duration(text, ref_text, ref_frames)
    if speed > 0 and speed != 1.0:
        estimate /= speed
    return max(1, int(estimate))


def natural_seconds(
    text: str, ref_text: str | None = None, ref_seconds: float | None = None, speed: float = 1.0
) -> float:
    """Seconds upstream's rule-based estimator gives ``text`` at a reference's pace (its transcript and length)."""
    frames = None if not ref_seconds else ref_seconds * FRAME_RATE
    return natural_frames(text, ref_text, frames, speed) / FRAME_RATE


def target_frames(seconds: float, frame_rate: int = FRAME_RATE) -> int:
    """Frames generated for a line of exactly ``seconds``: whole frames, at least one (n/rate seconds gives n)."""
    # seconds * rate of an exact n/rate often lands just under n (29/25*25 = 28.999...): absorb that before flooring.
    return max(1, int(seconds * frame_rate + 1e-6))
