"""One translation: every line of a script asked of the engine (or read from the cache), each candidate sized
against its slot, the fit choice made, and the result as a subtitle file and a report."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from omnidub.errors import OmnidubError
from omnidub.pace import base_seconds
from omnidub.pace import unavailable as pace_unavailable
from omnidub.script import DEFAULT_SPEAKER, Line, Script, labelled_srt, line_ranges
from omnidub.timing import limits
from omnidub.translate.base import Candidate, Engine, Pair, Progress, Request, Unanswered
from omnidub.translate.cache import LineCache
from omnidub.translate.checks import FLAGS, Checker, Verdict, mixed_variants, script_names
from omnidub.translate.fit import Choice, Pace, allowed_seconds, choose, size
from omnidub.translate.glossary import Glossary

NOT_TRANSLATED = "not translated"  # the "how" of a line the engine gave nothing for: written in the original
EDITED = "edited by hand"  # the "how" of a line's text in a translated file someone edited

CONTEXT = 2  # lines either side given to an engine that reads the scene

# The slowest pace a subtitle's cue is taken to speak its line at, against the base rate: 99 % of 6,140 lines of real
# speech by 20 voices (tests/data/pace_speech.json) are spoken faster. A longer cue holds silence, not speech.
SLOWEST_CUE_PACE = 1.6


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
    verdicts: tuple[tuple[Verdict, ...], ...] = ()  # the checks of each line's candidates, as ``choices[k].sized``
    unanswered: tuple[int, ...] = ()  # lines the engine gave nothing for: written in the original, flagged

    @property
    def script(self) -> Script:
        """The translated lines, with the original's times, speakers and indices (a line the engine gave nothing
        for keeps its original text and language)."""
        lines = tuple(
            c.line if c.line.index in self.unanswered else replace(c.line, text=c.text, language=self.pair.target)
            for c in self.choices
        )
        return replace(self.original, lines=lines)

    def verdict(self, k: int, candidate: int | None = None) -> Verdict:
        """The checks of line ``k``'s chosen candidate (or of candidate ``candidate``)."""
        if not self.verdicts:
            return Verdict(None)
        return self.verdicts[k][self.choices[k].chosen if candidate is None else candidate]

    def fit_share(self, chosen: bool = True) -> float:
        """The share of lines that fit their slot: with the fit choice, or with the engine's first candidate. A
        garbled, empty or untranslated line never fits."""
        if not self.choices:
            return 1.0
        fitting = 0
        for k, c in enumerate(self.choices):
            verdict = self.verdict(k, None if chosen else 0)
            fits = c.fits if chosen else c.first_fits
            fitting += fits and verdict.readable and c.line.index not in self.unanswered
        return fitting / len(self.choices)


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
            "pace": pace_json(pace),
        }


def pace_json(pace: Pace) -> dict:
    """A pace as translate.json and the manifest record it: the clip's words, seconds and language, the speed."""
    return {"text": pace.text, "seconds": pace.seconds, "language": pace.language, "speed": pace.speed}


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
    paces: dict[str | int, Pace] | None = None,
    cache: LineCache | None = None,
    progress: Progress | None = None,
    checker: Checker | None = None,
    edited: dict[int, str] | None = None,
) -> Translation:
    """Translate every line of ``script``; lines already translated with the same engine, model, settings, text,
    scene and glossary come from the cache. ``paces``: the pace of the clip a line will be cloned from, by line
    index (int) or by speaker (str), the line's own first (default: the original line as spoken in its slot; a pace
    without a language is the source's). Every candidate is checked (``checker``; default: every check but meaning,
    which needs a reverse model) and the fit choice passes over one that is not a translation of its line.
    ``edited``: lines whose text someone wrote by hand (a kept translated file), checked and sized as they are.
    A batch the engine refuses leaves its lines in the original, flagged; only when it refuses every line is
    the translation refused."""
    cache = cache or LineCache()
    checker = checker or Checker(
        pair,
        glossary=options.glossary,
        names=script_names([x.text for x in script.lines], [x.speaker for x in script.lines], pair.source),
        variant=pair.variant,
    )
    edited = edited or {}
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
    unanswered: dict[int, str] = {}
    for at in range(0, len(pending), batch):
        part = pending[at : at + batch]
        try:
            answered = engine.candidates(part, pair, options.glossary)
        except Unanswered as exc:  # the rest is translated; these lines are named, in the original
            answered = exc.answered
            unanswered.update((request.index, str(exc)) for request in part if request.index not in answered)
        for request in part:
            if request.index in answered:
                cache.put(LineCache.key(engine, pair, request, digest), answered[request.index])
            else:
                answered[request.index] = [Candidate(request.text, NOT_TRANSLATED)]
        found.update((request.index, answered[request.index]) for request in part)
        done += len(part)
        if progress:
            progress(done, len(requests))
    if lines and len(unanswered) == len(lines):
        raise OmnidubError(next(iter(unanswered.values())))
    for index, text in edited.items():
        if index in found:
            found[index] = [Candidate(text, EDITED)] + [c for c in found[index] if c.text != text]
    verdicts = _verdicts(lines, found, checker, unanswered, pair)
    choices = [
        _choice(line, found[line.index], end, _pace(line, paces, script.timed, pair), options, pair, verdicts[k])
        for k, (line, end) in enumerate(zip(lines, ends))
    ]
    notes = [said] if (said := pace_unavailable()) else []
    if options.fit:
        try:
            choices, verdicts, refused = _shortened(
                choices,
                verdicts,
                requests,
                engine,
                pair,
                options,
                cache,
                paces,
                script.timed,
                ends,
                checker,
                skip=set(unanswered) | set(edited),
            )
            if refused:
                notes.append(
                    f"line(s) {line_ranges(sorted(refused))} too long were not shortened "
                    f"({next(iter(refused.values()))}); run again to ask for them"
                )
        except OmnidubError as exc:  # the translations stand; only the shorter ones asked for are missing
            notes.append(f"lines too long were not shortened: {exc}")
    if pair.variant is None:
        verdicts = _mixed(choices, verdicts, pair, set(unanswered))
    if unanswered:
        notes.append(
            f"line(s) {line_ranges(sorted(unanswered))} not translated ({next(iter(unanswered.values()))}): written "
            "in the original, flagged untranslated; run again to ask for them"
        )
    notes = tuple(getattr(engine, "notes", ())) + tuple(notes)
    return Translation(
        script,
        pair,
        engine.name,
        engine.model,
        tuple(choices),
        len(pending),
        notes,
        tuple(tuple(v) for v in verdicts),
        tuple(sorted(unanswered)),
    )


