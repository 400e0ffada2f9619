"""Rendering one script: prompts per speaker, the timing plan, keyed segments, stems and a mix.

Orchestration only: keys come from ``keys``, batching from ``scheduler``, audio from the session's executor,
records from ``journal``. Reruns redo only what changed: every line's audio is stored under its key in
``<out>/.cache/`` (or a shared cache folder); each finished line is appended to the journal, so a crash loses at
most the lines in flight. ``job`` runs many renderers through one executor; ``Renderer.run`` is a job of one.
"""

from __future__ import annotations

import filecmp
import hashlib
import json
import os
import re
import shutil
from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import soundfile as sf

from omnidub import __version__
from omnidub.backends.base import Prompt, Request
from omnidub.duration import natural_seconds
from omnidub.errors import OmnidubError
from omnidub.files import LOCK, QA_MARKS, FolderLock, atomic_path, cache_home, is_temporary, remove_debris
from omnidub.journal import JOURNAL, MANIFEST, Journal, LineEntry, read_entries, read_manifest
from omnidub.keys import file_digest, line_key, line_seed
from omnidub.outputs.deliver import Delivered, DeliveryOptions, check, deliver
from omnidub.outputs.mix import Placement, container, write_atomic
from omnidub.scheduler import Failure, Outcome, stream
from omnidub.script import Script
from omnidub.timing import Target, plan
from omnidub.voices import PromptCache, Voice, voice_for, voice_prompt, voice_prompt_key

SEGMENT_FORMAT = "wav"  # segments stay lossless: they are the cache; --format applies to stems and the mix
# OmniVoice's audio rate; references are loaded at it (upstream would resample anything else anyway).
MODEL_SAMPLE_RATE = 24000


@dataclass(frozen=True)
class Speaker:
    """A speaker ready to plan: its voice, its prompt key and, once known, its prompt (None: designed voice,
    or not encoded yet) and pace."""

    voice: Voice
    key: str
    prompt: Prompt | None
    ref_text: str | None
    ref_seconds: float | None
    estimated: bool = False  # paced by the whole reference because the prompt is not prepared yet


@dataclass(frozen=True)
class Summary:
    """What a render did, for the closing table and ``--json``."""

    out_dir: Path
    lines: int
    rendered: int
    cached: int
    failed: int
    overflow: tuple[int, ...]
    audio_seconds: float
    synth_seconds: float
    program_seconds: float
    interrupted: bool = False
    outputs: tuple[str, ...] = ()
    pending: tuple[int, ...] = ()  # lines left out by --only that have no audio yet
    loudness: dict | None = None  # per mix: gain, limited, integrated, range, true_peak

    @property
    def rtf(self) -> float | None:
        return self.synth_seconds / self.audio_seconds if self.audio_seconds else None


class Listener:
    """Progress hooks; the CLI shows them with rich. The default does nothing."""

    def step(self, text: str) -> None: ...

    def note(self, text: str) -> None: ...

    def start(self, total: int) -> None: ...

    def line_started(self, entry: LineEntry) -> None: ...

    def line_done(self, entry: LineEntry, audio_seconds: float, wall_seconds: float) -> None: ...

    def input(self, name: str) -> None:
        """The input the next line events belong to (only in jobs of several inputs)."""

    def finish(self) -> None: ...


def safe_name(name: str) -> str:
    """A speaker name that is safe as a file name: no separators, no dots in front, never empty."""
    cleaned = re.sub(r"[^\w-]+", "_", name, flags=re.UNICODE).strip("_")
    return cleaned[:64] or "speaker"


def file_names(speakers, previous: dict[str, str] | None = None) -> dict[str, str]:
    """Each speaker's file name, from its own name alone: the safe name, plus a short hash of the name when
    sanitising changed it or another speaker's name differs only in case. A speaker keeps the name it had in
    ``previous`` (the last render's mapping) while that is still one of its own, so adding a speaker moves
    no one else's files."""
    previous = previous or {}

    def own(speaker: str, digits: int = 6) -> str:
        return f"{safe_name(speaker)}-{hashlib.sha256(speaker.encode()).hexdigest()[:digits]}"

    plain = {s: safe_name(s) if safe_name(s) == s else own(s) for s in speakers}
    folds = Counter(name.casefold() for name in plain.values())
    names: dict[str, str] = {}
    taken: set[str] = set()
    for speaker in sorted(speakers):
        old = previous.get(speaker)
        if old in (plain[speaker], own(speaker)) and old.casefold() not in taken:
            names[speaker] = old
            taken.add(old.casefold())
    for speaker in sorted(set(speakers) - set(names)):
        name, digits = plain[speaker], 6
        if folds[name.casefold()] > 1 or name.casefold() in taken:
            name = own(speaker)
        while name.casefold() in taken:  # a hash prefix shared by chance: a longer one
            digits += 6
            name = own(speaker, digits)
        names[speaker] = name
        taken.add(name.casefold())
    return names


