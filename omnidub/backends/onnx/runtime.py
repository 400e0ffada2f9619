"""ONNX Runtime sessions over an export folder: the transformer's target logits, encode and decode. No torch."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from omnidub.errors import OmnidubError
from omnidub.models import EXPORT_MANIFEST as MANIFEST

EXPORT_FORMAT = 1


def default_threads() -> int:
    """OMP_NUM_THREADS when set (workers sharing a machine split its cores that way), else the physical cores."""
    import psutil

    try:
        return max(1, int(os.environ["OMP_NUM_THREADS"]))
    except (KeyError, ValueError):
        return psutil.cpu_count(logical=False) or os.cpu_count() or 1


class Runtime:
    """The export's three graphs in ONNX Runtime sessions; the transformer is loaded now, the codec on first use."""

    def __init__(self, folder: Path, device: str = "cpu", *, threads: int | None = None, quantized: bool | None = None):
        import onnxruntime as ort

        self.folder = Path(folder)
        self.manifest = read_manifest(self.folder)
        check_content(self.folder, self.manifest)
        config = self.manifest["config"]
        self.codebooks = int(config["codebooks"])
        self.mask_id = int(config["mask_id"])
        self.sample_rate = int(config["sample_rate"])
        self.hop = int(config["hop_length"])
        self.frame_rate = int(config["frame_rate"])
        self.device = device
        self._ort = ort
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or default_threads()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.enable_mem_pattern = True
        options.log_severity_level = 3
        self._options = options
        if device.startswith("cuda"):
            if "CUDAExecutionProvider" not in ort.get_available_providers():
                raise OmnidubError(
                    "device cuda requested but this onnxruntime has no CUDA provider; "
                    "pip install onnxruntime-gpu or use --device cpu"
                )
            index = int(device.split(":")[1]) if ":" in device else 0
            # TF32 off: its ~1e-2 logit error compounds over the steps into different speech.
            self._providers = [("CUDAExecutionProvider", {"device_id": index, "use_tf32": 0}), "CPUExecutionProvider"]
            self._ort_device = ("cuda", index)
        elif device == "cpu":
            self._providers = ["CPUExecutionProvider"]
            self._ort_device = ("cpu", 0)
        else:
            raise OmnidubError(f"the ONNX Runtime backend runs on cpu or cuda, not {device!r}")
        if quantized is None:
            quantized = export_dtype(self.manifest) == "int8"
        self.quantized = quantized
        name = "transformer.int8.onnx" if quantized else "transformer.onnx"
        if quantized and name not in self.manifest["files"]:
            raise OmnidubError(f"{self.folder} has no int8 transformer; export it with --quantize int8")
        self.transformer = self._session(name)
        self._encoder = self._decoder = None

    def _session(self, name: str):
        path = self.folder / name
        if not path.is_file():
            raise OmnidubError(f"{path} is missing; export the model again")
        verify_file(self.folder, name, self.manifest["files"].get(name))
        try:
            return self._ort.InferenceSession(str(path), sess_options=self._options, providers=self._providers)
        except Exception as exc:  # ORT raises its own Fail/InvalidGraph types
            raise OmnidubError(f"cannot load {path}: {exc}".splitlines()[0]) from exc

    @property
    def encoder(self):
        if self._encoder is None:
            self._encoder = self._session("encoder.onnx")
        return self._encoder

    @property
    def decoder(self):
        if self._decoder is None:
            self._decoder = self._session("decoder.onnx")
        return self._decoder

    def forward_fn(self):
        """A ``forward(plan) -> logits [N, C, V]`` for one decoding batch, keeping each plan's fixed inputs bound.

        The masks, positions and target indices stay in ORT values for the whole decode; the tokens change
        every step and are bound again before every run (a bound input is copied once, not watched)."""
        bindings: dict[int, object] = {}
        kind, index = self._ort_device

        def forward(plan) -> np.ndarray:
            binding = bindings.get(id(plan))
            if binding is None:
                binding = self.transformer.io_binding()
                for name in ("audio_mask", "attention_mask", "position_ids", "target_index"):
                    value = self._ort.OrtValue.ortvalue_from_numpy(
                        np.ascontiguousarray(getattr(plan, name)), kind, index
                    )
                    binding.bind_ortvalue_input(name, value)
                binding.bind_output("logits")
                bindings[id(plan)] = (binding, plan)  # keep the plan alive so its id stays unique
            else:
                binding = binding[0]
            binding.bind_ortvalue_input(
                "input_ids", self._ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(plan.input_ids), kind, index)
            )
            self.transformer.run_with_iobinding(binding)
            return binding.copy_outputs_to_cpu()[0]

        return forward

    def encode(self, waveform: np.ndarray) -> np.ndarray:
        """Codes [C, frames] int64 of a mono float32 waveform at the model's rate."""
        x = np.ascontiguousarray(waveform, dtype=np.float32).reshape(1, 1, -1)
        return self.encoder.run(None, {"waveform": x})[0][0].astype(np.int64)

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """Mono float32 waveform of codes [C, frames]."""
        x = np.ascontiguousarray(codes, dtype=np.int64)[None]
        return self.decoder.run(None, {"codes": x})[0][0, 0].astype(np.float32)


