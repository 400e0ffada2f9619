"""The generation settings that change a line's audio, resolved for a device (for cache keys and the manifest)."""

from __future__ import annotations

from omnidub.presets import Preset

AUDIO_FIELDS = ("steps", "guidance_scale", "t_shift", "layer_penalty_factor", "position_temperature", "class_temperature")


def generation_settings(preset: Preset, device: str) -> dict:
    """Steps, guidance and temperatures, plus the CFG layout and dtype that ``auto`` resolves to on ``device``."""
    from omnidub.engine.cfg import resolve_layout
    from omnidub.engine.loading import resolve_dtype

    settings = {name: getattr(preset, name) for name in AUDIO_FIELDS}
    settings["cfg"] = resolve_layout(preset.cfg, device)
    settings["dtype"] = str(resolve_dtype(preset.dtype, device)).removeprefix("torch.")
    return settings
