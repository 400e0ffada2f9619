"""Synthetic checkpoints: the real OmniVoice architecture with random weights, built offline.

They load through the real ``OmniVoice.from_pretrained(folder)`` and run every code path with the real
shapes, so tests and benchmarks work without the hub. Their audio is noise.

- ``full``: exactly the k2-fsa/OmniVoice shapes (Qwen3-0.6B backbone, Higgs audio v2 tokenizer) with Qwen's
  real text tokenization, so sequence lengths, and so timings, are the real ones.
- ``tiny``: the same layout shrunk to a few MB, built in seconds, for tests.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from omnidub.errors import OmnidubError
from omnidub.files import cache_home, writer_alive

NAMES = ("tiny", "full")
# Bump when the recipe changes so cached folders are rebuilt.
RECIPE_VERSION = 2
SEED = 1234

# Qwen3 adds these after the 151,643 byte-level BPE tokens (ids 151643..151668).
QWEN3_ADDED_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
)
# OmniVoice's own control tokens (ids 151669..151675 in the released checkpoint).
OMNIVOICE_TOKENS = (
    "<|denoise|>",
    "<|lang_start|>",
    "<|lang_end|>",
    "<|instruct_start|>",
    "<|instruct_end|>",
    "<|text_start|>",
    "<|text_end|>",
)
PAD_TOKEN = "<|endoftext|>"

FULL_LLM = dict(
    hidden_size=1024,
    num_hidden_layers=28,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=128,
    intermediate_size=3072,
    rope_theta=1_000_000.0,
    rms_norm_eps=1e-6,
    max_position_embeddings=40960,
)
TINY_LLM = dict(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    intermediate_size=128,
    rope_theta=1_000_000.0,
    rms_norm_eps=1e-6,
    max_position_embeddings=4096,
)
# Higgs audio v2 as released: hop 8*5*4*2*3 = 960 samples at 24 kHz (25 frames/s), 8 quantizers.
FULL_DAC = dict(encoder_hidden_size=64, decoder_hidden_size=1024, hidden_size=256)
TINY_DAC = dict(encoder_hidden_size=4, decoder_hidden_size=32, hidden_size=8)
TINY_HUBERT = dict(
    hidden_size=16,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=32,
    conv_dim=[8] * 7,
    num_conv_pos_embeddings=16,
    num_conv_pos_embedding_groups=4,
)


def cache_root() -> Path:
    """Where synthetic checkpoints live (OMNIDUB_CACHE overrides the user cache dir)."""
    return cache_home() / "synthetic"


def synthetic_folder(name: str) -> Path:
    """Where synthetic checkpoint ``name`` lives once built."""
    if name not in NAMES:
        raise OmnidubError(f"unknown synthetic model {name!r}; use synthetic:tiny or synthetic:full")
    return cache_root() / f"{name}-v{RECIPE_VERSION}"


def build_synthetic(name: str) -> Path:
    """Return the folder of synthetic checkpoint ``name``, building it on first use."""
    folder = synthetic_folder(name)
    if (folder / "config.json").is_file():
        return folder
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_staging(folder.parent, name)
        # Build beside the target and rename, so a crash never leaves a half-written checkpoint in place; the
        # pid in the staging name lets a later start remove what a killed build left.
        staging = Path(tempfile.mkdtemp(prefix=f".{name}-{os.getpid()}-", dir=folder.parent))
    except OSError as exc:
        raise OmnidubError(f"cannot build synthetic:{name} in {folder.parent}: {exc.strerror or exc}") from exc
    try:
        _write_checkpoint(staging, full=(name == "full"))
        try:
            staging.rename(folder)
        except OSError:
            if not (folder / "config.json").is_file():  # a concurrent build did not win either
                raise
    except Exception as exc:
        reason = _disk_trouble(exc)
        if reason is None:
            raise
        raise OmnidubError(
            f"cannot build synthetic:{name} in {folder.parent}: {reason}; free some space or "
            "point OMNIDUB_CACHE at a roomier disk"
        ) from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def _remove_stale_staging(root: Path, name: str) -> None:
    """Remove staging folders of builds that were killed (their process is gone)."""
    pattern = re.compile(rf"\.{re.escape(name)}-(?:(\d+)-)?[a-z0-9_]{{8}}")
    for path in root.iterdir():
        match = pattern.fullmatch(path.name)
        if match and path.is_dir() and not path.is_symlink() and not writer_alive(match.group(1)):
            shutil.rmtree(path, ignore_errors=True)


def _disk_trouble(exc: BaseException) -> str | None:
    """Why writing failed, when the disk is the reason (full, quota, read-only); None for anything else."""
    while exc is not None:
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES):
            return exc.strerror or str(exc)
        text = str(exc)
        # safetensors and torch report a full disk through their own exception types.
        for marker in ("No space left on device", "Disk quota exceeded", "Read-only file system"):
            if marker in text:
                return marker
        exc = exc.__cause__ or exc.__context__
    return None


def _write_checkpoint(folder: Path, *, full: bool) -> None:
    import torch
    from omnivoice.models.omnivoice import OmniVoice, OmniVoiceConfig
    from transformers import (
        DacFeatureExtractor,
        HiggsAudioV2TokenizerConfig,
        HiggsAudioV2TokenizerModel,
        Qwen3Config,
    )

    tokenizer = _qwen_tokenizer() if full else _tiny_tokenizer()
    tokenizer.save_pretrained(folder)

    llm_config = Qwen3Config(
        # Text embeddings are also looked up on audio ids (< 1025), so the tiny vocab is padded up to that.
        vocab_size=max(len(tokenizer), 1088),
        hidden_act="silu",
        attention_bias=False,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        **(FULL_LLM if full else TINY_LLM),
    )
    config = OmniVoiceConfig(
        audio_vocab_size=1025,
        audio_mask_id=1024,
        num_audio_codebook=8,
        audio_codebook_weights=[8, 8, 6, 6, 4, 4, 2, 2],
        llm_config=llm_config,
    )
    torch.manual_seed(SEED)
    model = OmniVoice(config)
    # The released checkpoint is stored in bfloat16; keep the tiny one exact in float32 for parity tests.
    model.to(torch.bfloat16 if full else torch.float32).save_pretrained(folder)
    del model

    dac = dict(downsampling_ratios=[8, 5, 4, 2, 3], upsampling_ratios=[8, 5, 4, 2, 3])
    dac.update(FULL_DAC if full else TINY_DAC)
    audio_config = HiggsAudioV2TokenizerConfig(
        target_bandwidths=[0.5, 1, 1.5, 2],
        sample_rate=24000,
        codebook_size=1024,
        codebook_dim=64 if full else 8,
        acoustic_model_config=dac,
        semantic_model_config={} if full else dict(TINY_HUBERT),
    )
    torch.manual_seed(SEED + 1)
    audio_tokenizer = HiggsAudioV2TokenizerModel(audio_config).eval()
    # The shrunken tiny decoder barely responds to codes of unit scale; larger ones make tokens audible.
    _randomize_codebooks(audio_tokenizer, std=1.0 if full else 300.0)
    audio_folder = folder / "audio_tokenizer"
    audio_tokenizer.save_pretrained(audio_folder)
    DacFeatureExtractor(feature_size=1, sampling_rate=24000, padding_value=0.0, hop_length=960).save_pretrained(
        audio_folder
    )
    (folder / "omnidub-synthetic.json").write_text(
        json.dumps(
            {
                "name": "full" if full else "tiny",
                "recipe": RECIPE_VERSION,
                "seed": SEED,
                "note": "random weights: the audio is noise",
            },
            indent=2,
        )
    )


def _randomize_codebooks(audio_tokenizer, std: float) -> None:
    """Codebooks are buffers that transformers initialises to zeros; random ones make codes differ and decode
    to different audio, as with trained weights."""
    import torch

    with torch.no_grad():
        for quantizer in audio_tokenizer.quantizer.quantizers:
            codebook = quantizer.codebook
            codebook.embed.normal_(std=std)
            codebook.embed_avg.copy_(codebook.embed)
            codebook.cluster_size.fill_(1.0)
            codebook.inited.fill_(1.0)


def _wrap(tokenizer_object):
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tokenizer_object, pad_token=PAD_TOKEN, eos_token=PAD_TOKEN)
    tokenizer.add_special_tokens({"additional_special_tokens": list(OMNIVOICE_TOKENS)})
    return tokenizer


def _qwen_vocabulary() -> tuple[Path, str]:
    """Qwen's ranks file and split pattern, read from the files of the dashscope wheel: importing dashscope would
    load its whole client (aiohttp, cryptography, websockets...), which a machine building the checkpoint need not
    have."""
    import ast
    import importlib.util

    try:
        spec = importlib.util.find_spec("dashscope")  # finds the folder without importing the package
    except (ImportError, ValueError):
        spec = None
    folder = Path(next(iter(spec.submodule_search_locations))) if spec and spec.submodule_search_locations else None
    try:
        if folder is None:
            raise FileNotFoundError("dashscope is not installed")
        ranks = folder / "resources" / "qwen.tiktoken"
        tree = ast.parse((folder / "tokenizers" / "qwen_tokenizer.py").read_text(encoding="utf-8"))
        [pattern] = [
            ast.literal_eval(node.value)
            for node in tree.body
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "PAT_STR" for t in node.targets)
        ]
        if not ranks.is_file():
            raise FileNotFoundError(ranks)
    except (OSError, SyntaxError, ValueError) as exc:  # pragma: no cover - dashscope is a declared dependency
        raise OmnidubError(
            f"synthetic:full needs the Qwen vocabulary shipped by the dashscope package ({exc})"
        ) from None
    return ranks, pattern


def _qwen_tokenizer():
    """Qwen's byte-level BPE (151,643 ranks) + Qwen3's 26 added tokens + OmniVoice's 7, ids as released."""

    from tokenizers import AddedToken, Regex, decoders, normalizers, pre_tokenizers
    from transformers.convert_slow_tokenizer import TikTokenConverter

    ranks, pattern = _qwen_vocabulary()
    backend = TikTokenConverter(vocab_file=str(ranks), pattern=pattern).tokenizer()
    backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in QWEN3_ADDED_TOKENS])
    return _wrap(backend)


def _tiny_tokenizer():
    """A small byte-level BPE trained offline; vocab >= 1025 because text embeddings also see audio ids."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1200,
        special_tokens=[PAD_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(_training_text(), trainer=trainer)
    return _wrap(backend)


def _training_text() -> list[str]:
    # Enough varied English (plus the control-token vocabulary) for a BPE of ~1,200 pieces.
    words = (
        "the quick brown fox jumps over a lazy dog while we plan the trip to the station tomorrow morning "
        "hello world this is a short test of the dubbing pipeline where every line is fitted to its slot "
        "we need tickets coffee a map of the city and enough time to catch the early train before noon "
        "did you remember to call your sister about the dinner on friday night at the new restaurant "
        "none english chinese french german spanish japanese male female young elderly whisper pitch accent "
        "one two three four five six seven eight nine ten laughter sigh question surprise confirmation"
    ).split()
    lines = []
    for shift in range(len(words)):
        rotated = words[shift:] + words[:shift]
        lines.append(" ".join(rotated).capitalize() + ".")
        lines.append(", ".join(rotated[:12]) + "?")
    return lines
