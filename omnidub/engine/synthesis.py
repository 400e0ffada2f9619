"""The resident engine: one loaded OmniVoice turning requests (text, prompt, duration, seed) into audio."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np
import torch

from omnidub.engine.cfg import Item, resolve_layout
from omnidub.engine.decode import Sampling, decode
from omnidub.engine.loading import (
    DEFAULT_MODEL,
    ModelSource,
    dtype_name,
    load_model,
    resolve_device,
    resolve_dtype,
    resolve_model,
)
from omnidub.engine.postprocess import fit_exact, match_reference_volume
from omnidub.errors import OmnidubError
from omnidub.files import cache_home
from omnidub.presets import Preset

# Bump when the decoding loop or post-processing changes what a line sounds like (cache keys carry it).
DECODER_VERSION = 1
# Upstream's long-form rule: text estimated over 30 s is split at punctuation into ~15 s chunks.
CHUNK_THRESHOLD_SECONDS = 30.0
CHUNK_SECONDS = 15.0
# cross_fade_chunks puts this much silence (as frames) between chunks.
CHUNK_GAP_SECONDS = 0.1


@dataclass(frozen=True)
class Request:
    """One line to speak. ``duration`` (seconds) makes the audio exactly that long; ``seed`` fixes its noise."""

    text: str
    prompt: object | None = None  # omnivoice VoiceClonePrompt, or None for voice design / auto voice
    language: str | None = None
    instruct: str | None = None
    duration: float | None = None
    seed: int = 0


@dataclass(frozen=True, eq=False)
class Result:
    """Audio of one line (float32 mono), the wall seconds it cost (a batch's decoding time is shared equally
    among its lines) and the frames generated."""

    audio: np.ndarray
    sample_rate: int
    seconds: float
    frames: int


def generation_settings(preset: Preset, device: str) -> dict:
    """Everything besides model, prompt, text and seed that decides a line's audio (for cache keys)."""
    return {
        "steps": preset.steps,
        "cfg": resolve_layout(preset.cfg, device),
        "dtype": dtype_name(preset.dtype, device),
        "guidance_scale": preset.guidance_scale,
        "t_shift": preset.t_shift,
        "layer_penalty_factor": preset.layer_penalty_factor,
        "position_temperature": preset.position_temperature,
        "class_temperature": preset.class_temperature,
        "decoder": DECODER_VERSION,
    }


@dataclass
class _Line:
    """A request resolved: its chunks (one unless long), their frame budgets and seeds."""

    request: Request
    texts: list[str]
    frames: list[int]
    seeds: list[int]
    language: str | None
    instruct: str | None
    tokens: list[torch.Tensor | None]
    seconds: float = 0.0


