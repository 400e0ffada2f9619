"""Vocal isolation with Demucs (the `demucs` package, its author's maintained release), optional: the `separate`
extra. References are cut from the isolated vocals; the rest (drums, bass, other) is the accompaniment, written
for the render to use as its bed.

Models load through demucs' own loaders: a pretrained name (``htdemucs``, ``htdemucs_ft``, ``mdx_extra`` ...)
from its caches (the Hugging Face cache, then torch hub's), or a local model file (``.th`` package,
``.safetensors``, or a bag's ``.yaml`` beside its models).
"""

from __future__ import annotations

import contextlib
import io
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from omnidub.errors import OmnidubError, first_line
from omnidub.source.audio import CLIP_RATE, SourceAudio

VOCALS = "vocals"
INSTALL = "pip install 'omnidub[separate]'"


@dataclass(frozen=True, eq=False)
class Separation:
    """A source split into its vocals (mono, at the clip rate) and everything else (channels x samples)."""

    model: str
    vocals: SourceAudio
    accompaniment: np.ndarray
    sample_rate: int  # the accompaniment's rate (the model's)


def load_separator(model: str, device: str = "cpu"):
    """A Demucs model (or bag of models) by pretrained name or local file, on `device`."""
    try:
        from demucs import pretrained, states
        from demucs.hf import load_safetensors_model
    except ImportError as exc:
        raise OmnidubError(f"--separate needs the demucs package ({exc}): {INSTALL}") from None
    path = Path(model).expanduser()
    looks_like_file = path.suffix in (".th", ".safetensors", ".yaml") or "/" in model or "\\" in model
    try:
        if looks_like_file:
            if not path.is_file():
                raise OmnidubError(
                    f"--separate {model}: no such model file (give a .th, .safetensors or a bag's .yaml)"
                )
            if path.suffix == ".th":
                loaded = states.load_model(path)
            elif path.suffix == ".safetensors":
                loaded = load_safetensors_model(path)
            elif path.suffix == ".yaml":
                loaded = pretrained.get_model(path.stem, repo=path.parent)
            else:
                raise OmnidubError(f"--separate {model}: not a Demucs model file (.th, .safetensors or a bag's .yaml)")
        else:
            with _download_guard():
                loaded = pretrained.get_model(model)
    except OmnidubError:
        raise
    except Exception as exc:  # noqa: BLE001 - hub, network, checksum and unpickling errors all mean the same to a user
        reason = first_line(exc)
        if looks_like_file:
            raise OmnidubError(f"--separate {model}: cannot load it as a Demucs model ({reason})") from None
        raise OmnidubError(
            f"cannot load the separation model {model!r}: it is not in the local caches and could not be downloaded "
            f'({reason}); on a connected machine run: python -c "from demucs.pretrained import get_model; '
            f"get_model('{model}')\" (the weights then stay in the cache), or pass --separate PATH to a model file"
        ) from None
    if VOCALS not in loaded.sources:
        raise OmnidubError(f"--separate {model}: the model separates {', '.join(loaded.sources)}, not {VOCALS}")
    loaded.eval()
    return loaded.to(device)


@contextlib.contextmanager
def _download_guard():
    """Torch hub announces downloads on stdout, which --json keeps for the report: send it to stderr. With
    HF_HUB_OFFLINE set, demucs' fallback to its legacy download site must not reach the network either."""
    import torch.hub
    from huggingface_hub import constants

    if not constants.HF_HUB_OFFLINE:
        with contextlib.redirect_stdout(sys.stderr):
            yield
        return

    def refuse(url, *args, **kwargs):
        raise OSError("offline (HF_HUB_OFFLINE is set)")

    original = torch.hub.download_url_to_file
    torch.hub.download_url_to_file = refuse
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the announcement of a download it will not make
            yield
    finally:
        torch.hub.download_url_to_file = original


def separate(separator, path: Path, name: str) -> Separation:
    """Split a source's audio into vocals and accompaniment with a loaded Demucs model."""
    import torch
    from demucs.apply import apply_model

    rate, channels = int(separator.samplerate), int(separator.audio_channels)
    mix = torch.from_numpy(decode_channels(path, rate, channels))
    reference = mix.mean(0)
    mean, std = float(reference.mean()), float(reference.std()) + 1e-8
    device = next(separator.parameters()).device
    with torch.inference_mode():
        stems = apply_model(
            separator, ((mix - mean) / std)[None], device=device, shifts=1, split=True, overlap=0.25, progress=False
        )[0]
    stems = (stems * std + mean).cpu().numpy()
    k = list(separator.sources).index(VOCALS)
    accompaniment = np.delete(stems, k, axis=0).sum(axis=0).astype(np.float32)
    vocals = SourceAudio(Path(path), np.ascontiguousarray(stems[k].mean(axis=0), dtype=np.float32), rate)
    return Separation(name, vocals.at_rate(CLIP_RATE), accompaniment, rate)


def decode_channels(path: Path, sample_rate: int, channels: int) -> np.ndarray:
    """A file's first audio stream as float32 (channels x samples) at `sample_rate` (mono up-mixed, 5.1 down)."""
    import av

    layout = "stereo" if channels == 2 else "mono"
    try:
        with av.open(str(path)) as container:
            if not container.streams.audio:
                raise OmnidubError(f"{path}: has no audio stream")
            resampler = av.AudioResampler(format="fltp", layout=layout, rate=sample_rate)
            chunks = []
            for frame in container.decode(container.streams.audio[0]):
                chunks.extend(f.to_ndarray() for f in resampler.resample(frame))
            chunks.extend(f.to_ndarray() for f in resampler.resample(None))
    except OmnidubError:
        raise
    except Exception as exc:  # noqa: BLE001 - any decoder failure is the file's
        raise OmnidubError(f"{path}: cannot decode audio ({exc})") from None
    return np.ascontiguousarray(np.concatenate(chunks, axis=1), dtype=np.float32)


def build_random_separator(folder: Path, seed: int = 0) -> Path:
    """A small Hybrid Transformer Demucs with random weights, saved as demucs' own model package (``.th``).

    Its stems are noise; it runs the real loading and separation code offline, as synthetic:tiny does for
    OmniVoice."""
    import torch
    from demucs.htdemucs import HTDemucs

    torch.manual_seed(seed)
    model = HTDemucs(
        sources=["drums", "bass", "other", VOCALS],
        audio_channels=2,
        samplerate=44100,
        segment=4,
        channels=4,
        depth=4,
        t_layers=1,
        t_heads=2,
        bottom_channels=0,
        dconv_comp=4,
        t_hidden_scale=1.0,
    )
    args, kwargs = model._init_args_kwargs
    package = {
        "klass": HTDemucs,
        "args": args,
        "kwargs": kwargs,
        "state": {k: v.detach().clone() for k, v in model.state_dict().items()},
    }
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "random-htdemucs.th"
    torch.save(package, path)
    return path
