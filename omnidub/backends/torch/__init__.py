"""The torch backend: OmniVoice in PyTorch with omnidub's decoding loop and CFG layouts."""

from omnidub.backends.torch.backend import TorchBackend, Tuning, compare_logits, generation_settings

__all__ = ["TorchBackend", "Tuning", "compare_logits", "generation_settings"]
