"""The peer recipe as a user assembles it from the two published packages, and nothing of omnidub's in its path.

``OmniVoice.from_pretrained`` loads its own model (not omnidub's loader, not a model omnidub fused or packed),
omnivoice-fastpath's ``apply_trimmed_cfg`` wraps it once, upstream's ``create_voice_clone_prompt`` encodes the
reference and ``generate(num_step=..., duration=...)`` speaks each line. This is the bench's headline peer row;
``scripts/side-by-side`` writes the same recipe out again on its own, so the two can be checked against each other.
"""

from __future__ import annotations

from pathlib import Path


def available() -> bool:
    """True when omnivoice-fastpath is installed (``pip install 'omnidub[bench]'``)."""
    try:
        import omnivoice_fastpath  # noqa: F401
    except ImportError:
        return False
    return True


class Peer:
    """One resident upstream model with trimmed CFG, and the voice it clones."""

    def __init__(self, model_dir: Path, device: str, dtype: str):
        import torch
        from omnivoice.models.omnivoice import OmniVoice
        from omnivoice_fastpath import apply_trimmed_cfg

        self.model = OmniVoice.from_pretrained(str(model_dir), device_map=device, dtype=getattr(torch, dtype))
        apply_trimmed_cfg(self.model)
        self.prompt = None

    def clone(self, audio, sample_rate: int, text: str) -> None:
        """Encode the reference (mono float waveform and its exact transcript) with upstream's own prompt maker."""
        import torch

        waveform = torch.as_tensor(audio, dtype=torch.float32)[None]
        self.prompt = self.model.create_voice_clone_prompt(ref_audio=(waveform, int(sample_rate)), ref_text=text)

    def speak(self, text: str, seconds: float, steps: int, seed: int = 0):
        """One line of exactly ``seconds``, as upstream's README calls generate."""
        import torch

        torch.manual_seed(seed)
        return self.model.generate(
            text=text, language="en", voice_clone_prompt=self.prompt, num_step=steps, duration=seconds
        )[0]