class Engine:
    """A resident OmniVoice with omnidub's decoding loop; settings come from a preset.

    ``model`` is a ``--model`` spec, or a :class:`ModelSource` the caller already resolved."""

    def __init__(self, model: str | ModelSource = DEFAULT_MODEL, device: str = "auto", preset: Preset | None = None,
                 *, _shared: "Engine | None" = None):
        self.preset = preset or Preset()
        if _shared is not None:
            self.device, self.dtype, self.model = _shared.device, _shared.dtype, _shared.model
            self.source, self.identity = _shared.source, _shared.identity
        else:
            self.device = resolve_device(device)
            dtype = resolve_dtype(self.preset.dtype, self.device)
            self.dtype = dtype_name(self.preset.dtype, self.device)
            self.source = model if isinstance(model, ModelSource) else resolve_model(model)
            self.model = load_model(self.source, self.device, dtype)
            self.identity = dict(self.source.identity)
            # Prompts are encoded, and audio decoded, in float32 whatever the language model runs in.
            if self.model.audio_tokenizer.dtype != torch.float32:
                self.model.audio_tokenizer.float()
        self.sample_rate = int(self.model.sampling_rate)
        self.frame_rate = int(self.model.audio_tokenizer.config.frame_rate)
        self.layout = resolve_layout(self.preset.cfg, self.device)
        self.sampling = Sampling(
            steps=self.preset.steps,
            guidance_scale=self.preset.guidance_scale,
            t_shift=self.preset.t_shift,
            layer_penalty_factor=self.preset.layer_penalty_factor,
            position_temperature=self.preset.position_temperature,
            class_temperature=self.preset.class_temperature,
        )
        if self.preset.compile:
            self._llm = _shared._llm if _shared is not None and _shared.preset.compile else compile_llm(self.model.llm)
        else:
            self._llm = self.model.llm

    def with_preset(self, preset: Preset) -> "Engine":
        """An engine with other settings over the same resident model (reloads only if the dtype changes)."""
        if dtype_name(preset.dtype, self.device) != self.dtype:
            return Engine(self.source, self.device, preset)
        return Engine(preset=preset, _shared=self)

    @property
    def settings(self) -> dict:
        """The generation settings of this engine, as :func:`generation_settings` reports them."""
        return generation_settings(self.preset, self.device)

    @torch.inference_mode()
    def encode_prompt(self, audio, sample_rate: int | None = None, text: str | None = None):
        """Encode a reference (mono float waveform + its transcript) into a reusable VoiceClonePrompt.

        Also accepts an object with ``audio``, ``sample_rate`` and ``text`` (a voices.Reference)."""
        if hasattr(audio, "audio"):
            audio, sample_rate, text = audio.audio, audio.sample_rate, audio.text
        if not text or not text.strip():
            raise OmnidubError("a reference needs its transcript to clone the voice")
        waveform = torch.as_tensor(np.asarray(audio, dtype=np.float32))
        try:
            return self.model.create_voice_clone_prompt(ref_audio=(waveform, int(sample_rate)), ref_text=text,
                                                        preprocess_prompt=True)
        except ValueError as exc:  # upstream: "Reference audio is empty after silence removal"
            raise OmnidubError(f"reference audio unusable: {exc}".splitlines()[0]) from None

    def natural_seconds(self, text: str, prompt=None, language: str | None = None, speed: float = 1.0) -> float:
        """How long upstream's duration estimator says ``text`` takes in this voice (language does not change it)."""
        return self._natural_frames(text, prompt, speed) / self.frame_rate

    def synthesize(self, requests: list[Request]) -> list[Result]:
        """Speak every request, ``preset.batch`` lines per forward; results come back in request order."""
        lines = [self._resolve(request) for request in requests]
        self._decode_lines(lines)
        return [self._finish(line) for line in lines]

    def tokens(self, requests: list[Request]) -> list[torch.Tensor]:
        """The audio tokens [C, frames] that :meth:`synthesize` would decode (chunks joined in time)."""
        lines = [self._resolve(request) for request in requests]
        self._decode_lines(lines)
        return [torch.cat(line.tokens, dim=-1).cpu() for line in lines]

    @torch.inference_mode()
    def first_step_logits(self, requests: list[Request]) -> list[torch.Tensor]:
        """First-step target logits per line (all requests in one batch), [2 (cond, uncond), C, frames, V] float32 on CPU."""
        from omnidub.engine.cfg import Layout

        lines = [self._resolve(request) for request in requests]
        items = [self._item(line, 0) for line in lines]
        c, u = Layout(items, self.layout, self.model.config.audio_mask_id, self.model.device).logits(self.model, self._llm)
        return [torch.stack((c[i, :, : it.target_len], u[i, :, : it.target_len])).cpu() for i, it in enumerate(items)]

    # -- internals ---------------------------------------------------------------------------------------------

    def _natural_frames(self, text: str, prompt, speed: float = 1.0) -> int:
        ref_text = prompt.ref_text if prompt is not None else None
        ref_frames = prompt.ref_audio_tokens.shape[-1] if prompt is not None else None
        return self.model._estimate_target_tokens(text, ref_text, ref_frames, speed=speed)

    def _resolve(self, request: Request) -> _Line:
        from omnivoice.models.omnivoice import _resolve_instruct, _resolve_language
        from omnivoice.utils.text import chunk_text_punctuation
        from omnivoice.utils.voice_design import _ZH_RE

        if not request.text or not request.text.strip():
            raise OmnidubError("cannot synthesize an empty line")
        language = _resolve_language(request.language)
        instruct = None
        if request.instruct:
            try:
                instruct = _resolve_instruct(request.instruct, use_zh=bool(_ZH_RE.search(request.text)))
            except ValueError as exc:
                raise OmnidubError(str(exc).splitlines()[0]) from None
        natural = self._natural_frames(request.text, request.prompt)
        frames = natural if request.duration is None else target_frames(request.duration, self.frame_rate)
        seed = request.seed & 0x7FFF_FFFF_FFFF_FFFF
        if frames <= CHUNK_THRESHOLD_SECONDS * self.frame_rate:
            return _Line(request, [request.text], [frames], [seed], language, instruct, [None])

        # Long line: upstream's chunking at punctuation into ~15 s pieces.
        chunk_chars = int(CHUNK_SECONDS * self.frame_rate / (frames / len(request.text)))
        texts = chunk_text_punctuation(text=request.text, chunk_len=chunk_chars, min_chunk_len=3)
        estimates = [self._natural_frames(t, request.prompt) for t in texts]
        if request.duration is None:
            budgets = estimates
        else:
            # Split the exact target in proportion to each chunk's natural length, minus the gaps between them.
            gaps = int(round(CHUNK_GAP_SECONDS * self.frame_rate * (len(texts) - 1)))
            budgets = _split(max(len(texts), frames - gaps), estimates)
        seeds = [seed] + [_chunk_seed(seed, j) for j in range(1, len(texts))]
        return _Line(request, texts, budgets, seeds, language, instruct, [None] * len(texts))

    def _item(self, line: _Line, chunk: int) -> Item:
        prompt = line.request.prompt
        if prompt is not None:
            ref_text, ref_tokens = prompt.ref_text, prompt.ref_audio_tokens
        elif chunk > 0:
            # Without a reference, upstream voices later chunks with the first chunk as reference.
            ref_text, ref_tokens = line.texts[0], line.tokens[0]
        else:
            ref_text, ref_tokens = None, None
        inputs = self.model._prepare_inference_inputs(
            line.texts[chunk], line.frames[chunk], ref_text, ref_tokens, line.language, line.instruct, True
        )
        return Item(inputs["input_ids"][0], inputs["audio_mask"][0], line.frames[chunk])

    def _decode_lines(self, lines: list[_Line]) -> None:
        # Chunks that need the first chunk as reference wait for a second pass.
        for second_pass in (False, True):
            work = [
                (line, j)
                for line in lines
                for j in range(len(line.texts))
                if line.tokens[j] is None and (second_pass or j == 0 or line.request.prompt is not None)
            ]
            # Similar lengths together waste the least padding; results do not depend on the grouping.
            work.sort(key=lambda lj: -lj[0].frames[lj[1]])
            for start in range(0, len(work), self.preset.batch):
                group = work[start : start + self.preset.batch]
                began = time.perf_counter()
                items = [self._item(line, j) for line, j in group]
                tokens = decode(self.model, items, [line.seeds[j] for line, j in group], self.sampling, self.layout,
                                llm=self._llm)
                share = (time.perf_counter() - began) / len(group)
                for (line, j), t in zip(group, tokens):
                    line.tokens[j] = t
                    line.seconds += share

    @torch.inference_mode()
    def _finish(self, line: _Line) -> Result:
        from omnivoice.models.omnivoice import OmniVoiceGenerationConfig
        from omnivoice.utils.audio import cross_fade_chunks

        began = time.perf_counter()
        tokenizer = self.model.audio_tokenizer
        waves = [tokenizer.decode(t.to(tokenizer.device).unsqueeze(0)).audio_values[0].float().cpu().numpy()
                 for t in line.tokens]
        audio = cross_fade_chunks(waves, self.sample_rate)  # (1, samples)
        ref_rms = line.request.prompt.ref_rms if line.request.prompt is not None else None
        if line.request.duration is None:
            # Upstream's post-processing: trim long silences, match volume, 0.1 s fade and pad per side.
            audio = self.model._post_process_audio(audio, ref_rms=ref_rms,
                                                   gen_config=OmniVoiceGenerationConfig())[0]
        else:
            samples = int(round(line.request.duration * self.sample_rate))
            audio = fit_exact(match_reference_volume(audio[0], ref_rms), samples, self.sample_rate)
        seconds = line.seconds + time.perf_counter() - began
        return Result(np.ascontiguousarray(audio, dtype=np.float32), self.sample_rate, seconds, sum(line.frames))


