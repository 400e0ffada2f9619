"""Which backend renders and why, the device each would use, and what names an export: torch-free decisions."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from omnidub import hardware
from omnidub.backends import registry
from omnidub.errors import OmnidubError
from omnidub.models import ModelSource, resolve_model


def test_a_cpu_torch_wheel_never_guesses_cuda_and_onnxruntime_never_guesses_mps(monkeypatch):
    import sys

    monkeypatch.delitem(sys.modules, "torch", raising=False)  # decide as a plan does, before torch is imported
    monkeypatch.setattr(hardware, "_cuda_devices", lambda: 1)  # a host with a CUDA driver and a GPU
    monkeypatch.setattr(hardware, "torch_build", lambda: {"cuda": None, "hip": None})  # ... and a CPU-only wheel
    assert hardware.guess_device("auto", "torch") == "cpu"
    monkeypatch.setattr(hardware, "torch_build", lambda: {"cuda": "12.8", "hip": None})
    assert hardware.guess_device("auto", "torch") == "cuda"
    monkeypatch.setattr(hardware, "_cuda_devices", lambda: 0)
    monkeypatch.setattr(hardware.sys, "platform", "darwin")
    monkeypatch.setattr(hardware.platform, "machine", lambda: "arm64")
    assert hardware.guess_device("auto", "torch") == "mps"
    assert hardware.guess_device("auto", "onnxruntime") == "cpu"  # no MPS provider in ONNX Runtime
    assert hardware.guess_device("cuda", "onnxruntime") == "cuda"  # an explicit device is the user's


def test_torch_build_is_read_without_importing_torch():
    import subprocess
    import sys

    code = (
        "import sys; from omnidub.hardware import torch_build; b = torch_build(); "
        "assert 'torch' not in sys.modules; print(sorted(b))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    )
    assert done.returncode == 0, done.stderr[-1000:]
    assert done.stdout.strip() == "['cuda', 'hip']"


@pytest.fixture
def checkpoint(tiny_model_dir) -> ModelSource:
    return resolve_model("synthetic:tiny")


def test_auto_keeps_torch_unless_onnxruntime_measured_a_lossless_win(checkpoint, tmp_path, monkeypatch):
    from omnidub import measured
    from omnidub.backends.onnx import cache

    monkeypatch.setenv("OMNIDUB_CACHE", str(tmp_path))
    monkeypatch.setattr(hardware, "native_bf16", lambda: True)
    choice = registry.choose_backend("auto", checkpoint, "cpu", "auto")
    assert choice.name == "torch" and "bf16" in choice.reason and not choice.note  # bf16 is torch's: no ORT path
    fp32 = registry.choose_backend("auto", checkpoint, "cpu", "float32")
    assert fp32.name == "torch" and "--backend onnx" in fp32.note and cache.EXPORT_COST in fp32.note
    # Measured faster here, but no export in the cache: torch, and the note says how to get it back.
    key = measured.probe_key("cpu", "float32", "any", "h64x2")
    measured.record("backend", key, {"choice": "onnxruntime", "seconds": {"torch": 2.0, "onnxruntime": 1.0}})
    assert registry.choose_backend("auto", checkpoint, "cpu", "float32").name == "torch"
    # With the export built: ONNX Runtime, and the header says why.
    where = cache.folder(checkpoint)
    where.mkdir(parents=True)
    (where / "export.json").write_text("{}")
    monkeypatch.setattr(
        cache, "cached", lambda source: ModelSource("export", where, revision="export-x", backend="onnx")
    )
    choice = registry.choose_backend("auto", checkpoint, "cpu", "float32")
    assert choice.name == "onnxruntime" and "2.00x faster than torch in fp32" in registry.header(
        choice, "cpu", "float32"
    )
    assert cache.status(checkpoint).used and "renders fp32 with it here (2.00x" in cache.status(checkpoint).summary()
    # Built, but this CPU kind never compared it (a cache shared with another machine): torch until the engine
    # compares them once the model loads (no question, no bench).
    data = measured.load()
    data.pop("backend")
    (tmp_path / "measured.json").write_text(json.dumps(data))
    unmeasured = registry.choose_backend("auto", checkpoint, "cpu", "float32")
    assert unmeasured.name == "torch" and unmeasured.measure_export and "once the model loads" in unmeasured.reason
    assert not cache.status(checkpoint).used and "not yet measured" in cache.status(checkpoint).summary()
    measured.record("backend", key, {"choice": "onnxruntime", "seconds": {"torch": 2.0, "onnxruntime": 1.0}})
    # A project rendered with torch stays with torch: a faster path never changes its audio.
    assert registry.choose_backend("auto", checkpoint, "cpu", "float32", pinned="torch").name == "torch"
    measured.record("backend", key, {"choice": "torch", "seconds": {"torch": 1.0, "onnxruntime": 2.0}})
    assert registry.choose_backend("auto", checkpoint, "cpu", "float32").name == "torch"


def test_an_instruction_set_limit_in_the_environment_holds_bf16_and_names_another_cpu_kind(monkeypatch):
    from omnidub import measured
    from omnidub.hardware import ISA_LIMITS

    for name in ISA_LIMITS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(hardware, "cpu_name", lambda: "AMD EPYC")
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx2", "fma", "avx512f", "avx512_bf16"}))
    assert hardware.dtype_for("auto", "cpu") == "bfloat16" and measured.matrix_units() == "avx512_bf16"
    native = measured.machine_key("cpu", "float32")
    # Held to AVX2 (an AVX2-only CPU's kernels): oneDNN has no bf16 kernels then, so fp32 is the fast path.
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert not hardware.native_bf16() and hardware.dtype_for("auto", "cpu") == "float32"
    assert measured.matrix_units() == "avx2" and "avx512f" not in hardware.usable_flags()
    assert measured.machine_key("cpu", "float32") != native
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "avx512_core")  # AVX-512 without bf16; values are case-blind
    assert not hardware.native_bf16() and measured.matrix_units() == "avx512f"
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16")
    assert hardware.native_bf16()
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")  # the lowest limit set wins
    assert not hardware.native_bf16()
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx512")
    monkeypatch.setenv("MKL_ENABLE_INSTRUCTIONS", "SOMETHING_NEW")  # a value not known limits nothing
    assert hardware.native_bf16() and hardware.usable_flags() == hardware.cpu_flags()


def test_explicit_and_pinned_backends(checkpoint, export_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("OMNIDUB_CACHE", str(tmp_path))
    exported = resolve_model(str(export_dir))
    assert registry.choose_backend("auto", exported).name == "onnxruntime"
    with pytest.raises(OmnidubError, match="is an ONNX export"):
        registry.choose_backend("torch", exported)
    with pytest.raises(OmnidubError, match="unknown backend"):
        registry.choose_backend("tensorflow", checkpoint)
    onnx = registry.choose_backend("onnx", checkpoint)
    assert onnx.name == "onnxruntime" and onnx.build_export and "built first" in onnx.reason
    assert registry.identity(onnx, "cpu", "float32")["export"] == "pending"
    # A project pinned to ONNX Runtime whose export left the cache: one line saying both ways out.
    with pytest.raises(OmnidubError, match="--backend onnx builds it again.*--backend torch"):
        registry.choose_backend("auto", checkpoint, pinned="onnxruntime")


def test_backend_onnx_builds_the_export_once_compares_it_and_renders_with_it(checkpoint, tmp_path, monkeypatch):
    from omnidub import measured
    from omnidub.backends.base import Request
    from omnidub.engine import Engine

    pytest.importorskip("onnx")
    monkeypatch.setenv("OMNIDUB_CACHE", str(tmp_path))
    notes = []
    engine = Engine("synthetic:tiny", "cpu", "fast", backend="onnx")
    engine.on_note = notes.append
    assert engine.backend_name == "onnxruntime" and engine.identity["export"] == "pending"
    backend = engine.backend()
    assert backend.name == "onnxruntime" and backend.dtype == "float32"
    assert any("exporting synthetic:tiny" in n for n in notes) and any("ONNX Runtime vs torch" in n for n in notes)
    # The comparison is recorded for --backend auto, with logits that agree (a lossless path).
    [entry] = measured.load()["backend"].values()
    assert (
        entry["argmax_identical"]
        and entry["max_abs_logit_diff"] <= 1e-3
        and set(entry["seconds"]) == {"torch", "onnxruntime"}
    )
    (result,) = backend.synthesize([Request("Hello there.", None, "en", duration=0.6, seed=1)])
    assert result.audio.shape == (14400,) and np.isfinite(result.audio).all()
    # Built once: the next engine finds it and names the export by its content.
    again = Engine("synthetic:tiny", "cpu", "fast", backend="onnx")
    assert not again.backend_choice.build_export and again.identity["revision"].startswith("export-")


def test_an_export_is_named_by_its_content_not_its_reports_and_checked_when_it_loads(export_dir, tmp_path):
    from omnidub.backends.onnx import OnnxBackend
    from omnidub.models import export_content_digest

    folder = tmp_path / "export"
    shutil.copytree(export_dir, folder)
    manifest_path = folder / "export.json"
    manifest = json.loads(manifest_path.read_text())
    named = resolve_model(str(folder)).revision
    # A new parity report (what export --check-only writes) names nothing new: no line key changes.
    (folder / "parity.json").write_text("{}")
    manifest_path.write_text(json.dumps({**manifest, "parity": {"pass": True, "seconds": 1.0}}))
    assert resolve_model(str(folder)).revision == named
    assert OnnxBackend(folder, "cpu", threads=1).sample_rate == 24000
    # export.json edited where it shapes the audio: another name, and refused when it loads.
    tampered = {**manifest, "config": {**manifest["config"], "sample_rate": 16000}}
    manifest_path.write_text(json.dumps(tampered))
    assert resolve_model(str(folder)).revision != named
    with pytest.raises(OmnidubError, match="changed after the export"):
        OnnxBackend(folder, "cpu", threads=1)
    # ... even with its content hash made to match: the rates no longer agree with each other.
    manifest_path.write_text(json.dumps({**tampered, "content_sha256": export_content_digest(tampered)}))
    with pytest.raises(OmnidubError, match="disagree"):
        OnnxBackend(folder, "cpu", threads=1)
    # A graph that is not the exported one is refused before ONNX Runtime runs it.
    manifest_path.write_text(json.dumps(manifest))
    decoder = folder / "decoder.onnx"
    data = bytearray(decoder.read_bytes())
    data[-1] ^= 0xFF
    decoder.write_bytes(bytes(data))
    backend = OnnxBackend(folder, "cpu", threads=1)
    with pytest.raises(OmnidubError, match="decoder.onnx is not the file that was exported"):
        backend.runtime.decode(np.zeros((8, 4), dtype=np.int64))


def test_a_verified_file_is_hashed_once_until_it_changes(tmp_path, monkeypatch):
    import hashlib

    from omnidub import digests

    monkeypatch.setenv("OMNIDUB_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "big.onnx"
    path.write_bytes(b"weights" * 1000)
    opened = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda f, *a, **k: opened.append(str(f)) or real_open(f, *a, **k))
    first = digests.sha256(path)
    assert first == hashlib.sha256(b"weights" * 1000).hexdigest()
    assert digests.sha256(path) == first and opened.count(str(path.resolve())) == 1  # remembered by size and time
    path.write_bytes(b"other" * 1000)
    assert digests.sha256(path) == hashlib.sha256(b"other" * 1000).hexdigest()


def test_an_engine_plans_without_probing_and_follows_a_projects_pin(tiny_model_dir, tmp_path, monkeypatch):
    from omnidub.engine import Engine

    monkeypatch.setenv("OMNIDUB_CACHE", str(tmp_path))
    engine = Engine("synthetic:tiny", "cpu", "fast")
    status = engine.layout_status()
    assert (status.layout, status.source, status.measured) == ("joined", "default", False)
    assert engine.settings["cfg"] == "joined" and not (tmp_path / "measured.json").exists()  # a plan measures nothing
    engine.pin(cfg="packed", backend="torch")
    assert engine.settings["cfg"] == "packed" and engine.layout_status().source == "pinned"
    backend = engine.backend()
    # Loading probes only what the pin leaves open (the GEMM kernels), and renders in the pinned layout.
    assert backend.layout == "packed" and engine.settings["cfg"] == "packed"
    measured = json.loads((tmp_path / "measured.json").read_text())
    assert "layout" not in measured and len(measured["gemm"]) == 1
    # The header names the CPU kind and the GEMM library the probe chose, then why this backend.
    gemm = "oneDNN GEMMs with weights packed once" if backend.gemm == "onednn" else "GEMMs, "
    reason = engine.backend_reason()
    assert reason.startswith(f"torch on cpu ({hardware.cpu_kind()}; {backend.dtype}; ") and gemm in reason
    assert reason.endswith("here): as this project was rendered")


def test_the_probe_is_recorded_and_used_at_once_or_kept_for_later_projects(tiny_model_dir, tmp_path, monkeypatch):
    from omnidub.backends.torch import probe
    from omnidub.engine import Engine

    # A machine where packed measures faster (the probe's timings stand in for a real run).
    monkeypatch.setattr(probe, "interleaved", lambda runs, repeats=3: {k: 1.0 if k == "packed" else 2.0 for k in runs})
    monkeypatch.setenv("OMNIDUB_CACHE", str(tmp_path / "first"))
    engine = Engine("synthetic:tiny", "cpu", "fast")
    notes = []
    engine.on_note = notes.append
    assert engine.settings["cfg"] == "joined"  # planned and keyed before anything loads
    assert engine.backend(adopt_probe=False).layout == "joined" and engine.settings["cfg"] == "joined"
    assert any("this run keeps cfg joined" in n for n in notes)
    [entry] = json.loads((tmp_path / "first" / "measured.json").read_text())["layout"].values()
    assert entry["choice"] == "packed"
    assert Engine("synthetic:tiny", "cpu", "fast").settings["cfg"] == "packed"  # the next project follows it
    # By default the measurement is used at once, and settings say so (the job keys its lines again).
    monkeypatch.setenv("OMNIDUB_CACHE", str(tmp_path / "second"))
    adopting = Engine("synthetic:tiny", "cpu", "fast")
    assert adopting.backend().layout == "packed" and adopting.settings["cfg"] == "packed"


@pytest.mark.slow  # about 8 s (an export built and measured): pytest -m slow runs it, as CI does
def test_a_render_at_a_terminal_asks_once_before_building_an_export_and_then_follows_the_measurement(
    checkpoint, own_cache, tmp_path, monkeypatch
):
    from typer.testing import CliRunner

    from omnidub import measured
    from omnidub.backends.onnx import cache
    from omnidub.cli import app
    from omnidub.cli import render as render_command

    pytest.importorskip("onnx")
    monkeypatch.setattr(hardware, "native_bf16", lambda: False)  # fp32 is this CPU's path: ONNX Runtime may pay
    monkeypatch.setattr(render_command, "interactive", lambda: True)
    script = tmp_path / "scene.txt"
    script.write_text("ALICE: Hello there.\n")
    voice = Path(__file__).resolve().parent.parent / "examples" / "voices" / "alice.wav"

    def render(out: str, answer: str):
        args = [
            "render",
            script,
            "--voice",
            voice,
            "--voice-text",
            "Good morning, everyone. Thanks for coming in early. I know the traffic was terrible today.",
            "--model",
            "synthetic:tiny",
            "--out",
            tmp_path / out,
        ]
        return CliRunner().invoke(app, [str(a) for a in args], input=answer, catch_exceptions=False)

    # No: nothing is built, torch renders, and the question is not asked again on this CPU.
    first = render("no", "n\n")
    assert first.exit_code == 0, first.output
    assert "Export synthetic:tiny for it now" in first.output and cache.cached(checkpoint) is None
    assert json.loads((tmp_path / "no" / "manifest.json").read_text())["model"]["backend"] == "torch"
    again = render("no", "")  # a rerun into the same folder: every line cached, the question not asked
    assert again.exit_code == 0 and "Export synthetic:tiny for it now" not in again.output
    # Yes (on a CPU that was never asked): the export is built and measured before any line is planned, and the
    # render runs on whichever backend the measurement found faster.
    monkeypatch.setattr(cache, "declined_before", lambda source: False)
    yes = render("yes", "y\n")
    assert yes.exit_code == 0, yes.output
    assert cache.cached(checkpoint) is not None and "ONNX Runtime vs torch here in float32" in yes.output
    [found] = measured.load()["backend"].values()
    assert json.loads((tmp_path / "yes" / "manifest.json").read_text())["model"]["backend"] == found["choice"]


@pytest.mark.slow  # an export built and measured twice: pytest -m slow runs it, as CI does
def test_export_cache_prepares_the_export_once_and_auto_follows_what_this_cpu_measured(
    checkpoint, own_cache, monkeypatch
):
    from typer.testing import CliRunner

    from omnidub import measured
    from omnidub.backends.onnx import cache
    from omnidub.cli import app
    from omnidub.engine import Engine

    pytest.importorskip("onnx")
    monkeypatch.setattr(hardware, "native_bf16", lambda: False)  # fp32 is this CPU's path: ONNX Runtime may pay
    runner = CliRunner()
    # The explicit one-time command: builds the export into omnidub's cache and compares it with torch here.
    built = runner.invoke(app, ["export", "--cache", "--model", "synthetic:tiny"], catch_exceptions=False)
    assert built.exit_code == 0, built.output
    assert "ONNX Runtime vs torch here in float32" in built.output and cache.cached(checkpoint) is not None
    [found] = measured.load()["backend"].values()
    assert found["argmax_identical"] and found["max_abs_logit_diff"] <= 1e-3
    assert cache.status(checkpoint).summary() in " ".join(built.output.split())
    again = runner.invoke(app, ["export", "--cache", "--model", "synthetic:tiny"], catch_exceptions=False)
    said = " ".join(again.output.split())
    assert again.exit_code == 0 and "nothing to do" in said and "exporting" not in said
    # A render with no question and no bench: auto renders with what this CPU measured faster.
    engine = Engine("synthetic:tiny", "cpu", "fast", backend="auto")
    assert engine.backend().name == found["choice"]
    why = "faster than torch in fp32" if found["choice"] == "onnxruntime" else "torch measured faster than ONNX Runtime"
    assert why in engine.backend_reason()
    # The same cache on another kind of CPU (here: this one held to AVX2 by oneDNN's limit): never compared there,
    # so the engine compares once as it loads, records it for that kind, and follows it.
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    notes: list[str] = []
    other = Engine("synthetic:tiny", "cpu", "fast", backend="auto")
    other.on_note = notes.append
    assert other.backend_choice.measure_export and other.backend_choice.name == "torch"
    loaded = other.backend()
    assert any("comparing one fp32 step now" in n for n in notes)
    assert len(measured.load()["backend"]) == 2
    from omnidub.models import model_shape

    recorded = cache.backend_choice(model_shape(checkpoint))
    assert loaded.name == recorded["choice"] and not other.backend_choice.measure_export


def test_export_says_in_one_line_what_it_needs(tmp_path):
    from typer.testing import CliRunner

    from omnidub.cli import app

    runner = CliRunner()
    for args, said in (
        (["export"], "give OUT_DIR"),
        (["export", str(tmp_path / "out"), "--cache"], "--cache builds the fp32 export"),
        (["export", "--cache", "--quantize", "int8"], "it takes --model only"),
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert said in result.output and "Traceback" not in result.output
