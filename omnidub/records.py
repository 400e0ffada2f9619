"""The records of a render: one typed entry per line, and a folder's last render read once, typed.

A render's line records are appended to the journal as lines finish and folded into ``manifest.json`` at the end
(see ``journal``). Everything a later run needs from the previous one (its lines, the layout and backend it
rendered with, its speakers' file names, its last assembly, the voice check's verdicts) is read from those two
files once, here, into a :class:`LastRender`; nothing else parses them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from functools import cached_property
from pathlib import Path

MANIFEST = "manifest.json"
DONE = ("rendered", "cached")


@dataclass(frozen=True)
class Take:
    """One take of a line as the manifest's ``attempts`` records it: what it is (its seed and key, the text and
    the editor's changes it was made with, its audio's length and hash), QA's verdict on it (``verdict`` None: not
    judged; ``reasons`` then says why) and whether it is the line's audio now (``chosen``)."""

    seed: int
    key: str
    base_key: str | None = None
    text: str | None = None
    edit: dict | None = None
    duration: float | None = None
    sha256: str | None = None
    verdict: str | None = None
    severity: str | None = None
    passed: bool | None = None
    flags: tuple[str, ...] = ()
    error_rate: float | None = None
    voice_similarity: float | None = None
    reasons: tuple[str, ...] = ()
    chosen: bool = False

    @property
    def judged(self) -> bool:
        return self.verdict is not None

    def to_json(self) -> dict:
        return {**asdict(self), "flags": list(self.flags), "reasons": list(self.reasons)}

    @classmethod
    def from_json(cls, data) -> "Take | None":
        """A take from its record (None for one that names no seed and key: damaged, or of another version)."""
        if not isinstance(data, dict) or type(data.get("seed")) is not int or not isinstance(data.get("key"), str):
            return None
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["flags"] = tuple(str(f) for f in values.get("flags") or ())
        values["reasons"] = tuple(str(r) for r in values.get("reasons") or () if r is not None)
        values["edit"] = values.get("edit") if isinstance(values.get("edit"), dict) else None
        return cls(**values)


@dataclass
class LineEntry:
    """One line of a render as the manifest records it. ``start``/``end``/``limit_at``/``rendered_end`` are
    absolute times in the programme (``end`` is the slot's end); ``slot``, ``natural``, ``target`` and
    ``duration`` are lengths; ``render_seconds`` is the wall time its synthesis cost."""

    index: int
    speaker: str
    text: str
    language: str | None
    start: float
    end: float
    slot: float | None
    natural: float
    target: float
    speed: float
    limit_at: float | None
    file: str
    base_key: str
    key: str
    seed: int
    flags: list[str] = field(default_factory=list)
    status: str = "pending"
    duration: float | None = None
    sha256: str | None = None
    error: str | None = None
    render_seconds: float = 0.0
    attempts: tuple[Take, ...] = ()  # its takes (QA retakes, review), each with its verdict
    reference: dict | None = None  # where this line's voice came from, when it is not its speaker's voice
    # A person approved this audio (its key): kept while its text, voice and settings stay the same.
    approved: bool = False
    # The editor's changes to the line (omnidub review): "from" (the input's text they apply over), and any of
    # "text", "max_speedup", "borrow" (it may run into the silence before the next line), "voice" ("line" or
    # "speaker": which clip of the source it is cloned from).
    edit: dict | None = None
    # The editor's own words on the line and whether to look at it again (omnidub review): kept with the line,
    # whatever its audio, and never part of its key.
    note: str | None = None
    look_again: bool = False
    # A dub's line: its spoken length as the translation's fit choice predicted it, and the pace (the clip's
    # transcript and seconds) it was judged at; never part of its key.
    predicted: dict | None = None

    @property
    def done(self) -> bool:
        return self.status in DONE

    @property
    def rendered_end(self) -> float | None:
        """Where the line's audio ends on the programme (None until it has audio)."""
        return None if self.duration is None else round(self.start + self.duration, 3)

    def to_json(self) -> dict:
        return {**asdict(self), "attempts": [t.to_json() for t in self.attempts], "rendered_end": self.rendered_end}

    @classmethod
    def from_json(cls, data: dict) -> "LineEntry":
        """An entry from a manifest or journal record (unknown keys ignored; a missing field raises)."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        attempts = values.get("attempts")
        values["attempts"] = tuple(
            take for take in map(Take.from_json, attempts if isinstance(attempts, list) else ()) if take is not None
        )
        return cls(**values)


def entry_of(record) -> LineEntry | None:
    """The entry a manifest or journal record holds (None for a damaged record or one of another version: the
    keyed audio still counts)."""
    if not isinstance(record, dict):
        return None
    try:
        return LineEntry.from_json(record)
    except TypeError:
        return None


def read_json(folder: Path, name: str = MANIFEST) -> dict | None:
    """A JSON object a render wrote (the manifest, or another record ``name``), or None when there is none."""
    try:
        data = json.loads((Path(folder) / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def manifest_entries(manifest: dict | None) -> list[LineEntry]:
    """The line entries a manifest holds (damaged records skipped)."""
    lines = (manifest or {}).get("lines")
    return [e for e in map(entry_of, lines if isinstance(lines, list) else []) if e is not None]


@dataclass(frozen=True)
class Assembled:
    """The manifest's record of the last complete assembly: its key and the hash of every file it wrote."""

    key: str
    files: dict[str, str]


