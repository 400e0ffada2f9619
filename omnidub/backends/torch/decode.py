"""The iterative unmasking loop: upstream ``_generate_iterative`` semantics, vectorised across lines.

Same schedule, same CFG on log-softmax, same layer penalty, gumbel position noise and top-k unmasking as
omnivoice 0.2.1. Scoring runs once per step for the whole batch (per-line k is applied by rank), and each
line draws its noise from its own generator in its own shape, so a line decodes the same alone or batched.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from omnidub.backends.schedule import schedule
from omnidub.backends.torch.layout import Item, Layout
from omnidub.config import DecodeOptions


def gumbel(uniform: torch.Tensor) -> torch.Tensor:
    """Gumbel noise from uniform draws, exactly as upstream's _gumbel_sample makes it."""
    return -torch.log(-torch.log(uniform + 1e-10) + 1e-10)


@torch.inference_mode()
def decode(
    model,
    items: list[Item],
    seeds: list[int],
    sampling: DecodeOptions,
    layout: str,
    llm=None,
    skip_mask: bool = True,
    states: list | None = None,
) -> list[torch.Tensor]:
    """Decode a batch of items; returns each line's tokens [C, target_len] (long, on the model's device).
    ``states``, when given, gets the tokens [B, C, T_max] each step starts from (the bench's prefix-cache drift)."""
    device = model.device
    mask_id = model.config.audio_mask_id
    codebooks = model.config.num_audio_codebook
    batch = len(items)
    rows = Layout(items, layout, pad_id=mask_id, device=device, skip_mask=skip_mask)
    width = rows.max_target
    lengths = [item.target_len for item in items]

    plans = [schedule(t * codebooks, sampling.steps, sampling.t_shift) for t in lengths]
    k_max = [max(p[s] for p in plans) for s in range(sampling.steps)]
    k_step = torch.tensor(plans, dtype=torch.long).T.contiguous().to(device)  # [steps, B]
    generators = [torch.Generator().manual_seed(seed) for seed in seeds]

    # Draw every line's position noise up front, in upstream's order (one [C, T] draw per step that
    # unmasks something), so the loop itself has no per-line work. Class noise, when used, interleaves with
    # it per step, so that case draws inside the loop instead.
    predrawn = sampling.position_temperature > 0 and sampling.class_temperature <= 0
    if predrawn:
        noise = torch.zeros(sampling.steps, batch, codebooks, width)
        for i, (t, gen) in enumerate(zip(lengths, generators)):
            for step in range(sampling.steps):
                if plans[i][step] > 0:
                    noise[step, i, :, :t] = torch.rand(codebooks, t, generator=gen)
        noise = gumbel(noise.to(device))

    tokens = torch.full((batch, codebooks, width), mask_id, dtype=torch.long, device=device)
    valid = torch.arange(width, device=device) < torch.tensor(lengths, device=device)[:, None]  # [B, T]
    valid = valid[:, None, :].expand(batch, codebooks, width)
    penalty = torch.arange(codebooks, device=device).view(1, -1, 1) * sampling.layer_penalty_factor
    ranks = torch.arange(max(k_max), device=device)
    refresh, filled = sampling.prefix_refresh, False

    for step in range(sampling.steps):
        if k_max[step] == 0:
            continue  # every line has already unmasked everything
        if states is not None:
            states.append(tokens.clone())
        cache = None
        if refresh > 1:
            # The prefix cache: every refresh-th step runs the rows whole; the steps between run the targets only.
            cache = "reuse" if filled and step % refresh else "fill"
            filled = True
        c_logits, u_logits = rows.logits(model, llm, cache)
        log_probs = _guided_log_probs(c_logits, u_logits, sampling.guidance_scale)
        log_probs[..., mask_id] = -float("inf")

        class_noise = pos_noise = None
        if not predrawn and (sampling.class_temperature > 0 or sampling.position_temperature > 0):
            class_noise, pos_noise = _draw_step(generators, plans, step, lengths, log_probs.shape, sampling, device)

        if sampling.class_temperature > 0:
            filtered = _filter_top_k(log_probs, ratio=0.1)
            predicted = (filtered / sampling.class_temperature + class_noise).argmax(dim=-1)
            confidence = log_probs.max(dim=-1)[0]
        else:
            confidence, predicted = log_probs.max(dim=-1)

        scores = confidence - penalty
        if sampling.position_temperature > 0:
            scores = scores / sampling.position_temperature + (noise[step] if predrawn else pos_noise)
        scores = scores.masked_fill((tokens != mask_id) | ~valid, -float("inf"))

        # Top-k per line with per-line k: take the k_max best and keep each line's first k.
        _, best = scores.view(batch, -1).topk(k_max[step], dim=1)
        keep = ranks[: k_max[step]] < k_step[step][:, None]
        chosen = torch.zeros(batch, codebooks * width, dtype=torch.bool, device=device).scatter_(1, best, keep)
        tokens = torch.where(chosen.view_as(tokens), predicted, tokens)
        rows.write(tokens)

    return [tokens[i, :, : lengths[i]] for i in range(batch)]


def _guided_log_probs(c_logits: torch.Tensor, u_logits: torch.Tensor, scale: float) -> torch.Tensor:
    # Upstream's formula, op for op: CFG on log-probabilities, renormalised.
    if scale == 0:
        return F.log_softmax(c_logits, dim=-1)
    c = F.log_softmax(c_logits, dim=-1)
    u = F.log_softmax(u_logits, dim=-1)
    return torch.log_softmax(c + scale * (c - u), dim=-1)


def _filter_top_k(log_probs: torch.Tensor, ratio: float) -> torch.Tensor:
    k = math.ceil(ratio * log_probs.shape[-1])
    values, index = log_probs.topk(k, dim=-1)
    return torch.full_like(log_probs, float("-inf")).scatter_(-1, index, values)


def _draw_step(generators, plans, step, lengths, shape, sampling, device):
    # Per line and in upstream's order: the class noise [C, T, V], then the position noise [C, T].
    batch, codebooks, width, vocab = shape
    class_noise = torch.zeros(shape) if sampling.class_temperature > 0 else None
    pos_noise = torch.zeros(batch, codebooks, width) if sampling.position_temperature > 0 else None
    for i, (t, gen) in enumerate(zip(lengths, generators)):
        if plans[i][step] <= 0:
            continue
        if class_noise is not None:
            class_noise[i, :, :t] = torch.rand(codebooks, t, vocab, generator=gen)
        if pos_noise is not None:
            pos_noise[i, :, :t] = torch.rand(codebooks, t, generator=gen)
    return (
        gumbel(class_noise.to(device)) if class_noise is not None else None,
        gumbel(pos_noise.to(device)) if pos_noise is not None else None,
    )
