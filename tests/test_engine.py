"""Engine: CFG layouts match upstream's logits, the loop matches upstream's tokens, lines are deterministic
and exactly as long as asked. Tiny synthetic model, float32, CPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from omnidub.engine import Engine, Request, compare_logits
from omnidub.engine.synthesis import target_frames
from omnidub.errors import OmnidubError
from omnidub.presets import Preset

STEPS = 4
SR = 24000


def _voice(seconds: float, pitch: float) -> np.ndarray:
    """A voiced-ish waveform: a pitched tone with a syllable-rate envelope (survives silence removal)."""
    t = np.arange(int(SR * seconds)) / SR
    envelope = 0.55 + 0.45 * np.sin(2 * np.pi * 3.0 * t)
    return (0.3 * envelope * np.sin(2 * np.pi * pitch * t)).astype(np.float32)


@pytest.fixture(scope="module")
def engine(tiny_model_dir) -> Engine:
    return Engine("synthetic:tiny", device="cpu", preset=Preset(steps=STEPS, dtype="float32", cfg="padded"))


@pytest.fixture(scope="module")
def prompts(engine):
    return [
        engine.encode_prompt(_voice(2.0, 180.0), SR, "Hello there, this is me."),
        engine.encode_prompt(_voice(3.2, 120.0), SR, "A longer reference, spoken slowly and clearly."),
    ]


@pytest.fixture(scope="module")
def requests_(prompts) -> list[Request]:
    # Three lines of different lengths and two different references: rows of five different lengths.
    return [
        Request("Good morning.", prompts[0], "en", None, None, seed=11),
        Request("This line is a fair bit longer than the first one, with a comma.", prompts[1], "en", None, None, seed=12),
        Request("And a third, of middling length.", prompts[0], "en", None, 1.3, seed=13),
    ]


def _with(engine: Engine, **overrides) -> Engine:
    return engine.with_preset(engine.preset.with_overrides(**overrides))


def _upstream_tokens(engine: Engine, requests: list[Request], position_temperature=0.0, seed=None):
    """Tokens from upstream's own loop (_generate_iterative) on the task upstream's generate would build."""
    from omnivoice.models.omnivoice import OmniVoiceGenerationConfig

    model = engine.model
    config = OmniVoiceGenerationConfig(num_step=STEPS, position_temperature=position_temperature, class_temperature=0.0)
    task = model._preprocess_all(
        text=[r.text for r in requests],
        language=[r.language for r in requests],
        voice_clone_prompt=[r.prompt for r in requests],
        duration=[r.duration for r in requests],
    )
    if seed is not None:
        torch.manual_seed(seed)
    with torch.inference_mode():
        return [t.cpu() for t in model._generate_iterative(task, config)]


def test_prompt_needs_a_transcript(engine):
    with pytest.raises(OmnidubError, match="transcript"):
        engine.encode_prompt(_voice(2.0, 150.0), SR, "  ")


@pytest.mark.parametrize("layout", ["trimmed", "packed"])
def test_layouts_give_the_padded_logits(engine, requests_, layout):
    max_diff, agreement = compare_logits(engine, _with(engine, cfg=layout), requests_)
    assert max_diff <= 1e-5, f"{layout}: max |logit difference| {max_diff}"
    assert agreement == 1.0, f"{layout}: argmax differs from padded"


@pytest.mark.parametrize("layout", ["padded", "trimmed", "packed"])
def test_loop_reproduces_upstream_tokens_at_zero_temperature(engine, requests_, layout):
    greedy = _with(engine, cfg=layout, position_temperature=0.0, batch=3)
    expected = _upstream_tokens(engine, requests_)
    got = greedy.tokens(requests_)
    for e, g in zip(expected, got):
        assert torch.equal(e, g)
    alone = _upstream_tokens(engine, requests_[1:2])
    assert torch.equal(_with(greedy, batch=1).tokens(requests_[1:2])[0], alone[0])


def test_line_noise_matches_upstream_seeded_run_and_ignores_the_batch(engine, requests_):
    # At the default position temperature, a line alone reproduces upstream seeded with the line's seed,
    # and the same line inside a batch of three draws the same noise, so gives the same tokens.
    line = requests_[1]
    expected = _upstream_tokens(engine, [line], position_temperature=5.0, seed=line.seed)[0]
    alone = _with(engine, cfg="trimmed").tokens([line])[0]
    batched = _with(engine, cfg="packed", batch=3).tokens(requests_)[1]
    assert torch.equal(alone, expected)
    assert torch.equal(batched, expected)


def test_same_line_twice_gives_identical_audio(engine, requests_):
    fast = _with(engine, cfg="trimmed", batch=2)
    first = fast.synthesize(requests_[:2])
    again = fast.synthesize(requests_[:2])
    for a, b in zip(first, again):
        assert a.audio.dtype == np.float32 and a.audio.ndim == 1
        assert np.array_equal(a.audio, b.audio)
    # The tiny model's audio decoder ignores its tokens, so a new seed shows in the tokens only.
    reseeded = Request(**{**requests_[0].__dict__, "seed": 99})
    assert not torch.equal(fast.tokens([reseeded])[0], fast.tokens(requests_[:1])[0])


@pytest.mark.parametrize(("duration", "frames"), [(2.0, 50), (1.234, 30), (29 / 25, 29)])
def test_duration_gives_exact_sample_count(engine, prompts, duration, frames):
    result = engine.synthesize([Request("Exactly this long, please.", prompts[0], "en", None, duration, seed=3)])[0]
    assert result.sample_rate == SR
    assert result.audio.shape == (round(duration * SR),)
    assert result.frames == frames
    # Edges fade to silence, so placing the line in a stem never clicks.
    assert result.audio[0] == 0.0 and result.audio[-1] == 0.0


def test_a_whole_number_of_frames_is_never_one_short():
    # k/25 s must give k frames although k/25*25 is often a hair under k in floating point.
    assert [target_frames(k / 25, 25) for k in range(1, 401)] == list(range(1, 401))
    assert target_frames(1.234, 25) == 30 and target_frames(0.01, 25) == 1


def test_natural_length_follows_upstream_estimate_and_postprocessing(engine, prompts):
    text = "How long would this be on its own?"
    seconds = engine.natural_seconds(text, prompts[0])
    result = engine.synthesize([Request(text, prompts[0], "en", None, None, seed=5)])[0]
    assert result.frames == round(seconds * 25)
    # Upstream trims long silences and pads 0.1 s per side, so the length is near, not exactly, natural.
    assert 0 < result.audio.shape[0] <= (seconds + 0.2) * SR + 1


def test_long_line_is_chunked_and_still_exact(engine, prompts):
    text = " ".join(["This sentence is one of many in a very long paragraph that keeps on going."] * 12)
    natural = engine.natural_seconds(text, prompts[0])
    assert natural > 30  # over upstream's chunking threshold
    result = _with(engine, steps=2, batch=4).synthesize([Request(text, prompts[0], "en", None, 40.0, seed=8)])[0]
    assert result.audio.shape == (40 * SR,)
    assert result.frames < 40 * 25  # the gaps between chunks are part of the target


def test_voice_design_and_auto_voice_lines(engine):
    results = _with(engine, batch=2).synthesize([
        Request("No reference at all.", None, "en", None, 1.0, seed=1),
        Request("A designed voice.", None, "en", "female, low pitch", 1.0, seed=2),
    ])
    assert [r.audio.shape for r in results] == [(SR,), (SR,)]
    with pytest.raises(OmnidubError):
        engine.synthesize([Request("Bad instruct.", None, "en", "purple dragon", 1.0, seed=2)])


def test_a_resolved_model_source_is_not_resolved_again(engine, monkeypatch):
    from omnidub.engine import synthesis

    monkeypatch.setattr(synthesis, "resolve_model", lambda spec: pytest.fail(f"{spec} resolved again"))
    same = Engine(engine.source, device="cpu", preset=engine.preset)
    assert same.identity == engine.identity and same.identity["id"] == "synthetic:tiny"
    # Another dtype reloads the weights, from the same source.
    other = _with(engine, dtype="bfloat16")
    assert other.model is not engine.model and other.dtype == "bfloat16" and other.identity == engine.identity


def test_compile_is_opt_in_and_wraps_the_language_model(engine, monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "unset")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    monkeypatch.setenv("OMNIDUB_CACHE", str(tmp_path))
    compiled = _with(engine, compile=True)
    assert compiled._llm is not engine.model.llm and hasattr(compiled._llm, "_orig_mod")
    assert compiled.model.llm is engine.model.llm  # upstream's own path stays eager
    import os

    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "inductor")
