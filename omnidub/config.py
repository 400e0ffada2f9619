"""Settings, defined once: decoding, engine, voice preparation, timing and QA parts of a preset.

Preset TOML files stay flat (``steps = 12``, ``max_wer = 0.2``); each key is routed to the part that owns it.
Every value is checked for type and range when it is read, so a bad setting is one clear line, never a
failure deep inside a render.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from omnidub.errors import OmnidubError

CFG_MODES = ("auto", "padded", "trimmed", "packed", "joined")
LAYOUTS = CFG_MODES[1:]
# Bump when the decoding loop or post-processing changes what a line sounds like (line keys carry it).
DECODER_VERSION = 1
# int8: dynamic quantization of the language model's linears on the CPU, a lossy opt-in (never chosen by auto).
DTYPES = ("auto", "float32", "bfloat16", "float16", "int8")


@dataclass(frozen=True)
class DecodeOptions:
    """The decoding settings upstream's OmniVoiceGenerationConfig carries, with the same meanings."""

    steps: int = 32
    guidance_scale: float = 2.0
    t_shift: float = 0.1
    layer_penalty_factor: float = 5.0
    position_temperature: float = 5.0
    class_temperature: float = 0.0
    # omnidub's own, not upstream's: the conditional rows' prefix (style, text, reference) keys and values are
    # computed afresh every this many steps and reused in between, when only the target rows run. 1 (every
    # step) is today's exact decoding; above 1 it is approximate (OmniVoice's attention is bidirectional, so the
    # prefix's keys and values follow the targets as they are unmasked). See docs/speed.md.
    prefix_refresh: int = 1

    @property
    def approximate(self) -> bool:
        """True where these settings decode differently from upstream's loop (a stale prefix cache)."""
        return self.prefix_refresh > 1


@dataclass(frozen=True)
class EngineOptions:
    """How lines are decoded: decoding settings, CFG layout, precision, compilation and batching.

    ``batch`` caps lines per forward and ``batch_tokens`` the tokens a forward may hold; 0 means "choose for
    the device" (one line at a time on a CPU, where batching does not pay; a token budget on CUDA)."""

    decode: DecodeOptions = DecodeOptions(steps=12)
    cfg: str = "auto"
    dtype: str = "auto"
    compile: bool | str = "auto"  # True, False, or "auto": compile when the job's model time pays for it
    batch: int = 0
    batch_tokens: int = 0

    def replace(self, **changes) -> "EngineOptions":
        """A copy with engine or decoding fields replaced (``steps=4``, ``cfg="packed"``)."""
        decode_keys = {f.name for f in fields(DecodeOptions)}
        decode = dataclasses.replace(self.decode, **{k: v for k, v in changes.items() if k in decode_keys})
        return dataclasses.replace(self, decode=decode, **{k: v for k, v in changes.items() if k not in decode_keys})


@dataclass(frozen=True)
class VoiceOptions:
    """Reference preparation: aim for ``reference_seconds`` (0 keeps it whole, up to 10 s), cut inside the window."""

    reference_seconds: float = 3.0
    reference_window: tuple[float, float] = (2.5, 4.0)


@dataclass(frozen=True)
class TimingOptions:
    """Fitting lines to slots: the most a line may be sped up, and the gap between untimed lines."""

    max_speedup: float = 1.25
    gap: float = 0.4
    # A programme longer than this is refused unless the user raises it: a typo'd timestamp would otherwise
    # plan days of audio.
    max_program_hours: float = 12.0


@dataclass(frozen=True)
class QaOptions:
    """The thresholds a line is held to."""

    max_wer: float = 0.20
    max_cer: float = 0.10
    # Calibrated on flite and espeak-ng voices (docs/voice-check.md): 0.1 % of own-voice lines fall below it.
    min_voice_similarity: float = 0.72