def read_manifest(folder: Path) -> dict:
    """``export.json`` of an export folder, or a one-line error."""
    import json

    path = Path(folder) / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise OmnidubError(f"{folder} is not an omnidub export (no {MANIFEST}); run omnidub export first") from exc
    except json.JSONDecodeError as exc:
        raise OmnidubError(f"{path} is not valid JSON: {exc}") from exc
    if manifest.get("format") != EXPORT_FORMAT:
        raise OmnidubError(
            f"{path} has export format {manifest.get('format')}, this omnidub reads {EXPORT_FORMAT}; export again"
        )
    return manifest


def check_content(folder: Path, manifest: dict) -> None:
    """The manifest's audio-shaping content is what was exported: its content hash matches (exports made before
    it was recorded have none) and its rates agree with each other."""
    from omnidub.models import export_content_digest

    recorded = manifest.get("content_sha256")
    if recorded is not None and recorded != export_content_digest(manifest):
        raise OmnidubError(
            f"{Path(folder) / MANIFEST} was changed after the export (its content no longer matches its "
            "content_sha256); export the model again"
        )
    config = manifest.get("config") or {}
    try:
        consistent = int(config["sample_rate"]) == int(config["hop_length"]) * int(config["frame_rate"])
    except (KeyError, TypeError, ValueError):
        consistent = False
    if not consistent:
        raise OmnidubError(
            f"{Path(folder) / MANIFEST}: sample_rate, hop_length and frame_rate disagree "
            f"({config.get('sample_rate')} != {config.get('hop_length')} x {config.get('frame_rate')}); "
            "export the model again"
        )


def verify_file(folder: Path, name: str, described: dict | None) -> None:
    """A file of the export (and its weights sidecar) has the sha256 export.json records for it. Each file is
    hashed once: its hash is remembered by size and modification time (digests.py)."""
    from omnidub.digests import sha256

    if not described or "sha256" not in described:
        raise OmnidubError(f"{Path(folder) / MANIFEST} records no hash for {name}; export the model again")
    parts = [(name, described["sha256"])]
    if described.get("data"):
        parts.append((described["data"]["file"], described["data"]["sha256"]))
    for part, expected in parts:
        path = Path(folder) / part
        if not path.is_file():
            raise OmnidubError(f"{path} is missing; export the model again")
        if sha256(path) != expected:
            raise OmnidubError(
                f"{path} is not the file that was exported (its sha256 differs from export.json's); "
                "export the model again"
            )


def export_dtype(manifest: dict) -> str:
    """The precision an export renders in by default: int8 when exported with --quantize int8, else float32."""
    return "int8" if manifest.get("quantize") == "int8" else "float32"
