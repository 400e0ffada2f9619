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

The prefix cache (``DecodeOptions.prefix_refresh``) works in every layout the same way: a full pass runs the
rows whole and keeps each layer's keys and values; a cached pass runs, of each row, only its target columns (a
conditional segment's last ``target_len``, an unconditional segment whole), whose queries attend over the kept
keys and values with their own fresh ones written in. Each row keeps its own columns, so a line's cached pass is
the same whatever else shares its forward.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from omnidub.backends.rows import row_groups
from omnidub.backends.torch import upstream
from omnidub.backends.torch.fused import KeysValues


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
    cached: "_Cached"


@dataclass
class _Cached:
    """A plan's cached pass (the prefix cache): the columns each row computes and the mask its queries use."""

    kept: torch.Tensor  # [R, K] columns each row computes; the row's width (a scratch column) where it has fewer
    gather: torch.Tensor  # kept, scratch columns pointing at the last real one (they only fill the rectangle)
    mask: "torch.Tensor | CachedSegments | None"  # [R, 1, K, width (+1)] bool, or a joined row's segments
    scratch: bool
    store: KeysValues | None = None


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
        # Flat index (over all plans' positions, concatenated) of each line's target frames, in full passes and in
        # cached passes.
        index = {
            (cached, conditional): torch.zeros(self.batch, self.max_target, dtype=torch.long)
            for cached in (False, True)
            for conditional in (True, False)
        }
        offsets = [0, 0]
        for rows in groups:
            plan = _build_plan(items, rows, pad_id, device, index, offsets, skip_mask)
            offsets[0] += plan.input_ids.shape[0] * plan.input_ids.shape[2]
            offsets[1] += plan.cached.kept.numel()
            self.plans.append(plan)
        self.index = {key: value.to(device) for key, value in index.items()}
        self.cond_index, self.uncond_index = self.index[False, True], self.index[False, False]

    def logits(self, model, llm=None, cache: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Conditional and unconditional target logits, each [B, C, T_max, V] float32 (frames past a line's end are
        junk). ``cache`` (the prefix cache, fused model only): "fill" runs the rows whole and keeps every layer's
        keys and values; "reuse" runs only the target columns against what the last "fill" kept."""
        llm = llm if llm is not None else model.llm
        hidden = []
        for plan in self.plans:
            if cache == "reuse":
                cached = plan.cached
                where = cached.gather
                ids = plan.input_ids.gather(2, where[:, None, :].expand(-1, plan.input_ids.shape[1], -1))
                embeds = upstream.embed(model, ids, plan.audio_mask.gather(1, where))
                cached.store.kept = cached.kept
                out = llm(embeds, cached.mask, plan.position_ids.gather(1, where), prefix=cached.store)[0]
            else:
                embeds = upstream.embed(model, plan.input_ids, plan.audio_mask)
                mask = (
                    plan.segments
                    if plan.segments is not None and getattr(llm, "takes_segments", False)
                    else plan.attention_mask
                )
                if cache == "fill":
                    plan.cached.store = KeysValues(plan.cached.scratch)
                    out = llm(embeds, mask, plan.position_ids, prefix=plan.cached.store)[0]
                else:
                    out = upstream.forward_llm(llm, embeds, mask, plan.position_ids)
            hidden.append(out.reshape(-1, out.shape[-1]))
        flat = hidden[0] if len(hidden) == 1 else torch.cat(hidden)
        reused = cache == "reuse"
        # Heads only where logits are used: the target frames of both rows.
        targets = torch.stack((flat[self.index[reused, True]], flat[self.index[reused, False]]))  # [2, B, T, H]
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


class CachedSegments(tuple):
    """A joined row's cached pass: (query start, query length, key start, key length) of each segment."""


def _segment_len(items: list[Item], line: int, conditional: bool) -> int:
    return items[line].input_ids.shape[1] if conditional else items[line].target_len


def _build_plan(items, rows, pad_id, device, index, offsets, skip_mask) -> _Plan:
    codebooks = items[0].input_ids.shape[0]
    lengths = [sum(_segment_len(items, *seg) for seg in row) for row in rows]
    width = max(lengths)
    n = len(rows)
    input_ids = torch.full((n, codebooks, width), pad_id, dtype=torch.long)
    audio_mask = torch.zeros((n, width), dtype=torch.bool)
    attention = torch.zeros((n, 1, width, width), dtype=torch.bool)
    positions = torch.zeros((n, width), dtype=torch.long)
    dst_row, dst_col, src_line, src_frame = [], [], [], []
    spans, cached_spans = [], []
    kept: list[list[int]] = []  # per row: the columns a cached pass computes
    targets = []  # (line, conditional, row, kept positions of its target frames)
    for r, row in enumerate(rows):
        start = 0
        kept.append([])
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
            flat = offsets[0] + r * width + torch.arange(first, end)
            index[False, conditional][line, :t] = flat
            # A conditional segment's prefix (style, text, reference) is what a cached pass does not compute.
            computed = range(first, end) if conditional else range(start, end)
            cached_spans.append((len(kept[r]), len(computed), start, length))
            targets.append((line, conditional, r, torch.arange(len(kept[r]), len(kept[r]) + t)))
            kept[r].extend(computed)
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
    segments = Segments(spans) if n == 1 and len(spans) > 1 and start == width else None
    cached = _cached(kept, width, attention, None if skip_mask and full else attention, segments, cached_spans)
    for line, conditional, r, where in targets:
        index[True, conditional][line, : len(where)] = offsets[1] + r * cached["kept"].shape[1] + where
    return _Plan(
        input_ids=input_ids.to(device),
        audio_mask=audio_mask.to(device),
        attention_mask=None if skip_mask and full else attention.to(device),
        position_ids=positions.to(device),
        segments=segments,
        dst_row=torch.cat(dst_row).to(device),
        dst_col=torch.cat(dst_col).to(device),
        src_line=torch.cat(src_line).to(device),
        src_frame=torch.cat(src_frame).to(device),
        cached=_Cached(**{k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in cached.items()}),
    )


def _cached(kept: list[list[int]], width: int, attention, mask, segments, spans) -> dict:
    """A plan's cached pass: each row's computed columns as one [R, K] rectangle and the mask of their queries."""
    size = max(len(columns) for columns in kept)
    scratch = any(len(columns) < size for columns in kept)
    # Rows computing fewer columns pad with the scratch column (index width): only their own padding sees it.
    where = torch.tensor([columns + [width] * (size - len(columns)) for columns in kept])
    gather = torch.tensor([columns + [columns[-1]] * (size - len(columns)) for columns in kept])
    if segments is not None:
        return dict(kept=where, gather=gather, mask=CachedSegments(spans), scratch=False)
    if mask is None and not scratch:
        return dict(kept=where, gather=gather, mask=None, scratch=False)
    rows = torch.arange(len(kept))[:, None]
    queries = attention[rows, 0, gather]  # [R, K, width]
    if scratch:
        padding = where == width
        queries = torch.cat((queries.masked_fill(padding[..., None], False), padding[..., None]), dim=-1)
    return dict(kept=where, gather=gather, mask=queries[:, None], scratch=scratch)
