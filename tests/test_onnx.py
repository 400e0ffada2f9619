"""ONNX export and the ONNX Runtime backend on the tiny synthetic model: same tokens as torch, no torch at run time."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
torch = pytest.importorskip("torch")

from omnidub.backends.onnx import host, layout  # noqa: E402
from omnidub.backends.onnx.rng import TorchRandom  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "omnidub" / "data"


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    from omnidub.backends.torch import TorchBackend
    from omnidub.config import EngineOptions

    return TorchBackend("synthetic:tiny", "cpu", EngineOptions(dtype="float32"))


@pytest.fixture(scope="module")
def prompt(engine):
    import soundfile as sf

    wave, rate = sf.read(DATA / "alice-3s.wav", dtype="float32")
    return engine.encode_prompt(wave, rate, (DATA / "alice-3s.txt").read_text().strip(), "en")


@pytest.mark.parametrize("seed", [0, 7, 2**40 + 3, 0x7FFF_FFFF_FFFF_FFFF])
def test_noise_stream_is_torch_rand_bit_for_bit(seed):
    generator = torch.Generator().manual_seed(seed)
    ours = TorchRandom(seed)
    for shape in [(8, 13), (1,), (8, 40, 1025), (3, 5)]:
        assert np.array_equal(torch.rand(*shape, generator=generator).numpy(), ours.rand(*shape))


def test_schedule_matches_upstreams_time_steps_at_every_shift_and_step_count_used():
    # Upstream's own _get_time_steps (torch float32) with its per-step count, for the step counts of the presets
    # and tests, the presets' shift and two others, and every target length up to 30 s (8 codebooks per frame).
    from omnivoice.models.omnivoice import _get_time_steps

    from omnidub.backends.schedule import schedule

    for steps in (2, 4, 8, 12, 32):
        for t_shift in (0.1, 0.5, 1.0):
            t = _get_time_steps(t_start=0.0, t_end=1.0, num_step=steps, t_shift=t_shift).tolist()
            for total in range(8, 8 * 750 + 1, 8):
                expected, remaining = [], total
                for step in range(steps):
                    n = remaining if step == steps - 1 else min(math.ceil(total * (t[step + 1] - t[step])), remaining)
                    expected.append(int(n))
                    remaining -= int(n)
                assert schedule(total, steps, t_shift) == expected, (steps, t_shift, total)


def _items(engine, prompt):
    from omnidub.backends.base import Request

    requests = [
        Request("So, are we still driving to the coast next week?", prompt, "en", duration=1.6, seed=5),
        Request("Yes.", prompt, "en", duration=0.3, seed=7),
        Request("Great. What time should we leave?", None, "en", duration=1.2, seed=9),
    ]
    torch_items = [engine._item(engine._resolve(r), 0) for r in requests]
    ours = [layout.Item(t.input_ids.numpy(), t.audio_mask.numpy(), t.target_len) for t in torch_items]
    return torch_items, ours


@pytest.mark.parametrize("kind", layout.LAYOUTS)
def test_layouts_build_the_torch_rows(engine, prompt, kind):
    from omnidub.backends.torch.layout import Layout

    torch_items, items = _items(engine, prompt)
    # The ONNX graph always takes a mask, so compare with torch's rows built with their masks kept.
    theirs, ours = Layout(torch_items, kind, 1024, "cpu", skip_mask=False), layout.Layout(items, kind, 1024)
    assert len(theirs.plans) == len(ours.plans)
    for a, b in zip(theirs.plans, ours.plans, strict=True):
        for name in ("input_ids", "audio_mask", "attention_mask", "position_ids"):
            assert np.array_equal(getattr(a, name).numpy(), getattr(b, name))
        width = a.input_ids.shape[2]
        assert np.array_equal((a.dst_row * width + a.dst_col).numpy(), b.target_index)


def test_prompt_layout_matches_upstream(engine):
    from omnivoice.models.omnivoice import _resolve_instruct, _resolve_language

    from omnidub.backends.onnx.prompt import PromptBuilder, resolve_instruct, resolve_language

    builder = PromptBuilder(engine.source.path / "tokenizer.json", 8, 1024)
    ref = torch.randint(0, 1024, (8, 30), generator=torch.Generator().manual_seed(0))
    cases = [
        ("Hello world, this is a test.", 20, "Good morning.", ref, "en", None),
        ("Ha [laughter] that's  funny\n right?", 7, None, None, None, "female, low pitch"),
        ("你好 世界 （测试）", 11, "Some ref", ref, "zh", "男，河南话"),
        ("[sigh]", 3, None, None, None, None),
    ]
    for text, frames, ref_text, ref_codes, language, instruct in cases:
        expected = engine.model._prepare_inference_inputs(text, frames, ref_text, ref_codes, language, instruct, True)
        item = builder.item(
            text, frames, ref_text, None if ref_codes is None else ref_codes.numpy(), language, instruct
        )
        assert np.array_equal(expected["input_ids"][0].numpy(), item.input_ids)
        assert np.array_equal(expected["audio_mask"][0].numpy(), item.audio_mask)
    for instruct, zh in [("female, low pitch, british accent", False), ("Male，Whisper", True), ("男, 青年", False)]:
        assert resolve_instruct(instruct, "你好" if zh else "hi") == _resolve_instruct(instruct, use_zh=zh)
    for language in ("en", "English", "none", None, "klingon", "Chinese"):
        assert resolve_language(language) == _resolve_language(language)


@pytest.mark.parametrize("temperature, kind", [(0.0, "trimmed"), (5.0, "packed")])
def test_ort_host_loop_gives_the_torch_tokens(engine, prompt, export_dir, temperature, kind):
    from omnidub.backends.onnx.runtime import Runtime
    from omnidub.backends.torch.decode import decode
    from omnidub.config import DecodeOptions

    torch_items, items = _items(engine, prompt)
    sampling = DecodeOptions(steps=8, position_temperature=temperature)
    expected = decode(engine.model, torch_items, [5, 7, 9], sampling, kind)
    runtime = Runtime(export_dir, "cpu", threads=1, quantized=False)
    got = host.decode(runtime.forward_fn(), items, [5, 7, 9], sampling, kind, mask_id=1024)
    for a, b in zip(expected, got, strict=True):
        assert np.array_equal(a.numpy(), b)


def test_parity_check_passes_every_bound(export_dir):
    import json

    from omnidub.backends.onnx.parity import BOUNDS, check

    report = check(export_dir, e2e_seconds=(0.3, 2.0), lines=("Great. What time should we leave?",), steps=4, threads=1)
    assert report["pass"], report["failures"]
    assert report["transformer"]["argmax_agreement"] == 1.0
    assert report["transformer"]["max_abs_logit_diff"] <= BOUNDS["transformer_max_abs_logit_diff"]
    assert report["encoder"]["code_match"] == 1.0
    assert report["decoder"]["log_spectral_l1"] <= BOUNDS["decoder_log_spectral_l1"]
    for line in report["end_to_end"]["lines"]:
        assert line["token_identity"] == 1.0
        assert line["log_spectral_l1"] <= BOUNDS["end_to_end_log_spectral_l1"]
    # The int8 graph is measured on the same inputs, as a cost: it is not exact.
    assert 0.5 < report["int8_cost"]["argmax_agreement"] < 1.0
    saved = json.loads((export_dir / "parity.json").read_text())
    assert saved["pass"] and saved["end_to_end"]["lines"] == report["end_to_end"]["lines"]
    manifest = json.loads((export_dir / "export.json").read_text())
    assert manifest["parity"]["pass"] and manifest["model"]["id"] == "synthetic:tiny"
    assert set(manifest["files"]) == {"transformer.onnx", "transformer.int8.onnx", "encoder.onnx", "decoder.onnx"}


def test_parity_metric_sees_different_audio_not_rounding_or_phase():
    from omnidub.backends.onnx.parity import BOUNDS, log_spectral_l1

    rng = np.random.default_rng(0)
    noise = rng.standard_normal(24000).astype(np.float32) * 0.1
    assert (
        log_spectral_l1(noise, noise + rng.standard_normal(24000).astype(np.float32) * 1e-6)
        < BOUNDS["decoder_log_spectral_l1"]
    )
    assert log_spectral_l1(noise, rng.standard_normal(24000).astype(np.float32) * 0.1) > 0.5
    t = np.arange(24000) / 24000
    tone = np.sin(2 * np.pi * 440 * t)
    # A phase shift changes the waveform completely but the spectrum only at the clip's edges.
    assert (
        log_spectral_l1(tone, np.sin(2 * np.pi * 440 * t + 1.0))
        < 0.1
        < log_spectral_l1(tone, np.sin(2 * np.pi * 660 * t))
    )


def test_int8_export_loads_and_renders(export_dir):
    from omnidub.backends.base import Request
    from omnidub.backends.onnx import OnnxBackend

    backend = OnnxBackend(export_dir, "cpu", threads=1)
    assert backend.identity["dtype"] == "int8" and backend.identity["backend"] == "onnxruntime"
    (result,) = backend.synthesize([Request("Great. What time should we leave?", None, "en", duration=1.0, seed=1)])
    assert result.audio.shape == (24000,) and np.isfinite(result.audio).all() and np.abs(result.audio).max() > 0


def test_ort_render_runs_without_torch(export_dir, tmp_path):
    import json
    import os
    import subprocess
    import sys

    srt = tmp_path / "two.srt"
    srt.write_text(
        "1\n00:00:00,300 --> 00:00:01,500\nALICE: Great. What time should we leave?\n\n"
        "2\n00:00:02,000 --> 00:00:03,000\nALICE: Around nine.\n",
        encoding="utf-8",
    )
    examples = Path(__file__).resolve().parent.parent / "examples"
    out = tmp_path / "out"
    script = (
        "import sys\n"
        "from omnidub.api import Session\n"
        f"summary = Session(model={str(export_dir)!r}, device='cpu').render({str(srt)!r}, "
        f"voices={str(examples / 'voices.toml')!r}, out_dir={str(out)!r})\n"
        "assert summary.rendered == 2, summary\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'omnivoice'))\n"
        "assert not heavy, heavy[:5]\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["model"]["backend"] == "onnxruntime"
    assert [line["status"] for line in manifest["lines"]] == ["rendered", "rendered"]


def test_export_command_errors_are_one_line(tmp_path):
    from typer.testing import CliRunner

    from omnidub.cli import app

    runner = CliRunner()
    result = runner.invoke(app, ["export", str(tmp_path), "--check-only"])
    assert result.exit_code == 2 and "no export.json" in result.output
    result = runner.invoke(app, ["export", str(tmp_path), "--check-only", "--no-check"])
    assert result.exit_code == 2


@pytest.mark.slow  # over 10 s of CPU: pytest -m slow runs it, as CI does
def test_bench_on_an_export_adds_the_onnx_rows(export_dir, tmp_path):
    import json

    from typer.testing import CliRunner

    from omnidub.cli import app

    target = tmp_path / "bench.json"
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "--model",
            str(export_dir),
            "--rows",
            "fused,onnx,onnx-int8",
            "--lines",
            "1",
            "--repeat",
            "1",
            "--json",
            str(target),
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(target.read_text())
    assert data["model"] == "synthetic:tiny"  # the torch rows run on the model the export came from
    rows = {row["name"]: row for row in data["rows"]}
    assert list(rows) == ["fused", "onnx", "onnx-int8"]
    assert rows["onnx"]["dtype"] == "float32" and rows["onnx-int8"]["dtype"] == "int8"
    assert rows["onnx"]["against"] == "fused" and rows["onnx-int8"]["against"] == "onnx"
    assert all(row["rtf"] > 0 and row["audio_seconds"] == rows["fused"]["audio_seconds"] for row in rows.values())


def test_big_graphs_keep_their_weights_in_one_sidecar(export_dir, tmp_path, monkeypatch):
    import onnx
    import onnxruntime

    from omnidub.backends.onnx import export

    monkeypatch.setattr(export, "EXTERNAL_DATA_BYTES", 0)  # as if the decoder were over 2 GB
    _, described = export._consolidate(export_dir / "decoder.onnx", tmp_path / "decoder.onnx", onnx)
    assert described["data"]["file"] == "decoder.onnx.data" and (tmp_path / "decoder.onnx.data").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["decoder.onnx", "decoder.onnx.data"]
    codes = np.random.default_rng(0).integers(0, 1024, (1, 8, 10))
    runs = [
        onnxruntime.InferenceSession(str(folder / "decoder.onnx")).run(None, {"codes": codes})[0]
        for folder in (export_dir, tmp_path)
    ]
    assert np.array_equal(runs[0], runs[1])


def test_ort_backend_renders_what_torch_renders_long_lines_and_natural_lengths_included(engine, prompt, export_dir):
    import dataclasses

    from omnidub.backends.base import Request
    from omnidub.backends.onnx import OnnxBackend
    from omnidub.backends.onnx.parity import BOUNDS, _render, log_spectral_l1

    options = dataclasses.replace(engine.options, decode=dataclasses.replace(engine.options.decode, steps=2))
    ours, theirs = OnnxBackend(export_dir, "cpu", options, threads=1, quantized=False), engine.with_options(options)
    requests = [
        Request("Natural length, trimmed as upstream trims it.", prompt, "en", seed=3, id="natural"),
        # Over 30 s: cut into chunks; without a voice, later chunks take the first as their reference.
        Request("We should leave before the roads get busy. " * 12, None, "en", duration=31.0, seed=4, id="long"),
    ]
    for request in requests:
        (tokens_a, a), (tokens_b, b) = _render(theirs, request), _render(ours, request)
        assert np.array_equal(tokens_a, tokens_b)
        assert a.audio.shape == b.audio.shape and a.frames == b.frames
        assert log_spectral_l1(a.audio, b.audio) <= BOUNDS["end_to_end_log_spectral_l1"]