def verify_segment(path: Path, seconds: float, sha256: str | None = None) -> str | None:
    """Why the audio file at ``path`` cannot stand for a line of ``seconds`` (None: it can).

    Its length must be the line's exact length, and its bytes the recorded hash; without a hash, every
    sample must decode to a finite number."""
    try:
        info = sf.info(str(path))
    except (RuntimeError, OSError):
        return "not a readable audio file"
    expected = round(seconds * info.samplerate)
    if info.frames != expected:
        return f"{info.frames} samples where {expected} belong"
    if sha256 is not None:
        return None if file_digest(path).hexdigest() == sha256 else "its bytes differ from those written"
    try:
        audio, _ = sf.read(str(path), dtype="float32")
    except (RuntimeError, OSError):
        return "not a readable audio file"
    return None if len(audio) == expected and np.isfinite(audio).all() else "its samples do not decode"


def default_out_dir(input_path: Path, folder: Path | None = None) -> Path:
    """``folder`` (default ``output/<input stem>``), unless another input that still exists already rendered there."""
    folder = Path("output") / input_path.stem if folder is None else Path(folder)
    other = (read_manifest(folder) or {}).get("input")
    # Two inputs with one stem (ep1/en.srt, ep2/en.srt) must not share a folder: the second render would
    # replace the first and drop its cached audio. A renamed or moved input keeps its folder.
    if isinstance(other, str) and other and Path(other).exists() and Path(other).resolve() != input_path.resolve():
        raise OmnidubError(f"{folder} holds a render of {other}, not {input_path}; choose a folder with --out")
    return folder


def select_lines(spec: str | None, script: Script) -> frozenset[int] | None:
    """The line numbers ``--only 3,8-10`` names (None: every line); each must be a line of the script."""
    if spec is None:
        return None
    chosen = set()
    for part in spec.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not match:
            raise OmnidubError(f"--only {spec}: give line numbers and ranges, e.g. 3,8-10")
        first, last = int(match[1]), int(match[2] or match[1])
        if last < first:
            raise OmnidubError(f"--only {spec}: range {part.strip()} runs backwards")
        chosen.update(range(first, last + 1))
    known = {line.index for line in script.lines}
    unknown = sorted(chosen - known)
    if unknown:
        raise OmnidubError(f"--only {spec}: no line {unknown[0]} in the script (its lines are {min(known)}-{max(known)})")
    return frozenset(chosen)


KEYED_AUDIO = re.compile(r"[0-9a-f]{64}\.wav")  # a line's audio in .cache/, named by its key


def foreign_file(out_dir: Path) -> str | None:
    """A file in ``out_dir`` that no omnidub render explains (None when it holds a manifest or journal, or
    only what an interrupted first run leaves: empty folders, the lock, temporaries, keyed audio)."""
    if (out_dir / MANIFEST).exists() or (out_dir / JOURNAL).exists() or not out_dir.is_dir():
        return None
    for path in out_dir.rglob("*"):
        relative = path.relative_to(out_dir)
        if path.is_dir() or relative.as_posix() == LOCK or is_temporary(path.name):
            continue
        if relative.parent.as_posix() == ".cache" and KEYED_AUDIO.fullmatch(path.name):
            continue
        return relative.as_posix()
    return None


def is_qa_report(path: Path) -> bool:
    """Whether a qa.json / qa.html was written by omnidub qa (both carry its mark)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return any(mark in head for mark in QA_MARKS)


def _inside(relative: str) -> bool:
    # A manifest is data from disk: a path in it must not lead out of the output folder.
    path = Path(relative)
    return bool(relative) and not path.is_absolute() and ".." not in path.parts


def _ranges(numbers: list[int]) -> str:
    """[1, 2, 3, 7] -> "1-3, 7"."""
    spans: list[list[int]] = []
    for n in sorted(numbers):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def prompt_cache_dir() -> Path:
    return cache_home() / "prompts"


def assign_languages(script: Script, voices: dict[str, Voice]) -> Script:
    """Lines without a language take their voice's language (from voices.toml)."""
    lines = tuple(
        line if line.language else replace(line, language=voice_for(line.speaker, voices).language) for line in script.lines
    )
    return replace(script, lines=lines)