def _verdicts(lines, found, checker: Checker, unanswered: dict[int, str], pair: Pair) -> list[list[Verdict]]:
    """Each line's candidates checked, in one batch; a line the engine gave nothing for is flagged as such."""
    asked = [(line.text, c.text) for line in lines if line.index not in unanswered for c in found[line.index]]
    checked = iter(checker.check(asked))
    verdicts = []
    for line in lines:
        if line.index in unanswered:
            why = f"{NOT_TRANSLATED}: {unanswered[line.index]}"
            verdicts.append([Verdict(None, (("untranslated", why),))])
        else:
            verdicts.append([next(checked) for _ in found[line.index]])
    return verdicts


def _mixed(choices, verdicts, pair: Pair, skip: set[int]) -> list[list[Verdict]]:
    """Where no variant was asked for, a chosen line that speaks the variant the rest of the dub does not is
    flagged `variant` (see :func:`mixed_variants`); ``skip``: lines left in the original."""
    kept = [k for k, c in enumerate(choices) if c.line.index not in skip]
    verdicts = [list(v) for v in verdicts]
    for at, why in mixed_variants([choices[k].text for k in kept], pair.target).items():
        k = kept[at]
        chosen = verdicts[k][choices[k].chosen]
        verdicts[k][choices[k].chosen] = replace(chosen, problems=(*chosen.problems, ("variant", why)))
    return verdicts


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


def _pace(line: Line, paces: dict[str | int, Pace] | None, timed: bool, pair: Pair) -> Pace:
    given = (paces or {}).get(line.index) or (paces or {}).get(line.speaker)
    if given is not None:
        return given if given.language else replace(given, language=pair.source)
    if timed and line.end > line.start:
        # The original line as spoken in its slot: render --source clones a line from that very clip. A subtitle's
        # cue also holds the silence it is shown through ("Sure." for 2.2 s): no slower than SLOWEST_CUE_PACE.
        seconds = line.end - line.start
        base = base_seconds(line.text, pair.source)
        return Pace(line.text, min(seconds, base * SLOWEST_CUE_PACE) if base else seconds, pair.source)
    return Pace()


def _choice(
    line: Line,
    candidates: list[Candidate],
    limit,
    pace: Pace,
    options: TranslateOptions,
    pair: Pair,
    verdicts: list[Verdict],
) -> Choice:
    """The fit choice among the candidates that pass the checks (among all when none does); a line edited by hand
    keeps its text."""
    sized = size(candidates, line, limit, pace, options.max_speedup, options.glossary, pair.target)
    allowed = allowed_seconds(line, limit, options.max_speedup)
    if candidates[0].how == EDITED:
        return Choice(line, tuple(sized), 0, allowed, pace)
    passing = [k for k, v in enumerate(verdicts) if v.passes] or list(range(len(sized)))
    chosen = passing[choose([sized[k] for k in passing], fit=options.fit)]
    return Choice(line, tuple(sized), chosen, allowed, pace)