@dataclass(frozen=True)
class LastRender:
    """What a folder's last render recorded, typed (empty for a folder never rendered)."""

    input: str | None = None
    layout: str | None = None  # the CFG layout its lines were rendered in
    backend: str | None = None  # the backend that rendered them
    entries: tuple[LineEntry, ...] = ()  # the manifest's lines
    journal: tuple[LineEntry, ...] = ()  # lines a run appended after the manifest (one in progress, or killed)
    file_names: dict[str, str] = field(default_factory=dict)  # speaker -> the name of its files
    assembly: Assembled | None = None
    parts: dict = field(default_factory=dict)  # the outputs as recorded: stems, mix, loudness, delivery
    program_seconds: float | None = None
    request: RenderRequest | None = None  # how it was asked for: see Project.asked_json

    @classmethod
    def parse(cls, manifest: dict | None, journal: list[LineEntry] = ()) -> "LastRender":
        """The record a manifest (as omnidub wrote it; None: no render) and the journal's entries give."""
        data = manifest if isinstance(manifest, dict) else {}
        settings, model = _mapping(data.get("settings")), _mapping(data.get("model"))
        voices = _mapping(data.get("voices"))
        names = {
            str(name): record["file_name"]
            for name, record in voices.items()
            if isinstance(record, dict) and isinstance(record.get("file_name"), str)
        }
        record = data.get("assembly")
        assembly = None
        if isinstance(record, dict) and isinstance(record.get("key"), str) and isinstance(record.get("files"), dict):
            assembly = Assembled(record["key"], dict(record["files"]))
        program = data.get("program_seconds")
        return cls(
            input=data["input"] if isinstance(data.get("input"), str) else None,
            layout=settings["cfg"] if isinstance(settings.get("cfg"), str) else None,
            backend=model["backend"] if isinstance(model.get("backend"), str) else None,
            entries=tuple(manifest_entries(data)),
            journal=tuple(journal),
            file_names=names,
            assembly=assembly,
            parts={name: data.get(name) for name in ("stems", "mix", "loudness", "delivery") if name in data},
            program_seconds=float(program) if isinstance(program, (int, float)) else None,
            request=RenderRequest.parse(data.get("request")),
        )

    @property
    def exists(self) -> bool:
        return bool(self.entries or self.journal or self.input)

    @property
    def records(self) -> tuple[LineEntry, ...]:
        """Every line record, the manifest's then the journal's newer ones."""
        return self.entries + self.journal

    @property
    def stems(self) -> dict:
        return _mapping(self.parts.get("stems"))

    @property
    def past_video(self) -> tuple[int, ...]:
        """Lines the last assembly found ending after the video."""
        return tuple(e.index for e in self.entries if "past-video" in e.flags)

    def hashes(self) -> dict[int, str | None]:
        """Each line's audio hash as the manifest recorded it."""
        return {e.index: e.sha256 for e in self.entries}

    def verdicts(self) -> dict[int, dict]:
        """The voice check's verdicts recorded per line (``render --source --voice-match auto``)."""
        return verdicts(self.entries)


def verdicts(entries) -> dict[int, dict]:
    """The voice check's verdicts the entries record, by line."""
    found = {}
    for entry in entries:
        check = (entry.reference or {}).get("check") if isinstance(entry.reference, dict) else None
        if isinstance(check, dict) and "passed" in check:
            found[entry.index] = check
    return found


