"""The torch backend as the registry knows it (torch is imported only to load it)."""

from __future__ import annotations

from omnidub.backends.base import BackendSpec


def _load(source, device: str, options, pinned_layout: str | None):
    from omnidub.backends.torch.backend import TorchBackend

    return TorchBackend(source, device=device, options=options, pinned_layout=pinned_layout)


def _check_instruct(instruct: str) -> None:
    from omnidub.backends.torch.upstream import resolve_instruct

    resolve_instruct(instruct)


def _dtype(source, device: str, dtype: str) -> str:
    from omnidub.hardware import dtype_for

    return dtype_for(dtype, device)


SPEC = BackendSpec("torch", "torch", "torch", _load, _check_instruct, _dtype)
