"""What the review page hears beside a line, made when it asks: the line's own span of the source, the programme
over any span (the lines as they stand over the bed, ducked as the mix ducks it, with the source mixed in when
asked; a line in context is the programme around it) and the picture. Each reads the source, the segments and the
bed, never the project's state (the worker publishes the lines these read).

The source and the bed are decoded once, in the background from the moment a review opens, into WAV files in
omnidub's cache (``<cache>/review/``), from which a span is read without decoding again: a later review of the same
source starts with them ready. Until they are, a preview that needs one raises :class:`NotReady` at once, never
waiting (a request held open would hold one of the browser's few connections to the server)."""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from omnidub.errors import OmnidubError
from omnidub.source.audio import CLIP_RATE, wav_bytes

VIDEO_SUFFIXES = (".mp4", ".m4v", ".mov", ".mkv", ".webm")
CONTEXT_SECONDS = 2.0  # heard before and after a line played in context
PROGRAMME_SECONDS = 120.0  # the longest span of the programme assembled at once
RATE = CLIP_RATE  # the previews' rate: the source's clips' and the voices'
DECODED_VERSION = 1  # of the decoded files' layout: a new one decodes every source again
# The decoded copies kept in the cache, the most recently used first: a 22-minute source is about 63 MB at 24 kHz.
KEEP_BYTES = 2 * 1024**3


class NotReady(Exception):
    """The source or the bed is still being decoded (``what`` says which)."""

    def __init__(self, what: str):
        super().__init__(f"the {what} is still being prepared")
        self.what = what


@dataclass(frozen=True)
class Span:
    """A span of the programme to hear: from ``start`` to ``end`` seconds, with the dub, the source's own audio
    and the bed each in or out."""

    start: float
    end: float
    dub: bool = True
    original: bool = False
    bed: bool = True