@dataclass(frozen=True)
class Preset:
    """All settings of one render. Flags on the command line override single fields."""

    name: str = "fast"
    description: str = ""
    engine: EngineOptions = EngineOptions()
    voice: VoiceOptions = VoiceOptions()
    timing: TimingOptions = TimingOptions()
    qa: QaOptions = QaOptions()
    seed: int = 0

    def with_overrides(self, **overrides) -> "Preset":
        """A copy with the named flat settings replaced (``steps=8``, ``dtype="float32"``); None is ignored."""
        flat = {k: v for k, v in overrides.items() if v is not None}
        return _from_flat({**to_flat(self), **flat}, self.name)

    def to_json(self) -> dict:
        """The flat settings, as a preset file would hold them."""
        return to_flat(self)


# Each flat key, the part that owns it, and the check its value must pass.
_PARTS = {
    "decode": DecodeOptions,
    "engine": EngineOptions,
    "voice": VoiceOptions,
    "timing": TimingOptions,
    "qa": QaOptions,
}


def _owner(key: str) -> str | None:
    for part, cls in _PARTS.items():
        if key in {f.name for f in fields(cls)} and key != "decode":
            return part
    return None


def to_flat(preset: Preset) -> dict:
    """A preset as flat key -> value (the TOML form)."""
    flat = {"name": preset.name, "description": preset.description, "seed": preset.seed}
    for part in (preset.engine.decode, preset.engine, preset.voice, preset.timing, preset.qa):
        for f in fields(part):
            if f.name != "decode":
                value = getattr(part, f.name)
                flat[f.name] = list(value) if isinstance(value, tuple) else value
    return flat


def _number(
    name: str,
    value,
    *,
    integer: bool = False,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
) -> float:
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type or (not integer and not math.isfinite(value)):
        kind = "a whole number" if integer else "a finite number"
        if integer and low is not None and high is not None:
            kind += f" from {low:g} to {high:g}"
        elif integer and low is not None:
            kind += f" of at least {low:g}"
        # TOML reads 1e9 and 12.0 as decimals: say so, since they look whole.
        hint = " (a whole number is written without a decimal point or exponent)" if _looks_whole(value) else ""
        raise OmnidubError(f"{name} must be {kind}, got {value!r}{hint}")
    if low is not None and (value <= low if low_open else value < low):
        raise OmnidubError(f"{name} must be {'above' if low_open else 'at least'} {low:g}, got {value!r}")
    if high is not None and value > high:
        raise OmnidubError(f"{name} must be at most {high:g}, got {value!r}")
    return value


def _looks_whole(value) -> bool:
    return isinstance(value, float) and math.isfinite(value) and value.is_integer()


