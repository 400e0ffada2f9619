"""The export's parity check: each graph and the whole render against the torch model, in fp32 on the CPU.

Inputs come from a real render of the bundled example (its voice and lines), never random ids:

- transformer: argmax agreement and max |Δ logits| over every target position of every step of that render;
- encoder: exact code match on the bundled reference at several lengths;
- decoder: log-spectral L1 (phase-invariant) on the render's codes;
- end to end: the same lines at several lengths by both backends at zero temperatures: token identity and
  log-spectral L1 per line.

The int8 transformer, when exported, is measured on the same inputs and reported as a cost, not held to a bound.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from pathlib import Path

import numpy as np

from omnidub.backends.onnx.export import PARITY_FILE

BOUNDS = {
    "transformer_argmax_agreement": 1.0,  # at least
    "transformer_max_abs_logit_diff": 1e-3,  # at most
    "encoder_code_match": 1.0,  # at least
    "decoder_log_spectral_l1": 0.002,  # at most
    "end_to_end_log_spectral_l1": 0.005,  # at most, per line
    "end_to_end_token_identity": 1.0,  # at least, per line
}
# Line lengths of the end-to-end check (seconds), short interjection to upstream's longest single chunk.
E2E_SECONDS = (0.3, 1.0, 3.0, 8.0, 15.0, 25.0)
# The bundled example's lines (examples/dialogue.srt), spoken in the bundled voice.
EXAMPLE_LINES = (
    "So, are we still driving to the coast next week?",
    "Yes, as long as the car is back from the garage.",
    "Great. What time should we leave?",
    "Around nine, after the morning traffic.",
)


def log_spectral_l1(a: np.ndarray, b: np.ndarray, n_fft: int = 1024, hop: int = 256) -> float:
    """Mean |ln|A| - ln|B|| over STFT bins (Hann window); blind to phase, which a GAN vocoder does not pin down.

    Magnitudes are floored 80 dB under the loudest bin of either signal, so float rounding in near-silence
    (or in a window's far sidelobes) does not count as a difference anyone could hear."""
    n = min(a.shape[-1], b.shape[-1])
    if n == 0:
        return 0.0
    mags = [np.abs(_stft(x[:n], n_fft, hop)) for x in (a, b)]
    floor = max(1e-5, 1e-4 * max(float(m.max()) for m in mags))
    return float(np.mean(np.abs(np.log(np.maximum(mags[0], floor)) - np.log(np.maximum(mags[1], floor)))))


def _stft(x: np.ndarray, n_fft: int, hop: int) -> np.ndarray:
    x = np.pad(np.asarray(x, dtype=np.float64), (n_fft // 2, n_fft // 2))
    if x.shape[0] < n_fft:
        x = np.pad(x, (0, n_fft - x.shape[0]))
    frames = np.lib.stride_tricks.sliding_window_view(x, n_fft)[::hop]
    return np.fft.rfft(frames * np.hanning(n_fft), axis=-1)


def check(
    folder: Path,
    *,
    e2e_seconds=E2E_SECONDS,
    lines=EXAMPLE_LINES,
    steps: int | None = None,
    threads: int | None = None,
    progress=None,
) -> dict:
    """Run every parity figure for the export in ``folder``; returns the report (also written to parity.json and
    into export.json). The folder is held as the export held it (see ``export_folder``), before any work."""
    from omnidub.backends.onnx.export import export_folder
    from omnidub.backends.onnx.runtime import read_manifest

    folder = Path(folder)
    read_manifest(folder)  # not an export at all: said as such, not as a folder of someone else's files
    holder = export_folder(folder)
    holder.claim(None)
    try:
        holder.check_writable([PARITY_FILE])
        return _check(holder, e2e_seconds, lines, steps, threads, progress)
    finally:
        holder.release()


def _check(holder, e2e_seconds, lines, steps: int | None, threads: int | None, progress) -> dict:
    import soundfile as sf

    from omnidub.backends.base import Request
    from omnidub.backends.onnx.backend import OnnxBackend
    from omnidub.backends.onnx.export import write_manifest
    from omnidub.backends.onnx.runtime import Runtime, read_manifest
    from omnidub.backends.torch import TorchBackend
    from omnidub.config import EngineOptions
    from omnidub.duration import natural_frames

    say = progress or (lambda message: None)
    folder = holder.path
    manifest = read_manifest(folder)
    began = time.perf_counter()
    options = EngineOptions(dtype="float32", cfg="trimmed")
    if steps is not None:
        options = dataclasses.replace(options, decode=dataclasses.replace(options.decode, steps=steps))
    say("loading the torch model the export was made from")
    torch_backend = TorchBackend(_exported_from(manifest), "cpu", options)
    # One fp32 session serves the graph checks and the backend: a full-size transformer is 2.4 GB.
    onnx_backend = OnnxBackend(folder, "cpu", options, threads=threads, quantized=False)
    runtime = onnx_backend.runtime
    int8 = (
        Runtime(folder, "cpu", threads=threads, quantized=True)
        if "transformer.int8.onnx" in manifest["files"]
        else None
    )

    from importlib import resources

    voice = resources.files("omnidub").joinpath("data")
    wave, rate = sf.read(str(voice.joinpath("alice-3s.wav")), dtype="float32")
    ref_text = voice.joinpath("alice-3s.txt").read_text(encoding="utf-8").strip()
    prompt = torch_backend.encode_prompt(wave, rate, ref_text, "en")

    say("rendering the example with torch, checking the transformer at every step")
    # Each line at its natural length, as a render that fits its slot would ask.
    requests = [
        Request(
            text,
            prompt,
            "en",
            duration=natural_frames(text, prompt.text, prompt.frames) / runtime.frame_rate,
            seed=i + 1,
            id=str(i),
        )
        for i, text in enumerate(lines)
    ]
    figures = _Transformer(runtime, int8)
    with figures.capture():
        rendered = torch_backend.tokens(requests)
    figures.runtimes["int8"] = int8 = None  # measured; free its session before the long lines

    say("checking the encoder")
    tokenizer = torch_backend.model.audio_tokenizer
    encoder = _encoder_figures(tokenizer, runtime, wave, rate)
    say("checking the decoder")
    decoder = _decoder_figures(tokenizer, runtime, rendered)
    say("rendering lines of several lengths with both backends at zero temperatures")
    e2e = _end_to_end(torch_backend, onnx_backend, options, prompt, lines, e2e_seconds)

    report = {
        "provider": "CPUExecutionProvider",
        "precision": "float32",
        "steps": options.decode.steps,
        "inputs": f"bundled example: {len(lines)} lines in the bundled voice, {figures.forwards} forwards",
        "transformer": figures.fp32,
        "encoder": encoder,
        "decoder": decoder,
        "end_to_end": {
            "lines": e2e,
            "token_identity": min(line["token_identity"] for line in e2e),
            "log_spectral_l1": max(line["log_spectral_l1"] for line in e2e),
        },
        "bounds": BOUNDS,
        "seconds": round(time.perf_counter() - began, 1),
    }
    if figures.int8["positions"]:
        report["int8_cost"] = figures.int8
    report["failures"] = failures(report)
    report["pass"] = not report["failures"]
    import json

    holder.write_text(PARITY_FILE, json.dumps(report, indent=2) + "\n")
    manifest["parity"] = {key: report[key] for key in ("transformer", "encoder", "decoder", "end_to_end", "pass")}
    if "int8_cost" in report:
        manifest["parity"]["int8_cost"] = report["int8_cost"]
    write_manifest(holder, manifest)
    return report


def _encoder_figures(tokenizer, runtime, wave, rate) -> dict:
    """The export's encoder against torch's on clips of the bundled voice: the share of codes that match."""
    import torch

    hop = runtime.hop
    prepared = _prepared_reference(wave, rate, runtime.sample_rate, hop)
    matches = total = 0
    for seconds in (0.5, 1.0, 2.0, prepared.shape[-1] / runtime.sample_rate):
        clip = prepared[: max(hop, int(seconds * runtime.sample_rate) // hop * hop)]
        with torch.inference_mode():
            expected = tokenizer.encode(torch.from_numpy(clip)[None, None]).audio_codes[0].numpy()
        got = runtime.encode(clip)
        matches += int((got == expected).sum()) if got.shape == expected.shape else 0
        total += expected.size
    return {"code_match": matches / total, "codes": total}


def _decoder_figures(tokenizer, runtime, rendered) -> dict:
    """The export's decoder against torch's on the rendered lines' tokens: the worst log-spectral distance."""
    import torch

    worst = 0.0
    for codes in rendered:
        with torch.inference_mode():
            expected = tokenizer.decode(torch.from_numpy(codes)[None]).audio_values[0, 0].numpy()
        worst = max(worst, log_spectral_l1(runtime.decode(codes), expected))
    return {"log_spectral_l1": worst, "lines": len(rendered)}


def _end_to_end(torch_backend, onnx_backend, options, prompt, lines, e2e_seconds) -> list[dict]:
    """Lines of several lengths rendered by both backends at zero temperatures: tokens and audio compared."""
    from omnidub.backends.base import Request

    zero = dataclasses.replace(
        options, decode=dataclasses.replace(options.decode, position_temperature=0.0, class_temperature=0.0)
    )
    torch_zero, onnx_zero = torch_backend.with_options(zero), onnx_backend.with_options(zero)
    frame_rate = onnx_backend.runtime.frame_rate
    text = " ".join(lines)
    e2e = []
    for i, seconds in enumerate(e2e_seconds):
        frames = max(1, int(round(seconds * frame_rate)))
        request = Request(
            text if seconds > 2 else lines[i % len(lines)],
            prompt,
            "en",
            duration=frames / frame_rate,
            seed=100 + i,
            id=str(i),
        )
        (tokens_a, a), (tokens_b, b) = _render(torch_zero, request), _render(onnx_zero, request)
        e2e.append(
            {
                "seconds": seconds,
                "frames": frames,
                "token_identity": float(np.mean(tokens_a == tokens_b)) if tokens_a.shape == tokens_b.shape else 0.0,
                "log_spectral_l1": log_spectral_l1(a.audio, b.audio),
            }
        )
    return e2e


def _exported_from(manifest: dict):
    """The checkpoint the export was traced from, refusing one whose weights changed since."""
    from omnidub.errors import OmnidubError
    from omnidub.models import resolve_model

    model = manifest.get("model") or {}
    source = resolve_model(model.get("id", ""))
    if model.get("revision") and source.revision != model["revision"]:
        raise OmnidubError(
            f"{source.spec} changed since it was exported (revision {source.revision}, export has "
            f"{model['revision']}); export it again"
        )
    return source


def print_parity(report: dict, console) -> None:
    """The five figures against their bounds, then the int8 cost when there is one."""
    from rich import box
    from rich.table import Table

    t, e, d, e2e = report["transformer"], report["encoder"], report["decoder"], report["end_to_end"]
    table = Table(
        title=f"ONNX parity · {report['inputs']} · {report['provider']}, {report['precision']}",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    for column in ("figure", "value", "bound"):
        table.add_column(column, justify="left" if column == "figure" else "right")
    table.add_row(
        "transformer argmax agreement", f"{t['argmax_agreement']:.6f}", f">= {BOUNDS['transformer_argmax_agreement']}"
    )
    table.add_row(
        "transformer max |Δ logits|",
        f"{t['max_abs_logit_diff']:.2e}",
        f"<= {BOUNDS['transformer_max_abs_logit_diff']:.0e}",
    )
    table.add_row("encoder code match", f"{e['code_match']:.6f}", f">= {BOUNDS['encoder_code_match']}")
    table.add_row("decoder log-spectral L1", f"{d['log_spectral_l1']:.2e}", f"<= {BOUNDS['decoder_log_spectral_l1']}")
    for line in e2e["lines"]:
        table.add_row(
            f"end to end {line['seconds']:g} s: same tokens · L1",
            f"{line['token_identity']:.4f} · {line['log_spectral_l1']:.2e}",
            f"1 · <= {BOUNDS['end_to_end_log_spectral_l1']}",
        )
    console.print(table)
    if "int8_cost" in report:
        cost = report["int8_cost"]
        console.print(
            f"int8 transformer (a cost, no bound): argmax agreement {cost['argmax_agreement']:.4f}, "
            f"max |Δ logits| {cost['max_abs_logit_diff']:.3g}"
        )
    for failure in report["failures"]:
        console.print(f"[bold red]missed:[/] {failure}")
    console.print("parity: " + ("[bold green]pass[/]" if report["pass"] else "[bold red]FAIL[/]"))


def failures(report: dict) -> list[str]:
    """Which figures miss their bounds, as short sentences."""
    out = []
    t, e, d, e2e = report["transformer"], report["encoder"], report["decoder"], report["end_to_end"]
    if t["argmax_agreement"] < BOUNDS["transformer_argmax_agreement"]:
        out.append(
            f"transformer argmax agreement {t['argmax_agreement']:.6f} < {BOUNDS['transformer_argmax_agreement']}"
        )
    if t["max_abs_logit_diff"] > BOUNDS["transformer_max_abs_logit_diff"]:
        out.append(
            f"transformer max |Δ logits| {t['max_abs_logit_diff']:.3g} > {BOUNDS['transformer_max_abs_logit_diff']}"
        )
    if e["code_match"] < BOUNDS["encoder_code_match"]:
        out.append(f"encoder code match {e['code_match']:.6f} < {BOUNDS['encoder_code_match']}")
    if d["log_spectral_l1"] > BOUNDS["decoder_log_spectral_l1"]:
        out.append(f"decoder log-spectral L1 {d['log_spectral_l1']:.3g} > {BOUNDS['decoder_log_spectral_l1']}")
    for line in e2e["lines"]:
        if line["log_spectral_l1"] > BOUNDS["end_to_end_log_spectral_l1"]:
            out.append(
                f"end to end {line['seconds']} s: log-spectral L1 {line['log_spectral_l1']:.3g} > "
                f"{BOUNDS['end_to_end_log_spectral_l1']}"
            )
        if line["token_identity"] < BOUNDS["end_to_end_token_identity"]:
            out.append(f"end to end {line['seconds']} s: token identity {line['token_identity']:.4f} < 1")
    return out


def _render(backend, request):
    """One line's tokens and its finished audio from a single decode (both backends resolve, decode and finish
    lines the same way; ``synthesize`` would not hand back the tokens)."""
    line = backend._resolve(request)
    backend._decode_lines([line])
    tokens = np.concatenate([np.asarray(t.cpu() if hasattr(t, "cpu") else t) for t in line.tokens], axis=-1)
    return tokens, backend._finish(line)


def _prepared_reference(wave: np.ndarray, rate: int, sample_rate: int, hop: int) -> np.ndarray:
    """The bundled reference as the encoder sees it in a prompt: at the model's rate, silence-trimmed, whole frames."""
    from omnidub.backends.onnx.audio import remove_silence

    if rate != sample_rate:
        import soxr

        wave = soxr.resample(wave, rate, sample_rate).astype(np.float32)
    wave = remove_silence(wave, sample_rate, mid_ms=200, lead_ms=100, trail_ms=200)
    return np.ascontiguousarray(wave[: wave.shape[-1] // hop * hop], dtype=np.float32)


class _Transformer:
    """Hooks the torch backend's layout: every forward's inputs run through ORT and are compared right away."""

    def __init__(self, runtime, int8=None):
        self.runtimes = {"fp32": runtime, "int8": int8}
        self.forwards = 0
        self._stats = {"fp32": [0, 0, 0.0], "int8": [0, 0, 0.0]}  # agree, positions, max |Δ|

    @property
    def fp32(self) -> dict:
        return self._figures("fp32")

    @property
    def int8(self) -> dict:
        return self._figures("int8")

    def _figures(self, key: str) -> dict:
        agree, positions, diff = self._stats[key]
        return {
            "argmax_agreement": agree / positions if positions else 0.0,
            "max_abs_logit_diff": diff,
            "positions": positions,
        }

    @contextlib.contextmanager
    def capture(self):
        from unittest import mock

        from omnidub.backends.torch.layout import Layout

        original = Layout.logits
        figures = self

        def logits(layout, model, llm=None, cache=None):
            c, u = original(layout, model, llm, cache)
            figures._compare(layout, c.float().cpu().numpy(), u.float().cpu().numpy())
            return c, u

        with mock.patch.object(Layout, "logits", logits):
            yield self

    def _compare(self, layout, c: np.ndarray, u: np.ndarray) -> None:
        offset = 0
        cond_index = layout.cond_index.cpu().numpy()
        for plan in layout.plans:
            rows, _, width = plan.input_ids.shape
            row, col = plan.dst_row.cpu().numpy(), plan.dst_col.cpu().numpy()
            line, frame = plan.src_line.cpu().numpy(), plan.src_frame.cpu().numpy()
            flat = row * width + col
            conditional = cond_index[line, frame] == offset + flat
            expected = np.where(conditional[:, None, None], c[line, :, frame], u[line, :, frame])  # [N, C, V]
            inputs = {
                "input_ids": plan.input_ids.cpu().numpy(),
                "audio_mask": plan.audio_mask.cpu().numpy(),
                # torch runs unpadded single-segment rows without a mask; the graph always takes one (all True).
                "attention_mask": (
                    np.ones((rows, 1, width, width), dtype=bool)
                    if plan.attention_mask is None
                    else plan.attention_mask.cpu().numpy()
                ),
                "position_ids": plan.position_ids.cpu().numpy(),
                "target_index": flat.astype(np.int64),
            }
            for key, runtime in self.runtimes.items():
                if runtime is None:
                    continue
                got = runtime.transformer.run(None, inputs)[0]
                stats = self._stats[key]
                stats[0] += int((got.argmax(-1) == expected.argmax(-1)).sum())
                stats[1] += int(expected.shape[0] * expected.shape[1])
                stats[2] = max(stats[2], float(np.abs(got - expected).max()))
            offset += rows * width
            self.forwards += 1