class Previews:
    """The previews of one project. :meth:`prepare` decodes the source and the bed (once, cached on disk); a
    preview reads spans of them."""

    def __init__(self, project, on_ready: Callable[[str], None] = lambda what: None):
        self.project = project
        self.on_ready = on_ready
        self._decoded: dict[str, Path | None] = {}  # "source", "bed" -> the decoded WAV, or None (none, unreadable)
        self._lock = threading.Lock()
        self.ready = threading.Event()  # both decoded (or found to be absent)

    # -- decoding, once --------------------------------------------------------------------------------------
    def start(self) -> threading.Thread:
        """Decode the source and the bed on a thread of their own, at a low priority (the page's actions and the
        renders come first); ``on_ready(what)`` is called as each is there ("all" once both are)."""
        self._wanted()  # what is not there is known at once: a folder without a source or a bed never waits
        thread = threading.Thread(target=self.prepare, name="omnidub review media", daemon=True)
        thread.start()
        return thread

    def prepare(self) -> None:
        """Decode the source, then the bed, into omnidub's cache unless they are there already."""
        _lower_priority()
        wanted = self._wanted()
        try:
            for what, path in wanted.items():
                if path is None:
                    continue
                try:
                    found = decoded(path)
                except OmnidubError:
                    found = None  # unreadable: that preview is not offered (the render said why)
                with self._lock:
                    self._decoded[what] = found
                if what != list(wanted)[-1]:
                    self.on_ready(what)
        finally:
            with self._lock:
                self._decoded.update({what: None for what in wanted if what not in self._decoded})
            self.ready.set()
            self.on_ready("all")

    def _wanted(self) -> dict[str, Path | None]:
        """The source and the bed to decode; one this folder has not is known at once to be absent."""
        wanted = {"source": self._source_path(), "bed": self._bed_path()}
        with self._lock:
            self._decoded.update({what: None for what, path in wanted.items() if path is None})
        return wanted

    def _source_path(self) -> Path | None:
        options = self.project.options.source
        return Path(options.source) if options is not None else None

    def _bed_path(self) -> Path | None:
        project = self.project
        path = project.options.delivery.bed or (project.casting.bed if project.casting is not None else None)
        return Path(path) if path is not None and Path(path).is_file() else None

    def _read(self, what: str, start: float, frames: int):
        """``frames`` samples of the decoded source or bed from ``start`` seconds (zeros past its end), or None
        when there is none; NotReady while it is being decoded."""
        import numpy as np
        import soundfile as sf

        with self._lock:
            if what not in self._decoded:
                raise NotReady(what)
            path = self._decoded[what]
        if path is None:
            return None
        first = max(0, int(round(start * RATE)))
        try:
            samples, _ = sf.read(str(path), start=first, frames=frames, dtype="float32", always_2d=True)
        except (OSError, RuntimeError, sf.LibsndfileError):
            return None  # removed from the cache under it: left out
        samples = samples[:, 0]
        return np.pad(samples, (0, frames - samples.size))

    # -- what the page hears ---------------------------------------------------------------------------------
    def own_original(self, span: tuple[float, float] | None) -> bytes | None:
        """A span of the source as WAV bytes, or None (no span, no source, or one that cannot be read); NotReady
        while the source is being decoded."""
        if span is None or self.project.options.source is None:
            return None
        start, end = max(0.0, span[0]), max(span[0], span[1])
        samples = self._read("source", start, int(round((end - start) * RATE)))
        return None if samples is None else wav_bytes(samples, RATE)

    def voice_clip(self, path: Path) -> bytes | None:
        """A clip of the source a line may be voiced from (a file of the source's analysis) as WAV bytes, or None
        (no such file: the analysis was removed from the cache under the review)."""
        import soundfile as sf

        try:
            samples, rate = sf.read(str(path), dtype="float32", always_2d=True)
        except (OSError, RuntimeError, sf.LibsndfileError):
            return None
        return wav_bytes(samples[:, 0], rate)

    def given_voice(self, path: Path) -> bytes | None:
        """The sample of a voice the user gave (any common audio file) as WAV bytes, or None (gone, or unreadable)."""
        from omnidub.media import decode_audio

        try:
            samples, rate = decode_audio(path)
        except (OmnidubError, OSError):
            return None
        return wav_bytes(samples, rate)

    def context(self, line: dict, placed: list[tuple[dict, object]]) -> bytes:
        """The line (its view) with CONTEXT_SECONDS before and after, as the lines stand now, over the bed: the
        programme around it (see :meth:`programme`) at the level of the line's own player (the segments')."""
        start = max(0.0, line["start"] - CONTEXT_SECONDS)
        return self.programme(Span(start, line["end"] + CONTEXT_SECONDS), placed)

    def programme(self, span: Span, placed: list[tuple[dict, object]], gains=(0.0, None)) -> bytes:
        """The programme from ``span.start`` to ``span.end`` as the lines stand now, as WAV bytes: every placed
        segment (each line's view and the path of its segment) at its place, over the bed ducked under the lines as
        the mix ducks it, with the source's own audio when asked; NotReady while what it needs is being decoded.

        ``gains``: the dB the last assembly gave the dub and the mix over the bed (None: no bed then), so that the
        programme plays at the delivered mix's level (its look-ahead limiter is left out)."""
        import numpy as np
        import soundfile as sf

        from omnidub.outputs.bed import audible
        from omnidub.outputs.mix import Bed

        delivery = self.project.options.delivery
        start, end = span.start, span.end
        frames = int(round((end - start) * RATE))
        bed = self._read("bed", start, frames) if span.bed else None
        source = self._read("source", start, frames) if span.original and self._source_path() else None
        out = np.zeros(frames, dtype=np.float32)
        reach = Bed(Path()).release + 1.0  # lines just outside the span still duck the bed inside it
        spoken = []  # when the dub speaks near the span, each segment read once for its sound and its span
        for view, path in placed if span.dub or bed is not None else ():
            ends = view["start"] + (view["duration"] or 0.0)
            if path is None or view["start"] > end + reach or max(ends, view["end"]) < start - reach:
                continue
            try:
                data, rate = sf.read(str(path), dtype="float32", always_2d=True)
            except (OSError, RuntimeError, sf.LibsndfileError):
                continue  # replaced under it: left out of this preview
            if (heard := audible(view["start"], data, rate)) is not None:
                spoken.append(heard)
            if not span.dub:
                continue
            samples = data.mean(axis=1)
            if rate != RATE:
                from omnidub.media import resample

                samples = resample(samples, rate, RATE)
            a = int(round((view["start"] - start) * RATE))
            piece = samples[max(0, -a) : max(0, frames - a)]
            out[max(a, 0) : max(a, 0) + piece.size] += piece
        out *= 10 ** (gains[0] / 20)
        if bed is not None:
            out += bed * self._duck(spoken, start, frames, delivery.duck)
            out *= 10 ** ((gains[1] or 0.0) / 20)
        if source is not None:
            out += source
        return wav_bytes(np.clip(out, -1.0, 1.0), RATE)

    @staticmethod
    def _duck(spoken: list[tuple[float, float]], start: float, frames: int, depth: float):
        """The bed's gain over the span, as the mix ducks it (the same speech spans, attack and release)."""
        from omnidub.outputs.bed import duck_curve, merged_spans
        from omnidub.outputs.mix import Bed

        shape = Bed(Path(), duck=depth)
        spans = merged_spans(spoken, shape.attack, shape.release)
        return duck_curve(spans, int(round(start * RATE)), frames, RATE, shape.duck, shape.attack, shape.release)

    def picture(self):
        """The video the page shows beside the lines (the one the render delivers over, else a source that is a
        video), or None. The user's own file: only read."""
        video = self.project.options.delivery.video
        source = self.project.options.source
        if video is None and source is not None and source.source.suffix.lower() in VIDEO_SUFFIXES:
            video = source.source
        return video if video is not None and video.is_file() else None


