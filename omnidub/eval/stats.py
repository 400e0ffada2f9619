"""Paired statistics of two configurations over the same sentences: the mean difference, a bootstrap confidence
interval, a sign-flip permutation p-value and the smallest difference the corpus can resolve.

Each sentence gives one difference ``d = b - a`` (in WER points). Most sentences of a good system are ties
(``d = 0``); only the sentences that differ carry signal, which is why their count is reported beside the mean.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 20_000
POWER = 0.80  # for the difference the corpus finds four times in five
# Resampled values held in memory at once (a corpus of 1,000 sentences draws 2,000 resamples per batch).
_BATCH_VALUES = 2_000_000


@dataclass(frozen=True)
class Paired:
    """The comparison of B against A over ``n`` sentences: ``delta`` (mean of b - a), its bootstrap ``ci``, the
    permutation ``p`` (``exact`` when every sign pattern was counted), how many sentences differ, and the
    smallest mean difference this corpus would call significant (``detectable``; ``detectable_80`` finds it
    with 80 % power); both are None when no sentence differs (the spread then says nothing)."""

    n: int
    delta: float
    ci: tuple[float, float]
    p: float
    exact: bool
    differing: int
    standard_error: float
    detectable: float | None
    detectable_80: float | None
    confidence: float = CONFIDENCE
    resamples: int = RESAMPLES


def paired(a, b, *, resamples: int = RESAMPLES, seed: int = 0, confidence: float = CONFIDENCE) -> Paired:
    """Compare per-sentence figures ``b`` against ``a`` (same sentences, same order). The interval is the
    percentile bootstrap of the mean difference over sentences; the p-value is the two-sided paired permutation
    test of the same mean (each sentence's difference keeps or flips its sign), exact when the differing
    sentences are few enough for every sign pattern to be counted within ``resamples``."""
    from scipy import stats

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired figures need the same sentences: got {a.shape} and {b.shape}")
    if len(a) < 2:
        raise ValueError("a paired comparison needs at least two sentences")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    d = b - a
    n = len(d)
    rng = np.random.default_rng(seed)
    delta = float(d.mean())
    batch = max(1, _BATCH_VALUES // n)
    if np.all(d == d[0]):  # every resample has the same mean: the interval is that point
        ci = (delta, delta)
    else:
        boot = stats.bootstrap(
            (d,),
            np.mean,
            n_resamples=resamples,
            confidence_level=confidence,
            method="percentile",
            rng=rng,
            batch=batch,
            vectorized=True,
        )
        ci = (float(boot.confidence_interval.low), float(boot.confidence_interval.high))
    differ = d[d != 0]
    k = len(differ)
    if k == 0:
        p, exact = 1.0, True
    else:
        # Ties flip to themselves: the test over the differing sentences alone is the same test, and small
        # enough to be exact more often.
        exact = k < 63 and 2**k <= resamples
        test = stats.permutation_test(
            (differ,),
            _mean,
            permutation_type="samples",
            n_resamples=resamples,
            alternative="two-sided",
            rng=rng,
            batch=max(1, _BATCH_VALUES // k),
            vectorized=True,
        )
        p = float(min(1.0, max(0.0, test.pvalue)))
    standard_error = float(d.std(ddof=1) / math.sqrt(n))
    z = stats.norm.ppf(0.5 + confidence / 2)
    detectable = detectable_80 = None
    if k:
        detectable = float(z * standard_error)
        detectable_80 = float((z + stats.norm.ppf(POWER)) * standard_error)
    return Paired(
        n=n,
        delta=delta,
        ci=ci,
        p=p,
        exact=exact,
        differing=k,
        standard_error=standard_error,
        detectable=detectable,
        detectable_80=detectable_80,
        confidence=confidence,
        resamples=resamples,
    )


def _mean(x, axis):
    return np.mean(x, axis=axis)
