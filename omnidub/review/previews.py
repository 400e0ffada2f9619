"""What the review page hears beside a line, made when it asks: the line's own span of the source, the line in
context (its neighbours as they stand, over the bed) and the picture. Each reads the source, the segments and
the bed, never the project's state (the worker publishes the lines these read)."""

from __future__ import annotations

from omnidub.errors import OmnidubError

VIDEO_SUFFIXES = (".mp4", ".m4v", ".mov", ".mkv", ".webm")
CONTEXT_SECONDS = 2.0  # heard before and after a line played in context


class Previews:
    """The previews of one project; the source and the bed are decoded once, when first asked for."""

    def __init__(self, project):
        self.project = project
        self._source = None  # the source's audio
        self._bed_samples = None  # (rate, samples) of the bed

    def own_original(self, span: tuple[float, float] | None) -> bytes | None:
        """A span of the source as WAV bytes, or None (no span, no source, or one that cannot be read)."""
        from omnidub.source.audio import CLIP_RATE, read_source, wav_bytes

        options = self.project.options.source
        if span is None or options is None:
            return None
        if self._source is None:
            try:
                self._source = read_source(options.source, CLIP_RATE)
            except OmnidubError:
                return None
        return wav_bytes(self._source.cut(span[0], span[1]), CLIP_RATE)

    def context(self, line: dict, placed: list[tuple[dict, object]]) -> bytes:
        """The line (its view) with CONTEXT_SECONDS before and after, as the lines stand now: every placed segment
        (each line's view and the path of its segment) at its place over the bed, ducked under the lines as the
        mix ducks it, as WAV bytes."""
        import numpy as np
        import soundfile as sf

        from omnidub.source.audio import wav_bytes

        delivery = self.project.options.delivery
        start, end = max(0.0, line["start"] - CONTEXT_SECONDS), line["end"] + CONTEXT_SECONDS
        parts = []
        for view, path in placed:
            ends = view["start"] + (view["duration"] or 0.0)
            if path is None or view["start"] > end or max(ends, view["end"]) < start:
                continue
            try:
                data, rate = sf.read(str(path), dtype="float32", always_2d=True)
            except (OSError, RuntimeError, sf.LibsndfileError):
                continue  # replaced under it: left out of this preview
            parts.append((view["start"], data.mean(axis=1), rate))
        rate = parts[0][2] if parts else delivery.sample_rate
        out = np.zeros(int(round((end - start) * rate)), dtype=np.float32)
        speech = np.zeros(out.size, dtype=bool)
        for at, samples, own_rate in parts:
            if own_rate != rate:
                from omnidub.media import resample

                samples = resample(samples, own_rate, rate)
            a = int(round((at - start) * rate))
            piece = samples[max(0, -a) : max(0, out.size - a)]
            out[max(a, 0) : max(a, 0) + piece.size] += piece
            speech[max(a, 0) : max(a, 0) + piece.size] = True
        bed = self._bed(start, out.size, rate)
        if bed is not None:
            out += np.where(speech, bed * 10 ** (-delivery.duck / 20), bed)
        return wav_bytes(np.clip(out, -1.0, 1.0), rate)

    def _bed(self, start: float, frames: int, rate: int):
        """The bed's samples from ``start`` (mono, at ``rate``), or None without a bed."""
        import numpy as np

        from omnidub.media import load_audio

        project = self.project
        path = project.options.delivery.bed or (project.casting.bed if project.casting is not None else None)
        if path is None or not path.is_file():
            return None
        if self._bed_samples is None or self._bed_samples[0] != rate:
            try:
                self._bed_samples = (rate, load_audio(path, rate))  # decoded once
            except OmnidubError:
                return None
        samples = self._bed_samples[1][int(round(start * rate)) :][:frames]
        return np.pad(samples, (0, frames - samples.size))

    def picture(self):
        """The video the page shows beside the lines (the one the render delivers over, else a source that is a
        video), or None. The user's own file: only read."""
        video = self.project.options.delivery.video
        source = self.project.options.source
        if video is None and source is not None and source.source.suffix.lower() in VIDEO_SUFFIXES:
            video = source.source
        return video if video is not None and video.is_file() else None
