"""The plan of a render, as pure functions: script + voices + settings -> each line's timing, file and key.

Nothing here reads or writes a file or loads a model: the same inputs always give the same plan, which is
what makes a dry run exactly the render (once the voices are prepared) and a rerun redo only what changed.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, replace

from omnidub.backends.base import Prompt
from omnidub.config import TimingOptions
from omnidub.errors import OmnidubError
from omnidub.journal import LineEntry
from omnidub.keys import line_key, line_seed
from omnidub.pace import Pace, natural_seconds
from omnidub.pace import model as pace_model
from omnidub.script import Script
from omnidub.timing import Fit, Target, plan
from omnidub.voices import Voice, voice_for

SEGMENT_FORMAT = "wav"  # segments stay lossless: they are the cache; --format applies to stems and the mix


@dataclass(frozen=True)
class Speaker:
    """A voice ready to plan: its voice, its prompt key and, once known, its prompt (None: a designed voice,
    or not encoded yet) and the pace its reference sets."""

    voice: Voice
    key: str
    prompt: Prompt | None
    ref_text: str | None
    ref_seconds: float | None
    estimated: bool = False  # paced by the whole reference because the prompt is not prepared yet

    @property
    def pace(self) -> Pace:
        """The pace its lines are spoken at: its reference's transcript, length and language, and the voice's speed."""
        return Pace(self.ref_text, self.ref_seconds, self.voice.spoken, self.voice.speed or 1.0)


@dataclass(frozen=True)
class Plan:
    """Every line's entry (timing, file, key; nothing rendered yet), the programme's length, and the model that
    predicted each line's natural length (:func:`omnidub.pace.model`)."""

    entries: list[LineEntry]
    targets: list[Target]
    program: float
    pace: str = ""


@dataclass(frozen=True)
class KeyContext:
    """What besides the line itself goes into its key: the model identity, generation settings and run seed."""

    model: dict
    settings: dict
    seed: int


def plan_lines(
    script: Script,
    speakers: dict[str, Speaker],
    names: dict[str, str],
    *,
    timing: TimingOptions,
    keys: KeyContext,
    where: str = "",
    lines: dict[int, Speaker] | None = None,
    fits: dict[int, Fit] | None = None,
) -> Plan:
    """Time every line at its voice's pace, name its segment and key its audio. ``lines``: lines with a voice of
    their own (a clip of the original line they translate), by index; the others speak in their speaker's.
    ``fits``: lines with fitting rules of their own (an editor's speed cap, borrowing the gap)."""
    lines = lines or {}
    voice = {line.index: lines.get(line.index) or speakers[line.speaker] for line in script.lines}
    naturals = [natural_seconds(line.text, line.language, voice[line.index].pace) for line in script.lines]
    targets = plan(
        list(script.lines), naturals, max_speedup=timing.max_speedup, timed=script.timed, gap=timing.gap, fits=fits
    )
    program = max([t.end for t in targets] + [t.line.end for t in targets if script.timed] + [0.0])
    if program > timing.max_program_hours * 3600:
        raise OmnidubError(
            f"{where or 'the script'}: the programme would be {program / 3600:.1f} hours long (a timestamp typo?); "
            f"raise max_program_hours in a preset if that is right"
        )
    entries = [_entry(t, voice[t.line.index], names, script.timed, keys) for t in targets]
    return Plan(entries, targets, program, pace_model())


def _entry(target: Target, speaker: Speaker, names: dict[str, str], timed: bool, keys: KeyContext) -> LineEntry:
    line = target.line
    seed = line_seed(keys.seed, line.speaker, line.text, line.language)
    key = key_for(target, speaker, seed, keys)
    return LineEntry(
        index=line.index,
        speaker=line.speaker,
        text=line.text,
        language=line.language,
        start=round(target.start, 3),
        end=round(line.end if timed else target.end, 3),
        slot=round(line.end - line.start, 3) if timed else None,
        natural=round(target.natural, 3),
        target=round(target.target, 3),
        speed=round(target.speed, 3),
        limit_at=None if target.limit is None else round(target.limit, 3),
        file=segment_name(line.index, names[line.speaker]),
        base_key=key,
        key=key,
        seed=seed,
        flags=list(target.flags),
    )


def key_for(target: Target, speaker: Speaker, seed: int, keys: KeyContext) -> str:
    """The key of a line's audio at ``seed`` (a retake's seed gives the retake's key)."""
    return line_key(
        prompt=speaker.key,
        instruct=speaker.voice.instruct,
        text=target.line.text,
        language=target.line.language,
        seconds=target.target,
        seed=seed,
        model=keys.model,
        settings=keys.settings,
    )


def segment_name(index: int, name: str) -> str:
    return f"segments/{index:04d}-{name}.{SEGMENT_FORMAT}"


def assign_languages(script: Script, voices: dict[str, Voice]) -> Script:
    """Lines without a language take their voice's language (from voices.toml)."""
    lines = tuple(
        line if line.language else replace(line, language=voice_for(line.speaker, voices).language)
        for line in script.lines
    )
    return replace(script, lines=lines)


def language_note(script: Script, voices: dict[str, Voice]) -> str | None:
    """What to say when lines have no language while their voices' references speak one: the reference's language
    is never taken for the dub's, so the model reads each line's language from its text (None: nothing to say)."""
    heard = sorted(
        {
            v.reference_language
            for line in script.lines
            if line.language is None
            for v in [voice_for(line.speaker, voices)]
            if v.reference_language
        }
    )
    if not heard:
        return None
    return (
        f"the references speak {', '.join(heard)}, which is not taken for the dub's language: lines without one "
        "are spoken in the language their text reads as; give --language (e.g. --language es) to name it"
    )


def select_lines(spec: str | None, script: Script) -> frozenset[int] | None:
    """The line numbers ``--only 3,8-10`` names (None: every line); each must be a line of the script."""
    if spec is None:
        return None
    known = sorted(line.index for line in script.lines)
    chosen = set()
    for part in spec.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not match:
            raise OmnidubError(f"--only {spec}: give line numbers and ranges, e.g. 3,8-10")
        huge = next((n for n in (match[1], match[2] or "") if len(n.lstrip("0")) > 18), None)
        if huge is not None:  # no script has that many lines (and Python refuses to read 4,300 digits)
            raise OmnidubError(
                f"--only {_short(spec)}: no line {_short(huge)} in the script (its lines are {known[0]}-{known[-1]})"
            )
        first, last = int(match[1]), int(match[2] or match[1])
        if last < first:
            raise OmnidubError(f"--only {spec}: range {part.strip()} runs backwards")
        # Filled from the script's own lines, never number by number: 1-99999999999 costs what 1-3 does.
        inside = [n for n in known if first <= n <= last]
        if len(inside) != last - first + 1:
            missing = next(n for n, m in zip(itertools.count(first), inside + [None]) if n != m)
            raise OmnidubError(f"--only {spec}: no line {missing} in the script (its lines are {known[0]}-{known[-1]})")
        chosen.update(inside)
    return frozenset(chosen)


def _short(text: str, limit: int = 24) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