@dataclass(frozen=True)
class RenderRequest:
    """How a folder was asked to render (the manifest's ``request``, see ``Project.asked_json``): what a review
    replays. Voices, source and delivery options keep their JSON form; paths are absolute strings."""

    model: str | None
    device: str | None
    backend: str | None
    asr_model: str | None  # the ASR the render decided with (reference cuts, hearing the source)
    preset: dict
    language: str | None
    voices: dict
    format: str
    allow_other_files: bool
    cache: str | None
    source: dict | None
    delivery: dict

    @classmethod
    def parse(cls, data) -> "RenderRequest | None":
        """The request a manifest recorded, or None when it recorded none (or not one of this shape)."""
        if not isinstance(data, dict) or not isinstance(data.get("preset"), dict):
            return None
        text = lambda name: data[name] if isinstance(data.get(name), str) else None  # noqa: E731
        voices, delivery, source = data.get("voices"), data.get("delivery"), data.get("source")
        if not isinstance(voices, dict) or not isinstance(delivery, dict) or not isinstance(source, (dict, type(None))):
            return None
        return cls(
            model=text("model"),
            device=text("device"),
            backend=text("backend"),
            asr_model=text("asr_model"),
            preset=data["preset"],
            language=text("language"),
            voices=voices,
            format=text("format") or "wav",
            allow_other_files=data.get("allow_other_files") is True,
            cache=text("cache"),
            source=source,
            delivery=delivery,
        )


@dataclass(frozen=True)
class QaRecord:
    """What omnidub qa recorded of a folder (qa.json), typed: the ASR model it heard with and each line's
    verdict as written (by line number)."""

    asr_model: str | None
    lines: dict[int, dict]

    @classmethod
    def read(cls, folder: Path) -> "QaRecord | None":
        """The folder's qa.json when omnidub wrote it (by its generator field), else None."""
        data = read_json(folder, "qa.json")
        if data is None or data.get("generator") != "omnidub":
            return None
        lines = data.get("lines") if isinstance(data.get("lines"), list) else []
        return cls(
            asr_model=data["asr_model"] if isinstance(data.get("asr_model"), str) else None,
            lines={line["index"]: line for line in lines if isinstance(line, dict) and type(line.get("index")) is int},
        )

    def failures(self) -> dict[int, tuple[str, tuple[str, ...]]]:
        """Line -> (the hash of the audio QA judged, its flags) for each line it failed."""
        failed = {}
        for index, line in self.lines.items():
            if line.get("verdict") == "failed" and isinstance(line.get("sha256"), str):
                failed[index] = (line["sha256"], tuple(str(f) for f in line.get("flags") or ()) or ("failed",))
        return failed


def _mapping(value) -> dict:
    return value if isinstance(value, dict) else {}


# A candidate with one of these flags says something else than the original, or nothing: never offered again.
UNSAYABLE = ("meaning", "language", "garbled", "empty")
SAME_SLOT = 0.005  # seconds: two lines whose starts and ends are this close are in one slot


