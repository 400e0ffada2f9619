"""The configurations an eval compares, as one argument each: a preset (a name or a .toml file) followed by
overrides of its flat keys, as a preset file names them, and of the model and backend::

    fast                      fast,steps=8              fast,dtype=bfloat16
    fast,reference_seconds=6  quality,steps=12          backend=onnx
    model=EXPORT_DIR          fast,dtype=int8           my-preset.toml,cfg=packed

Values are read as TOML values (``8``, ``2.5``, ``true``, ``[2.5, 5]``), anything else as text (``bfloat16``),
and checked exactly as a preset file's are. The seed is the eval's own (``--seed``), the same for both sides.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from omnidub.config import Preset, load_preset
from omnidub.errors import OmnidubError

# Keys a configuration sets besides the preset's: what renders (a hub id, a checkpoint or an export folder) and
# on which backend.
SESSION_KEYS = ("model", "backend")
DEFAULT_PRESET = "fast"


@dataclass(frozen=True)
class Configuration:
    """One side of an eval: the preset it renders with (the eval's seed in it), the model and backend, the
    overrides it named, a label that says it plainly, and the folder (under the eval's --out) it renders into."""

    given: str
    preset: Preset
    model: str
    backend: str
    named: dict
    label: str
    folder: str

    @property
    def synthetic(self) -> bool:
        return self.model.startswith("synthetic:")


def parse_configuration(
    text: str, *, flag: str = "--a", model: str, device: str = "auto", seed: int = 0
) -> Configuration:
    """Read one CONFIG argument; a bad one is one OmnidubError naming the flag, the argument and what is wrong.
    ``model`` is the eval's --model (a ``model=`` override wins); ``device`` and ``seed`` go into the folder name."""
    try:
        return _parse(text, model, device, seed)
    except OmnidubError as exc:
        raise OmnidubError(f"{flag} {text}: {exc}") from None


def _parse(text: str, model: str, device: str, seed: int) -> Configuration:
    items = _items(text)
    if not items or any(not item for item in items):
        raise OmnidubError(
            "give a preset name or file, then key=value overrides, separated by commas (e.g. fast,steps=8)"
        )
    base = DEFAULT_PRESET
    if "=" not in items[0]:
        base, items = items[0], items[1:]
    overrides: dict = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep:
            raise OmnidubError(f"{item!r} is not key=value (only the first item may name a preset)")
        if not key or not raw.strip():
            raise OmnidubError(f"{item!r} needs a key and a value")
        if key in overrides:
            raise OmnidubError(f"{key} is given twice")
        overrides[key] = _value(raw.strip())
    if "seed" in overrides:
        raise OmnidubError(
            "seed is the eval's own (--seed): both configurations render every sentence with the same seed"
        )
    session = {k: overrides.pop(k) for k in SESSION_KEYS if k in overrides}
    for key, value in session.items():
        if not isinstance(value, str):
            raise OmnidubError(f"{key} must be text, got {value!r}")
    backend = session.get("backend", "auto")
    from omnidub.backends.registry import BACKENDS

    if backend not in BACKENDS:
        raise OmnidubError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    preset = load_preset(base)
    # compile "auto" decides by the job's length, so the two sides could differ in it without asking: in an eval
    # it is off unless a configuration (or its preset file) names it.
    if preset.engine.compile == "auto":
        preset = preset.with_overrides(compile=False)
    start = preset
    preset = preset.with_overrides(**overrides, seed=seed)
    flat, before = preset.to_json(), start.to_json()
    changed = {k: v for k, v in overrides.items() if flat[k] != before[k]}
    words = [preset.name] + [f"{k}={_show(flat[k])}" for k in sorted(changed)]
    words += [f"{k}={session[k]}" for k in SESSION_KEYS if k in session]
    label = ",".join(words)
    # The prefix cache off (1) is how every render decoded before it existed: the folders of those evals stay theirs.
    rendered_by = {
        **{k: v for k, v in flat.items() if k not in ("name", "description") and (k, v) != ("prefix_refresh", 1)},
        "model": session.get("model", model),
        "backend": backend,
        "device": device,
    }
    digest = hashlib.sha256(json.dumps(rendered_by, sort_keys=True, default=str).encode()).hexdigest()[:8]
    return Configuration(
        given=text,
        preset=preset,
        model=session.get("model", model),
        backend=backend,
        named={k: flat[k] for k in overrides},
        label=label,
        folder=f"{_slug(label)}-{digest}",
    )


def _items(text: str) -> list[str]:
    """The comma-separated items of a CONFIG, commas inside brackets or quotes kept (``reference_window=[2,5]``)."""
    items, current, depth, quote = [], [], 0, None
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    items.append("".join(current).strip())
    return items if any(items) else []


def _value(raw: str):
    """A TOML value (``8``, ``2.5``, ``true``, ``[2.5, 5]``, ``"text"``), or the text itself (``bfloat16``)."""
    try:
        return tomllib.loads(f"value = {raw}")["value"]
    except tomllib.TOMLDecodeError:
        return raw


def _show(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_show(v) for v in value) + "]"
    return str(value)


def _slug(label: str) -> str:
    """The label as a folder name: commas become '+', anything unusual '_', at most 48 characters."""
    slug = re.sub(r"[^A-Za-z0-9._=+-]+", "_", label.replace(",", "+")).strip("._") or "config"
    return slug[:48]