def _choice(name: str, value, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise OmnidubError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def _check(flat: dict) -> None:
    _number("steps", flat["steps"], integer=True, low=1, high=1000)
    _number("guidance_scale", flat["guidance_scale"], low=0, high=100)
    _number("t_shift", flat["t_shift"], low=0, high=1, low_open=True)
    _number("layer_penalty_factor", flat["layer_penalty_factor"], low=0, high=1000)
    _number("position_temperature", flat["position_temperature"], low=0, high=1000)
    _number("class_temperature", flat["class_temperature"], low=0, high=1000)
    _number("prefix_refresh", flat["prefix_refresh"], integer=True, low=1, high=1000)
    _choice("cfg", flat["cfg"], CFG_MODES)
    _choice("dtype", flat["dtype"], DTYPES)
    if not isinstance(flat["compile"], bool) and flat["compile"] != "auto":
        raise OmnidubError(f'compile must be true or false (or "auto"), got {flat["compile"]!r}')
    _number("batch", flat["batch"], integer=True, low=0, high=4096)
    _number("batch_tokens", flat["batch_tokens"], integer=True, low=0)
    _number("reference_seconds", flat["reference_seconds"], low=0, high=30)
    window = flat["reference_window"]
    if not isinstance(window, (list, tuple)) or len(window) != 2:
        raise OmnidubError(f"reference_window must be two seconds [low, high], got {window!r}")
    low, high = (_number("reference_window", x, low=0, low_open=True) for x in window)
    if not low < high:
        raise OmnidubError(f"reference_window must be two increasing positive seconds, got {list(window)}")
    _number("max_speedup", flat["max_speedup"], low=1, high=4)
    _number("gap", flat["gap"], low=0, high=60)
    _number("max_program_hours", flat["max_program_hours"], low=0, low_open=True)
    _number("max_wer", flat["max_wer"], low=0)
    _number("max_cer", flat["max_cer"], low=0)
    _number("min_voice_similarity", flat["min_voice_similarity"], low=-1, high=1)
    _number("seed", flat["seed"], integer=True, low=0, high=2**63 - 1)
    for key in ("name", "description"):
        if not isinstance(flat[key], str):
            raise OmnidubError(f"{key} must be text, got {flat[key]!r}")


def _from_flat(flat: dict, name: str) -> Preset:
    """Build a preset from flat settings, checking every value."""
    flat = {**to_flat(Preset()), "name": name, **flat}
    unknown = sorted(k for k in flat if k not in ("name", "description", "seed") and _owner(k) is None)
    if unknown:
        raise OmnidubError(f"unknown setting(s) {', '.join(unknown)}")
    _check(flat)
    parts: dict[str, dict] = {part: {} for part in _PARTS}
    for key, value in flat.items():
        owner = _owner(key)
        if owner is not None:
            parts[owner][key] = tuple(float(x) for x in value) if key == "reference_window" else value
    float_keys = {f.name for cls in _PARTS.values() for f in fields(cls) if f.type in ("float", float)}
    for part in parts.values():
        for key in part:
            if key in float_keys:
                part[key] = float(part[key])
    decode = DecodeOptions(**parts["decode"])
    return Preset(
        name=flat["name"],
        description=flat["description"],
        engine=EngineOptions(decode=decode, **parts["engine"]),
        voice=VoiceOptions(**parts["voice"]),
        timing=TimingOptions(**parts["timing"]),
        qa=QaOptions(**parts["qa"]),
        seed=flat["seed"],
    )


def preset_from_json(flat: dict) -> Preset:
    """A preset from its flat settings as the manifest records them (:meth:`Preset.to_json`), checked."""
    return _from_flat(dict(flat), str(flat.get("name", "recorded")))


def builtin_presets() -> list[str]:
    """Names of the presets shipped with omnidub."""
    return sorted(
        p.name.removesuffix(".toml")
        for p in resources.files("omnidub.preset_files").iterdir()
        if p.name.endswith(".toml")
    )


def load_preset(name_or_path: str = "fast") -> Preset:
    """Load a built-in preset by name, or a preset TOML file by path."""
    path = Path(name_or_path)
    # A built-in name wins over a folder of the same name; a .toml or a path with a folder is a file.
    if name_or_path in builtin_presets() and path.suffix != ".toml" and len(path.parts) == 1:
        text = resources.files("omnidub.preset_files").joinpath(f"{name_or_path}.toml").read_text(encoding="utf-8")
        name = name_or_path
    elif path.suffix == ".toml" or len(path.parts) > 1 or path.is_file():
        if path.is_dir():
            raise OmnidubError(f"--preset {path} is a folder; give a preset .toml file, or fast or quality")
        if not path.is_file():
            from omnidub.files import did_you_mean

            raise OmnidubError(f"preset file not found: {path}{did_you_mean(path)}")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise OmnidubError(f"preset {path}: cannot read it ({exc})") from exc
        name = path.stem
    else:
        raise OmnidubError(
            f"unknown preset {name_or_path!r}; built-in presets: {', '.join(builtin_presets())}, or give a .toml path"
        )
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise OmnidubError(f"preset {name_or_path}: not valid TOML ({exc})") from exc
    data.setdefault("name", name)
    try:
        return _from_flat(data, data["name"])
    except OmnidubError as exc:
        raise OmnidubError(f"preset {name_or_path}: {exc}") from exc


@dataclass(frozen=True)
class LayoutChoice:
    """The CFG layout a render will use and where it comes from: "explicit" (--cfg or the preset), "pinned" (the
    project's recorded layout), "measured" (this machine's probe, with its evidence) or "default" (not measured
    yet: the probe runs once the model is loaded for rendering)."""

    layout: str
    source: str
    evidence: str = ""

    @property
    def measured(self) -> bool:
        return self.source != "default"


def layout_status(
    spec: str, device: str, dtype: str = "auto", pinned: str | None = None, *, backend: str = "torch", shape: str = ""
) -> LayoutChoice:
    """Which layout ``spec`` means here, and why: an explicit layout wins, then ``pinned`` (the layout a project
    was rendered with), then this machine's measurement for the dtype, backend and model shape, then
    :func:`default_layout`. Torch-free; never probes."""
    if spec != "auto":
        if spec not in LAYOUTS:
            raise OmnidubError(f"unknown cfg layout {spec!r}; use {', '.join(CFG_MODES)}")
        return LayoutChoice(spec, "explicit")
    if pinned is not None:
        if pinned not in LAYOUTS:
            raise OmnidubError(f"unknown pinned cfg layout {pinned!r}; use {', '.join(LAYOUTS)}")
        return LayoutChoice(pinned, "pinned")
    from omnidub.hardware import dtype_for
    from omnidub.measured import layout_choice

    found = layout_choice(device, dtype_for(dtype, device), backend, shape)
    if found is not None:
        return LayoutChoice(found["choice"], "measured", found.get("evidence", ""))
    return LayoutChoice(default_layout(device, backend), "default")


def default_layout(device: str, backend: str = "torch") -> str:
    """The layout before this machine measured one, and the one its probe keeps unless another is clearly faster:
    packed on CUDA (the fastest at one line and at 4 and 16 lines a forward, in fp16 and bf16, on an H200:
    docs/speed.md, "On a GPU"); on a CPU, joined for torch (every row of the batch through each GEMM at once,
    attention no larger than trimmed's: within noise of trimmed or up to 18 % faster on the three CPUs measured,
    docs/speed.md), trimmed elsewhere (fewer tokens wins where compute is the bottleneck)."""
    if device.startswith("cuda"):
        return "packed"
    return "joined" if backend == "torch" and device.startswith("cpu") else "trimmed"


def resolve_layout(
    spec: str, device: str, dtype: str = "auto", pinned: str | None = None, *, backend: str = "torch", shape: str = ""
) -> str:
    """The layout of :func:`layout_status`."""
    return layout_status(spec, device, dtype, pinned, backend=backend, shape=shape).layout


def approximations(options: EngineOptions) -> list[str]:
    """What in these settings decodes differently from upstream's loop, said plainly: the render header, the
    manifest and the bench label every approximate setting with it."""
    refresh = options.decode.prefix_refresh
    if refresh == 1:
        return []
    return [
        f"prefix_refresh {refresh}: the prefix's keys and values are computed every {refresh} steps and reused in "
        "between (approximate; 1 is exact)"
    ]


def generation_settings(options: EngineOptions, device: str, layout: str | None = None) -> dict:
    """Everything besides model, prompt, text and seed that decides a line's audio (for keys); ``layout`` is the
    resolved CFG layout when the caller knows it (a loaded backend, a pinned project). The prefix cache enters
    only when it is on, so lines decoded exactly keep the keys they had before it existed."""
    decode = dataclasses.asdict(options.decode)
    if decode["prefix_refresh"] == 1:
        del decode["prefix_refresh"]
    return {
        **decode,
        "cfg": layout or resolve_layout(options.cfg, device, options.dtype),
        "decoder": DECODER_VERSION,
    }