def same_slot(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether two (start, end) are one slot of the programme."""
    return abs(a[0] - b[0]) < SAME_SLOT and abs(a[1] - b[1]) < SAME_SLOT


@dataclass(frozen=True)
class TranslationRecord:
    """What omnidub translate recorded beside the translation it wrote (translate.json), typed: each line's record
    as written (its slot, original, the translation chosen, the candidates, and the checks' ``flags``, ``checks``
    and back-translation ``back`` where the file has them). A record is found for a line by its slot and its text,
    never by its number: a cue added to or removed from the translation by hand moves every number after it."""

    source_language: str | None
    target_language: str | None
    engine: str | None
    lines: tuple[dict, ...]

    @classmethod
    def parse(cls, data) -> "TranslationRecord | None":
        """The record of a translate.json's content, or None when it is not one."""
        if not isinstance(data, dict) or not isinstance(data.get("lines"), list):
            return None
        text = lambda name: data[name] if isinstance(data.get(name), str) else None  # noqa: E731
        lines = tuple(
            line
            for line in data["lines"]
            if isinstance(line, dict)
            and isinstance(line.get("candidates"), list)
            and isinstance(line.get("original"), str)
            and isinstance(line.get("translation"), str)
        )
        return cls(text("from"), text("to"), text("engine"), lines)

    def find(self, start: float, end: float, text: str, *, timed: bool = True) -> tuple[dict | None, str | None]:
        """The record of the line at ``start``-``end`` whose input says ``text`` (the translation chosen, or one of
        its candidates), and None; or None and why there is none. An untimed script has no slots: its line is
        found by its text alone, when one record says it."""
        said = _words(text)
        if timed:
            near = self._by_start.get(round(start * 100), ()) + self._by_start.get(round(start * 100) + 1, ())
            near += self._by_start.get(round(start * 100) - 1, ())
            here = [r for r in near if same_slot(_slot(r), (start, end))]
            if not here:
                return None, "omnidub translate recorded no line at its time (a cue added to the translation by hand)"
        else:
            here = list(self.lines)
        for texts in (lambda r: [r["translation"]], _texts):
            matching = [r for r in here if said in map(_words, texts(r))]
            if len(matching) == 1 or (matching and timed):
                return matching[0], None
            if len(matching) > 1:
                return None, "several lines of the translation say this; which record is its cannot be told"
        return None, (
            "its text is not what omnidub translate wrote for it (the translation was edited by hand), so its "
            "record is not offered"
        )

    @cached_property
    def _by_start(self) -> dict[int, tuple[dict, ...]]:
        """The records by their start in hundredths of a second (found in one look, for an episode's lines)."""
        found: dict[int, tuple[dict, ...]] = {}
        for record in self.lines:
            slot = _slot(record)
            if slot is not None:
                found[round(slot[0] * 100)] = found.get(round(slot[0] * 100), ()) + (record,)
        return found

    @staticmethod
    def judged(record: dict, text: str) -> dict | None:
        """The checks' verdict on ``text`` as the record has it: {"flags", "checks", "back"} (the chosen
        translation's, or a candidate's), or None when the record does not hold that text."""
        said = _words(text)
        if _words(record["translation"]) == said:
            source = record
        else:
            source = next(
                (c for c in record["candidates"] if isinstance(c, dict) and _words(c.get("text")) == said), None
            )
            if source is None:
                return None
        checks = record.get("checks") if source is record and isinstance(record.get("checks"), dict) else {}
        return {
            "flags": [str(f) for f in source.get("flags") or () if isinstance(f, str)],
            "checks": {str(k): str(v) for k, v in checks.items() if isinstance(v, str)},
            "back": source["back"] if isinstance(source.get("back"), str) else None,
        }

    @staticmethod
    def sayable(record: dict) -> list[str]:
        """The record's candidates (most faithful first) whose checks found nothing UNSAYABLE: what a review may
        offer the line instead."""
        texts, refused = _candidates(record)
        return [t for t in texts if not refused.get(t)]

    @staticmethod
    def again(record: dict, current: str) -> tuple[str | None, str | None]:
        """The candidate after the one the line says now (round again after the last; the first when it says none
        of them) among those whose checks found nothing UNSAYABLE, and None; or None and why there is none."""
        texts, refused = _candidates(record)
        if not [t for t in texts if _words(t) != _words(current)]:
            return None, "omnidub translate gave no other translation of it"
        others = [t for t in TranslationRecord.sayable(record) if _words(t) != _words(current)]
        if not others:
            flags = sorted({f for t in texts if _words(t) != _words(current) for f in refused.get(t, ())})
            return None, (
                f"none of omnidub translate's other translations of it passed its checks ({', '.join(flags)})"
            )
        at = next((k for k, t in enumerate(texts) if _words(t) == _words(current)), None)
        if at is None:
            return others[0], None
        after = texts[at + 1 :] + texts[: at + 1]
        return next(t for t in after if t in others), None


def _candidates(record: dict) -> tuple[list[str], dict[str, list[str]]]:
    """A record's candidate texts in its order (each once), and the flags of each that change what it says."""
    candidates = [c for c in record["candidates"] if isinstance(c, dict) and _words(c.get("text"))]
    refused = {c["text"]: sorted(set(c.get("flags") or ()) & set(UNSAYABLE)) for c in candidates}
    return list(dict.fromkeys(c["text"] for c in candidates)), refused


def _words(text) -> str:
    return " ".join(text.split()) if isinstance(text, str) else ""


def _texts(record: dict) -> list[str]:
    return [record["translation"]] + [
        c["text"] for c in record["candidates"] if isinstance(c, dict) and isinstance(c.get("text"), str)
    ]


def _slot(record: dict) -> tuple[float, float] | None:
    start, end = record.get("start"), record.get("end")
    ok = all(isinstance(t, (int, float)) and not isinstance(t, bool) for t in (start, end))
    return (float(start), float(end)) if ok else None