def decoded(path: Path) -> Path:
    """The audio of ``path`` (any audio or video file) decoded to mono 16-bit WAV at RATE in omnidub's cache,
    decoding it only when the cache has no copy of this version of the file (its path, size and time)."""
    from omnidub.files import atomic_path, cache_home
    from omnidub.source.audio import read_source

    path = Path(path).resolve()
    try:
        stat = path.stat()
    except OSError as exc:
        raise OmnidubError(f"{path}: {exc.strerror or exc}") from exc
    key = f"omnidub-decoded-v{DECODED_VERSION}\0{path}\0{stat.st_size}\0{stat.st_mtime_ns}\0{RATE}"
    target = cache_home() / "review" / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.wav"
    if target.is_file():
        try:
            os.utime(target)  # used now: the last to go when the cache is pruned
        except OSError:
            pass
        return target
    audio = read_source(path, RATE)
    target.parent.mkdir(parents=True, exist_ok=True)
    import soundfile as sf

    with atomic_path(target) as temp:
        sf.write(str(temp), audio.samples, RATE, subtype="PCM_16", format="WAV")
    _prune(target.parent, target)
    return target


def _prune(folder: Path, kept: Path) -> None:
    """Remove the least recently used decoded copies beyond KEEP_BYTES (never ``kept``, the one just made); a
    source whose copy went is decoded again when reviewed."""
    found = []
    for copy in folder.glob("*.wav"):
        try:
            stat = copy.stat()
        except OSError:
            continue
        found.append((stat.st_mtime, stat.st_size, copy))
    total = 0
    for _, size, copy in sorted(found, key=lambda x: x[0], reverse=True):
        total += size
        if total > KEEP_BYTES and copy != kept:
            try:
                copy.unlink()
            except OSError:
                pass


def _lower_priority() -> None:
    """Run the calling thread at a lower priority where the system allows it (Linux: a thread is its own task)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    except (AttributeError, OSError):
        pass
