"""The prefix cache (``prefix_refresh``): off it is today's decoding bit for bit in every CFG layout; a cached pass
computes only the target columns and, right after a full pass, the full pass's logits; above 1 it is labelled
approximate wherever the render says what it ran. Tiny synthetic model, float32, CPU."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from test_speed import three_requests
from typer.testing import CliRunner

from omnidub.backends import Request
from omnidub.backends.torch import TorchBackend
from omnidub.backends.torch.fused import FusedLM
from omnidub.backends.torch.layout import Layout
from omnidub.cli import app
from omnidub.config import DecodeOptions, EngineOptions, approximations, generation_settings, load_preset
from omnidub.errors import OmnidubError
from omnidub.eval.configs import parse_configuration
from omnidub.scheduler import Budget, stream

LAYOUTS = ["padded", "trimmed", "packed", "joined"]


@pytest.fixture(scope="module")
def engine(tiny_model_dir) -> TorchBackend:
    return TorchBackend(
        "synthetic:tiny", device="cpu", options=EngineOptions(DecodeOptions(steps=4), dtype="float32", cfg="padded")
    )


@pytest.fixture(scope="module")
def requests_(engine) -> list[Request]:
    return three_requests(engine)


def _with(engine, **overrides) -> TorchBackend:
    return engine.with_options(engine.options.replace(**overrides))


def _rows(backend, requests) -> Layout:
    lines = [backend._resolve(r) for r in requests]
    items = [backend._item(line, 0) for line in lines]
    return Layout(items, backend.layout, backend.model.config.audio_mask_id, backend.model.device)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_refresh_every_step_is_todays_decoding_bit_for_bit(engine, requests_, layout):
    today = _with(engine, cfg=layout)
    every_step = _with(engine, cfg=layout, prefix_refresh=1)
    for a, b in zip(today.tokens(requests_), every_step.tokens(requests_), strict=True):
        assert torch.equal(torch.as_tensor(a), torch.as_tensor(b))
    assert every_step.settings == today.settings  # the same line keys as before the cache existed


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_full_pass_that_keeps_keys_and_values_is_the_plain_pass_bit_for_bit(engine, requests_, layout):
    backend = _with(engine, cfg=layout)
    rows = _rows(backend, requests_)
    with torch.inference_mode():
        plain = rows.logits(backend.model, backend._llm)
        filled = rows.logits(backend.model, backend._llm, "fill")
    assert torch.equal(plain[0], filled[0]) and torch.equal(plain[1], filled[1])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_cached_pass_runs_only_the_targets_and_right_after_a_full_pass_gives_its_logits(engine, requests_, layout):
    backend = _with(engine, cfg=layout)
    rows = _rows(backend, requests_)
    seen = []
    hook = backend._llm.register_forward_hook(lambda m, args, out: seen.append(args[0].shape[:2]))
    try:
        with torch.inference_mode():
            full_c, full_u = rows.logits(backend.model, backend._llm, "fill")
            seen.clear()
            cached_c, cached_u = rows.logits(backend.model, backend._llm, "reuse")
    finally:
        hook.remove()
    targets = [r.target_len for r in rows_items(backend, requests_)]
    # Each forward computes, per row, at most its widest row's targets (a conditional row's last frames, an
    # unconditional row whole): never a prefix column.
    computed = sum(n * k for n, k in seen)
    assert computed <= 2 * len(targets) * max(targets)
    if layout == "joined":
        assert computed == 2 * sum(targets)
    for i, t in enumerate(targets):
        assert float((cached_c[i, :, :t] - full_c[i, :, :t]).abs().max()) <= 1e-5
        assert float((cached_u[i, :, :t] - full_u[i, :, :t]).abs().max()) <= 1e-5


def rows_items(backend, requests):
    return [backend._item(backend._resolve(r), 0) for r in requests]


def test_refresh_every_k_steps_is_approximate_and_the_same_in_every_layout_and_bucket(engine, requests_):
    exact = _with(engine, cfg="joined").tokens(requests_)
    cached = {layout: _with(engine, cfg=layout, prefix_refresh=2).tokens(requests_) for layout in LAYOUTS}
    for layout in LAYOUTS[1:]:
        for a, b in zip(cached["padded"], cached[layout], strict=True):
            assert np.array_equal(a, b), layout
    # Stale prefix keys and values change some tokens: the option is not a no-op.
    assert not all(np.array_equal(a, b) for a, b in zip(exact, cached["joined"], strict=True))
    backend = _with(engine, cfg="packed", prefix_refresh=2)
    tagged = [Request(**{**r.__dict__, "id": str(i)}) for i, r in enumerate(requests_)]
    alone = {r.id: r.audio for r in stream(backend, tagged, Budget(lines=1))}
    together = {r.id: r.audio for r in stream(backend, tagged, Budget(lines=0, tokens=0))}
    assert all(np.array_equal(alone[key], together[key]) for key in alone)


def test_prefix_refresh_enters_keys_and_labels_only_when_on():
    fast = load_preset("fast").engine
    assert "prefix_refresh" not in generation_settings(fast, "cpu", "joined") and approximations(fast) == []
    cached = fast.replace(prefix_refresh=4)
    assert generation_settings(cached, "cpu", "joined")["prefix_refresh"] == 4
    assert "approximate" in approximations(cached)[0]
    with pytest.raises(OmnidubError, match="prefix_refresh must be at least 1"):
        load_preset("fast").with_overrides(prefix_refresh=0)


def test_what_cannot_run_the_prefix_cache_says_so(engine):
    from omnidub.backends.onnx.backend import OnnxBackend

    with pytest.raises(OmnidubError, match="torch backend only"):
        OnnxBackend("no-export-here", options=EngineOptions().replace(prefix_refresh=4))
    with pytest.raises(OmnidubError, match="fused language model"):
        _with(engine, dtype="int8", prefix_refresh=4)
    with pytest.raises(OmnidubError, match="eagerly"):
        _with(engine, compile=True, prefix_refresh=4)
    assert isinstance(_with(engine, prefix_refresh=4)._eager, FusedLM)


def test_backend_auto_takes_torch_for_the_prefix_cache(tiny_model_dir):
    from omnidub.backends.registry import choose_backend
    from omnidub.engine import Engine
    from omnidub.models import resolve_model

    source = resolve_model("synthetic:tiny")
    assert choose_backend("auto", source, "cpu", "float32", needs_torch="why").reason == "why"
    preset = load_preset("fast").with_overrides(prefix_refresh=4, dtype="float32")
    choice = Engine("synthetic:tiny", "cpu", preset).backend_choice
    assert choice.name == "torch" and "prefix_refresh 4" in choice.reason


def test_eval_prices_the_prefix_cache_as_a_b_configuration(tiny_model_dir):
    fast = parse_configuration("fast", model="synthetic:tiny")
    cached = parse_configuration("fast,prefix_refresh=4", flag="--b", model="synthetic:tiny")
    assert cached.preset.engine.decode.prefix_refresh == 4 and cached.label == "fast,prefix_refresh=4"
    assert cached.folder != fast.folder
    assert parse_configuration("fast,prefix_refresh=1", model="synthetic:tiny").folder == fast.folder


def test_a_render_with_the_prefix_cache_says_approximate_in_its_header_and_manifest(tmp_path, tiny_model_dir):
    voices = tmp_path / "voices.toml"
    voices.write_text('[BOB]\ninstruct = "female, low pitch"\n')
    script = tmp_path / "one.txt"
    script.write_text("BOB: I am fine, thank you.\n")
    preset = tmp_path / "preset.toml"
    preset.write_text("steps = 4\nreference_seconds = 0\n")
    out = tmp_path / "out"
    runner = CliRunner()
    args = ["render", script, "--voices", voices, "--model", "synthetic:tiny", "--preset", preset, "--cfg", "joined"]
    result = runner.invoke(app, [*map(str, args), "--out", str(out), "--prefix-refresh", "2"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "prefix cache every 2 steps (approximate)" in result.stderr
    settings = json.loads((out / "manifest.json").read_text())["settings"]
    assert settings["prefix_refresh"] == 2 and "approximate" in settings["approximate"][0]
    exact = tmp_path / "exact"
    result = runner.invoke(app, [*map(str, args), "--out", str(exact)], catch_exceptions=False)
    assert result.exit_code == 0 and "approximate" not in result.stderr
    assert "approximate" not in json.loads((exact / "manifest.json").read_text())["settings"]
