"""Synthetic checkpoints: the real architecture, loaded through the real OmniVoice.from_pretrained."""

from __future__ import annotations

import pytest
import torch

from omnidub import synthetic
from omnidub.errors import OmnidubError
from omnidub.models import resolve_model


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    from omnivoice.models.omnivoice import OmniVoice

    return OmniVoice.from_pretrained(str(tiny_model_dir), dtype=torch.float32)


def test_tiny_loads_through_upstream_with_omnivoice_control_tokens(tiny, tiny_model_dir):
    assert resolve_model("synthetic:tiny").path == tiny_model_dir
    assert tiny.sampling_rate == 24000 and tiny.audio_tokenizer.config.frame_rate == 25
    ids = tiny.text_tokenizer.convert_tokens_to_ids(list(synthetic.OMNIVOICE_TOKENS))
    assert tiny.text_tokenizer.unk_token_id not in ids and len(set(ids)) == 7
    assert sum(p.numel() for p in tiny.parameters()) < 5_000_000


def test_tiny_audio_depends_on_the_tokens(tiny):
    codes = torch.randint(0, 1024, (2, 8, 50), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        first, second = (tiny.audio_tokenizer.decode(c[None]).audio_values for c in codes)
    assert first.shape == second.shape == (1, 1, 50 * 960)
    assert float((first - second).abs().max()) > 0.1 * float(first.abs().max())


def test_full_has_exactly_the_released_shapes():
    from omnivoice.models.omnivoice import OmniVoice, OmniVoiceConfig
    from transformers import (
        HiggsAudioV2TokenizerConfig,
        HiggsAudioV2TokenizerModel,
        Qwen3Config,
    )

    # Built on the meta device: every shape, no memory.
    with torch.device("meta"):
        llm = Qwen3Config(vocab_size=151676, tie_word_embeddings=True, **synthetic.FULL_LLM)
        model = OmniVoice(OmniVoiceConfig(llm_config=llm))
        audio = HiggsAudioV2TokenizerModel(
            HiggsAudioV2TokenizerConfig(
                target_bandwidths=[0.5, 1, 1.5, 2],
                codebook_dim=64,
                acoustic_model_config=dict(
                    downsampling_ratios=[8, 5, 4, 2, 3], upsampling_ratios=[8, 5, 4, 2, 3], **synthetic.FULL_DAC
                ),
            )
        )
    assert sum(p.numel() for p in model.parameters()) == 612_577_280
    assert sum(p.numel() for p in audio.parameters()) == 200_343_777
    assert audio.config.hop_length == 960 and audio.config.num_quantizers == 8


@pytest.mark.slow  # about 8 s or more: pytest -m slow runs it, as CI does
def test_full_tokenizes_like_qwen():
    tokenizer = synthetic._qwen_tokenizer()
    ids = tokenizer("Hello world, this is a short test of the dubbing pipeline.", add_special_tokens=False).input_ids
    assert len(ids) == 14
    assert len(tokenizer) == 151676
    assert tokenizer.convert_tokens_to_ids("<|endoftext|>") == 151643
    assert tokenizer.convert_tokens_to_ids(["<|denoise|>", "<|text_end|>"]) == [151669, 151675]


def test_unknown_synthetic_name_is_a_user_error():
    with pytest.raises(OmnidubError, match="synthetic:tiny or synthetic:full"):
        resolve_model("synthetic:huge")


def _dead_pid() -> int:
    import subprocess
    import sys

    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_full_cache_is_one_line_and_killed_builds_leave_nothing(tmp_path, monkeypatch):
    import errno
    import os

    monkeypatch.setenv("OMNIDUB_CACHE", str(tmp_path))
    root = synthetic.cache_root()
    root.mkdir(parents=True)
    killed = [root / f".tiny-{_dead_pid()}-abcd_123", root / ".tiny-zz99yy88"]  # this version's, an older one
    running = root / f".tiny-{os.getpid()}-abcdefgh"
    for folder in (*killed, running):
        (folder / "audio_tokenizer").mkdir(parents=True)
        (folder / "model.safetensors").write_bytes(b"half")
    for error in (
        OSError(errno.ENOSPC, "No space left on device"),
        RuntimeError('Error while serializing: IoError(Os { code: 28, message: "No space left on device" })'),
    ):

        def full(folder, *, full, error=error):
            (folder / "model.safetensors").write_bytes(b"partial")
            raise error

        monkeypatch.setattr(synthetic, "_write_checkpoint", full)
        with pytest.raises(
            OmnidubError, match=r"cannot build synthetic:tiny in .*: No space left on device; free some"
        ):
            synthetic.build_synthetic("tiny")
        assert sorted(p.name for p in root.iterdir()) == [running.name]  # nothing of ours left but a live build

    monkeypatch.setattr(synthetic, "_write_checkpoint", lambda folder, full: 1 / 0)
    with pytest.raises(ZeroDivisionError):  # a bug is not a disk problem: it keeps its traceback
        synthetic.build_synthetic("tiny")
