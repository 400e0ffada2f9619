"""Upstream's unmasking schedule, shared by both backends: how many tokens each step reveals.

Computed in numpy with torch.linspace's float32 recipe and upstream's time shift in float32, so every ceil()
lands where upstream's ``_get_time_steps`` puts it (tested against torch).
"""

from __future__ import annotations

import math

import numpy as np


def schedule(total: int, steps: int, t_shift: float) -> list[int]:
    """How many tokens upstream unmasks at each step for ``total`` masked tokens."""
    # torch.linspace's float32 recipe (each half from its own end), then the shift in float32, so the ceil()s agree.
    f32 = np.float32
    step = (f32(1.0) - f32(0.0)) / f32(steps)
    index = np.arange(steps + 1)
    halfway = (steps + 1) // 2
    t = np.where(
        index < halfway, f32(0.0) + step * index.astype(f32), f32(1.0) - step * (steps - index).astype(f32)
    ).astype(f32)
    t = (f32(t_shift) * t / (f32(1.0) + f32(t_shift - 1) * t)).astype(f32).tolist()
    out, remaining = [], total
    for s in range(steps):
        n = remaining if s == steps - 1 else min(math.ceil(total * (t[s + 1] - t[s])), remaining)
        out.append(int(n))
        remaining -= int(n)
    return out
