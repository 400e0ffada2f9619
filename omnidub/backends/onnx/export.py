"""``omnidub export``: OmniVoice as three ONNX graphs (fp32), optional int8 transformer, and ``export.json``.

The legacy TorchScript exporter is used: it traces the real modules (SDPA without a causal flag, the codec's
shape branches baked in) and needs no onnxscript. Graphs over 2 GB keep their weights in one sidecar file.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from omnidub.backends.onnx.runtime import EXPORT_FORMAT, MANIFEST
from omnidub.errors import OmnidubError
from omnidub.files import atomic_path
from omnidub.folder import OutputFolder
from omnidub.models import export_content_digest

DEFAULT_OPSET = 18
PARITY_FILE = "parity.json"
TRANSFORMER = "transformer.onnx"
TRANSFORMER_INT8 = "transformer.int8.onnx"
ENCODER = "encoder.onnx"
DECODER = "decoder.onnx"
# Above this, protobuf cannot hold the weights inside the graph file.
EXTERNAL_DATA_BYTES = 2 * 1024**3 - 64 * 1024**2
QUANTIZE = ("int8",)

CONTRACT = {
    TRANSFORMER: {
        "inputs": {
            "input_ids": ["rows", "codebooks", "length", "int64"],
            "audio_mask": ["rows", "length", "bool"],
            "attention_mask": ["rows", 1, "length", "length", "bool"],
            "position_ids": ["rows", "length", "int64"],
            "target_index": ["targets", "int64 (flat row * length + column)"],
        },
        "outputs": {"logits": ["targets", "codebooks", "audio_vocab", "float32"]},
    },
    ENCODER: {
        "inputs": {"waveform": ["batch", 1, "samples", "float32 at sample_rate"]},
        "outputs": {"codes": ["batch", "codebooks", "frames", "int64"]},
    },
    DECODER: {
        "inputs": {"codes": ["batch", "codebooks", "frames", "int64"]},
        "outputs": {"waveform": ["batch", 1, "samples", "float32"]},
    },
}


@dataclass(frozen=True)
class ExportResult:
    folder: Path
    manifest: dict
    seconds: float


def export_folder(out_dir: Path) -> OutputFolder:
    """An export's folder, held as a render holds its own: new or empty, or an export omnidub wrote (its ledger
    in ``.omnidub/``, or an older export whose export.json vouches for its files); nothing else is touched."""
    return OutputFolder(
        Path(out_dir), record=MANIFEST, others=None, flag="OUT_DIR", made="an export of", older=older_export
    )


def export(
    out_dir: Path, model: str, *, opset: int = DEFAULT_OPSET, quantize: str | None = None, on_start=lambda: None
) -> ExportResult:
    """Export ``model`` (a --model spec) into ``out_dir``: graphs, tokenizer, ``export.json`` (parity comes later).
    The folder is claimed first (see :func:`export_folder`); ``on_start`` is called once it is, before the model
    loads."""
    _require_exporter()
    if quantize is not None and quantize not in QUANTIZE:
        raise OmnidubError(f"unknown quantization {quantize!r}; use int8")
    out_dir = Path(out_dir)
    if Path(model).expanduser().is_dir() and Path(model).expanduser().resolve() == out_dir.resolve():
        raise OmnidubError(
            f"OUT_DIR {out_dir} is the checkpoint folder --model {model} itself; export into "
            "another folder (the checkpoint's own files are never touched)"
        )
    folder = export_folder(out_dir)
    folder.claim(None)
    try:
        on_start()
        return _export(folder, model, opset, quantize)
    finally:
        folder.release()


def _export(folder: OutputFolder, model: str, opset: int, quantize: str | None) -> ExportResult:
    import onnx
    import torch

    began = time.perf_counter()
    out_dir = folder.path
    source, omnivoice = load_torch_model(model)
    # What an earlier export left here must not pass for this one's.
    folder.discard([MANIFEST, PARITY_FILE, TRANSFORMER_INT8, TRANSFORMER_INT8 + ".data"])
    from omnidub.backends.onnx.graphs import DecoderGraph, EncoderGraph, TransformerGraph

    config = omnivoice.config
    codebooks = config.num_audio_codebook
    tokenizer = omnivoice.audio_tokenizer
    hop = int(tokenizer.config.hop_length)
    # Example inputs only fix ranks and dtypes; every length axis is dynamic.
    rows, length, targets = 2, 48, 16
    transformer_inputs = (
        torch.full((rows, codebooks, length), config.audio_mask_id, dtype=torch.long),
        torch.arange(length).ge(length // 2).repeat(rows, 1),
        torch.ones(rows, 1, length, length, dtype=torch.bool),
        torch.arange(length).repeat(rows, 1),
        torch.arange(length - targets, length),
    )
    graphs = [
        (
            TRANSFORMER,
            TransformerGraph(omnivoice),
            transformer_inputs,
            {
                "input_ids": {0: "rows", 2: "length"},
                "audio_mask": {0: "rows", 1: "length"},
                "attention_mask": {0: "rows", 2: "length", 3: "length"},
                "position_ids": {0: "rows", 1: "length"},
                "target_index": {0: "targets"},
                "logits": {0: "targets"},
            },
        ),
        (
            ENCODER,
            EncoderGraph(tokenizer),
            (torch.zeros(1, 1, hop * 40),),
            {"waveform": {0: "batch", 2: "samples"}, "codes": {0: "batch", 2: "frames"}},
        ),
        (
            DECODER,
            DecoderGraph(tokenizer),
            (torch.zeros(1, codebooks, 40, dtype=torch.long),),
            {"codes": {0: "batch", 2: "frames"}, "waveform": {0: "batch", 2: "samples"}},
        ),
    ]
    files = {}
    for name, module, inputs, axes in graphs:
        contract = CONTRACT[name]
        # Scratch space in omnidub's state folder: a killed export leaves nothing among the outputs.
        with tempfile.TemporaryDirectory(prefix="export-", dir=folder.state) as scratch:
            raw = Path(scratch) / "raw" / name
            raw.parent.mkdir()
            with torch.inference_mode(False), torch.no_grad(), _quiet_export():
                torch.onnx.export(
                    module.eval(),
                    inputs,
                    str(raw),
                    dynamo=False,
                    opset_version=opset,
                    input_names=list(contract["inputs"]),
                    output_names=list(contract["outputs"]),
                    dynamic_axes=axes,
                    do_constant_folding=True,
                )
            files[name] = _move_in(folder, _consolidate(raw, Path(scratch) / name, onnx))
    manifest = _manifest(source, omnivoice, opset, quantize, files)
    del graphs, module, tokenizer, omnivoice  # the quantizer holds the graph in memory: let the torch model go first
    gc.collect()
    if quantize == "int8":
        with tempfile.TemporaryDirectory(prefix="export-", dir=folder.state) as scratch:
            files[TRANSFORMER_INT8] = _move_in(
                folder, quantize_int8(out_dir / TRANSFORMER, Path(scratch) / TRANSFORMER_INT8)
            )
    manifest["tokenizer"] = {}
    for extra in ("tokenizer.json", "tokenizer_config.json"):
        if (source.path / extra).is_file():
            folder.make_way([extra])
            with atomic_path(out_dir / extra) as temp:
                shutil.copyfile(source.path / extra, temp)
            manifest["tokenizer"][extra] = _describe(out_dir / extra)
            folder.record(extra, manifest["tokenizer"][extra]["sha256"])
    if "tokenizer.json" not in manifest["tokenizer"]:
        raise OmnidubError(f"{source.spec} has no tokenizer.json; the ONNX backend needs the fast tokenizer file")
    # Written last and checked on every load: an export.json edited afterwards no longer matches it.
    manifest["content_sha256"] = export_content_digest(manifest)
    write_manifest(folder, manifest)
    written = {MANIFEST, *manifest["tokenizer"]}
    for name, described in files.items():
        written |= {name, *([described["data"]["file"]] if described.get("data") else [])}
    folder.remove_stale(written)  # what an earlier export wrote that this one does not (a weights sidecar)
    return ExportResult(out_dir, manifest, time.perf_counter() - began)


def _move_in(folder: OutputFolder, made: tuple[Path, dict]) -> dict:
    """Move a graph written in scratch space (and its weights sidecar) into the export folder; returns its
    description. A file of the folder someone changed since omnidub wrote it is moved aside first."""
    path, described = made
    names = [path.name] + ([described["data"]["file"]] if described.get("data") else [])
    folder.discard([path.name + ".data"])  # an earlier export's sidecar must not pass for this graph's
    folder.make_way(names)
    for name in names:
        os.replace(path.with_name(name), folder.path / name)
    folder.record(path.name, described["sha256"])
    if described.get("data"):
        folder.record(described["data"]["file"], described["data"]["sha256"])
    return described


def _manifest(source, omnivoice, opset: int, quantize: str | None, files: dict) -> dict:
    import onnx
    import torch

    config = omnivoice.config
    tokenizer = omnivoice.audio_tokenizer
    return {
        "format": EXPORT_FORMAT,
        "model": dict(source.identity),
        "opset": opset,
        "exporter": {"kind": "torch.onnx legacy (TorchScript)", "torch": torch.__version__, "onnx": onnx.__version__},
        "quantize": quantize,
        "transformer": TRANSFORMER_INT8 if quantize == "int8" else TRANSFORMER,
        "config": {
            "codebooks": int(config.num_audio_codebook),
            "audio_vocab": int(config.audio_vocab_size),
            "mask_id": int(config.audio_mask_id),
            "sample_rate": int(omnivoice.sampling_rate),
            "hop_length": int(tokenizer.config.hop_length),
            "frame_rate": int(tokenizer.config.frame_rate),
            "shape": f"h{int(config.llm_config.hidden_size)}x{int(config.llm_config.num_hidden_layers)}",
        },
        "contract": CONTRACT,
        "files": files,
        "parity": None,
    }


def quantize_int8(source: Path, target: Path) -> tuple[Path, dict]:
    """Dynamic int8 of the transformer's MatMul weights (activations quantized per call); returns the file written
    and its description."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    big = _external(source)
    logging.disable(logging.WARNING)  # the quantizer advises a pre-processing pass on its root logger
    try:
        quantize_dynamic(
            str(source),
            str(target),
            op_types_to_quantize=["MatMul"],
            weight_type=QuantType.QInt8,
            use_external_data_format=big,
        )
    finally:
        logging.disable(logging.NOTSET)
    return target, _describe(target)


