"""omnidub: batch dubbing with OmniVoice voice cloning."""

__version__ = "0.1.0"