def _shortened(
    choices, verdicts, requests, engine, pair, options, cache, paces, timed, ends, checker, skip
) -> tuple[list[Choice], list[list[Verdict]], dict[int, str]]:
    """Lines none of whose candidates fit asked once more for shorter ones, where the engine can; and the lines
    whose shorter ones the engine did not give after its tries, with why (they keep their translations)."""
    over = [k for k, c in enumerate(choices) if not c.fits and c.line.index not in skip]
    if not over:
        return choices, verdicts, {}
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
    refused: dict[int, str] = {}
    for at in range(0, len(missing), batch):
        part = missing[at : at + batch]
        try:
            answered = engine.shorten(part, pair, options.glossary)
        except Unanswered as exc:  # the lines answered are shortened; the others keep their translations
            answered = exc.answered
            refused.update((request.index, str(exc)) for request in part if request.index not in answered)
        if answered is None:
            return choices, verdicts, refused
        for request in part:
            if request.index in answered:
                cache.put(LineCache.key(engine, pair, request, digest, "shorten"), answered[request.index])
                more[request.index] = answered[request.index]
    out, checked = list(choices), list(verdicts)
    for k in over:
        line = choices[k].line
        known = [s.candidate for s in choices[k].sized]
        extra = [c for c in more.get(line.index, []) if c.text not in {x.text for x in known}]
        if extra:
            checked[k] = list(verdicts[k]) + checker.check([(line.text, c.text) for c in extra])
            out[k] = _choice(line, known + extra, ends[k], _pace(line, paces, timed, pair), options, pair, checked[k])
            # Without the choice a translator keeps the engine's first answer: the share without it is unchanged.
    return out, checked, refused


def subtitles(translation: Translation) -> str:
    """The translation as SRT (timed) or a plain script (untimed), each line labelled with its speaker. A line's
    text is one line: nothing inside a translation can add, drop or retime a cue."""
    script = translation.script
    lines = [replace(line, text=" ".join(line.text.split())) for line in script.lines]
    if not script.timed:
        return "".join(f"{_label(line)}{line.text}\n" for line in lines)
    return labelled_srt(lines, _label)


def _label(line: Line) -> str:
    return "" if line.speaker == DEFAULT_SPEAKER else f"{line.speaker}: "


def report(translation: Translation, *, input_path: str, output: str, glossary: str | None) -> dict:
    """translate.json: per line the original, the translation, every candidate sized against the slot, and the
    fit figures with and without the choice. What a review needs to show a line beside its original and offer
    the next candidate is all here (``original``, ``candidates``, ``chosen``)."""
    lines = []
    for k, c in enumerate(translation.choices):
        chosen = c.sized[c.chosen]
        checks = _checks(chosen, translation.verdict(k))
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
                "pace": pace_json(c.pace),
                "speed": chosen.speed,
                "fits": chosen.fits and translation.verdict(k).readable,  # garbled or empty text never fits
                "overflow": chosen.overflow,
                "dropped": list(chosen.dropped),
                "flags": list(checks),
                "checks": checks,
                "back": translation.verdict(k).back,
                "edited": chosen.candidate.how == EDITED,
                "candidates": [
                    {
                        "text": s.candidate.text,
                        "how": s.candidate.how,
                        "natural": s.natural,
                        "speed": s.speed,
                        "fits": s.fits and translation.verdict(k, j).readable,
                        "overflow": s.overflow,
                        "dropped": list(s.dropped),
                        "flags": list(_checks(s, translation.verdict(k, j))),
                        "back": translation.verdict(k, j).back,
                    }
                    for j, s in enumerate(c.sized)
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
        "variant": translation.pair.variant,
        "flagged": flagged(lines),
        "fit": {
            "lines": len(translation.choices),
            "fit_with_choice": round(translation.fit_share(True), 4),
            "fit_first_candidate": round(translation.fit_share(False), 4),
        },
        "asked": translation.asked,
        "notes": list(translation.notes),
        "lines": lines,
    }


def _checks(sized, verdict: Verdict) -> dict[str, str]:
    """{flag: one-line why} of a sized candidate: its fit, its glossary terms, and what the checks found."""
    found: dict[str, str] = {}
    if not sized.fits:
        found["overflow"] = f"{sized.overflow:.2f} s too long even sped up"
    if sized.dropped:
        found["glossary"] = f"drops the glossary's {', '.join(map(repr, sized.dropped))}"
    found.update(verdict.why)
    return {flag: found[flag] for flag in FLAGS if flag in found}


def flagged(lines: list[dict]) -> dict[str, list[int]]:
    """The lines each flag is on, in the order of ``FLAGS``."""
    found = {flag: [line["index"] for line in lines if flag in line["flags"]] for flag in FLAGS}
    return {flag: indices for flag, indices in found.items() if indices}


def check_pair(pair: Pair) -> None:
    if pair.source == pair.target:
        raise OmnidubError(f"--from and --to are both {pair.source}: nothing to translate")
