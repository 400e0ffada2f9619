"""The ONNX Runtime backend as the registry knows it (an omnidub export; no torch)."""

from __future__ import annotations

from omnidub.backends.base import BackendSpec


def _load(source, device: str, options, pinned_layout: str | None):
    from omnidub.backends.onnx.backend import OnnxBackend

    return OnnxBackend(source, device=device, options=options, pinned_layout=pinned_layout)


def _check_instruct(instruct: str) -> None:
    # Its own torch-free rules, checked against upstream's in the tests.
    from omnidub.backends.onnx.prompt import resolve_instruct

    resolve_instruct(instruct)


def _dtype(source, device: str, dtype: str) -> str:
    """An export renders in the precision it was exported for (float32 while it is still to be built)."""
    if source is None:
        return "float32"
    from omnidub.backends.onnx.runtime import export_dtype, read_manifest

    return export_dtype(read_manifest(source.path))


SPEC = BackendSpec("onnxruntime", "ONNX Runtime", "onnxruntime", _load, _check_instruct, _dtype)
