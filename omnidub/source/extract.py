"""Voices from the source: every speaker's reference clip chosen from the original's lines (and, for per-line
references, each original line's own clip assessed), in one pass over the source."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from omnidub.asr import Asr, whisper_language
from omnidub.errors import OmnidubError
from omnidub.script import Script
from omnidub.source.analysis import Analysis, analyse, labelled
from omnidub.source.audio import SourceAudio
from omnidub.source.clips import (
    Candidate,
    ClipOptions,
    clip_samples,
    fallback_candidate,
    speaker_candidates,
    word_agreement,
)
from omnidub.source.heard import Heard
from omnidub.source.identity import (
    JOIN_LEAST,
    cue_joined_candidate,
    cued_voice,
    guarded,
    heard_alone_candidate,
    joined_candidate,
)
from omnidub.source.lines import (
    LINE_FLOOR,
    LineClip,
    LineReference,
    assess_line,
    line_references,
)
from omnidub.source.separate import Separation

BACKGROUND_NOTE = (
    "clips carry the source's background (music, effects) and it will be cloned with the voices; "
    "--separate MODEL isolates the vocals first"
)
UNCHECKED_NOTE = (
    "the original subtitles could not be checked against what the source says (no ASR model): subtitles in "
    "another language than the audio would give every clip the wrong words; --asr-model checks them (tiny.en "
    "for English, offline)"
)


@dataclass(frozen=True)
class ExtractOptions:
    """What an extraction needs besides the source: clip rules, a speaker count, the language, the line floor."""

    clips: ClipOptions = field(default_factory=ClipOptions)
    speakers: int | None = None  # groups for an unlabelled original; None: chosen by the data
    language: str | None = None  # the language spoken in the source
    line_floor: float = LINE_FLOOR
    assess_lines: bool = False  # also judge every original line's own clip (per-line references)
    names: dict[str, str] = field(default_factory=dict)  # --names: a voice found in the source -> its name


@dataclass(frozen=True, eq=False)
class Extraction:
    """The outcome: per speaker its ranked candidates and chosen clip (or why none), and per original line its
    own clip when asked for."""

    analysis: Analysis
    candidates: dict[str, tuple[Candidate, ...]]
    chosen: dict[str, Candidate]
    missing: dict[str, str]  # speaker -> why it has no clip
    line_clips: dict[int, LineClip]
    separation: Separation | None
    notes: tuple[str, ...]
    heard: Heard | None = None  # the source as transcribed, when it came without subtitles

    def clip(self, start: float, end: float, parts=()) -> np.ndarray:
        """A clip's samples (float32 at the clip rate), cut as the extraction cuts them (a joined one's parts)."""
        return clip_samples(self.analysis, start, end, parts)

    def speaker_clips(self) -> dict[str, tuple[float, float, str]]:
        """speaker -> (start, end, text) of its chosen clip."""
        return {name: (c.start, c.end, c.text) for name, c in self.chosen.items()}

    def references(self, dub: Script) -> tuple[LineReference, ...]:
        """Each dubbed line's reference (needs ExtractOptions(assess_lines=True))."""
        from omnidub.source.summary import summarize

        if not self.line_clips:
            raise ValueError("per-line references need an extraction made with assess_lines=True")
        return line_references(dub, summarize(self))


def extract_voices(
    source: SourceAudio,
    original: Script,
    *,
    encoder,
    asr: Asr | None,
    options: ExtractOptions = ExtractOptions(),
    separation: Separation | None = None,
    heard: Heard | None = None,
) -> Extraction:
    """Choose every speaker's clip from the source (from its isolated vocals when `separation` is given).
    ``heard``: the source as transcribed when it came without subtitles (``original`` is then its lines)."""
    notes = [] if separation else [BACKGROUND_NOTE]
    if options.speakers is not None and labelled(original):
        notes.append(f"--speakers {options.speakers} ignored: the original names its speakers")
    audio = separation.vocals if separation else source

    first: list[Analysis] = []  # the lines heard are grouped again over the same audio: what it heard is kept

    def analysed(lines: Script) -> Analysis:
        found = analyse(
            lines,
            audio,
            encoder,
            speakers=options.speakers,
            language=options.language,
            separated=separation is not None,
            speech=heard.speech if heard else None,
            heard=heard is not None,
            heard_lines=heard is not None and not heard.cued,
            both=first[0].overlapped if first else None,
        )
        first[:] = first or [found]
        return found

    if heard is not None and not heard.cued:  # a quick reply Whisper ran into the line before is a line of its own
        from omnidub.source.heard import voice_changes

        heard, analysis = voice_changes(heard, analysed, encoder)
        original = heard.original
    else:
        analysis = analysed(original)
    if options.names:
        analysis = renamed(analysis, options.names)
    if analysis.grouping is not None:  # two voices the lines cannot tell apart: said, with the lines, not guessed
        notes += list(dict.fromkeys(analysis.grouping.doubts.values()))
    if heard is not None:  # its lines are the words heard: nothing to check them against
        if analysis.language is None:
            notes.append(f"language {heard.transcript.language!r}, as the ASR heard it; --language sets it")
        analysis = replace(
            analysis,
            words=heard.transcript.words,
            language=analysis.language or heard.transcript.language,
            heard_lines=not heard.cued,  # at a dub's cues, where a line ends is its cue's time, not a guess
        )
    elif asr is not None:
        # One pass over the whole track: Whisper encodes 30 s windows, so a call per clip would cost a window each.
        said = asr.transcribe(
            audio.samples, audio.sample_rate, language=whisper_language(analysis.language), word_timestamps=True
        )
        if analysis.language is None:
            notes.append(f"language {said.language!r}, as the ASR heard it; --language sets it")
        analysis = replace(analysis, words=said.words, language=analysis.language or said.language)
        check_words(analysis, said.language)
    else:
        notes.append(UNCHECKED_NOTE)
    candidates, chosen, missing = {}, {}, {}
    for speaker in dict.fromkeys(analysis.speakers[line.index] for line in original.lines):
        if speaker not in analysis.centroids:
            candidates[speaker] = ()
            joined = None
            if cued_voice(analysis, speaker):  # labelled, or found by its cues' time (no centre: see analyse)
                joined = cue_joined_candidate(analysis, speaker) or (
                    heard_alone_candidate(analysis, speaker, encoder, asr, "no line with speech enough to embed")
                    if heard and asr
                    else None
                )
            if joined is not None:
                chosen[speaker] = joined
            else:
                missing[speaker] = "none of its lines has enough speech to know the voice"
            continue
        found = tuple(speaker_candidates(analysis, speaker, encoder, asr, options.clips))
        candidates[speaker] = found
        if found and found[0].problem is None:
            chosen[speaker] = found[0]
            continue
        fallback = (
            fallback_candidate(analysis, speaker, encoder, _why_none(found))
            or joined_candidate(analysis, speaker, encoder, _why_none(found))
            or (cue_joined_candidate(analysis, speaker) if cued_voice(analysis, speaker) else None)
            or (heard_alone_candidate(analysis, speaker, encoder, asr, _why_none(found)) if heard and asr else None)
        )
        if fallback is not None:
            chosen[speaker] = fallback
        else:
            missing[speaker] = (
                f"{_why_none(found)}; and not {JOIN_LEAST:g} s of its own speech alone, even joined across its lines"
            )
    line_clips = {}
    if options.assess_lines:
        line_clips = {
            line.index: assess_line(analysis, line.index, encoder, options.line_floor) for line in original.lines
        }
        line_clips = guarded(analysis, encoder, line_clips, chosen)
    return Extraction(analysis, candidates, chosen, missing, line_clips, separation, tuple(notes), heard)


