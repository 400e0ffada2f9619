"""Backends turn requests into audio: the torch backend (OmniVoice in PyTorch) and the ONNX Runtime one."""

from omnidub.backends.base import Backend, Prompt, Request, Result

__all__ = ["Backend", "Prompt", "Request", "Result"]
