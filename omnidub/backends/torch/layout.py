"""CFG row layouts: how the conditional and unconditional rows of a batch are laid out for one forward.

Every line needs two rows per step: the conditional row (style + text + reference codes + targets) and the
unconditional row (targets only). The layouts differ only in how those rows share forwards:

- ``padded``: upstream's layout, 2B rows padded to the longest; padded positions attend only to themselves.
- ``trimmed``: no padding: rows are grouped by exact length and each group runs as its own forward.
- ``packed``: a line's two rows share one row with a block-diagonal mask and positions restarting at 0;
  the lines of a batch are rows padded to the longest.
- ``joined``: every row of the batch side by side in one row, positions restarting at 0 in each: the GEMMs,
  norms and rotary run over all of them at once, and attention runs segment by segment with no mask (the
  fused model); upstream's own model gets the block-diagonal mask instead.

No real position attends to another segment or to padding in any layout, so they compute the same logits
(up to the rounding of differently shaped matmuls).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from omnidub.backends.rows import row_groups
from omnidub.backends.torch import upstream


@dataclass
class Item:
    """One sequence to decode: its conditional input and how many target frames end it."""

    input_ids: torch.Tensor  # [C, L] long: style, text, reference codes, then target_len mask ids
    audio_mask: torch.Tensor  # [L] bool: True on audio positions
    target_len: int


@dataclass
class _Plan:
    """One forward: rows of equal (padded) length with their masks and positions."""

    input_ids: torch.Tensor  # [R, C, L]
    audio_mask: torch.Tensor  # [R, L]
    attention_mask: torch.Tensor | None  # [R, 1, L, L] bool, True = may attend; None: every position sees every other
    position_ids: torch.Tensor  # [R, L]
    segments: "Segments | None"  # joined: where each segment of the one row starts and how long it is
    # Where target frames sit in this plan: row and column, and which (line, frame) they hold.
    dst_row: torch.Tensor
    dst_col: torch.Tensor
    src_line: torch.Tensor
    src_frame: torch.Tensor


class Layout:
    """The forwards of one decoding batch, built once (masks included); ``logits`` runs them, ``write`` updates
    targets. With ``skip_mask``, a forward whose rows are one unpadded segment each (always so when trimmed)
    runs without a mask: the mask would be all True, and without one SDPA picks its fastest kernel."""

    def __init__(self, items: list[Item], kind: str, pad_id: int, device, skip_mask: bool = True):
        self.kind = kind
        self.batch = len(items)
        self.max_target = max(item.target_len for item in items)
        groups = row_groups([item.input_ids.shape[1] for item in items], [item.target_len for item in items], kind)

        self.plans: list[_Plan] = []
        # Flat index (over all plans' positions, concatenated) of each line's target frames.
        cond_index = torch.zeros(self.batch, self.max_target, dtype=torch.long)
        uncond_index = torch.zeros(self.batch, self.max_target, dtype=torch.long)
        offset = 0
        for rows in groups:
            plan = _build_plan(items, rows, pad_id, device, cond_index, uncond_index, offset, skip_mask)
            offset += plan.input_ids.shape[0] * plan.input_ids.shape[2]
            self.plans.append(plan)
        self.cond_index = cond_index.to(device)
        self.uncond_index = uncond_index.to(device)

    def logits(self, model, llm=None) -> tuple[torch.Tensor, torch.Tensor]:
        """Conditional and unconditional target logits, each [B, C, T_max, V] float32 (frames past a line's end are
        junk)."""
        llm = llm if llm is not None else model.llm
        hidden = []
        for plan in self.plans:
            embeds = upstream.embed(model, plan.input_ids, plan.audio_mask)
            mask = (
                plan.segments
                if plan.segments is not None and getattr(llm, "takes_segments", False)
                else plan.attention_mask
            )
            out = upstream.forward_llm(llm, embeds, mask, plan.position_ids)
            hidden.append(out.reshape(-1, out.shape[-1]))
        flat = hidden[0] if len(hidden) == 1 else torch.cat(hidden)
        # Heads only where logits are used: the target frames of both rows.
        targets = torch.stack((flat[self.cond_index], flat[self.uncond_index]))  # [2, B, T, H]
        codebooks = model.config.num_audio_codebook
        logits = model.audio_heads(targets).view(2, self.batch, self.max_target, codebooks, -1)
        logits = logits.transpose(2, 3).float()  # [2, B, C, T, V], as upstream scores in float32
        return logits[0], logits[1]

    def write(self, tokens: torch.Tensor) -> None:
        """Copy the current target tokens [B, C, T_max] into every row that holds them."""
        for plan in self.plans:
            plan.input_ids[plan.dst_row, :, plan.dst_col] = tokens[plan.src_line, :, plan.src_frame]


class Segments(tuple):
    """(start, length) of each segment of a joined row, in order: attention stays inside each one."""


def _segment_len(items: list[Item], line: int, conditional: bool) -> int:
    return items[line].input_ids.shape[1] if conditional else items[line].target_len


def _build_plan(items, rows, pad_id, device, cond_index, uncond_index, offset, skip_mask) -> _Plan:
    codebooks = items[0].input_ids.shape[0]
    lengths = [sum(_segment_len(items, *seg) for seg in row) for row in rows]
    width = max(lengths)
    n = len(rows)
    input_ids = torch.full((n, codebooks, width), pad_id, dtype=torch.long)
    audio_mask = torch.zeros((n, width), dtype=torch.bool)
    attention = torch.zeros((n, 1, width, width), dtype=torch.bool)
    positions = torch.zeros((n, width), dtype=torch.long)
    dst_row, dst_col, src_line, src_frame = [], [], [], []
    spans = []
    for r, row in enumerate(rows):
        start = 0
        for line, conditional in row:
            item = items[line]
            t = item.target_len
            if conditional:
                ids, mask = item.input_ids, item.audio_mask
            else:
                ids, mask = item.input_ids[:, -t:], item.audio_mask[-t:]
            length = ids.shape[1]
            end = start + length
            input_ids[r, :, start:end] = ids.cpu()
            audio_mask[r, start:end] = mask.cpu()
            attention[r, 0, start:end, start:end] = True
            spans.append((start, length))
            positions[r, start:end] = torch.arange(length)
            first = end - t
            flat = offset + r * width + torch.arange(first, end)
            (cond_index if conditional else uncond_index)[line, :t] = flat
            dst_row.append(torch.full((t,), r))
            dst_col.append(torch.arange(first, end))
            src_line.append(torch.full((t,), line))
            src_frame.append(torch.arange(t))
            start = end
        if start < width:
            # Padding attends only to itself, so no real position ever sees it (upstream's rule).
            pad = torch.arange(start, width)
            attention[r, 0, pad, pad] = True
    full = all(len(row) == 1 for row in rows) and all(length == width for length in lengths)
    return _Plan(
        input_ids=input_ids.to(device),
        audio_mask=audio_mask.to(device),
        attention_mask=None if skip_mask and full else attention.to(device),
        position_ids=positions.to(device),
        segments=Segments(spans) if n == 1 and len(spans) > 1 and start == width else None,
        dst_row=torch.cat(dst_row).to(device),
        dst_col=torch.cat(dst_col).to(device),
        src_line=torch.cat(src_line).to(device),
        src_frame=torch.cat(src_frame).to(device),
    )