def load_torch_model(spec: str):
    """The torch model a --model spec names, in float32 on the CPU (what the graphs are traced from)."""
    import torch

    from omnidub.backends.torch.upstream import load_model
    from omnidub.models import resolve_model

    source = resolve_model(spec)
    if source.backend != "torch":
        raise OmnidubError(
            f"{spec} is already an ONNX export; export from a checkpoint (hub id, folder or synthetic:*)"
        )
    model = load_model(source, "cpu", torch.float32)
    model.audio_tokenizer.eval()
    return source, model


def write_manifest(folder: OutputFolder, manifest: dict) -> list[str]:
    """Write export.json into the export folder (atomically, through its ledger); returns the notes of a changed
    export.json moved aside."""
    return folder.write_text(MANIFEST, json.dumps(manifest, indent=2) + "\n")


def older_export(folder: Path) -> set[str]:
    """The files of an export written by an omnidub that kept no ledger, as its own export.json proves them:
    that export.json (its content hash intact), every file whose sha256 it records and holds, and its parity
    report."""
    from omnidub.backends.onnx.runtime import check_content, read_manifest
    from omnidub.digests import sha256

    try:
        manifest = read_manifest(folder)
        check_content(folder, manifest)
    except OmnidubError:
        return set()
    described = {**(manifest.get("files") or {}), **(manifest.get("tokenizer") or {})}
    vouched = set()
    for name, entry in described.items():
        parts = [(name, entry.get("sha256"))] if isinstance(entry, dict) else []
        if parts and isinstance(entry.get("data"), dict):
            parts.append((entry["data"].get("file"), entry["data"].get("sha256")))
        for part, expected in parts:
            path = Path(folder) / str(part)
            if isinstance(part, str) and "/" not in part and path.is_file() and sha256(path) == expected:
                vouched.add(part)
    if not vouched:
        return set()
    return vouched | {MANIFEST} | ({PARITY_FILE} if (Path(folder) / PARITY_FILE).is_file() else set())