def renamed(analysis: Analysis, names: dict[str, str]) -> Analysis:
    """The analysis with the voices it found renamed (``--names S1=NORA,S2=OWEN``); one line for a name that is
    not a voice of this source, or two voices given one name."""
    unknown = sorted(set(names) - set(analysis.speakers.values()))
    if unknown:
        raise OmnidubError(
            f"--names {unknown[0]}=...: the source has no voice {unknown[0]} (it has "
            f"{', '.join(dict.fromkeys(analysis.speakers.values()))})"
        )
    new = {s: names.get(s, s) for s in dict.fromkeys(analysis.speakers.values())}
    if len(set(new.values())) < len(new):
        raise OmnidubError("--names gives two voices one name: " + ", ".join(f"{a}={b}" for a, b in names.items()))
    grouping = analysis.grouping
    if grouping is not None:
        grouping = replace(
            grouping,
            speakers=tuple(new[s] for s in grouping.speakers),
            cued=tuple(new.get(s, s) for s in grouping.cued),
            lines=tuple(
                replace(g, speaker=new[g.speaker], nearest=new.get(g.nearest, g.nearest)) for g in grouping.lines
            ),
        )
    return replace(
        analysis,
        speakers={i: new[s] for i, s in analysis.speakers.items()},
        centroids={new[s]: c for s, c in analysis.centroids.items()},
        typical={new[s]: t for s, t in analysis.typical.items()},
        calibration={
            new[s]: replace(c, alike={new.get(o, o): m for o, m in c.alike.items()})
            for s, c in analysis.calibration.items()
        },
        grouping=grouping,
    )


def parse_names(text: str | None) -> dict[str, str]:
    """``S1=NORA,S2=OWEN`` as a mapping (one line when it is not of that form)."""
    names = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        old, sep, new = part.partition("=")
        if not sep or not old.strip() or not new.strip():
            raise OmnidubError(f"--names takes VOICE=NAME pairs separated by commas (S1=NORA,S2=OWEN), not {part!r}")
        names[old.strip()] = new.strip()
    return names


# Subtitles whose cues agree this little with what the ASR hears in them (the median over cues, 1 - WER) are not
# the words of this audio: another language, or another film. tiny.en on the films' English agrees 0.6-1.0.
WORDS_AGREEMENT = 0.15


def check_words(analysis: Analysis, heard_language: str) -> None:
    """One line when the cues do not say what the ASR hears in them (subtitles in another language than the
    audio), before any clip is chosen."""
    found = []
    for line in analysis.original.lines:
        span = analysis.voiced.get(line.index)
        heard = analysis.heard(*span) if span else None
        if heard:
            said = " ".join(w.text for w in heard)
            found.append((word_agreement(line.text, said, analysis.language), line, said))
    if len(found) < 3 or float(np.median([a for a, _, _ in found])) >= WORDS_AGREEMENT:
        return
    _, line, said = min(found, key=lambda f: f[0])
    raise OmnidubError(
        f"the original subtitles do not say what {analysis.audio.path.name} says: the ASR hears "
        f"{said[:60]!r} ({heard_language}) where line {line.index} says {line.text[:60]!r}; are they "
        "in another language than the audio? Give the subtitles of the language spoken in it"
    )


def _why_none(found: tuple[Candidate, ...]) -> str:
    if not found:
        return "no line to take a clip from"
    reasons = "; ".join(
        f"line{'s' if len(c.lines) > 1 else ''} {'+'.join(map(str, c.lines))}: {c.problem}" for c in found[:4]
    )
    more = f"; and {len(found) - 4} more" if len(found) > 4 else ""
    return f"no usable clip ({reasons}{more})"
