"""Which backend renders, decided once, said in one sentence, and loaded by name: torch or ONNX Runtime.

``--backend auto`` keeps torch unless ONNX Runtime was measured to be the faster LOSSLESS path on this CPU: that
is float32 only (ONNX Runtime has no bfloat16 path that gives torch's tokens), on the CPU, from an export of the
same model built in omnidub's cache when the user asked for one (``--backend onnx``: minutes and gigabytes, see
onnx/cache.py). A project pins the backend it was rendered with; keys name the backend, so a faster path that
appears later never changes an existing project's audio. Deciding is torch-free and never builds anything.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from omnidub.backends.base import BackendSpec
from omnidub.backends.onnx.spec import SPEC as ONNX_SPEC
from omnidub.backends.torch.spec import SPEC as TORCH_SPEC
from omnidub.errors import OmnidubError
from omnidub.hardware import device_kind, dtype_for, guess_device
from omnidub.models import ModelSource, model_shape

BACKENDS = ("auto", "torch", "onnx")
# Every backend, by the name identities and manifests carry: a new backend is one more spec here.
SPECS: dict[str, BackendSpec] = {s.name: s for s in (TORCH_SPEC, ONNX_SPEC)}
TORCH, ONNXRUNTIME = TORCH_SPEC.name, ONNX_SPEC.name


@dataclass(frozen=True)
class BackendChoice:
    """The backend that renders (``name``: torch or onnxruntime), the model source it loads, why (one clause
    for the header line), whether the export still has to be built, and a note to show once (or "")."""

    name: str
    source: ModelSource
    reason: str
    build_export: bool = False
    note: str = ""
    # ONNX Runtime was never measured here in fp32 and its export could be built now: a render at a terminal asks.
    could_export: bool = False
    # The export is built but was never compared with torch on this CPU kind: the engine compares them once when it
    # loads the model, and renders with the faster (see measure_export).
    measure_export: bool = False


def choose_backend(
    spec: str,
    source: ModelSource,
    device: str = "auto",
    dtype: str = "auto",
    pinned: str | None = None,
    needs_torch: str = "",
) -> BackendChoice:
    """Decide which backend renders ``source``: ``spec`` is auto, torch or onnx; ``pinned`` the backend a project
    was rendered with (torch or onnxruntime), followed when ``spec`` is auto. ``needs_torch``: why the settings
    run on torch only (auto then takes torch, with that reason)."""
    if spec not in BACKENDS:
        raise OmnidubError(f"unknown backend {spec!r}; use {', '.join(BACKENDS)}")
    if source.backend == "onnx":
        if spec == "torch":
            raise OmnidubError(
                f"{source.spec} is an ONNX export; give the checkpoint it came from to render with torch"
            )
        return BackendChoice(ONNXRUNTIME, source, "the model is an ONNX export")
    if spec == "torch":
        return BackendChoice(TORCH, source, "--backend torch")
    if spec == "onnx":
        return _onnx(source, "--backend onnx")
    if pinned is not None:
        if pinned not in SPECS:
            raise OmnidubError(f"unknown pinned backend {pinned!r}")
        if pinned == TORCH:
            return BackendChoice(TORCH, source, "as this project was rendered")
        from omnidub.backends.onnx import cache

        if cache.cached(source) is None:
            raise OmnidubError(
                "this project was rendered with ONNX Runtime from an export that is no longer in "
                f"omnidub's cache: --backend onnx builds it again ({cache.EXPORT_COST}), "
                "--backend torch renders the project again with torch"
            )
        return _onnx(source, "as this project was rendered")
    if needs_torch:
        return BackendChoice(TORCH, source, needs_torch)
    return _auto(source, device, dtype)


def _onnx(source: ModelSource, why: str) -> BackendChoice:
    from omnidub.backends.onnx import cache

    exported = cache.cached(source)
    if exported is None:
        return BackendChoice(
            ONNXRUNTIME, source, f"{why}; its export is built first ({cache.EXPORT_COST})", build_export=True
        )
    return BackendChoice(ONNXRUNTIME, exported, f"{why}, from the export in omnidub's cache")


def _auto(source: ModelSource, device: str, dtype: str) -> BackendChoice:
    kind = device_kind(guess_device(device, TORCH))
    precision = dtype_for(dtype, kind)
    if kind != "cpu":
        return BackendChoice(TORCH, source, "ONNX Runtime is weighed against torch on a CPU only")
    if precision != "float32":
        why = "this CPU multiplies bf16 in hardware" if dtype == "auto" else f"--dtype {precision}"
        return BackendChoice(TORCH, source, f"{why}; ONNX Runtime's lossless path is fp32 only")
    from omnidub.backends.onnx import cache

    measured = cache.backend_choice(model_shape(source))
    exported = cache.cached(source)
    if measured is None:
        if exported is not None:
            return BackendChoice(
                TORCH,
                source,
                "ONNX Runtime's export is built but not yet measured on this CPU: compared with torch once the model "
                "loads",
                measure_export=True,
            )
        can = cache.can_export()
        how = "" if can else "pip install 'omnidub[onnx]', then "
        note = (
            f"fp32 on this CPU: ONNX Runtime may be faster; {how}omnidub export --cache (or --backend onnx) builds "
            f"an export once ({cache.EXPORT_COST}) and measures it against torch; --backend auto then takes the faster"
        )
        return BackendChoice(TORCH, source, "ONNX Runtime not measured on this CPU", note=note, could_export=can)
    seconds = measured.get("seconds") or {}
    ratio = seconds.get("torch", 0) / seconds["onnxruntime"] if seconds.get("onnxruntime") else 0.0
    if measured.get("choice") != ONNXRUNTIME:
        return BackendChoice(
            TORCH,
            source,
            f"torch measured faster than ONNX Runtime in fp32 on this CPU ({1 / ratio if ratio else 0:.2f}x)",
        )
    if exported is None:
        return BackendChoice(
            TORCH,
            source,
            "ONNX Runtime's export is no longer in the cache",
            note=f"ONNX Runtime measured {ratio:.2f}x faster here in fp32: --backend onnx builds its "
            f"export again ({cache.EXPORT_COST})",
        )
    return BackendChoice(
        ONNXRUNTIME, exported, f"measured {ratio:.2f}x faster than torch in fp32 on this CPU, same tokens"
    )


def spec(name: str) -> BackendSpec:
    """The registered backend of that name (torch or onnxruntime)."""
    if name not in SPECS:
        raise OmnidubError(f"unknown backend {name!r}")
    return SPECS[name]


def header(choice: BackendChoice, device: str, dtype: str) -> str:
    """The clause the render's header line gives the backend: what runs, on which kind of CPU, with which GEMM
    library, and why."""
    if device_kind(device) != "cpu":
        return f"{spec(choice.name).label} on {device} ({dtype}): {choice.reason}"
    from omnidub.hardware import cpu_kind

    how = dtype
    if choice.name == TORCH and dtype in ("float32", "bfloat16"):
        how += "; " + gemm_clause(device, dtype, model_shape(choice.source))
    return f"{spec(choice.name).label} on cpu ({cpu_kind()}; {how}): {choice.reason}"


def gemm_clause(device: str, dtype: str, shape: str) -> str:
    """Which library runs torch's GEMMs here, as measured (torch-free): for the header and the bench."""
    from omnidub.measured import gemm_choice

    found = gemm_choice(device, dtype, shape)
    if found is None:
        return "GEMM library chosen by a probe when the model loads"
    seconds = found.get("seconds") or {}
    # torch's own linear runs MKL's SGEMM in float32, and oneDNN with a weight reorder per call in bfloat16.
    torchs = "MKL" if dtype == "float32" else "torch's own"
    if found["choice"] == "onednn":
        ratio = seconds.get("aten", 0) / seconds["onednn"] if seconds.get("onednn") else 0
        return f"oneDNN GEMMs with weights packed once, {ratio:.2f}x {torchs} here"
    ratio = seconds.get("onednn", 0) / seconds["aten"] if seconds.get("aten") else 0
    return f"{torchs} GEMMs, {ratio:.2f}x oneDNN's here"


