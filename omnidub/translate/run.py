"""One translation: every line of a script asked of the engine (or read from the cache), each candidate sized
against its slot, the fit choice made, and the result as a subtitle file and a report."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from omnidub.errors import OmnidubError
from omnidub.script import DEFAULT_SPEAKER, Line, Script, labelled_srt
from omnidub.timing import limits
from omnidub.translate.base import Candidate, Engine, Pair, Progress, Request
from omnidub.translate.cache import LineCache
from omnidub.translate.fit import Choice, Pace, allowed_seconds, choose, size
from omnidub.translate.glossary import Glossary

CONTEXT = 2  # lines either side given to an engine that reads the scene


@dataclass(frozen=True)
class TranslateOptions:
    """How lines are translated and chosen: the fit choice (off: the engine's first candidate), the speed-up a
    render allows, and the glossary."""

    fit: bool = True
    max_speedup: float = 1.25
    glossary: Glossary = field(default_factory=Glossary)


@dataclass(frozen=True)
class Translation:
    """A script translated: each line's choice, the engine that made it, and what to say about it."""

    original: Script
    pair: Pair
    engine: str
    model: str
    choices: tuple[Choice, ...]
    asked: int  # lines the engine was asked for (the others came from the cache)
    notes: tuple[str, ...] = ()

    @property
    def script(self) -> Script:
        """The translated lines, with the original's times, speakers and indices."""
        lines = tuple(replace(c.line, text=c.text, language=self.pair.target) for c in self.choices)
        return replace(self.original, lines=lines)

    def fit_share(self, chosen: bool = True) -> float:
        """The share of lines that fit their slot: with the fit choice, or with the engine's first candidate."""
        if not self.choices:
            return 1.0
        return sum(c.fits if chosen else c.first_fits for c in self.choices) / len(self.choices)


@dataclass(frozen=True)
class Predicted:
    """A translated line as the fit choice left it: its text and slot (the line's identity), its spoken length as
    predicted, and the pace it was judged at. What a dub hands its render beside the lines."""

    text: str
    start: float
    end: float
    natural: float
    pace: Pace

    @property
    def identity(self) -> tuple[str, float, float]:
        return identity(self.text, self.start, self.end)

    def to_json(self) -> dict:
        pace = self.pace
        return {
            "natural": self.natural,
            "pace": {"text": pace.ref_text, "seconds": pace.ref_seconds, "speed": pace.speed},
        }


def identity(text: str, start: float, end: float) -> tuple[str, float, float]:
    """A line's identity across files: its words and its slot (never its number)."""
    return (" ".join(text.split()), round(start, 3), round(end, 3))


def predictions(translation: Translation) -> tuple[Predicted, ...]:
    """Every translated line's prediction (see :class:`Predicted`)."""
    return tuple(
        Predicted(c.text, c.line.start, c.line.end, c.sized[c.chosen].natural, c.pace) for c in translation.choices
    )


def translate_script(
    script: Script,
    engine: Engine,
    pair: Pair,
    *,
    options: TranslateOptions = TranslateOptions(),
    paces: dict[int | str, Pace] | None = None,
    cache: LineCache | None = None,
    progress: Progress | None = None,
) -> Translation:
    """Translate every line of ``script``; lines already translated with the same engine, model, settings, text,
    scene and glossary come from the cache. ``paces``: the pace a line is spoken at, by line index (the clip it
    will be cloned from), else by speaker; default: each line's own, as the original speaks it in its slot."""
    cache = cache or LineCache()
    lines = list(script.lines)
    ends = limits(lines) if script.timed else [None] * len(lines)
    requests = [_request(lines, k, ends[k], options.max_speedup, script.timed) for k in range(len(lines))]
    digest = options.glossary.digest()
    found: dict[int, list[Candidate]] = {}
    pending = []
    for request in requests:
        kept = cache.get(LineCache.key(engine, pair, request, digest))
        if kept is None:
            pending.append(request)
        else:
            found[request.index] = kept
    done = len(requests) - len(pending)
    if progress:
        progress(done, len(requests))
    batch = getattr(engine, "batch", 8)
    for at in range(0, len(pending), batch):
        part = pending[at : at + batch]
        answered = engine.candidates(part, pair, options.glossary)
        for request in part:
            cache.put(LineCache.key(engine, pair, request, digest), answered[request.index])
            found[request.index] = answered[request.index]
        done += len(part)
        if progress:
            progress(done, len(requests))
    choices = [
        _choice(line, found[line.index], end, _pace(line, paces, script.timed), options)
        for line, end in zip(lines, ends)
    ]
    notes = []
    if options.fit:
        try:
            choices = _shortened(choices, requests, engine, pair, options, cache, paces, script.timed, ends)
        except OmnidubError as exc:  # the translations stand; only the shorter ones asked for are missing
            notes.append(f"lines too long were not shortened: {exc}")
    notes = tuple(getattr(engine, "notes", ())) + tuple(notes)
    return Translation(script, pair, engine.name, engine.model, tuple(choices), len(pending), notes)


def _request(lines: list[Line], k: int, limit: float | None, max_speedup: float, timed: bool) -> Request:
    line = lines[k]
    seconds = None
    if timed:  # the last line may run on: its budget is its slot, sped up as allowed
        seconds = allowed_seconds(line, limit, max_speedup) or round((line.end - line.start) * max_speedup, 3)
    characters = None
    if seconds is not None:
        from omnidub.duration import natural_seconds

        spoken = natural_seconds(line.text, line.text, max(line.end - line.start, 0.04))
        characters = max(1, int(len(line.text) * seconds / max(spoken, 0.04)))
    return Request(
        line.index,
        line.text,
        line.speaker,
        before=tuple(f"{x.speaker}: {x.text}" for x in lines[max(0, k - CONTEXT) : k]),
        after=tuple(f"{x.speaker}: {x.text}" for x in lines[k + 1 : k + 1 + CONTEXT]),
        seconds=seconds,
        characters=characters,
    )


def _pace(line: Line, paces: dict[int | str, Pace] | None, timed: bool) -> Pace:
    if paces and line.index in paces:
        return paces[line.index]
    if paces and line.speaker in paces:
        return paces[line.speaker]
    if timed and line.end > line.start:
        # The original line as spoken in its slot: render --source clones a line from that very clip.
        return Pace(line.text, line.end - line.start)
    return Pace()


def _choice(line: Line, candidates: list[Candidate], limit, pace: Pace, options: TranslateOptions) -> Choice:
    sized = size(candidates, line, limit, pace, options.max_speedup, options.glossary)
    chosen = choose(sized, fit=options.fit)
    return Choice(line, tuple(sized), chosen, allowed_seconds(line, limit, options.max_speedup), pace)


def _shortened(choices, requests, engine, pair, options, cache, paces, timed, ends) -> list[Choice]:
    """Lines none of whose candidates fit asked once more for shorter ones, where the engine can."""
    over = [k for k, c in enumerate(choices) if not c.fits]
    if not over:
        return choices
    digest = options.glossary.digest()
    asked = [requests[k] for k in over]
    more: dict[int, list[Candidate]] = {}
    missing = []
    for request in asked:
        kept = cache.get(LineCache.key(engine, pair, request, digest, "shorten"))
        if kept is None:
            missing.append(request)
        else:
            more[request.index] = kept
    batch = getattr(engine, "batch", 8)
    for at in range(0, len(missing), batch):
        part = missing[at : at + batch]
        answered = engine.shorten(part, pair, options.glossary)
        if answered is None:
            return choices
        for request in part:
            cache.put(LineCache.key(engine, pair, request, digest, "shorten"), answered[request.index])
            more[request.index] = answered[request.index]
    out = list(choices)
    for k in over:
        line = choices[k].line
        known = [s.candidate for s in choices[k].sized]
        extra = [c for c in more.get(line.index, []) if c.text not in {x.text for x in known}]
        if extra:
            out[k] = _choice(line, known + extra, ends[k], _pace(line, paces, timed), options)
            # Without the choice a translator keeps the engine's first answer: the share without it is unchanged.
    return out


def subtitles(translation: Translation) -> str:
    """The translation as SRT (timed) or a plain script (untimed), each line labelled with its speaker."""
    script = translation.script
    if not script.timed:
        return "".join(f"{_label(line)}{line.text}\n" for line in script.lines)
    return labelled_srt(script.lines, _label)


def _label(line: Line) -> str:
    return "" if line.speaker == DEFAULT_SPEAKER else f"{line.speaker}: "


def report(translation: Translation, *, input_path: str, output: str, glossary: str | None) -> dict:
    """translate.json: per line the original, the translation, every candidate sized against the slot, and the
    fit figures with and without the choice. What a review needs to show a line beside its original and offer
    the next candidate is all here (``original``, ``candidates``, ``chosen``)."""
    lines = []
    for c in translation.choices:
        chosen = c.sized[c.chosen]
        flags = []
        if not chosen.fits:
            flags.append("overflow")
        if chosen.dropped:
            flags.append("glossary")
        lines.append(
            {
                "index": c.line.index,
                "speaker": c.line.speaker,
                "start": c.line.start,
                "end": c.line.end,
                "original": c.line.text,
                "translation": chosen.candidate.text,
                "chosen": c.chosen,
                "allowed": c.allowed,
                "natural": chosen.natural,
                "pace": {"text": c.pace.ref_text, "seconds": c.pace.ref_seconds, "speed": c.pace.speed},
                "speed": chosen.speed,
                "fits": chosen.fits,
                "overflow": chosen.overflow,
                "dropped": list(chosen.dropped),
                "flags": flags,
                "candidates": [
                    {
                        "text": s.candidate.text,
                        "how": s.candidate.how,
                        "natural": s.natural,
                        "speed": s.speed,
                        "fits": s.fits,
                        "overflow": s.overflow,
                        "dropped": list(s.dropped),
                    }
                    for s in c.sized
                ],
            }
        )
    return {
        "input": input_path,
        "output": output,
        "from": translation.pair.source,
        "to": translation.pair.target,
        "engine": translation.engine,
        "model": translation.model,
        "glossary": glossary,
        "fit": {
            "lines": len(translation.choices),
            "fit_with_choice": round(translation.fit_share(True), 4),
            "fit_first_candidate": round(translation.fit_share(False), 4),
        },
        "asked": translation.asked,
        "notes": list(translation.notes),
        "lines": lines,
    }


def check_pair(pair: Pair) -> None:
    if pair.source == pair.target:
        raise OmnidubError(f"--from and --to are both {pair.source}: nothing to translate")
