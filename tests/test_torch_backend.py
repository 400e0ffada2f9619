"""Torch backend: CFG layouts match upstream's logits, the loop matches upstream's tokens, lines are
deterministic, exactly as long as asked, and independent of their bucket. Tiny synthetic model, float32, CPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from omnidub.backends import Request
from omnidub.backends.torch import TorchBackend, compare_logits
from omnidub.backends.torch.fused import fused_llm
from omnidub.config import DecodeOptions, EngineOptions
from omnidub.duration import natural_seconds, target_frames
from omnidub.errors import OmnidubError
from omnidub.scheduler import Budget, stream

STEPS = 4
SR = 24000


def _voice(seconds: float, pitch: float) -> np.ndarray:
    """A voiced-ish waveform: a pitched tone with a syllable-rate envelope (survives silence removal)."""
    t = np.arange(int(SR * seconds)) / SR
    envelope = 0.55 + 0.45 * np.sin(2 * np.pi * 3.0 * t)
    return (0.3 * envelope * np.sin(2 * np.pi * pitch * t)).astype(np.float32)


@pytest.fixture(scope="module")
def engine(tiny_model_dir) -> TorchBackend:
    return TorchBackend(
        "synthetic:tiny", device="cpu", options=EngineOptions(DecodeOptions(steps=STEPS), dtype="float32", cfg="padded")
    )


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
        Request(
            "This line is a fair bit longer than the first one, with a comma.", prompts[1], "en", None, None, seed=12
        ),
        Request("And a third, of middling length.", prompts[0], "en", None, 1.3, seed=13),
    ]


def _with(engine: TorchBackend, **overrides) -> TorchBackend:
    return engine.with_options(engine.options.replace(**overrides))


def _synthesize(engine, requests):
    return list(engine.synthesize(requests))


def _upstream_tokens(engine: TorchBackend, requests: list[Request], position_temperature=0.0, seed=None):
    """Tokens from upstream's own loop (_generate_iterative) on the task upstream's generate would build."""
    from omnivoice.models.omnivoice import OmniVoiceGenerationConfig

    from omnidub.backends.torch.upstream import voice_clone_prompt

    model = engine.model
    config = OmniVoiceGenerationConfig(num_step=STEPS, position_temperature=position_temperature, class_temperature=0.0)
    task = model._preprocess_all(
        text=[r.text for r in requests],
        language=[r.language for r in requests],
        voice_clone_prompt=[voice_clone_prompt(r.prompt) if r.prompt else None for r in requests],
        duration=[r.duration for r in requests],
    )
    if seed is not None:
        torch.manual_seed(seed)
    with torch.inference_mode():
        return [t.cpu().numpy() for t in model._generate_iterative(task, config)]


def test_prompt_needs_a_transcript(engine):
    with pytest.raises(OmnidubError, match="transcript"):
        engine.encode_prompt(_voice(2.0, 150.0), SR, "  ")


@pytest.mark.parametrize("layout", ["trimmed", "packed", "joined"])
def test_layouts_give_the_padded_logits(engine, requests_, layout):
    max_diff, agreement = compare_logits(engine, _with(engine, cfg=layout), requests_)
    assert max_diff <= 1e-5, f"{layout}: max |logit difference| {max_diff}"
    assert agreement == 1.0, f"{layout}: argmax differs from padded"


@pytest.mark.parametrize("layout", ["padded", "trimmed", "packed", "joined"])
def test_loop_reproduces_upstream_tokens_at_zero_temperature(engine, requests_, layout):
    greedy = _with(engine, cfg=layout, position_temperature=0.0)
    expected = _upstream_tokens(engine, requests_)
    got = greedy.tokens(requests_)
    for e, g in zip(expected, got, strict=True):
        assert np.array_equal(e, g)
    alone = _upstream_tokens(engine, requests_[1:2])
    assert np.array_equal(greedy.tokens(requests_[1:2])[0], alone[0])


def test_line_noise_matches_upstream_seeded_run_and_ignores_the_batch(engine, requests_):
    # At the default position temperature, a line alone reproduces upstream seeded with the line's seed,
    # and the same line inside a batch of three draws the same noise, so gives the same tokens.
    line = requests_[1]
    expected = _upstream_tokens(engine, [line], position_temperature=5.0, seed=line.seed)[0]
    alone = _with(engine, cfg="trimmed").tokens([line])[0]
    batched = _with(engine, cfg="packed").tokens(requests_)[1]
    assert np.array_equal(alone, expected)
    assert np.array_equal(batched, expected)


@pytest.mark.parametrize("layout", ["padded", "trimmed", "packed", "joined"])
def test_a_line_sounds_the_same_in_any_bucket(engine, requests_, layout):
    # The scheduler may put a line alone or with any others; in float32 its audio must not change.
    backend = _with(engine, cfg=layout)
    tagged = [Request(**{**r.__dict__, "id": str(i)}) for i, r in enumerate(requests_)]
    alone = {r.id: r.audio for r in stream(backend, tagged, Budget(lines=1))}
    together = {r.id: r.audio for r in stream(backend, tagged, Budget(lines=0, tokens=0))}
    pairs = {r.id: r.audio for r in stream(backend, tagged, Budget(lines=2))}
    assert set(alone) == {"0", "1", "2"}
    for key in alone:
        assert np.array_equal(alone[key], together[key]) and np.array_equal(alone[key], pairs[key])


def test_same_line_twice_gives_identical_audio(engine, requests_):
    fast = _with(engine, cfg="trimmed")
    first = _synthesize(fast, requests_[:2])
    again = _synthesize(fast, requests_[:2])
    for a, b in zip(first, again, strict=True):
        assert a.audio.dtype == np.float32 and a.audio.ndim == 1
        assert np.array_equal(a.audio, b.audio)
    # Another seed draws other noise: other tokens, and (the tiny model's codec decodes what it is given) other audio.
    reseeded = Request(**{**requests_[0].__dict__, "seed": 99})
    assert not np.array_equal(fast.tokens([reseeded])[0], fast.tokens(requests_[:1])[0])
    assert not np.array_equal(_synthesize(fast, [reseeded])[0].audio, first[0].audio)


@pytest.mark.parametrize(("duration", "frames"), [(2.0, 50), (1.234, 30), (29 / 25, 29)])
def test_duration_gives_exact_sample_count(engine, prompts, duration, frames):
    result = _synthesize(engine, [Request("Exactly this long, please.", prompts[0], "en", None, duration, seed=3)])[0]
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
    seconds = natural_seconds(text, prompts[0].text, prompts[0].seconds)
    result = _synthesize(engine, [Request(text, prompts[0], "en", None, None, seed=5)])[0]
    assert result.frames == round(seconds * 25)
    # Upstream trims long silences and pads 0.1 s per side, so the length is near, not exactly, natural.
    assert 0 < result.audio.shape[0] <= (seconds + 0.2) * SR + 1


def test_long_line_is_chunked_and_still_exact(engine, prompts):
    text = " ".join(["This sentence is one of many in a very long paragraph that keeps on going."] * 12)
    natural = natural_seconds(text, prompts[0].text, prompts[0].seconds)
    assert natural > 30  # over upstream's chunking threshold
    result = _synthesize(_with(engine, steps=2), [Request(text, prompts[0], "en", None, 40.0, seed=8)])[0]
    assert result.audio.shape == (40 * SR,)
    assert result.frames < 40 * 25  # the gaps between chunks are part of the target


def test_voice_design_and_auto_voice_lines(engine):
    results = _synthesize(
        engine,
        [
            Request("No reference at all.", None, "en", None, 1.0, seed=1),
            Request("A designed voice.", None, "en", "female, low pitch", 1.0, seed=2),
        ],
    )
    assert [r.audio.shape for r in results] == [(SR,), (SR,)]
    with pytest.raises(OmnidubError):
        _synthesize(engine, [Request("Bad instruct.", None, "en", "purple dragon", 1.0, seed=2)])


def test_a_resolved_model_source_is_not_resolved_again(engine, monkeypatch):
    from omnidub.backends.torch import backend

    monkeypatch.setattr(backend, "resolve_model", lambda spec: pytest.fail(f"{spec} resolved again"))
    same = TorchBackend(engine.source, device="cpu", options=engine.options)
    assert same.identity == engine.identity and same.identity["id"] == "synthetic:tiny"
    # Another dtype reloads the weights, from the same source.
    other = _with(engine, dtype="bfloat16")
    assert other.model is not engine.model and other.dtype == "bfloat16" and other.source is engine.source
    assert other.identity == {**engine.identity, "dtype": "bfloat16"}


def test_compile_wraps_the_fused_language_model_and_upstream_stays_eager(engine):
    compiled = _with(engine, compile=True)
    assert compiled.compiled and hasattr(compiled._llm, "_orig_mod")
    # The fused twin with torch's own linears, compiled (inductor traces those, whichever GEMM kind this CPU's
    # probe chose for the eager path).
    assert compiled._llm._orig_mod is fused_llm(engine.model.llm, "aten")
    assert compiled.model.llm is engine.model.llm and not hasattr(engine.model.llm, "_orig_mod")
    assert not _with(engine, compile=False).compiled


@pytest.mark.slow  # inductor compiles the model first: 15 s warm, longer with a cold inductor cache
def test_compiled_model_gives_the_eager_tokens_and_logits_in_float32(engine, prompts):
    # Inductor reorders float32 sums, so logits may move by rounding (bound: 1e-5 on logits of order 1-10, as for
    # every lossless lever); the tokens must not move at all.
    compiled = _with(engine, compile=True, cfg="trimmed", steps=2)
    eager = _with(engine, compile=False, cfg="trimmed", steps=2)
    lines = [Request("Short and sweet.", prompts[0], "en", None, 0.8, seed=4)]
    for a, b in zip(compiled.first_step_logits(lines), eager.first_step_logits(lines), strict=True):
        assert float((a - b).abs().max()) <= 1e-5
    for a, b in zip(compiled.tokens(lines), eager.tokens(lines), strict=True):
        assert np.array_equal(a, b)


def test_a_ray_workers_buckets_keep_the_share_of_the_job_it_heard(engine, prompts, monkeypatch, tmp_path):
    from omnidub.backends.torch import backend
    from omnidub.cluster import Worker

    monkeypatch.setenv("OMNIDUB_CACHE", str(tmp_path))
    calls = []
    monkeypatch.setattr(backend, "compile_llm", lambda llm: calls.append(llm) or llm)
    auto = _with(engine, compile="auto", steps=1)
    worker = Worker(lambda: auto)
    line = [Request("Short.", prompts[0], "en", None, 0.4, seed=1, id="0")]
    # The driver says the worker's share of a long job once; each bucket alone would never pay for compiling.
    worker.expect(auto.cost(line[0]) * 400_000)
    worker.render(line)
    assert calls and auto.compiled


def test_compile_auto_compiles_only_when_the_job_pays_for_it(engine, prompts, monkeypatch, tmp_path):
    from omnidub.backends.torch import backend

    monkeypatch.setenv("OMNIDUB_CACHE", str(tmp_path))  # nothing measured yet on this "machine"
    calls, notes = [], []
    monkeypatch.setattr(backend, "compile_llm", lambda llm: calls.append(llm) or llm)
    auto = _with(engine, compile="auto", steps=1)
    auto.on_note = notes.append
    line = [Request("Short.", prompts[0], "en", None, 0.4, seed=1, id="0")]
    list(stream(auto, line, Budget(lines=1)))  # one tiny line: compiling could never pay
    assert calls == [] and not auto.compiled and "not compiling" in notes[-1]
    # A job with far more model time left than the compile costs compiles after its first line.
    auto.expect(auto.cost(line[0]) * 400_000)
    list(auto.synthesize(line))
    assert calls == [auto._eager] and auto.compiled and "compiling now" in notes[-1]


def test_compile_auto_learns_what_compiling_cost_and_gave_here_and_counts_a_warm_cache(
    engine, prompts, monkeypatch, tmp_path
):
    import json

    from omnidub import measured
    from omnidub.backends.torch import backend

    monkeypatch.setenv("OMNIDUB_CACHE", str(tmp_path))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.setattr(backend, "compile_llm", lambda llm: llm)  # "compiles" at no cost and gives nothing
    line = [Request("Short.", prompts[0], "en", None, 0.4, seed=1, id="0")]
    notes = []
    auto = _with(engine, compile="auto", steps=1)
    auto.on_note = notes.append
    auto.expect(auto.cost(line[0]) * 400_000)
    for _ in range(3):  # eager, then the bucket that paid for compiling, then one at the compiled rate
        list(auto.synthesize(line))
    assert auto.compiled and "inductor cache cold" in notes[0]
    [(key, record)] = json.loads((tmp_path / "measured.json").read_text())["compile"].items()
    assert key == auto._compile_key() and record["inductor_cache"] == str(tmp_path / "inductor")
    assert record["cold_seconds"] >= 0 and 0.2 < record["speedup"] < 5  # about 1x: nothing was compiled
    # The next render on this machine: compiling measured no gain beyond noise, so even a long job stays eager.
    measured.record_compile(key, 30.0, warm=False, cache=str(tmp_path / "inductor"), speedup=1.01)
    again = _with(engine, compile="auto", steps=1)
    again.on_note = notes.append
    again.expect(again.cost(line[0]) * 400_000)
    list(again.synthesize(line))
    assert not again.compiled and "no gain" in notes[-1]
    # Where it gave 1.5x: a warm inductor cache (the folder the record names, holding compiled graphs) costs a
    # share of the cold compile, so a job too short to pay for a cold compile compiles once the cache is warm.
    measured.record_compile(key, 600.0, warm=False, cache=str(tmp_path / "inductor"), speedup=1.5)

    def decide() -> TorchBackend:
        fresh = _with(engine, compile="auto", steps=1)
        fresh.on_note = notes.append
        # Each bucket timed at 10 ms a token, whatever this machine's load: the decision, not the clock, is tested.
        timed = fresh._decoded
        fresh._decoded = lambda seconds, tokens: timed(tokens * 0.01, tokens)
        list(fresh.synthesize(line))  # its model rate here (a bucket of a job with nothing left: stays eager)
        fresh.expect(int(500 / fresh._rate))  # then ~500 s of model time left: saves ~167 s at 1.5x
        list(fresh.synthesize(line))
        return fresh

    assert not decide().compiled and "inductor cache cold" in notes[-1]
    (tmp_path / "inductor" / "fxgraph").mkdir(parents=True)
    measured.record_compile(key, 100.0, warm=True, cache=str(tmp_path / "inductor"), speedup=1.5)
    assert decide().compiled and "inductor cache warm" in notes[-1]
    # Another inductor folder than the one the record filled is cold again.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert not decide().compiled and "inductor cache cold" in notes[-1]


def test_duration_estimate_agrees_with_upstream_on_varied_texts(engine):
    # omnidub plans without the model, so its estimate must be upstream's _estimate_target_tokens exactly.
    from omnidub.backends.torch import upstream
    from omnidub.duration import natural_frames

    rng = np.random.default_rng(7)
    pieces = [
        "Hello",
        "world",
        "42",
        "3.14",
        "naïve",
        "café",
        "你好",
        "世界",
        "こんにちは",
        "안녕하세요",
        "Привет",
        "مرحبا",
        "שלום",
        "नमस्ते",
        "[laughter]",
        "...",
        "!",
        "?",
        ",",
        "—",
        "e-mail",
        "O'Brien",
        "2026",
        "%",
        "&",
    ]
    refs = [
        (None, None),
        ("Nice to meet you.", 25),
        ("A longer reference, spoken slowly and clearly.", 82),
        ("短い参照です。", 40),
        ("Un, deux, trois!", 31),
    ]
    checked = 0
    for n in range(300):
        text = " ".join(rng.choice(pieces, size=int(rng.integers(1, 30))))
        ref_text, ref_frames = refs[n % len(refs)]
        speed = [1.0, 1.3, 0.8][n % 3]
        assert natural_frames(text, ref_text, ref_frames, speed) == upstream.estimate_frames(
            engine.model, text, ref_text, ref_frames, speed
        ), text
        checked += 1
    assert checked == 300
