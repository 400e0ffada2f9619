"""Rendering a script: prompts per speaker, a timing plan, one cached segment per line, stems and a mix.

Reruns redo only what changed: every line has a key over everything that changes its audio, and its audio is
stored under that key in ``<out>/.cache/``. Files are written atomically and the manifest after every line, so
a crash loses at most the line in flight.
"""

from __future__ import annotations

import filecmp
import hashlib
import json
import re
import shutil
import signal
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import soundfile as sf

from omnidub import __version__
from omnidub.duration import FRAME_RATE, natural_seconds
from omnidub.errors import OmnidubError
from omnidub.files import atomic_path, cache_home, write_text_atomic
from omnidub.mix import FORMATS, Placement, assemble, mix_gain, write_atomic
from omnidub.presets import Preset
from omnidub.script import Line, Script
from omnidub.timing import Target, plan
from omnidub.voices import PromptCache, Voice, prompt_key, voice_for, voice_prompt

MANIFEST = "manifest.json"
SEGMENT_FORMAT = "wav"  # segments stay lossless: they are the cache; --format applies to stems and the mix
# OmniVoice's audio rate; references are loaded at it (upstream would resample anything else anyway).
MODEL_SAMPLE_RATE = 24000


@dataclass(frozen=True)
class Speaker:
    """A speaker ready to render: its voice, its prompt (None for a designed voice) and its pace."""

    voice: Voice
    prompt: object | None
    key: str  # identifies what the prompt holds; part of every line key
    ref_text: str | None
    ref_seconds: float | None


@dataclass(frozen=True)
class Summary:
    """What a render did, for the closing table and ``--json``."""

    out_dir: Path
    lines: int
    rendered: int
    cached: int
    failed: int
    overflow: int
    audio_seconds: float
    synth_seconds: float
    program_seconds: float
    interrupted: bool = False
    outputs: tuple[str, ...] = ()

    @property
    def rtf(self) -> float | None:
        return self.synth_seconds / self.audio_seconds if self.audio_seconds else None


class Listener:
    """Progress hooks; the CLI shows them with rich. The default does nothing."""

    def step(self, text: str) -> None: ...

    def note(self, text: str) -> None: ...

    def start(self, total: int) -> None: ...

    def line_started(self, target: Target) -> None: ...

    def line_done(self, entry: dict, audio_seconds: float, wall_seconds: float) -> None: ...

    def finish(self) -> None: ...


def safe_name(name: str) -> str:
    """A speaker name that is safe as a file name: no separators, no dots in front, never empty."""
    cleaned = re.sub(r"[^\w-]+", "_", name, flags=re.UNICODE).strip("_")
    return cleaned[:64] or "speaker"


