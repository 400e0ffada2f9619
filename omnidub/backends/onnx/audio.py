"""Upstream's waveform rules in numpy + pydub (no torch): silence removal, edge fade and pad, chunk joins."""

from __future__ import annotations

import numpy as np

SILENCE_DBFS = -50


def remove_silence(audio: np.ndarray, sample_rate: int, mid_ms: int, lead_ms: int, trail_ms: int) -> np.ndarray:
    """Shorten inner silences over ``mid_ms`` to ``mid_ms`` each side and trim the edges to ``lead_ms``/``trail_ms``.

    ``audio`` is mono [samples]; silence is below -50 dBFS, judged on 16-bit samples as upstream does."""
    from omnidub.media import quiet_pydub

    with quiet_pydub():
        from pydub import AudioSegment
        from pydub.silence import detect_leading_silence, split_on_silence

    pcm = (np.asarray(audio, dtype=np.float32) * 32768.0).clip(-32768, 32767).astype(np.int16)
    wave = AudioSegment(data=pcm.tobytes(), sample_width=2, frame_rate=sample_rate, channels=1)
    if mid_ms > 0:
        pieces = split_on_silence(
            wave, min_silence_len=mid_ms, silence_thresh=SILENCE_DBFS, keep_silence=mid_ms, seek_step=10
        )
        wave = sum(pieces, AudioSegment.silent(duration=0))
    start = max(0, detect_leading_silence(wave, silence_threshold=SILENCE_DBFS) - lead_ms)
    wave = wave[start:].reverse()
    start = max(0, detect_leading_silence(wave, silence_threshold=SILENCE_DBFS) - trail_ms)
    wave = wave[start:].reverse()
    return np.array(wave.get_array_of_samples()).astype(np.float32) / 32768.0


def fade_and_pad(
    audio: np.ndarray, sample_rate: int, pad_seconds: float = 0.1, fade_seconds: float = 0.1
) -> np.ndarray:
    """A linear fade at both ends, then silence on both sides (upstream's output framing)."""
    if audio.shape[-1] == 0:
        return audio
    out = np.array(audio, dtype=np.float32, copy=True)
    k = min(int(fade_seconds * sample_rate), out.shape[-1] // 2)
    if k > 0:
        out[:k] *= np.linspace(0, 1, k, dtype=np.float32)
        out[-k:] *= np.linspace(1, 0, k, dtype=np.float32)
    pad = np.zeros(int(pad_seconds * sample_rate), dtype=np.float32)
    return np.concatenate([pad, out, pad])


def join_chunks(chunks: list[np.ndarray], sample_rate: int, gap_seconds: float = 0.3) -> np.ndarray:
    """Chunks of one long line joined as upstream joins them: fade out, 0.1 s of silence, fade in."""
    fade = int(gap_seconds * sample_rate) // 3
    merged = np.array(chunks[0], dtype=np.float32, copy=True)
    for chunk in chunks[1:]:
        n = min(fade, merged.shape[-1])
        if n > 0:
            merged[-n:] *= np.linspace(1, 0, n, dtype=np.float32)
        head = np.array(chunk, dtype=np.float32, copy=True)
        m = min(fade, head.shape[-1])
        if m > 0:
            head[:m] *= np.linspace(0, 1, m, dtype=np.float32)
        merged = np.concatenate([merged, np.zeros(fade, dtype=np.float32), head])
    return merged
