"""Every call into omnivoice's model code lives here, private ones included, so an upstream change breaks one
module (pinned: omnivoice>=0.2.1,<0.3). Also loading the model and resolving the device with torch."""

from __future__ import annotations

import numpy as np
import torch

from omnidub.errors import OmnidubError
from omnidub.hardware import dtype_for
from omnidub.models import ModelSource, quiet

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_device(spec: str = "auto") -> str:
    """``auto`` picks cuda, then mps, then cpu; an explicit device must be available."""
    if spec == "auto":
        if torch.cuda.is_available():
            return "cuda"
        if torch.backends.mps.is_available():
            return "mps"
        return "cpu"
    if spec not in ("cpu", "cuda", "mps") and not spec.startswith("cuda:"):
        raise OmnidubError(f"unknown device {spec!r}; use auto, cpu, cuda or mps")
    if spec.startswith("cuda") and not torch.cuda.is_available():
        raise OmnidubError(f"device {spec} requested but no CUDA GPU is available; use --device cpu")
    if spec == "mps" and not torch.backends.mps.is_available():
        raise OmnidubError("device mps requested but MPS is not available; use --device cpu")
    return spec


def resolve_dtype(spec: str, device: str) -> torch.dtype:
    """``auto``: fp16 on GPUs, bf16 on CPUs with native bf16 matmul, else fp32."""
    name = dtype_for(spec, device)
    if name not in _DTYPES:
        raise OmnidubError(f"unknown dtype {spec!r}; use auto, float32, bfloat16 or float16")
    if name == "float16" and device == "cpu":
        raise OmnidubError("float16 is not supported on the CPU; use --dtype bfloat16 or float32")
    return _DTYPES[name]


def load_model(source: ModelSource, device: str, dtype: torch.dtype):
    """OmniVoice from a resolved source on ``device`` in ``dtype``; the audio tokenizer stays float32."""
    from omnidub.media import quiet_pydub

    with quiet_pydub():
        from omnivoice.models.omnivoice import OmniVoice

    try:
        with quiet():
            model = OmniVoice.from_pretrained(str(source.path), dtype=dtype, device_map=device)
    except OmnidubError:
        raise
    except Exception as exc:
        raise OmnidubError(f"cannot load model {source.spec}: {type(exc).__name__}: {exc}".splitlines()[0]) from exc
    model.eval()
    # Prompts are encoded, and audio decoded, in float32 whatever the language model runs in.
    if model.audio_tokenizer.dtype != torch.float32:
        model.audio_tokenizer.float()
    return model


def encode_reference(model, audio: np.ndarray, sample_rate: int, text: str) -> tuple[torch.Tensor, str, float]:
    """Upstream's prompt creation: (codes [C, T], transcript, RMS) of a prepared reference."""
    waveform = torch.as_tensor(np.asarray(audio, dtype=np.float32))
    try:
        prompt = model.create_voice_clone_prompt(
            ref_audio=(waveform, int(sample_rate)), ref_text=text, preprocess_prompt=True
        )
    except ValueError as exc:  # upstream: "Reference audio is empty after silence removal"
        raise OmnidubError(f"reference audio unusable: {exc}".splitlines()[0]) from exc
    return prompt.ref_audio_tokens, prompt.ref_text, float(prompt.ref_rms)


def estimate_frames(model, text: str, ref_text: str | None, ref_frames: int | None, speed: float = 1.0) -> int:
    """Upstream's own duration estimate in frames (omnidub's duration module must agree with it)."""
    return model._estimate_target_tokens(text, ref_text, ref_frames, speed=speed)


def prepare_inputs(
    model, text: str, frames: int, ref_text, ref_codes, language, instruct
) -> tuple[torch.Tensor, torch.Tensor]:
    """The conditional row upstream builds: input ids [C, L] and audio mask [L] (targets last)."""
    inputs = model._prepare_inference_inputs(text, frames, ref_text, ref_codes, language, instruct, True)
    return inputs["input_ids"][0], inputs["audio_mask"][0]


def embed(model, input_ids: torch.Tensor, audio_mask: torch.Tensor) -> torch.Tensor:
    """Upstream's input embeddings: text embeddings, plus summed codebook embeddings on audio positions."""
    return model._prepare_embed_inputs(input_ids, audio_mask)


def forward_llm(llm, embeds: torch.Tensor, mask: torch.Tensor | None, positions: torch.Tensor) -> torch.Tensor:
    """Last hidden states of the language model (upstream's or its fused twin) over ``embeds`` [R, L, H].

    ``mask`` None means every position attends to every other. transformers would then build a causal mask;
    handing it the per-layer-type mask mapping with no mask, and ``is_causal=False`` for the attention kernel,
    keeps attention bidirectional with no mask tensor at all (transformers 5's mask-mapping contract)."""
    if mask is None:
        kinds = set(getattr(llm.config, "layer_types", None) or ["full_attention"])
        out = llm(
            inputs_embeds=embeds, attention_mask={kind: None for kind in kinds}, position_ids=positions, is_causal=False
        )
    else:
        out = llm(inputs_embeds=embeds, attention_mask=mask, position_ids=positions)
    return out[0]


def resolve_language(language: str | None) -> str | None:
    from omnivoice.models.omnivoice import _resolve_language

    return _resolve_language(language)


def resolve_instruct(instruct: str | None, text: str = "") -> str | None:
    """Upstream's normalised voice-design instruction (Chinese items when the text is Chinese)."""
    from omnivoice.models.omnivoice import _resolve_instruct
    from omnivoice.utils.voice_design import _ZH_RE

    if not instruct:
        return None
    try:
        return _resolve_instruct(instruct, use_zh=bool(_ZH_RE.search(text)))
    except ValueError as exc:
        raise OmnidubError(str(exc).splitlines()[0]) from exc


def chunk_text(text: str, chunk_chars: int) -> list[str]:
    from omnivoice.utils.text import chunk_text_punctuation

    return chunk_text_punctuation(text=text, chunk_len=chunk_chars, min_chunk_len=3)


def cross_fade(waves: list[np.ndarray], sample_rate: int) -> np.ndarray:
    from omnivoice.utils.audio import cross_fade_chunks

    return cross_fade_chunks(waves, sample_rate)


def post_process(model, audio: np.ndarray, ref_rms: float | None) -> np.ndarray:
    """Upstream's post-processing of a line of natural length: trim long silences, match volume, fade and pad."""
    from omnivoice.models.omnivoice import OmniVoiceGenerationConfig

    return model._post_process_audio(audio, ref_rms=ref_rms, gen_config=OmniVoiceGenerationConfig())[0]


def voice_clone_prompt(prompt):
    """Upstream's VoiceClonePrompt for one of omnidub's prompts (to call upstream's own ``generate``)."""
    from omnivoice.models.omnivoice import VoiceClonePrompt

    return VoiceClonePrompt(torch.as_tensor(prompt.codes), prompt.text, prompt.rms)
