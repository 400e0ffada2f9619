"""OmniVoice's own length estimate for a line, at the pace of a reference."""

from __future__ import annotations

from functools import lru_cache

FRAME_RATE = 25  # OmniVoice audio frames per second (24 kHz, hop 960)
# Upstream's fallback when there is no reference (voice design): a short sentence spoken in one second.
FALLBACK_REF_TEXT = "Nice to meet you."
FALLBACK_REF_FRAMES = 25


@lru_cache(maxsize=1)
def _estimator():
    from omnivoice.utils.duration import RuleDurationEstimator

    return RuleDurationEstimator()


def natural_seconds(text: str, ref_text: str | None = None, ref_seconds: float | None = None, speed: float = 1.0) -> float:
    """Seconds upstream's rule-based estimator gives ``text`` at a reference's pace (its transcript and length)."""
    if ref_text and ref_seconds:
        frames = ref_seconds * FRAME_RATE
    else:
        ref_text, frames = FALLBACK_REF_TEXT, FALLBACK_REF_FRAMES
    estimate = _estimator().estimate_duration(text, ref_text, frames)
    if speed and speed > 0:
        estimate /= speed
    # Upstream generates whole frames, at least one.
    return max(1, int(estimate)) / FRAME_RATE
