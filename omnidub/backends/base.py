"""The backend protocol and the plain data that crosses it: prompts, requests and results.

Nothing here imports torch: a prompt is numpy arrays and text, saved as ``.npz``, so it can be cached, keyed
and sent to a worker without the model's classes.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Protocol, Sequence, runtime_checkable

import numpy as np

from omnidub.duration import FRAME_RATE

PROMPT_FORMAT = 1


@dataclass(frozen=True, eq=False)
class Prompt:
    """An encoded voice: the reference's audio codes [codebooks, frames], its exact transcript, its RMS level."""

    codes: np.ndarray
    text: str
    rms: float
    language: str | None = None
    note: str = ""  # how the reference was prepared (trimmed where, or why it was kept whole)
    provisional: bool = False  # kept whole only for want of an ASR model: prepare again once one is there

    @property
    def frames(self) -> int:
        return int(self.codes.shape[-1])

    @property
    def seconds(self) -> float:
        return self.frames / FRAME_RATE

    def digest(self) -> str:
        """A content hash: two prompts with equal codes, text and level give equal audio."""
        import hashlib

        h = hashlib.sha256(np.ascontiguousarray(self.codes, dtype=np.int64).tobytes())
        h.update(f"{self.text}\0{float(self.rms):.9g}\0{self.language}".encode())
        return h.hexdigest()

    def to_bytes(self, made_for: str | None = None) -> bytes:
        """The prompt as an .npz file's bytes; ``made_for`` (a prompt key) is recorded with the prompt's own hash,
        so a reader can tell the file holds what was made for that key."""
        made = {"made_for": made_for, "sha256": self.digest()} if made_for is not None else {}
        meta = json.dumps(
            {
                "format": PROMPT_FORMAT,
                "text": self.text,
                "rms": float(self.rms),
                "language": self.language,
                "note": self.note,
                "provisional": self.provisional,
                **made,
            }
        )
        buffer = io.BytesIO()
        np.savez(
            buffer, codes=np.asarray(self.codes, dtype=np.int64), meta=np.frombuffer(meta.encode(), dtype=np.uint8)
        )
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, made_for: str | None = None) -> "Prompt":
        """A prompt from :meth:`to_bytes`; with ``made_for``, ValueError unless it was made for that key and
        still holds what was made (a file swapped with another key's, or changed, is refused)."""
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            meta = json.loads(npz["meta"].tobytes().decode())
            if meta.get("format") != PROMPT_FORMAT:
                raise ValueError(f"prompt format {meta.get('format')} is not {PROMPT_FORMAT}")
            codes = np.array(npz["codes"], dtype=np.int64)
        if codes.ndim != 2 or codes.shape[1] == 0:
            raise ValueError(f"prompt codes have shape {codes.shape}")
        prompt = cls(
            codes,
            meta["text"],
            float(meta["rms"]),
            meta.get("language"),
            meta.get("note", ""),
            bool(meta.get("provisional", False)),
        )
        if made_for is not None and meta.get("made_for") != made_for:
            raise ValueError("it was made for another voice" if meta.get("made_for") else "it records no voice")
        if made_for is not None and meta.get("sha256") != prompt.digest():
            raise ValueError("its content is not what was stored")
        return prompt

    def save(self, path: Path) -> None:
        Path(path).write_bytes(self.to_bytes())

    @classmethod
    def load(cls, path: Path) -> "Prompt":
        return cls.from_bytes(Path(path).read_bytes())


@dataclass(frozen=True)
class Request:
    """One line to speak. ``duration`` (seconds) makes the audio exactly that long, from
    ``target_frames(duration)`` generated frames (None: its natural length, trimmed as upstream does);
    ``seed`` fixes its noise; ``id`` comes back on its result."""

    text: str
    prompt: Prompt | None = None
    language: str | None = None
    instruct: str | None = None
    duration: float | None = None
    seed: int = 0
    id: str = ""


@dataclass(frozen=True, eq=False)
class Result:
    """Audio of one line (float32 mono), the wall seconds it cost (a batch's time shared among its lines) and
    the frames generated."""

    id: str
    audio: np.ndarray
    sample_rate: int
    seconds: float
    frames: int


@runtime_checkable
class Backend(Protocol):
    """What render, bench and the scheduler need of a model (the decoding loop, backends/loop.py, implements
    everything but the runtime's own hooks)."""

    name: str  # "torch" or "onnxruntime"
    sample_rate: int
    frame_rate: int
    device: str
    dtype: str
    layout: str  # the CFG layout it renders in
    layout_choice: object  # config.LayoutChoice: the layout and where it comes from
    on_note: Callable[[str], None]  # what the backend decides on its own while it renders (--compile auto)

    @property
    def identity(self) -> dict:
        """Model, backend, device and dtype: what changes the audio besides the request (for keys)."""

    @property
    def settings(self) -> dict:
        """Generation settings that change the audio (steps, layout, ...), for keys and the manifest."""

    def encode_prompt(self, audio: np.ndarray, sample_rate: int, text: str, language: str | None = None) -> Prompt:
        """Encode a prepared reference (mono float waveform and its exact transcript)."""

    def cost(self, request: Request) -> int:
        """Tokens one decoding step of this request runs through the model (for token-budget buckets)."""

    def synthesize(self, requests: Sequence[Request]) -> Iterator[Result]:
        """Speak one bucket of requests; yields each line's result as soon as it is finished."""

    def tokens(self, requests: Sequence[Request]) -> list[np.ndarray]:
        """The audio tokens [codebooks, frames] that :meth:`synthesize` would decode (for parity checks)."""

    def probe(self) -> list:
        """Measure on first use what this machine never measured (layout, kernels), record it, use it; returns
        what was measured (``probe.ProbeResult``), or nothing."""

    def use_layout(self, layout: str) -> None:
        """Render in ``layout`` from now on (a project pinned it)."""

    def expect(self, tokens: int) -> None:
        """Hear the job's work left, in tokens per step (:meth:`cost` summed), before its first bucket (a backend
        may plan for it: --compile auto)."""


@dataclass(frozen=True)
class BackendSpec:
    """How the registry knows a backend without importing it: its name (in identities and manifests), the Python
    module it needs, and torch-free callables that load it, check a voice-design instruction and say the dtype it
    will render in. Each backend package declares its own (``spec.py``); the registry lists them once."""

    name: str
    label: str  # for people: "torch", "ONNX Runtime"
    module: str  # the import it needs to run
    load: Callable  # (source, device, EngineOptions, pinned_layout) -> Backend
    check_instruct: Callable[[str], None]
    dtype: Callable[[object, str, str], str]  # (source or None while its export is unbuilt, device, dtype spec)
