"""The CFG row layouts of the torch backend, built in numpy: the same rows, masks, positions and targets.

A line needs a conditional row (style + text + reference codes + targets) and an unconditional row (targets
only) per step. ``padded`` pads all 2B rows to the longest; ``trimmed`` groups rows of equal length, one
forward per group; ``packed`` lays a line's two rows side by side in one row with a block-diagonal mask.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from omnidub.backends.rows import row_groups
from omnidub.config import LAYOUTS  # noqa: F401  (the layouts this module builds)


@dataclass(frozen=True, eq=False)
class Item:
    """One sequence to decode: its conditional input and how many target frames end it."""

    input_ids: np.ndarray  # [C, L] int64: style, text, reference codes, then target_len mask ids
    audio_mask: np.ndarray  # [L] bool: True on audio positions
    target_len: int


@dataclass(eq=False)
class Plan:
    """One forward: rows of equal (padded) length, and where the targets sit in them."""

    input_ids: np.ndarray  # [R, C, W] int64
    audio_mask: np.ndarray  # [R, W] bool
    attention_mask: np.ndarray  # [R, 1, W, W] bool, True = may attend
    position_ids: np.ndarray  # [R, W] int64
    target_index: np.ndarray  # [N] int64: flat row * W + column of every target position
    half: np.ndarray  # [N] 0 = conditional, 1 = unconditional
    line: np.ndarray  # [N]
    frame: np.ndarray  # [N]


class Layout:
    """The forwards of one decoding batch; ``write`` copies updated target tokens into every row holding them."""

    def __init__(self, items: list[Item], kind: str, pad_id: int):
        self.batch = len(items)
        self.max_target = max(item.target_len for item in items)
        groups = row_groups([item.input_ids.shape[1] for item in items], [item.target_len for item in items], kind)
        self.plans = [_build_plan(items, rows, pad_id) for rows in groups]

    def write(self, tokens: np.ndarray) -> None:
        """Copy the target tokens [B, C, T_max] into every row of every plan."""
        for plan in self.plans:
            rows, cols = np.divmod(plan.target_index, plan.input_ids.shape[2])
            plan.input_ids[rows, :, cols] = tokens[plan.line, :, plan.frame]

    def logits(self, forward) -> tuple[np.ndarray, np.ndarray]:
        """Conditional and unconditional target logits [B, C, T_max, V] float32; ``forward(plan)`` gives [N, C, V].

        Frames past a line's end are zeros (they are never chosen)."""
        out = None
        for plan in self.plans:
            logits = forward(plan)
            if out is None:
                out = np.zeros((2, self.batch, self.max_target) + logits.shape[1:], dtype=np.float32)
            out[plan.half, plan.line, plan.frame] = logits
        out = out.transpose(0, 1, 3, 2, 4)  # [2, B, C, T, V]
        return out[0], out[1]


def _segment_len(items: list[Item], line: int, conditional: bool) -> int:
    return items[line].input_ids.shape[1] if conditional else items[line].target_len


def _build_plan(items: list[Item], rows, pad_id: int) -> Plan:
    codebooks = items[0].input_ids.shape[0]
    width = max(sum(_segment_len(items, *seg) for seg in row) for row in rows)
    n = len(rows)
    input_ids = np.full((n, codebooks, width), pad_id, dtype=np.int64)
    audio_mask = np.zeros((n, width), dtype=bool)
    attention = np.zeros((n, 1, width, width), dtype=bool)
    positions = np.zeros((n, width), dtype=np.int64)
    index, half, line_of, frame = [], [], [], []
    for r, row in enumerate(rows):
        start = 0
        for line, conditional in row:
            item = items[line]
            t = item.target_len
            ids, mask = (
                (item.input_ids, item.audio_mask) if conditional else (item.input_ids[:, -t:], item.audio_mask[-t:])
            )
            end = start + ids.shape[1]
            input_ids[r, :, start:end] = ids
            audio_mask[r, start:end] = mask
            attention[r, 0, start:end, start:end] = True
            positions[r, start:end] = np.arange(end - start)
            index.append(r * width + np.arange(end - t, end))
            half.append(np.full(t, 0 if conditional else 1))
            line_of.append(np.full(t, line))
            frame.append(np.arange(t))
            start = end
        # Padding attends only to itself, so no real position ever sees it (upstream's rule).
        pad = np.arange(start, width)
        attention[r, 0, pad, pad] = True
    return Plan(
        input_ids,
        audio_mask,
        attention,
        positions,
        np.concatenate(index).astype(np.int64),
        np.concatenate(half),
        np.concatenate(line_of),
        np.concatenate(frame),
    )