def line_seed(run_seed: int, line: Line) -> int:
    """A per-line seed from the run seed and the line's content, so one line always renders the same."""
    digest = hashlib.sha256(f"{run_seed}\x00{line.speaker}\x00{line.text}\x00{line.language}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def default_out_dir(input_path: Path) -> Path:
    """``output/<input stem>``, unless another input that still exists already rendered there."""
    folder = Path("output") / input_path.stem
    try:
        other = json.loads((folder / MANIFEST).read_text(encoding="utf-8")).get("input")
    except (OSError, ValueError, AttributeError):
        return folder
    # Two inputs with one stem (ep1/en.srt, ep2/en.srt) must not share a folder: the second render would
    # replace the first and drop its cached audio. A renamed or moved input keeps its folder.
    if other and Path(other).exists() and Path(other).resolve() != input_path.resolve():
        raise OmnidubError(f"{folder} holds a render of {other}, not {input_path}; choose a folder with --out")
    return folder


def prompt_cache_dir() -> Path:
    return cache_home() / "prompts"


def plan_lines(script: Script, speakers: dict[str, Speaker], preset: Preset) -> list[Target]:
    """The timing plan for every line, paced by each speaker's reference."""
    naturals = []
    for line in script.lines:
        speaker = speakers[line.speaker]
        naturals.append(natural_seconds(line.text, speaker.ref_text, speaker.ref_seconds, speaker.voice.speed or 1.0))
    return plan(list(script.lines), naturals, max_speedup=preset.max_speedup, timed=script.timed, gap=preset.gap)


def assign_languages(script: Script, voices: dict[str, Voice]) -> Script:
    """Lines without a language take their voice's language (from voices.toml)."""
    lines = tuple(
        line if line.language else replace(line, language=voice_for(line.speaker, voices).language) for line in script.lines
    )
    return replace(script, lines=lines)


def estimated_speakers(script: Script, voices: dict[str, Voice]) -> dict[str, Speaker]:
    """Speakers paced by their whole reference, for --dry-run: no ASR, no model."""
    speakers = {}
    for name in sorted({line.speaker for line in script.lines}):
        voice = voice_for(name, voices)
        seconds = None
        if voice.audio is not None:
            try:
                seconds = sf.info(str(voice.audio)).duration
            except RuntimeError:
                seconds = None  # not readable by libsndfile (mp3/m4a): fall back to upstream's default pace
        speakers[name] = Speaker(voice, None, "", voice.text, seconds)
    return speakers


def _check_instruct(voice: Voice) -> None:
    """A designed voice's instruct must be one OmniVoice knows; say so before any model loads."""
    from omnivoice.models.omnivoice import _resolve_instruct

    try:
        _resolve_instruct(voice.instruct)
    except ValueError as exc:
        raise OmnidubError(f"voice {voice.speaker!r}: {str(exc).splitlines()[0]}") from None


def line_key(target: Target, speaker: Speaker, seed: int, model: dict, settings: dict) -> str:
    """A key over everything that changes a line's audio."""
    payload = {
        "model": model,
        "settings": settings,
        "prompt": speaker.key,
        "instruct": speaker.voice.instruct,
        "text": target.line.text,
        "language": target.line.language,
        "frames": round(target.target * FRAME_RATE * 1000),
        "seed": seed,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class Renderer:
    """Renders one script into one output folder with a resident engine (loaded only when needed)."""

    def __init__(
        self,
        script: Script,
        voices: dict[str, Voice],
        preset: Preset,
        out_dir: Path,
        *,
        input_path: Path,
        model_identity: dict,
        settings: dict,
        engine_factory: Callable[[], object],
        asr_factory: Callable[[], object] | None = None,
        fmt: str = "wav",
        force: bool = False,
        listener: Listener | None = None,
    ):
        self.script = assign_languages(script, voices)
        self.voices = voices
        self.preset = preset
        self.out_dir = Path(out_dir)
        self.input_path = input_path
        self.model_identity = model_identity
        self.settings = settings
        self._engine_factory = engine_factory
        self._engine = None
        self._asr_factory = asr_factory
        self._asr = None
        self.fmt = fmt
        self.force = force
        self.listener = listener or Listener()
        self._stop = False
        self.entries: list[dict] = []
        self.program: float | None = None  # known once every line is planned
        self.outputs: dict[str, str] = {}  # {speaker: stem, "": mix}, relative to out_dir, once assembled

    # -- resources, loaded on first use -------------------------------------------------------------------
    @property
    def engine(self):
        if self._engine is None:
            self.listener.step("loading the TTS model")
            self._engine = self._engine_factory()
        return self._engine

    def asr(self):
        if self._asr is None and self._asr_factory is not None:
            self._asr = self._asr_factory()
        return self._asr

    # -- the flow -----------------------------------------------------------------------------------------
    def run(self) -> Summary:
        previous = self._previous_entries()
        try:
            for sub in ("segments", "stems", ".cache"):
                (self.out_dir / sub).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OmnidubError(f"cannot write the output folder {self.out_dir}: {exc.strerror or exc}") from None
        self.speakers = speakers = self.prepare_speakers()
        self.targets = targets = plan_lines(self.script, speakers, self.preset)
        self.names = names = self._file_names(speakers)

        self.entries = [self._entry(t, speakers[t.line.speaker], names, previous) for t in targets]
        pending = [i for i, e in enumerate(self.entries) if e["status"] != "cached"]
        for entry in self.entries:
            if entry["status"] == "cached":
                self._place(entry)
        self._write_manifest()
        self.listener.start(len(self.entries))
        for entry in self.entries:
            if entry["status"] == "cached":
                self.listener.line_done(entry, entry["duration"] or 0.0, 0.0)

        if pending:
            self.engine  # a model that cannot load is the user's to fix (exit 2), not a failure of every line
        synth_seconds = audio_seconds = 0.0
        previous_handler = self._catch_interrupt()
        try:
            for group in self._batches(pending):
                if self._stop:
                    break
                wall, produced = self._render_group([targets[i] for i in group], [self.entries[i] for i in group], speakers)
                synth_seconds += wall
                audio_seconds += produced
        finally:
            if previous_handler is not None:
                signal.signal(signal.SIGINT, previous_handler)
            self.listener.finish()

        self.program = program = max([t.end for t in targets] + [t.line.end for t in targets if self.script.timed] + [0.0])
        if not self._stop:
            self.reassemble()
        else:
            self._write_manifest()
        counts = {s: sum(e["status"] == s for e in self.entries) for s in ("rendered", "cached", "failed")}
        return Summary(
            out_dir=self.out_dir,
            lines=len(self.entries),
            rendered=counts["rendered"],
            cached=counts["cached"],
            failed=counts["failed"],
            overflow=sum("overflow" in e["flags"] for e in self.entries),
            audio_seconds=audio_seconds,
            synth_seconds=synth_seconds,
            program_seconds=program,
            interrupted=self._stop,
            outputs=tuple(self.outputs.values()),
        )

    def prepare_speakers(self) -> dict[str, Speaker]:
        """One prompt per distinct voice: from the prompt cache, else trimmed, transcribed and encoded once."""
        cache = PromptCache(prompt_cache_dir())
        asr = self.asr()
        # Prompts are encoded in float32 whatever the model's dtype; the ASR model that finds the cut (and
        # any missing transcript) decides them too.
        identity = {k: v for k, v in self.model_identity.items() if k != "dtype"}
        identity["asr"] = asr.name if asr is not None else None
        by_voice: dict[Voice, Speaker] = {}
        speakers = {}
        for name in sorted({line.speaker for line in self.script.lines}):
            voice = voice_for(name, self.voices)
            if voice not in by_voice:
                by_voice[voice] = self._speaker(voice, cache, identity)
            speakers[name] = by_voice[voice]
        return speakers

    def _speaker(self, voice: Voice, cache: PromptCache, identity: dict) -> Speaker:
        key = prompt_key(voice, self.preset, identity)
        if voice.audio is None:  # voice design: no reference, upstream's default pace
            _check_instruct(voice)
            return Speaker(voice, None, key, None, None)
        if not cache.path(key).is_file():
            self.listener.step(f"preparing the voice of {voice.speaker}")
        prompt, reference = voice_prompt(
            voice, cache=cache, preset=self.preset, model_identity=identity, sample_rate=MODEL_SAMPLE_RATE,
            asr=self.asr(), encode=lambda ref: self.engine.encode_prompt(ref.audio, ref.sample_rate, ref.text),
            key=key,
        )
        note = reference.note if reference is not None else "reference prompt from cache"
        if note:
            self.listener.note(f"{voice.speaker}: {note}")
        frames = int(prompt.ref_audio_tokens.shape[-1])
        # Lines are keyed by what the prompt holds, so a prompt prepared differently re-renders its lines.
        digest = hashlib.sha256(prompt.ref_audio_tokens.cpu().numpy().tobytes())
        digest.update(f"{prompt.ref_text}\0{float(prompt.ref_rms):.9g}".encode())
        return Speaker(voice, prompt, digest.hexdigest(), prompt.ref_text, frames / FRAME_RATE)

    # -- lines --------------------------------------------------------------------------------------------
    def _file_names(self, speakers: dict[str, Speaker]) -> dict[str, str]:
        names, taken = {}, set()
        for speaker in sorted(speakers):
            base = candidate = safe_name(speaker)
            n = 2
            while candidate.lower() in taken:
                candidate, n = f"{base}_{n}", n + 1
            taken.add(candidate.lower())
            names[speaker] = candidate
        return names

    def _entry(self, target: Target, speaker: Speaker, names: dict[str, str], previous: dict[str, dict]) -> dict:
        line = target.line
        seed = line_seed(self.preset.seed, line)
        key = line_key(target, speaker, seed, self.model_identity, self.settings)
        entry = {
            "index": line.index,
            "speaker": line.speaker,
            "text": line.text,
            "language": line.language,
            "start": round(target.start, 3),
            "end": round(line.end if self.script.timed else target.end, 3),
            "slot": round(line.end - line.start, 3) if self.script.timed else None,
            "target": round(target.target, 3),
            "natural": round(target.natural, 3),
            "speed": round(target.speed, 3),
            "limit": None if target.limit is None else round(target.limit, 3),
            "duration": None,
            "file": f"segments/{line.index:04d}-{names[line.speaker]}.{SEGMENT_FORMAT}",
            "base_key": key,
            "key": key,
            "seed": seed,
            "status": "pending",
            "error": None,
            "flags": list(target.flags),
            "seconds": 0.0,
        }
        old = previous.get(key)
        if old is not None and self._cached_path(old["key"]).is_file():
            # A retake chosen by QA on an earlier run is kept while the line itself is unchanged.
            entry.update(key=old["key"], seed=old["seed"])
            if old.get("attempts"):
                entry["attempts"] = old["attempts"]
        cached = self._cached_path(entry["key"])
        # The audio is keyed, so a line rendered just before a crash (missing from the manifest) counts too.
        if not self.force and cached.is_file():
            entry.update(status="cached", duration=round(sf.info(str(cached)).duration, 3))
        return entry

    def _batches(self, pending: list[int]):
        size = max(1, self.preset.batch)
        for i in range(0, len(pending), size):
            yield pending[i : i + size]

    def _render_group(self, targets: list[Target], entries: list[dict], speakers: dict[str, Speaker]) -> tuple[float, float]:
        for target in targets:
            self.listener.line_started(target)
        try:
            results = self._synthesize(targets, entries, speakers)
        except Exception as exc:  # one bad line must not stop the run: retry the group line by line
            if len(targets) == 1:
                self._fail(entries[0], exc)
                return 0.0, 0.0
            wall = produced = 0.0
            for target, entry in zip(targets, entries):
                w, p = self._render_group([target], [entry], speakers)
                wall, produced = wall + w, produced + p
            return wall, produced
        wall = produced = 0.0
        for entry, result in zip(entries, results):
            self._store(entry, result.audio, result.sample_rate)
            entry.update(status="rendered", seconds=round(result.seconds, 3), error=None)
            wall, produced = wall + result.seconds, produced + entry["duration"]
            self._write_manifest()
            self.listener.line_done(entry, entry["duration"], result.seconds)
        return wall, produced

    def _synthesize(self, targets: list[Target], entries: list[dict], speakers: dict[str, Speaker], seeds: list[int] | None = None):
        from omnidub.engine import Request

        requests = []
        for i, (target, entry) in enumerate(zip(targets, entries)):
            speaker = speakers[target.line.speaker]
            requests.append(
                Request(
                    text=target.line.text,
                    prompt=speaker.prompt,
                    language=entry["language"],
                    instruct=speaker.voice.instruct,
                    duration=target.target,
                    seed=seeds[i] if seeds else entry["seed"],
                )
            )
        return self.engine.synthesize(requests)

    def _store(self, entry: dict, audio, sample_rate: int) -> None:
        write_atomic(self._cached_path(entry["key"]), audio, sample_rate, SEGMENT_FORMAT)
        entry["duration"] = round(len(audio) / sample_rate, 3)
        self._place(entry)

    def _fail(self, entry: dict, exc: Exception) -> None:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        # A user-fixable problem speaks for itself; anything else also names what went wrong.
        error = message if isinstance(exc, OmnidubError) else f"{type(exc).__name__}: {message}".rstrip(": ")
        entry.update(status="failed", error=error)
        self._write_manifest()
        self.listener.line_done(entry, 0.0, 0.0)

    def _cached_path(self, key: str) -> Path:
        return self.out_dir / ".cache" / f"{key}.{SEGMENT_FORMAT}"

    def _place(self, entry: dict) -> None:
        """Put a copy of the cached audio at the line's segment name (a copy, so editing a segment never
        reaches the cache)."""
        source, dest = self._cached_path(entry["key"]), self.out_dir / entry["file"]
        if dest.is_file() and filecmp.cmp(source, dest, shallow=False):
            return
        with atomic_path(dest) as temp:
            shutil.copyfile(source, temp)

    # -- retakes ------------------------------------------------------------------------------------------
    def render_take(self, entry: dict, seed: int) -> dict:
        """Render a line again with another seed; returns a manifest entry for the take (not yet adopted)."""
        position = self.entries.index(entry)
        target, speaker = self.targets[position], self.speakers[entry["speaker"]]
        key = line_key(target, speaker, seed, self.model_identity, self.settings)
        path = self._cached_path(key)
        if not path.is_file():
            result = self._synthesize([target], [entry], self.speakers, seeds=[seed])[0]
            write_atomic(path, result.audio, result.sample_rate, SEGMENT_FORMAT)
        return dict(entry, key=key, seed=seed, file=path.relative_to(self.out_dir).as_posix(),
                    duration=round(sf.info(str(path)).duration, 3), status="rendered")

    def base_seed(self, entry: dict) -> int:
        """The line's own seed, before any retake."""
        return line_seed(self.preset.seed, self.targets[self.entries.index(entry)].line)

    def save_manifest(self) -> None:
        """Write the manifest as the lines stand now (e.g. after recording retake attempts)."""
        self._write_manifest()

    def adopt(self, entry: dict, take: dict) -> None:
        """Make a take the line's audio; the line's base key stays, so reruns keep the take."""
        entry.update(key=take["key"], seed=take["seed"], duration=take["duration"])
        self._place(entry)
        self._write_manifest()

    def reassemble(self) -> dict[str, str]:
        """Write stems and mix from the current segments, drop stale files, and finish the manifest."""
        self.outputs = self._assemble(self.speakers, self.names, self.program)
        self._remove_stale(self.names)
        self._write_manifest()
        return self.outputs

    # -- outputs ------------------------------------------------------------------------------------------
    def _assemble(self, speakers: dict[str, Speaker], names: dict[str, str], program: float) -> dict[str, str]:
        """Write one stem per speaker and the mix; returns {speaker: stem path, "": mix path}, relative."""
        self.listener.step("assembling stems and mix")
        sample_rate = self._output_rate()
        placements = [
            Placement(self.out_dir / e["file"], e["start"], e["speaker"]) for e in self.entries if e["status"] in ("rendered", "cached")
        ]
        outputs = {}
        for speaker in sorted(speakers):
            path = self.out_dir / "stems" / f"{names[speaker]}.{self.fmt}"
            assemble([p for p in placements if p.speaker == speaker], path, sample_rate, program, self.fmt)
            outputs[speaker] = path.relative_to(self.out_dir).as_posix()
        mix_path = self.out_dir / f"mix.{self.fmt}"
        assemble(placements, mix_path, sample_rate, program, self.fmt, gain=mix_gain(placements, sample_rate, program))
        outputs[""] = mix_path.name
        return outputs

    def _output_rate(self) -> int:
        for entry in self.entries:
            if entry["status"] in ("rendered", "cached"):
                return sf.info(str(self.out_dir / entry["file"])).samplerate
        return MODEL_SAMPLE_RATE

    def _remove_stale(self, names: dict[str, str]) -> None:
        """Drop files no line or speaker of this render owns any more: old segments, cached audio, stems of
        speakers that left or of another format, an old-format mix, and QA reports of audio that changed."""
        keep_segments = {Path(e["file"]).name for e in self.entries}
        for path in (self.out_dir / "segments").glob(f"*.{SEGMENT_FORMAT}"):
            if path.name not in keep_segments and re.fullmatch(r"\d{4}-.+", path.stem):
                path.unlink()
        keep_keys = {e["key"] for e in self.entries} | {a["key"] for e in self.entries for a in e.get("attempts", [])}
        for path in (self.out_dir / ".cache").glob(f"*.{SEGMENT_FORMAT}"):
            if path.stem not in keep_keys:
                path.unlink()
        keep_stems = {f"{name}.{self.fmt}" for name in names.values()}
        for path in (self.out_dir / "stems").iterdir():
            if path.suffix.lstrip(".") in FORMATS and path.name not in keep_stems:
                path.unlink()
        for fmt in FORMATS:
            if fmt != self.fmt:
                (self.out_dir / f"mix.{fmt}").unlink(missing_ok=True)
        if any(e["status"] == "rendered" for e in self.entries):
            for report in ("qa.json", "qa.html"):
                (self.out_dir / report).unlink(missing_ok=True)

    # -- manifest -----------------------------------------------------------------------------------------
    def _previous_entries(self) -> dict[str, dict]:
        """Last run's finished lines by base key (what the line would be without retakes)."""
        path = self.out_dir / MANIFEST
        try:
            lines = json.loads(path.read_text(encoding="utf-8")).get("lines", [])
        except (OSError, ValueError, AttributeError):
            return {}  # no manifest, or one from an interrupted or foreign run: the keyed audio still counts
        return {
            e["base_key"]: e
            for e in lines
            if isinstance(e, dict) and e.get("base_key") and e.get("key") and e.get("status") in ("rendered", "cached")
        }

    def _write_manifest(self) -> None:
        program, outputs = self.program, self.outputs
        data = {
            "omnidub": __version__,
            "input": str(self.input_path.resolve()),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "model": self.model_identity,
            "settings": {**asdict(self.preset), **self.settings},
            "sample_rate": MODEL_SAMPLE_RATE if self._engine is None else int(self._engine.sample_rate),
            "program_seconds": None if program is None else round(program, 3),
            "format": self.fmt,
            "stems": {speaker: path for speaker, path in outputs.items() if speaker},
            "mix": outputs.get(""),
            "notes": list(self.script.warnings) + [f"skipped: {s}" for s in self.script.skipped],
            "lines": self.entries,
        }
        write_text_atomic(self.out_dir / MANIFEST, json.dumps(data, indent=2, ensure_ascii=False))

    # -- Ctrl-C -------------------------------------------------------------------------------------------
    def _catch_interrupt(self):
        """First Ctrl-C: finish the line in flight, then stop cleanly. A second one stops at once."""
        import threading

        if threading.current_thread() is not threading.main_thread():
            return None

        def handler(signum, frame):
            if self._stop:
                # The manifest already holds every finished line; only the line in flight is dropped.
                raise KeyboardInterrupt
            self._stop = True
            self.listener.note("stopping after the line in flight (Ctrl-C again to stop now)")

        return signal.signal(signal.SIGINT, handler)
