"""The iterative unmasking loop in numpy: the torch backend's schedule, CFG, scoring and noise, without torch.

Per step: one forward per layout plan (``forward(plan) -> [N, C, V]`` logits of the plan's targets), CFG on
log-softmax, the layer penalty, gumbel position noise from each line's own torch-compatible stream, and top-k
unmasking per line. At zero temperatures the tokens equal the torch backend's; with noise the uniform draws
are bit-identical too, so only float rounding of the two runtimes can tell them apart.
"""

from __future__ import annotations

import math

import numpy as np

from omnidub.backends.onnx.layout import Item, Layout
from omnidub.backends.onnx.rng import TorchRandom
from omnidub.backends.schedule import schedule
from omnidub.config import DecodeOptions


def gumbel(uniform: np.ndarray) -> np.ndarray:
    """Gumbel noise from uniform draws, as upstream makes it (float32)."""
    eps = np.float32(1e-10)
    return -np.log(-np.log(uniform + eps) + eps)


def log_softmax(x: np.ndarray) -> np.ndarray:
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def guided_log_probs(c_logits: np.ndarray, u_logits: np.ndarray, scale: float) -> np.ndarray:
    """CFG on log-probabilities, renormalised (upstream's formula)."""
    c = log_softmax(c_logits)
    if scale == 0:
        return c
    u = log_softmax(u_logits)
    return log_softmax(c + np.float32(scale) * (c - u))


def decode(
    forward, items: list[Item], seeds: list[int], sampling: DecodeOptions, layout: str, *, mask_id: int
) -> list[np.ndarray]:
    """Decode a batch of items; returns each line's tokens [C, target_len] int64."""
    batch = len(items)
    codebooks = items[0].input_ids.shape[0]
    rows = Layout(items, layout, pad_id=mask_id)
    width = rows.max_target
    lengths = [item.target_len for item in items]
    plans = [schedule(t * codebooks, sampling.steps, sampling.t_shift) for t in lengths]
    streams = [TorchRandom(seed) for seed in seeds]

    tokens = np.full((batch, codebooks, width), mask_id, dtype=np.int64)
    valid = np.broadcast_to((np.arange(width) < np.array(lengths)[:, None])[:, None, :], tokens.shape)
    penalty = (np.arange(codebooks, dtype=np.float32) * np.float32(sampling.layer_penalty_factor)).reshape(1, -1, 1)

    for step in range(sampling.steps):
        if all(plan[step] == 0 for plan in plans):
            continue  # every line has already unmasked everything
        c_logits, u_logits = rows.logits(forward)
        log_probs = guided_log_probs(c_logits, u_logits, sampling.guidance_scale)
        log_probs[..., mask_id] = -np.inf
        class_noise, pos_noise = _draw_step(streams, plans, step, lengths, log_probs.shape, sampling)

        if sampling.class_temperature > 0:
            filtered = _filter_top_k(log_probs, ratio=0.1)
            predicted = (filtered / np.float32(sampling.class_temperature) + class_noise).argmax(axis=-1)
            confidence = log_probs.max(axis=-1)
        else:
            predicted = log_probs.argmax(axis=-1)
            confidence = np.take_along_axis(log_probs, predicted[..., None], axis=-1)[..., 0]

        scores = confidence - penalty
        if sampling.position_temperature > 0:
            scores = scores / np.float32(sampling.position_temperature) + pos_noise
        scores = np.where((tokens != mask_id) | ~valid, -np.inf, scores).reshape(batch, -1)

        flat = tokens.reshape(batch, -1)
        chosen_from = predicted.reshape(batch, -1)
        for i in range(batch):
            k = plans[i][step]
            if k:
                best = np.argpartition(-scores[i], k - 1)[:k]
                flat[i, best] = chosen_from[i, best]
        rows.write(tokens)

    return [tokens[i, :, : lengths[i]].copy() for i in range(batch)]


def _filter_top_k(log_probs: np.ndarray, ratio: float) -> np.ndarray:
    k = math.ceil(ratio * log_probs.shape[-1])
    keep = np.argpartition(-log_probs, k - 1, axis=-1)[..., :k]
    out = np.full_like(log_probs, -np.inf)
    np.put_along_axis(out, keep, np.take_along_axis(log_probs, keep, axis=-1), axis=-1)
    return out


def _draw_step(streams, plans, step, lengths, shape, sampling):
    # Per line and in upstream's order: the class noise [C, T, V], then the position noise [C, T].
    batch, codebooks, width, vocab = shape
    class_noise = np.zeros(shape, dtype=np.float32) if sampling.class_temperature > 0 else None
    pos_noise = np.zeros((batch, codebooks, width), dtype=np.float32) if sampling.position_temperature > 0 else None
    for i, (t, stream) in enumerate(zip(lengths, streams)):
        if plans[i][step] <= 0:
            continue
        if class_noise is not None:
            class_noise[i, :, :t] = stream.rand(codebooks, t, vocab)
        if pos_noise is not None:
            pos_noise[i, :, :t] = stream.rand(codebooks, t)
    return (
        gumbel(class_noise) if class_noise is not None else None,
        gumbel(pos_noise) if pos_noise is not None else None,
    )