def _consolidate(raw: Path, target: Path, onnx) -> tuple[Path, dict]:
    """Write an exported graph in omnidub's layout at ``target`` (scratch space): one file, or graph + one
    ``.data`` sidecar when the weights need it. Returns the graph's path and description."""
    # The exporter may have spilled each big weight into its own loose file beside the graph; loading with
    # external data from the scratch folder gathers them all before we write our own layout.
    model = onnx.load(str(raw), load_external_data=True)
    size = sum(len(t.raw_data) for t in model.graph.initializer)
    data = target.with_name(target.name + ".data")
    if size > EXTERNAL_DATA_BYTES:
        onnx.save_model(
            model,
            str(target),
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location=data.name,
            size_threshold=1024,
        )
    else:
        onnx.save_model(model, str(target))
    return target, _describe(target)


def _describe(path: Path) -> dict:
    data = path.with_name(path.name + ".data")
    out = {"sha256": _sha256(path), "bytes": path.stat().st_size}
    if data.is_file():
        out["data"] = {"file": data.name, "sha256": _sha256(data), "bytes": data.stat().st_size}
    return out


def _external(path: Path) -> bool:
    return path.with_name(path.name + ".data").is_file()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _require_exporter() -> None:
    try:
        import onnx  # noqa: F401
    except ImportError as exc:
        raise OmnidubError("omnidub export needs the onnx package: pip install 'omnidub[onnx]'") from exc


class _quiet_export:
    """The legacy exporter warns about every traced branch; those are expected (the parity check covers them)."""

    def __enter__(self):
        import warnings

        self._catch = warnings.catch_warnings()
        self._catch.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, *exc):
        self._catch.__exit__(*exc)