def target_frames(seconds: float, frame_rate: int) -> int:
    """Frames generated for a line of exactly ``seconds``: whole frames, at least one (n/rate seconds gives n)."""
    # seconds * rate of an exact n/rate often lands just under n (29/25*25 = 28.999...): absorb that before flooring.
    return max(1, int(seconds * frame_rate + 1e-6))


def compare_logits(a: Engine, b: Engine, requests: list[Request]) -> tuple[float, float]:
    """Max |difference| and argmax agreement (0..1) of two engines' first-step logits on the same requests."""
    diff, agree, total = 0.0, 0, 0
    for x, y in zip(a.first_step_logits(requests), b.first_step_logits(requests)):
        diff = max(diff, float((x - y).abs().max()))
        agree += int((x.argmax(-1) == y.argmax(-1)).sum())
        total += x[..., 0].numel()
    return diff, agree / total


def compile_llm(llm):
    """torch.compile the language model (dynamic shapes), caching inductor's output on disk across runs."""
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache_home() / "inductor")
    return torch.compile(llm, dynamic=True)


def _split(total: int, weights: list[int]) -> list[int]:
    """``total`` split in proportion to ``weights`` (largest remainders), every share at least 1."""
    raw = [total * w / sum(weights) for w in weights]
    shares = [max(1, int(r)) for r in raw]
    order = sorted(range(len(raw)), key=lambda i: raw[i] - int(raw[i]), reverse=True)
    for i in order[: max(0, total - sum(shares))]:
        shares[i] += 1
    return shares


def _chunk_seed(seed: int, chunk: int) -> int:
    # Each chunk gets its own stream so chunks can decode in any grouping.
    return int(np.random.SeedSequence([seed, chunk]).generate_state(1, np.uint64)[0]) & 0x7FFF_FFFF_FFFF_FFFF
