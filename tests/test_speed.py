"""Lossless speed levers of the torch backend: each gives upstream's float32 logits and tokens.

Upstream here is OmniVoice's own forward on the padded batch its ``_generate_iterative`` builds, and its own
loop for tokens. Tiny synthetic model, float32, CPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from omnidub.backends import Request
from omnidub.backends.torch import TorchBackend, Tuning, gemm
from omnidub.backends.torch.layout import Layout
from omnidub.config import DecodeOptions, EngineOptions

SR = 24000
STEPS = 4
LEVERS = {
    "none": Tuning(fused=False, skip_mask=False, gemm="aten"),
    "no-mask": Tuning(fused=False, skip_mask=True, gemm="aten"),
    "fused": Tuning(fused=True, skip_mask=False, gemm="aten"),
    "onednn": Tuning(fused=True, skip_mask=False, gemm="onednn"),
    "all": Tuning(gemm="onednn"),
}


def _voice(seconds: float, pitch: float) -> np.ndarray:
    t = np.arange(int(SR * seconds)) / SR
    return (0.3 * (0.55 + 0.45 * np.sin(2 * np.pi * 3.0 * t)) * np.sin(2 * np.pi * pitch * t)).astype(np.float32)


@pytest.fixture(scope="module")
def engine(tiny_model_dir) -> TorchBackend:
    options = EngineOptions(DecodeOptions(steps=STEPS, position_temperature=0.0), dtype="float32", cfg="trimmed")
    return TorchBackend("synthetic:tiny", device="cpu", options=options, tuning=LEVERS["none"])


def three_requests(engine) -> list[Request]:
    """Two references and three lines of different lengths: every layout pads, groups or joins rows of five
    lengths."""
    short = engine.encode_prompt(_voice(2.0, 180.0), SR, "Hello there, this is me.")
    long = engine.encode_prompt(_voice(3.2, 120.0), SR, "A longer reference, spoken slowly and clearly.")
    return [
        Request("Good morning.", short, "en", None, None, seed=11),
        Request("This line is a fair bit longer than the first one, with a comma.", long, "en", None, None, seed=12),
        Request("And a third, of middling length.", short, "en", None, 1.3, seed=13),
    ]


@pytest.fixture(scope="module")
def requests_(engine) -> list[Request]:
    return three_requests(engine)


def _upstream_logits(engine: TorchBackend, requests: list[Request]) -> list[torch.Tensor]:
    """First-step target logits from OmniVoice's own forward over upstream's padded CFG batch."""
    lines = [engine._resolve(r) for r in requests]
    items = [engine._item(line, 0) for line in lines]
    [plan] = Layout(items, "padded", engine.model.config.audio_mask_id, "cpu", skip_mask=False).plans
    with torch.inference_mode():
        logits = engine.model(
            input_ids=plan.input_ids, audio_mask=plan.audio_mask, attention_mask=plan.attention_mask
        ).logits.float()
    out, b = [], len(items)
    for i, item in enumerate(items):
        c_len, t = item.input_ids.shape[1], item.target_len
        out.append(torch.stack((logits[i, :, c_len - t : c_len], logits[b + i, :, :t])))
    return out


def _upstream_tokens(engine: TorchBackend, requests: list[Request]) -> list[np.ndarray]:
    from omnivoice.models.omnivoice import OmniVoiceGenerationConfig

    from omnidub.backends.torch.upstream import voice_clone_prompt

    config = OmniVoiceGenerationConfig(num_step=STEPS, position_temperature=0.0, class_temperature=0.0)
    task = engine.model._preprocess_all(
        text=[r.text for r in requests],
        language=[r.language for r in requests],
        voice_clone_prompt=[voice_clone_prompt(r.prompt) for r in requests],
        duration=[r.duration for r in requests],
    )
    with torch.inference_mode():
        return [t.cpu().numpy() for t in engine.model._generate_iterative(task, config)]


@pytest.mark.parametrize("lever", ["no-mask", "fused", "onednn", "all"])
@pytest.mark.parametrize("layout", ["trimmed", "packed", "padded", "joined"])
def test_each_lever_gives_upstream_logits(engine, requests_, lever, layout):
    fast = engine.with_options(engine.options.replace(cfg=layout), tuning=LEVERS[lever])
    for ours, theirs in zip(fast.first_step_logits(requests_), _upstream_logits(engine, requests_), strict=True):
        assert ours.shape == theirs.shape
        assert float((ours - theirs).abs().max()) <= 1e-5, f"{lever}/{layout}"
        assert torch.equal(ours.argmax(-1), theirs.argmax(-1))


@pytest.mark.parametrize("lever", ["no-mask", "fused", "onednn", "all"])
def test_each_lever_gives_upstream_tokens(engine, requests_, lever):
    fast = engine.with_options(engine.options, tuning=LEVERS[lever])
    for ours, theirs in zip(fast.tokens(requests_), _upstream_tokens(engine, requests_), strict=True):
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


def test_a_joined_row_attends_segment_by_segment_in_the_fused_model(engine, requests_, monkeypatch):
    # Every row of the batch in one row: the fused model gets the segments (no mask at all), upstream's own
    # model gets the block-diagonal mask, and both give upstream's logits (test_each_lever_gives_upstream_logits).
    from omnidub.backends.torch import upstream
    from omnidub.backends.torch.fused import fused_llm

    items = [engine._item(engine._resolve(r), 0) for r in requests_]
    [plan] = Layout(items, "joined", engine.model.config.audio_mask_id, "cpu").plans
    lengths = [n for _, n in plan.segments]
    assert plan.input_ids.shape[0] == 1 and len(lengths) == 2 * len(items) and sum(lengths) == plan.input_ids.shape[2]
    assert lengths[1::2] == [item.target_len for item in items]
    seen = []
    forward = upstream.forward_llm
    monkeypatch.setattr(upstream, "forward_llm", lambda llm, e, mask, p: seen.append(mask) or forward(llm, e, mask, p))
    rows = Layout(items, "joined", engine.model.config.audio_mask_id, "cpu")
    with torch.inference_mode():
        fused = rows.logits(engine.model, fused_llm(engine.model.llm))
        plain = rows.logits(engine.model, engine.model.llm)
    assert seen[0] is rows.plans[0].segments and seen[1] is rows.plans[0].attention_mask
    for a, b in zip(fused, plain, strict=True):
        assert float((a - b).abs().max()) <= 1e-5


def test_fusing_leaves_upstreams_own_forward_bit_identical(engine, requests_):
    from omnidub.backends.torch.fused import FusedLM, fused_llm

    engine = TorchBackend(engine.source, device="cpu", options=engine.options, tuning=LEVERS["none"])  # unfused
    before = _upstream_logits(engine, requests_)
    fused = fused_llm(engine.model.llm)
    assert isinstance(fused, FusedLM) and fused_llm(engine.model.llm) is fused  # made once per model
    attention = engine.model.llm.layers[0].self_attn
    # Upstream's projections read the fused weight's memory: no copy is kept.
    assert attention.q_proj.weight.data_ptr() == fused.layers[0].qkv.weight.data_ptr()
    for a, b in zip(before, _upstream_logits(engine, requests_), strict=True):
        assert torch.equal(a, b)


@pytest.mark.skipif(not gemm.onednn_bf16(), reason="oneDNN has no bfloat16 kernels for this CPU (AVX2 only)")
def test_onednn_linears_in_bf16_stay_within_bf16_rounding_of_torchs(engine, requests_):
    # bf16 carries 8 bits of mantissa: logits of order 1-10 may move by a few 1e-2 between GEMM libraries.
    options = engine.options.replace(dtype="bfloat16")
    ours = engine.with_options(options, tuning=Tuning(gemm="onednn"))
    theirs = engine.with_options(options, tuning=Tuning(gemm="aten"))
    for a, b in zip(ours.first_step_logits(requests_), theirs.first_step_logits(requests_), strict=True):
        scale = float(b.abs().max())
        assert float((a - b).abs().max()) <= 2**-7 * max(1.0, scale) * 4


def test_onednn_asked_for_in_bf16_where_this_cpu_has_no_such_kernels_runs_torchs_gemm(engine, requests_, monkeypatch):
    # An AVX2-only CPU: oneDNN cannot even pack bf16 weights there, so asking for it must not fail the render.
    monkeypatch.setattr(gemm, "onednn_bf16", lambda: False)
    options = engine.options.replace(dtype="bfloat16")
    ours = engine.with_options(options, tuning=Tuning(gemm="onednn"))
    theirs = engine.with_options(options, tuning=Tuning(gemm="aten"))
    assert ours.gemm == "aten" and not any("Onednn" in type(m).__name__ for m in ours._llm.modules())
    for a, b in zip(ours.first_step_logits(requests_), theirs.first_step_logits(requests_), strict=True):
        assert torch.equal(a, b)
    assert gemm.onednn_usable("cpu", torch.float32)  # float32 runs in oneDNN on every x86 CPU


def _on_cpu(monkeypatch, name: str, flags: set[str]):
    from omnidub import hardware

    monkeypatch.setattr(hardware, "cpu_name", lambda: name)
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset(flags))
    import omnidub.measured as measured

    monkeypatch.setattr(measured, "cpu_name", lambda: name)


def test_cfg_auto_follows_what_was_measured_on_this_processor_only(tmp_path, monkeypatch):
    import json

    from omnidub import measured
    from omnidub.config import EngineOptions, generation_settings, layout_status, resolve_layout
    from omnidub.hardware import ISA_LIMITS

    monkeypatch.setenv("OMNIDUB_CACHE", str(tmp_path))
    for name in ISA_LIMITS:
        monkeypatch.delenv(name, raising=False)
    _on_cpu(monkeypatch, "Xeon A", {"avx512f", "amx_bf16"})
    status = layout_status("auto", "cpu", "float32", shape="h64x2")
    # Nothing measured yet: joined for torch on a CPU (never slower than trimmed where measured), trimmed for ONNX
    # Runtime, packed on CUDA (the fastest at every batch size on the GPU measured).
    assert (status.layout, status.source, status.measured) == ("joined", "default", False)
    assert resolve_layout("auto", "cpu", "float32", backend="onnxruntime") == "trimmed"
    assert resolve_layout("auto", "cuda", "float16") == "packed"
    assert (
        measured.record_layout("cpu", "float32", {"trimmed": 10.0, "packed": 9.0}, "probe", shape="h64x2") == "packed"
    )
    assert resolve_layout("auto", "cpu", "float32", shape="h64x2") == "packed"
    assert resolve_layout("auto", "cpu", "bfloat16", shape="h64x2") == "joined"  # measured per dtype
    assert resolve_layout("auto", "cpu", "float32", shape="h1024x28") == "joined"  # and per model shape
    assert resolve_layout("auto", "cpu", "float32", backend="onnxruntime", shape="h64x2") == "trimmed"  # and backend
    assert resolve_layout("trimmed", "cpu", "float32", shape="h64x2") == "trimmed"  # an explicit layout wins
    assert resolve_layout("auto", "cpu", "float32", "trimmed", shape="h64x2") == "trimmed"  # so does a project's pin
    assert layout_status("auto", "cpu", "float32", "trimmed").source == "pinned"
    assert generation_settings(EngineOptions(dtype="float32"), "cpu", "packed")["cfg"] == "packed"
    [entry] = json.loads((tmp_path / "measured.json").read_text())["layout"].values()
    assert entry["evidence"] == "probe" and entry["seconds"] == {"trimmed": 10.0, "packed": 9.0}
    # A probe that kept the default (the fastest beat it by less than the noise margin) is followed as it decided.
    seconds = {"trimmed": 10.0, "packed": 9.9, "joined": 10.0}
    assert measured.record_layout("cpu", "bfloat16", seconds, "probe", shape="h64x2", choice="joined") == "joined"
    assert resolve_layout("auto", "cpu", "bfloat16", shape="h64x2") == "joined"
    # The rule the probe and bench --record decide by: the default stays unless another is 3 % faster or more.
    from omnidub.backends.probe import kept

    assert kept({"trimmed": 9.8, "joined": 10.0}, "joined") == "joined"
    assert kept({"trimmed": 9.0, "joined": 10.0}, "joined") == "trimmed"
    assert kept({"trimmed": 9.0, "packed": 9.5}, "joined") == "trimmed"  # the default not measured: the fastest
    # Another CPU model, or the same name with other matrix units (a VM naming every Xeon alike), ignores it.
    _on_cpu(monkeypatch, "EPYC B", {"avx512f", "avx512_bf16"})
    assert layout_status("auto", "cpu", "float32", shape="h64x2").source == "default"
    _on_cpu(monkeypatch, "Xeon A", {"avx512f", "avx2"})
    assert layout_status("auto", "cpu", "float32", shape="h64x2").source == "default"
    _on_cpu(monkeypatch, "Xeon A", {"avx512f", "amx_bf16"})
    assert layout_status("auto", "cpu", "float32", shape="h64x2").layout == "packed"
    # The same CPU with its libraries held to fewer instructions runs other kernels: not measured there either.
    monkeypatch.setenv("MKL_ENABLE_INSTRUCTIONS", "AVX2")
    assert layout_status("auto", "cpu", "float32", shape="h64x2").source == "default"


def test_first_use_probe_measures_records_and_is_followed(engine, tmp_path, monkeypatch):
    import json

    from omnidub.config import layout_status

    monkeypatch.setenv("OMNIDUB_CACHE", str(tmp_path))
    fresh = engine.with_options(engine.options.replace(cfg="auto"), tuning=Tuning())
    assert not fresh.layout_choice.measured and fresh.gemm == "aten"
    results = {r.what: r for r in fresh.probe()}
    assert set(results) == {"layout", "gemm"}
    assert fresh.layout == results["layout"].choice in ("trimmed", "packed", "joined")
    assert fresh.gemm == results["gemm"].choice in ("aten", "onednn")
    data = json.loads((tmp_path / "measured.json").read_text())
    [layout] = data["layout"].values()
    assert set(layout["seconds"]) == {"trimmed", "packed", "joined"} and "first-use probe" in layout["evidence"]
    assert "h64x2" in next(iter(data["layout"]))  # valid for this model's shape only
    # Measured once: the next backend follows it and probes nothing; an explicit layout is never probed.
    again = engine.with_options(engine.options.replace(cfg="auto"), tuning=Tuning())
    assert again.layout == fresh.layout and again.gemm == fresh.gemm and again.probe() == []
    assert engine.with_options(engine.options.replace(cfg="padded"), tuning=Tuning(gemm="aten")).probe() == []
    assert layout_status("auto", "cpu", "float32", shape=fresh.shape).source == "measured"


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


def test_the_benchs_peer_is_upstreams_own_model_and_speaks_as_upstream_does(engine, requests_):
    # The headline peer row must be what a user assembles from the two packages: its own model (not omnidub's,
    # whose projections fusing turns into views of one weight), trimmed CFG from omnivoice-fastpath, upstream's
    # prompt (the same codes omnidub encodes from the same reference) and upstream's generate.
    from omnidub.backends.torch.fused import fused_llm
    from omnidub.bench.peer import Peer

    fused_llm(engine.model.llm)  # omnidub's resident model is fused; the peer's must not be
    peer = Peer(engine.source.path, "cpu", "float32")
    q_proj = peer.model.llm.layers[0].self_attn.q_proj.weight
    assert peer.model is not engine.model and q_proj._base is None
    assert getattr(peer.model, "_trimmed_cfg_applied", False)
    reference = _voice(2.0, 180.0)
    peer.clone(reference, SR, "Hello there, this is me.")
    assert np.array_equal(peer.prompt.ref_audio_tokens.numpy(), requests_[0].prompt.codes)
    audio = peer.speak("Good morning.", 1.2, steps=STEPS, seed=3)
    assert audio.ndim == 1 and len(audio) > 0.5 * SR and np.isfinite(audio).all()