class Renderer:
    """Plans and renders one script into one output folder, with the session's backend (loaded only when a
    line must be rendered or a prompt encoded)."""

    def __init__(self, session, script: Script, voices: dict[str, Voice], out_dir: Path, *, input_path: Path,
                 fmt: str = "wav", force: bool = False, listener: Listener | None = None,
                 only: frozenset[int] | None = None, delivery: DeliveryOptions | None = None,
                 cache_dir: Path | None = None):
        for speaker in sorted({line.speaker for line in script.lines}):
            voice_for(speaker, voices)  # every speaker needs a voice before anything heavy starts
        self.session = session
        self.preset = session.preset
        self.script = assign_languages(script, voices)
        self.voices = voices
        self.out_dir = Path(out_dir)
        self.input_path = input_path
        self.fmt = fmt
        self.delivery = replace(delivery or DeliveryOptions(), fmt=fmt)
        check(self.delivery)
        self.delivered: Delivered | None = None
        self.force = force
        self.only = only
        self.listener = listener or Listener()
        self.stopping = False
        self.entries: list[LineEntry] = []
        self.speakers: dict[str, Speaker] = {}
        self.names: dict[str, str] = {}
        self.program: float | None = None
        self.outputs: dict[str, str] = {}  # {speaker: stem, "": mix}, relative to out_dir, once assembled
        self.journal = Journal(self.out_dir)
        self._repair = False
        self.notes: list[str] = []  # said once on the console, and kept in the manifest
        self._cache = PromptCache(prompt_cache_dir())
        self._lock = FolderLock(self.out_dir)
        self._owned: set[str] = set()
        self._reused: dict | None = None  # the last manifest, when its assembly is reused unchanged
        self._assembly: str | None = None  # the key of what the outputs were assembled from
        # A shared cache (--cache) holds other inputs' lines too: it is never pruned.
        self.cache_dir = Path(cache_dir) if cache_dir is not None else self.out_dir / ".cache"
        self.left_out: list[int] = []  # lines --only leaves without audio

    def request_stop(self) -> None:
        """Finish the lines in flight, then stop (the CLI calls this on Ctrl-C)."""
        self.stopping = True

    # -- planning ------------------------------------------------------------------------------------------
    def plan(self, *, prepare: bool = False) -> list[LineEntry]:
        """Every line's entry: timing, key and whether its audio is cached. With ``prepare``, prompts that are
        not cached yet are prepared (ASR, model); without it they are estimated from the whole reference."""
        if not prepare:
            try:
                self.session.source
            except OmnidubError as exc:  # a plan needs no model: say why cache status is unknown, and go on
                self.listener.note(f"{exc}; the plan cannot tell which lines are cached")
                self.session.use_unresolved_model()
        self._repair = prepare  # a plan alone changes nothing on disk
        self.speakers = self._speakers(prepare)
        self._note_untrimmed(prepare)
        self.names = self._file_names(self.speakers)
        records = read_entries(self.out_dir)
        previous = {e.base_key: e for e in records if e.done}
        known = {e.key: e for e in records if e.done}  # the latest record of each key: its hash and segment name
        naturals = []
        for line in self.script.lines:
            s = self.speakers[line.speaker]
            naturals.append(natural_seconds(line.text, s.ref_text, s.ref_seconds, s.voice.speed or 1.0))
        timing = self.preset.timing
        targets = plan(list(self.script.lines), naturals, max_speedup=timing.max_speedup, timed=self.script.timed,
                       gap=timing.gap)
        self.targets = targets
        self.entries = [self._entry(t, previous, known) for t in targets]
        self.program = max([t.end for t in targets] + [t.line.end for t in targets if self.script.timed] + [0.0])
        if self.program > timing.max_program_hours * 3600:
            raise OmnidubError(
                f"{self.input_path}: the programme would be {self.program / 3600:.1f} hours long (a timestamp typo?); "
                f"raise max_program_hours in a preset if that is right"
            )
        return self.entries

    @property
    def estimated(self) -> bool:
        """True when some speaker's pace is a guess from the whole reference (its prompt is not prepared yet)."""
        return any(s.estimated for s in self.speakers.values())

    def selected(self, index: int) -> bool:
        """Whether this run may render the line (``--only``)."""
        return self.only is None or index in self.only

    def _note_untrimmed(self, prepare: bool) -> None:
        # Said once for all speakers: the fast preset's ~3 s cut needs word times, which need an ASR model.
        whole = sorted({s.voice.speaker for s in self.speakers.values() if s.prompt is not None and s.prompt.provisional})
        if not whole:
            return
        note = (f"no ASR model ({self.session.asr_name}) to find word boundaries, so the samples of "
                f"{', '.join(whole)} are kept whole; pass --asr-model with a local faster-whisper folder to trim them")
        if note not in self.notes:
            self.notes.append(note)
            if prepare:
                self.listener.note(note)

    def _speakers(self, prepare: bool) -> dict[str, Speaker]:
        by_voice: dict[Voice, Speaker] = {}
        speakers = {}
        for name in sorted({line.speaker for line in self.script.lines}):
            voice = voice_for(name, self.voices)
            if voice not in by_voice:
                by_voice[voice] = self._speaker(voice, prepare)
            speakers[name] = by_voice[voice]
        return speakers

    def _speaker(self, voice: Voice, prepare: bool) -> Speaker:
        key = voice_prompt_key(voice, self.preset.voice, self.session.prompt_identity)
        if voice.audio is None:  # voice design: no reference, upstream's default pace
            return Speaker(voice, key, None, None, None)
        prompt = self._cache.get(key)
        if prompt is not None and prompt.provisional and prepare and self.session.asr().available():
            prompt = None  # kept whole for want of an ASR model, which is here now: trim it
        if prompt is None and prepare:
            self.listener.step(f"preparing the voice of {voice.speaker}")
            backend = self.session.backend()
            prompt, reference = voice_prompt(
                voice, cache=self._cache, options=self.preset.voice, key=key, sample_rate=backend.sample_rate,
                asr=self.session.asr(),
                encode=lambda ref: backend.encode_prompt(ref.audio, ref.sample_rate, ref.text, voice.language),
            )
            said = reference.note if reference is not None else ""
            if reference is not None and reference.provisional:
                # Kept whole for want of ASR: said once for all speakers (_note_untrimmed); keep any other warning.
                said = said.split("kept whole (")[0].rstrip("; ")
            if said:
                self.listener.note(f"{voice.speaker}: {said}")
        if prompt is None:
            seconds = None
            try:
                seconds = sf.info(str(voice.audio)).duration
            except (RuntimeError, OSError):
                pass  # not readable by libsndfile (mp3/m4a): upstream's default pace
            return Speaker(voice, key, None, voice.text, seconds, estimated=True)
        return Speaker(voice, key, prompt, prompt.text, prompt.seconds)

    def _file_names(self, speakers: dict[str, Speaker]) -> dict[str, str]:
        voices = (read_manifest(self.out_dir) or {}).get("voices")
        previous = {}
        if isinstance(voices, dict):
            previous = {name: record.get("file_name") for name, record in voices.items() if isinstance(record, dict)}
        return file_names(speakers, previous)

    def _entry(self, target: Target, previous: dict[str, LineEntry], known: dict[str, LineEntry]) -> LineEntry:
        line = target.line
        speaker = self.speakers[line.speaker]
        seed = line_seed(self.preset.seed, line.speaker, line.text, line.language)
        key = self._line_key(target, speaker, seed)
        entry = LineEntry(
            index=line.index,
            speaker=line.speaker,
            text=line.text,
            language=line.language,
            start=round(target.start, 3),
            end=round(line.end if self.script.timed else target.end, 3),
            slot=round(line.end - line.start, 3) if self.script.timed else None,
            natural=round(target.natural, 3),
            target=round(target.target, 3),
            speed=round(target.speed, 3),
            limit_at=None if target.limit is None else round(target.limit, 3),
            file=f"segments/{line.index:04d}-{self.names[line.speaker]}.{SEGMENT_FORMAT}",
            base_key=key,
            key=key,
            seed=seed,
            flags=list(target.flags),
        )
        if self.force and self.selected(line.index):  # --force renders again what this run may render
            return entry
        old = previous.get(key)
        if old is not None:
            # A retake chosen by QA on an earlier run is kept while the line itself is unchanged (and rendered
            # again from its own seed if its audio was lost).
            entry.key, entry.seed, entry.attempts = old.key, old.seed, list(old.attempts)
        # The audio is keyed, so a line rendered just before a crash (missing from the manifest) counts too.
        self._reuse(entry, known.get(entry.key))
        return entry

    def _reuse(self, entry: LineEntry, record: LineEntry | None) -> None:
        """Mark the entry cached when its keyed audio verifies, else when an intact segment can restore it; else
        leave it to be rendered. A damaged cache file is noted (and removed when repairing)."""
        path, sha = self._cached_path(entry.key), record.sha256 if record is not None else None
        problem = None
        if path.exists():
            problem = verify_segment(path, entry.target, sha)
            if problem is None:
                entry.status, entry.duration = "cached", round(sf.info(str(path)).duration, 3)
                entry.sha256 = sha or file_digest(path).hexdigest()
                return
            if self._repair:
                path.unlink(missing_ok=True)
        # A segment can stand in for the cache only when its content hash was recorded.
        for name in dict.fromkeys([entry.file, record.file] if sha else []):
            segment = self.out_dir / name
            if segment.is_file() and verify_segment(segment, entry.target, sha) is None:
                if self._repair:
                    with atomic_path(path) as temp:
                        shutil.copyfile(segment, temp)
                entry.status, entry.duration, entry.sha256 = "cached", round(sf.info(str(segment)).duration, 3), sha
                if problem:
                    self.listener.note(f"line {entry.index}: its cached audio is damaged ({problem}); restored from {name}")
                return
        if problem:
            self.listener.note(f"line {entry.index}: its cached audio is damaged ({problem}); rendering it again")

    def _line_key(self, target: Target, speaker: Speaker, seed: int) -> str:
        return line_key(prompt=speaker.key, instruct=speaker.voice.instruct, text=target.line.text,
                        language=target.line.language, seconds=target.target, seed=seed,
                        model=self.session.identity, settings=self.session.settings)

    # -- the flow ------------------------------------------------------------------------------------------
    def open_folder(self) -> None:
        """Claim the output folder before anything slow starts: refuse someone else's files (unless --force),
        lock it against a second run, and clear what an interrupted write left behind."""
        if self._lock.held:
            return
        stranger = None if self.force else foreign_file(self.out_dir)
        if stranger is not None:
            raise OmnidubError(
                f"{self.out_dir} holds files omnidub did not write (e.g. {stranger}); choose an empty folder with "
                f"--out, or pass --force to render into it (omnidub removes only files its own manifest lists)"
            )
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            self._lock.acquire()
            for folder in (self.out_dir / "segments", self.out_dir / "stems", self.cache_dir):
                folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OmnidubError(f"cannot write the output folder {self.out_dir}: {exc.strerror or exc}") from exc
        folders = [self.out_dir, self.out_dir / "segments", self.out_dir / "stems", self.cache_dir, prompt_cache_dir()]
        debris = sum(remove_debris(folder) for folder in folders)
        if debris:
            self.listener.note(f"removed {debris} temporary file(s) left by an interrupted run")
        self._owned = self._written_before()

    def close(self) -> None:
        """Let go of the output folder (the lock); the process ending does the same."""
        self.journal.close()
        self._lock.release()

    def run(self) -> Summary:
        """Render every line that is not cached, then assemble stems and the mix."""
        from omnidub.job import Job

        return Job(self.session, [self], listener=self.listener).run()[0].result()

    def prepare(self) -> list[LineEntry]:
        """Claim the folder, plan with prepared prompts and place the cached lines; returns the lines to render."""
        self.open_folder()
        self.plan(prepare=True)
        pending = [e for e in self.entries if not e.done and self.selected(e.index)]
        self.left_out = [e.index for e in self.entries if not e.done and not self.selected(e.index)]
        if self.left_out:
            self.notes.append(f"--only: line(s) {_ranges(self.left_out)} have no audio yet and are left out of the "
                              f"stems and mix; rerun without --only to render them")
            self.listener.note(self.notes[-1])
        for entry in self.entries:
            if entry.done:
                self._place(entry)
        for speaker in {e.speaker for e in pending}:
            if self.speakers[speaker].voice.instruct:
                self.session.check_instruct(self.speakers[speaker].voice.instruct)
        return pending

    def request(self, entry: LineEntry, id: str, seed: int | None = None) -> Request:
        """What a backend needs to speak a line (``id`` comes back on its result)."""
        speaker = self.speakers[entry.speaker]
        return Request(text=entry.text, prompt=speaker.prompt, language=entry.language, instruct=speaker.voice.instruct,
                       duration=entry.target, seed=entry.seed if seed is None else seed, id=id)

    def accept(self, entry: LineEntry, outcome: Outcome) -> None:
        """Store a line's audio (or its failure) and journal it."""
        if isinstance(outcome, Failure):
            self._fail(entry, outcome.error)
            return
        self._store(entry, outcome.audio, outcome.sample_rate)
        entry.status, entry.render_seconds, entry.error = "rendered", round(outcome.seconds, 3), None
        self.journal.append(entry)
        self.listener.line_done(entry, entry.duration, outcome.seconds)

    def finish(self, synth_seconds: float = 0.0, audio_seconds: float = 0.0) -> Summary:
        """Close the journal, assemble (unless stopping) and sum up the run."""
        self.journal.close()
        if not self.stopping:
            self.reassemble()
        else:
            self.save_manifest()
        counts = {s: sum(e.status == s for e in self.entries) for s in ("rendered", "cached", "failed")}
        return Summary(
            out_dir=self.out_dir,
            lines=len(self.entries),
            rendered=counts["rendered"],
            cached=counts["cached"],
            failed=counts["failed"],
            overflow=tuple(e.index for e in self.entries if "overflow" in e.flags),
            audio_seconds=audio_seconds,
            synth_seconds=synth_seconds,
            program_seconds=self.program or 0.0,
            interrupted=self.stopping,
            outputs=tuple(self.outputs.values()) + self._delivered_files(),
            pending=tuple(self.left_out),
            loudness=self.delivered.loudness() if self.delivered else self._reused_loudness(),
        )

    def _reused_loudness(self) -> dict | None:
        if self._reused is None:
            return None
        return {key: self._reused["loudness"].get(key) for key in ("mix", "bed_mix")}

    def _store(self, entry: LineEntry, audio, sample_rate: int) -> None:
        path = self._cached_path(entry.key)
        write_atomic(path, audio, sample_rate, SEGMENT_FORMAT)
        entry.duration = round(len(audio) / sample_rate, 3)
        entry.sha256 = file_digest(path).hexdigest()
        self._place(entry)

    def _fail(self, entry: LineEntry, exc: BaseException) -> None:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        # A user-fixable problem speaks for itself; anything else also names what went wrong.
        entry.status = "failed"
        entry.error = message if isinstance(exc, OmnidubError) else f"{type(exc).__name__}: {message}".rstrip(": ")
        self.journal.append(entry)
        self.listener.line_done(entry, 0.0, 0.0)

    def _cached_path(self, key: str) -> Path:
        return self.cache_dir / f"{key}.{SEGMENT_FORMAT}"

    def _place(self, entry: LineEntry) -> None:
        """Put a copy of the cached audio at the line's segment name (a copy, so editing a segment never
        reaches the cache)."""
        source, dest = self._cached_path(entry.key), self.out_dir / entry.file
        if dest.is_file() and filecmp.cmp(source, dest, shallow=False):
            return
        with atomic_path(dest) as temp:
            shutil.copyfile(source, temp)

    # -- retakes ------------------------------------------------------------------------------------------
    def render_take(self, entry: LineEntry, seed: int) -> LineEntry:
        """Render a line again with another seed; returns an entry for the take (not yet adopted)."""
        target = self.targets[self.entries.index(entry)]
        key = self._line_key(target, self.speakers[entry.speaker], seed)
        path = self._cached_path(key)
        if verify_segment(path, entry.target) is not None:
            [outcome] = list(stream(self.session.backend(), [self.request(entry, "0", seed)], self.session.budget))
            if isinstance(outcome, Failure):
                raise outcome.error
            write_atomic(path, outcome.audio, outcome.sample_rate, SEGMENT_FORMAT)
        return replace(entry, key=key, seed=seed, file=Path(os.path.relpath(path, self.out_dir)).as_posix(),
                       duration=round(sf.info(str(path)).duration, 3), status="rendered",
                       sha256=file_digest(path).hexdigest(), attempts=[])

    def base_seed(self, entry: LineEntry) -> int:
        """The line's own seed, before any retake."""
        return line_seed(self.preset.seed, entry.speaker, entry.text, entry.language)

    def adopt(self, entry: LineEntry, take: LineEntry) -> None:
        """Make a take the line's audio; the line's base key stays, so reruns keep the take."""
        entry.key, entry.seed, entry.duration, entry.sha256 = take.key, take.seed, take.duration, take.sha256
        self._place(entry)
        self.journal.append(entry)

    def reassemble(self) -> dict[str, str]:
        """Write stems and mix from the current segments (unless the last run assembled exactly these), drop
        stale files, and write the manifest."""
        key = self._assembly_key()
        if not self._reuse_assembly(key):
            self.outputs = self._assemble()
        self._assembly = key
        self._remove_stale()
        self.save_manifest()
        return self.outputs

    # -- outputs ------------------------------------------------------------------------------------------
    def _assemble(self) -> dict[str, str]:
        """Write stems, mixes, video, subtitles and timelines; returns {speaker: stem, "": mix}, relative."""
        self.listener.step("assembling stems and mix")
        placements = [Placement(self.out_dir / e.file, e.start, e.speaker, e.duration or 0.0, e.text, e.index)
                      for e in self.entries if e.done]
        stems = {speaker: self.out_dir / "stems" / f"{self.names[speaker]}.{self.fmt}" for speaker in sorted(self.speakers)}
        options = self.delivery
        if options.language is None:  # the dub's audio track speaks the lines' language, when they share one
            languages = {e.language for e in self.entries}
            options = replace(options, language=languages.pop() if len(languages) == 1 else None)
        name = options.video.stem if options.video else self.input_path.stem
        self.delivered = done = deliver(placements, self.out_dir, stems, self.out_dir / f"mix.{self.fmt}", self.program or 0.0, options, name)
        self.program = done.seconds
        if container(self.fmt, int(round(done.seconds * options.sample_rate)), 2 if done.bed_mix else 1)[0] == "RF64":
            self.listener.note("stems and mixes pass WAV's 4 GiB limit: they were written as RF64 (64-bit WAV)")
        for entry in self.entries:
            if entry.index in done.past_video and "past-video" not in entry.flags:
                entry.flags.append("past-video")
        if done.past_video:
            self.listener.note(f"line(s) {', '.join(map(str, done.past_video))} end after the video ({done.video_seconds:.2f} s)")
        outputs = {speaker: path.relative_to(self.out_dir).as_posix() for speaker, path in stems.items()}
        outputs[""] = f"mix.{self.fmt}"
        return outputs

    def _assembly_key(self) -> str:
        """A key over everything assembly reads: each line's audio (hash), place and file, the names, format,
        programme and delivery options (with the bed's and video's size and time)."""
        sources = {}
        for path in (self.delivery.bed, self.delivery.video):
            if path:
                stat = Path(path).stat()
                sources[str(Path(path).resolve())] = [stat.st_size, stat.st_mtime_ns]
        payload = {
            "omnidub": __version__,
            "lines": [[e.index, e.file, e.sha256, e.start, e.duration, e.speaker] for e in self.entries if e.done],
            "names": self.names, "format": self.fmt, "program": self.program, "delivery": repr(self.delivery),
            "sources": sources,
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()

    def _reuse_assembly(self, key: str) -> bool:
        """A rerun that rendered nothing, over exactly what the last run assembled, keeps its outputs: loudness
        passes, video, subtitles and timelines are not redone. Any doubt means assembling again."""
        self._reused = None
        if self.force or any(e.status == "rendered" or (e.done and not e.sha256) for e in self.entries):
            return False
        previous = read_manifest(self.out_dir) or {}
        if previous.get("assembly") != key:
            return False
        stems, mix, delivery = previous.get("stems"), previous.get("mix"), previous.get("delivery")
        if not (isinstance(stems, dict) and isinstance(mix, str) and isinstance(delivery, dict)
                and isinstance(previous.get("loudness"), dict)):
            return False
        files = [*stems.values(), mix] + [v for key in ("bed_mix", "video") if isinstance(v := delivery.get(key), str)]
        files += [v for key in ("subtitles", "timelines") for v in (delivery.get(key) or []) if isinstance(v, str)]
        if not all(isinstance(f, str) and _inside(f) and (self.out_dir / f).is_file() for f in files):
            return False
        if set(stems) != set(self.speakers):
            return False
        self._reused = previous
        self.outputs = {**stems, "": mix}
        self.program = previous.get("program_seconds", self.program)
        late = {r.get("index") for r in previous.get("lines", []) if isinstance(r, dict) and "past-video" in (r.get("flags") or [])}
        for entry in self.entries:
            if entry.index in late and "past-video" not in entry.flags:
                entry.flags.append("past-video")
        self.listener.step("stems and mix are up to date")
        return True

    def _delivered_files(self) -> tuple[str, ...]:
        """The bed mix, dubbed video, subtitles and timelines this render wrote, relative to the folder."""
        if self.delivered is None:
            if self._reused is None:
                return ()
            files = self._reused["delivery"]
            return tuple(p for p in (files.get("bed_mix"), files.get("video"), *(files.get("subtitles") or []),
                                     *(files.get("timelines") or [])) if p)
        files = self.delivered.files(self.out_dir)
        return tuple(p for p in (files["bed_mix"], files["video"], *files["subtitles"], *files["timelines"]) if p)

    def _written_before(self) -> set[str]:
        """Files (relative paths) an earlier render says it wrote here: its manifest and journal, keyed audio in
        .cache/, and QA reports that carry omnidub's mark. Nothing else in the folder is ever removed."""
        manifest = read_manifest(self.out_dir) or {}
        owned = set()
        stems = manifest.get("stems")
        owned.update(v for v in (stems.values() if isinstance(stems, dict) else ()) if isinstance(v, str))
        if isinstance(manifest.get("mix"), str):
            owned.add(manifest["mix"])
        delivered = manifest.get("delivery") if isinstance(manifest.get("delivery"), dict) else {}
        for key in ("bed_mix", "video", "subtitles", "timelines"):
            value = delivered.get(key)
            owned.update(v for v in (value if isinstance(value, list) else [value]) if isinstance(v, str))
        for entry in read_entries(self.out_dir):
            owned.add(entry.file)
            owned.update(f".cache/{key}.{SEGMENT_FORMAT}" for key in (entry.key, entry.base_key))
            owned.update(f".cache/{a['key']}.{SEGMENT_FORMAT}" for a in entry.attempts if isinstance(a, dict) and isinstance(a.get("key"), str))
        owned.update(name for name in ("qa.json", "qa.html") if is_qa_report(self.out_dir / name))
        return {path for path in owned if _inside(path)}

    def _remove_stale(self) -> None:
        """Drop files omnidub wrote here that no line or speaker of this render owns any more: old segments,
        cached audio, stems of speakers that left or of another format, an old-format mix, and QA reports of
        audio that changed. A file omnidub did not write is never touched."""
        keep = {e.file for e in self.entries if e.done} | set(self.outputs.values()) | set(self._delivered_files())
        keep |= {f".cache/{key}.{SEGMENT_FORMAT}" for e in self.entries
                 for key in (e.key, *(a["key"] for a in e.attempts if isinstance(a, dict) and "key" in a))}
        if not any(e.status == "rendered" for e in self.entries):
            keep |= {"qa.json", "qa.html"}
        owned = self._owned | {f".cache/{p.name}" for p in (self.out_dir / ".cache").glob("*") if KEYED_AUDIO.fullmatch(p.name)}
        for relative in sorted(owned - keep):
            (self.out_dir / relative).unlink(missing_ok=True)

    # -- manifest -----------------------------------------------------------------------------------------
    def voices_record(self) -> dict:
        """Per speaker: which sample, how it was prepared, and the prompt it gave."""
        record = {}
        for name, s in sorted(self.speakers.items()):
            record[name] = {
                "audio": str(s.voice.audio.resolve()) if s.voice.audio else None,
                "instruct": s.voice.instruct,
                "text": s.prompt.text if s.prompt else s.voice.text,
                "seconds": round(s.prompt.seconds, 3) if s.prompt else None,
                "prepared": s.prompt.note if s.prompt else None,
                "prompt_key": s.key,
                "file_name": self.names.get(name),
            }
        return record

    def manifest(self) -> dict:
        return {
            "omnidub": __version__,
            "input": str(self.input_path.resolve()),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "model": self.session.identity,
            "settings": {**self.preset.to_json(), **self.session.settings},
            "sample_rate": MODEL_SAMPLE_RATE,
            "program_seconds": None if self.program is None else round(self.program, 3),
            "format": self.fmt,
            "stems": {speaker: path for speaker, path in self.outputs.items() if speaker},
            "mix": self.outputs.get(""),
            **self._delivery_record(),
            "assembly": self._assembly if self.outputs else None,
            "voices": self.voices_record(),
            "notes": list(self.script.warnings) + [f"skipped: {s}" for s in self.script.skipped] + self.notes,
            "lines": [self._line_record(e) for e in self.entries],
        }

    def _line_record(self, entry: LineEntry) -> dict:
        """The entry, with SMPTE timecodes beside its start and end once the frame rate is known."""
        from omnidub.outputs.timeline import timecode

        record = entry.to_json()
        fps = self.delivered.fps if self.delivered else self._reused["delivery"].get("fps") if self._reused else self.delivery.fps
        if fps:
            record["start_tc"], record["end_tc"] = timecode(entry.start, fps), timecode(entry.end, fps)
        return record

    def _delivery_record(self) -> dict:
        """Loudness as measured and what else was delivered (empty until assembled)."""
        done, options = self.delivered, self.delivery
        if done is None:
            if self._reused is not None:
                return {"loudness": self._reused["loudness"], "delivery": self._reused["delivery"]}
            return {}
        return {
            "loudness": {"target": options.loudness, "true_peak_ceiling": options.true_peak, **done.loudness()},
            "delivery": {
                "sample_rate": options.sample_rate, "fps": round(done.fps, 6),
                "bed": str(Path(options.bed).resolve()) if options.bed else None, "duck": options.duck,
                "source_video": str(Path(options.video).resolve()) if options.video else None,
                "video_seconds": None if done.video_seconds is None else round(done.video_seconds, 3),
                **done.files(self.out_dir),
            },
        }

    def save_manifest(self) -> None:
        """Write the manifest as the lines stand now; the journal's records are then part of it."""
        self.journal.snapshot(self.manifest())
