"""Presets: every generation, timing and QA setting in one dataclass, loaded from TOML."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from omnidub.errors import OmnidubError

CFG_MODES = ("auto", "padded", "trimmed", "packed")
DTYPES = ("auto", "float32", "bfloat16", "float16")


@dataclass(frozen=True)
class Preset:
    """Settings for one render. Flags on the command line override single fields."""

    name: str = "fast"
    description: str = ""
    steps: int = 12
    cfg: str = "auto"
    batch: int = 1
    dtype: str = "auto"
    compile: bool = False
    guidance_scale: float = 2.0
    t_shift: float = 0.1
    layer_penalty_factor: float = 5.0
    position_temperature: float = 5.0
    class_temperature: float = 0.0
    reference_seconds: float = 3.0
    reference_window: tuple[float, float] = (2.5, 4.0)
    max_speedup: float = 1.25
    gap: float = 0.4
    max_wer: float = 0.20
    max_cer: float = 0.10
    seed: int = 0

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise OmnidubError(f"preset {self.name}: steps must be at least 1, got {self.steps}")
        if self.batch < 1:
            raise OmnidubError(f"preset {self.name}: batch must be at least 1, got {self.batch}")
        if self.cfg not in CFG_MODES:
            raise OmnidubError(f"preset {self.name}: cfg must be one of {', '.join(CFG_MODES)}, got {self.cfg!r}")
        if self.dtype not in DTYPES:
            raise OmnidubError(f"preset {self.name}: dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if self.max_speedup < 1.0:
            raise OmnidubError(f"preset {self.name}: max_speedup must be >= 1.0, got {self.max_speedup}")
        low, high = self.reference_window
        if not 0 < low < high:
            raise OmnidubError(f"preset {self.name}: reference_window must be two increasing positive seconds")

    def with_overrides(self, **overrides) -> "Preset":
        """A copy with the given fields replaced; None values are ignored."""
        return dataclasses.replace(self, **{k: v for k, v in overrides.items() if v is not None})


def builtin_presets() -> list[str]:
    """Names of the presets shipped with omnidub."""
    return sorted(p.name.removesuffix(".toml") for p in resources.files("omnidub.preset_files").iterdir() if p.name.endswith(".toml"))


def load_preset(name_or_path: str = "fast") -> Preset:
    """Load a built-in preset by name, or a preset TOML file by path."""
    path = Path(name_or_path)
    # A built-in name wins over a folder of the same name; a .toml or a path with a folder is a file.
    if name_or_path in builtin_presets() and path.suffix != ".toml" and len(path.parts) == 1:
        text = resources.files("omnidub.preset_files").joinpath(f"{name_or_path}.toml").read_text(encoding="utf-8")
        name = name_or_path
    elif path.suffix == ".toml" or len(path.parts) > 1 or path.is_file():
        if not path.is_file():
            raise OmnidubError(f"preset file not found: {path}")
        text, name = path.read_text(encoding="utf-8"), path.stem
    else:
        raise OmnidubError(f"unknown preset {name_or_path!r}; built-in presets: {', '.join(builtin_presets())}, or give a .toml path")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise OmnidubError(f"preset {name_or_path}: not valid TOML ({exc})") from None
    known = {f.name for f in fields(Preset)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise OmnidubError(f"preset {name_or_path}: unknown setting(s) {', '.join(unknown)}")
    data.setdefault("name", name)
    try:
        if "reference_window" in data:
            data["reference_window"] = tuple(float(x) for x in data["reference_window"])
        return Preset(**data)
    except (TypeError, ValueError) as exc:
        raise OmnidubError(f"preset {name_or_path}: {exc}") from None