def identity(choice: BackendChoice, device: str, dtype: str) -> dict:
    """What a line's key says about the model before anything loads (the loaded backend's own identity wins)."""
    ident = {**choice.source.identity, "backend": choice.name, "device": device_kind(device), "dtype": dtype}
    if choice.build_export:
        ident["export"] = "pending"  # the export's content names it once it is built
    return ident


def loaded_dtype(choice: BackendChoice, device: str, dtype: str) -> str:
    """The dtype the chosen backend will render in (an export renders in the precision it was exported for)."""
    return spec(choice.name).dtype(None if choice.build_export else choice.source, device, dtype)


def available(name: str) -> str | None:
    """None when backend ``name`` (torch or onnxruntime) can run here, else why not (torch-free)."""
    import importlib.util

    module = spec(name).module
    return None if importlib.util.find_spec(module) is not None else f"{module} is not installed"


def measure_export(choice: BackendChoice, say=lambda text: None) -> bool:
    """Compare a built export with torch on this CPU when ``choice`` asks for it (seconds, once per CPU kind and
    model shape, recorded): True when it ran, and the backend must then be chosen again."""
    if not choice.measure_export:
        return False
    from omnidub.backends.onnx import cache

    exported = cache.cached(choice.source)
    if exported is None:
        return False
    say("ONNX Runtime's export is built but this CPU never compared it with torch: comparing one fp32 step now, once")
    cache.compare(choice.source, exported, say)
    return True


def prepare(choice: BackendChoice, say=lambda text: None) -> BackendChoice:
    """The choice with its export built, when it asked for one (the user did: --backend onnx)."""
    if not choice.build_export:
        return choice
    from omnidub.backends.onnx import cache

    return replace(choice, source=cache.build(choice.source, say), build_export=False)


def load(choice: BackendChoice, device: str, options, *, pinned_layout: str | None = None):
    """The backend ``choice`` names, loaded (its export, when it needed one, is built: see :func:`prepare`)."""
    why_not = available(choice.name)
    if why_not is not None:
        raise OmnidubError(f"the {choice.name} backend cannot run here: {why_not}")
    return spec(choice.name).load(prepare(choice).source, device, options, pinned_layout)
