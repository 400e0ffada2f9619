"""Lossless speed levers of the torch backend: each gives upstream's float32 logits and tokens.

Upstream here is OmniVoice's own forward on the padded batch its ``_generate_iterative`` builds, and its own
loop for tokens. Tiny synthetic model, float32, CPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from omnidub.backends import Request
from omnidub.backends.torch import TorchBackend, Tuning
from omnidub.backends.torch.layout import Layout
from omnidub.config import DecodeOptions, EngineOptions

SR = 24000
STEPS = 4
LEVERS = {
    "none": Tuning(fused=False, skip_mask=False),
    "no-mask": Tuning(fused=False, skip_mask=True),
    "fused": Tuning(fused=True, skip_mask=False),
    "both": Tuning(),
}


def _voice(seconds: float, pitch: float) -> np.ndarray:
    t = np.arange(int(SR * seconds)) / SR
    return (0.3 * (0.55 + 0.45 * np.sin(2 * np.pi * 3.0 * t)) * np.sin(2 * np.pi * pitch * t)).astype(np.float32)


@pytest.fixture(scope="module")
def engine(tiny_model_dir) -> TorchBackend:
    options = EngineOptions(DecodeOptions(steps=STEPS, position_temperature=0.0), dtype="float32", cfg="trimmed")
    return TorchBackend("synthetic:tiny", device="cpu", options=options, tuning=LEVERS["none"])


@pytest.fixture(scope="module")
def requests_(engine) -> list[Request]:
    short = engine.encode_prompt(_voice(2.0, 180.0), SR, "Hello there, this is me.")
    long = engine.encode_prompt(_voice(3.2, 120.0), SR, "A longer reference, spoken slowly and clearly.")
    return [
        Request("Good morning.", short, "en", None, None, seed=11),
        Request("This line is a fair bit longer than the first one, with a comma.", long, "en", None, None, seed=12),
        Request("And a third, of middling length.", short, "en", None, 1.3, seed=13),
    ]


def _upstream_logits(engine: TorchBackend, requests: list[Request]) -> list[torch.Tensor]:
    """First-step target logits from OmniVoice's own forward over upstream's padded CFG batch."""
    lines = [engine._resolve(r) for r in requests]
    items = [engine._item(line, 0) for line in lines]
    [plan] = Layout(items, "padded", engine.model.config.audio_mask_id, "cpu", skip_mask=False).plans
    with torch.inference_mode():
        logits = engine.model(input_ids=plan.input_ids, audio_mask=plan.audio_mask,
                              attention_mask=plan.attention_mask).logits.float()
    out, b = [], len(items)
    for i, item in enumerate(items):
        c_len, t = item.input_ids.shape[1], item.target_len
        out.append(torch.stack((logits[i, :, c_len - t: c_len], logits[b + i, :, :t])))
    return out


def _upstream_tokens(engine: TorchBackend, requests: list[Request]) -> list[np.ndarray]:
    from omnivoice.models.omnivoice import OmniVoiceGenerationConfig

    from omnidub.backends.torch.upstream import voice_clone_prompt

    config = OmniVoiceGenerationConfig(num_step=STEPS, position_temperature=0.0, class_temperature=0.0)
    task = engine.model._preprocess_all(
        text=[r.text for r in requests], language=[r.language for r in requests],
        voice_clone_prompt=[voice_clone_prompt(r.prompt) for r in requests], duration=[r.duration for r in requests])
    with torch.inference_mode():
        return [t.cpu().numpy() for t in engine.model._generate_iterative(task, config)]


@pytest.mark.parametrize("lever", ["no-mask", "fused", "both"])
@pytest.mark.parametrize("layout", ["trimmed", "packed", "padded"])
def test_each_lever_gives_upstream_logits(engine, requests_, lever, layout):
    fast = engine.with_options(engine.options.replace(cfg=layout), tuning=LEVERS[lever])
    for ours, theirs in zip(fast.first_step_logits(requests_), _upstream_logits(engine, requests_)):
        assert ours.shape == theirs.shape
        assert float((ours - theirs).abs().max()) <= 1e-5, f"{lever}/{layout}"
        assert torch.equal(ours.argmax(-1), theirs.argmax(-1))


@pytest.mark.parametrize("lever", ["no-mask", "fused", "both"])
def test_each_lever_gives_upstream_tokens(engine, requests_, lever):
    fast = engine.with_options(engine.options, tuning=LEVERS[lever])
    for ours, theirs in zip(fast.tokens(requests_), _upstream_tokens(engine, requests_)):
        assert np.array_equal(ours, theirs)


def test_trimmed_forwards_run_without_a_mask_and_packed_ones_keep_it(engine, requests_):
    items = [engine._item(engine._resolve(r), 0) for r in requests_]
    pad = engine.model.config.audio_mask_id
    trimmed = Layout(items, "trimmed", pad, "cpu").plans
    assert len(trimmed) > 1 and all(plan.attention_mask is None for plan in trimmed)
    # Packed rows hold two segments, so attention must stay block-diagonal; padded rows have padding.
    assert all(plan.attention_mask is not None for plan in Layout(items, "packed", pad, "cpu").plans)
    assert all(plan.attention_mask is not None for plan in Layout(items, "padded", pad, "cpu").plans)
    assert all(plan.attention_mask is not None for plan in Layout(items, "trimmed", pad, "cpu", skip_mask=False).plans)


def test_fusing_leaves_upstreams_own_forward_bit_identical(engine, requests_):
    from omnidub.backends.torch.fused import FusedLM, fused_llm

    engine = TorchBackend(engine.source, device="cpu", options=engine.options, tuning=LEVERS["none"])  # unfused
    before = _upstream_logits(engine, requests_)
    fused = fused_llm(engine.model.llm)
    assert isinstance(fused, FusedLM) and fused_llm(engine.model.llm) is fused  # made once per model
    attention = engine.model.llm.layers[0].self_attn
    # Upstream's projections read the fused weight's memory: no copy is kept.
    assert attention.q_proj.weight.data_ptr() == fused.layers[0].qkv_weight.data_ptr()
    for a, b in zip(before, _upstream_logits(engine, requests_)):
        assert torch.equal(a, b)


def test_cfg_auto_follows_what_the_bench_measured_on_this_processor(tmp_path, monkeypatch):
    import json

    from omnidub import measured
    from omnidub.config import EngineOptions, generation_settings, resolve_layout

    monkeypatch.setenv("OMNIDUB_CACHE", str(tmp_path))
    assert resolve_layout("auto", "cpu", "float32") == "trimmed"  # nothing measured: trimmed off CUDA
    assert measured.record_layout("cpu", "float32", {"trimmed": 10.0, "packed": 9.0}, "bench run") == "packed"
    assert resolve_layout("auto", "cpu", "float32") == "packed"
    assert resolve_layout("auto", "cpu", "bfloat16") == "trimmed"  # measured per dtype
    assert resolve_layout("trimmed", "cpu", "float32") == "trimmed"  # an explicit layout wins
    # The choice reaches the line keys' settings, and the evidence is written down beside it.
    assert generation_settings(EngineOptions(dtype="float32"), "cpu")["cfg"] == "packed"
    [entry] = json.loads((tmp_path / "measured.json").read_text())["layout"].values()
    assert entry["evidence"] == "bench run" and entry["seconds"] == {"trimmed": 10.0, "packed": 9.0}


def test_threads_follow_the_physical_cores_and_sleep_on_a_busy_machine(monkeypatch):
    import os

    import psutil

    from omnidub import cli

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (50.0, 50.0, 50.0))
    cli.set_threads()
    assert os.environ["OMP_NUM_THREADS"] == str(psutil.cpu_count(logical=False))
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    # A quiet machine keeps OpenMP's default, and what the user set always wins.
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv("OMP_WAIT_POLICY")
    monkeypatch.setattr(os, "getloadavg", lambda: (0.1, 0.1, 0.1))
    cli.set_threads()
    assert os.environ["OMP_NUM_THREADS"] == "1" and "OMP_WAIT_POLICY" not in os.environ
