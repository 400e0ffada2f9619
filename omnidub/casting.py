"""A project's cast when its voices come from the source (``render --source``): the voices and per-line clips
the source gives, the clips placed in the output folder for a person to hear, and the voice check that sends a
line back to its speaker's clip when the actor's own line made it sound like someone else."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np

from omnidub.errors import OmnidubError
from omnidub.names import safe_name
from omnidub.plan import assign_languages
from omnidub.records import LineEntry
from omnidub.script import Line, Script, line_ranges
from omnidub.source.cast import (
    SourceCast,
    SourceOptions,
    assign_speakers,
    check_source_cast,
    choice_clip,
    reference_record,
    source_cast,
    source_summary,
    unvoiced_lines,
    unvoiced_note,
    unvoiced_why,
    voice_choices,
)
from omnidub.voices import Voice

REFERENCES = "references"  # the clips each line was cloned from, for a person to hear beside the dub


@dataclass(frozen=True)
class Casting:
    """What the source decided for a dub: its cast, every speaker's voice (the user's win), the script with the
    speakers and languages it gives, the source's accompaniment to use as the bed (None: keep the render's), and
    what to tell the user."""

    cast: SourceCast
    voices: dict[str, Voice]
    script: Script
    bed: Path | None
    notes: tuple[str, ...]
    left: tuple[tuple[Line, str], ...] = ()  # each line left without a voice, and why (what gives it one)
    # each line left without a voice -> how like its own speech each voice the user gave with a sample is
    given_likeness: dict[int, dict[str, float]] = field(default_factory=dict)

    @property
    def unvoiced(self) -> dict[int, str]:
        """Each dubbed line left without a voice -> its speaker."""
        return {line.index: line.speaker for line, _ in self.left}

    def left_json(self) -> list[dict]:
        """The lines left without a voice as the manifest, QA and the review give them: number, speaker, words, slot,
        why (what gives it a voice), the clips the review may voice it from (:meth:`choices`), how like each voice
        offered its own speech is (the source analysis's cosine to the voice's centroid), and the file of each voice
        the user gave that is offered."""
        found = []
        for line, why in self.left:
            choices = self.choices(line.index)
            offered = {c.get("speaker") for c in choices}
            reference = self.cast.references.get(line.index)
            like = self.cast.summary.likeness.get(reference.original[0], {}) if reference and reference.original else {}
            like = {**like, **self.given_likeness.get(line.index, {})}
            found.append(
                {
                    "index": line.index,
                    "speaker": line.speaker,
                    "text": line.text,
                    "start": line.start,
                    "end": line.end,
                    "why": why,
                    "choices": choices,
                    # each choice's clip, by the hash of its samples: what the review plays before one is chosen
                    # (None for a voice the user gave: its own file is played)
                    "clips": [
                        None if c["voice"] == "given" else choice_clip(reference, c, self.cast.summary)[3]
                        for c in choices
                    ],
                    # how like each voice offered its own speech is (empty where it was too short to embed): a
                    # voice of the source by its centroid, a voice the user gave by its file
                    "likeness": {name: x for name, x in like.items() if name in offered},
                    # each voice the user gave that is offered -> its file's name (None: a voice with no sample)
                    "given": {c["speaker"]: self.given_file(c["speaker"]) for c in choices if c["voice"] == "given"},
                }
            )
        return found

    def choices(self, index: int) -> list[dict]:
        """The clips an editor may voice a line left without a voice from, having heard it, each as the review asks
        for it (see ``source.cast.voice_choices``): its own speech, or the clip of a voice of the source that says
        lines of this dub; then each voice the user gave a speaker of this dub (``{"voice": "given", "speaker":
        NAME}``); none where there is none of these."""
        reference = self.cast.references.get(index)
        if reference is None:
            return []
        speaking = {line.speaker for line in self.script.lines}
        found = [
            c
            for c in voice_choices(reference, self.cast.summary)
            if c["voice"] == "line" or (c["speaker"] in self.cast.voices and c["speaker"] in speaking)
        ]
        given = sorted(name for name in self.voices if name not in self.cast.voices and name in speaking)
        return found + [{"voice": "given", "speaker": name} for name in given]

    def given_file(self, name: str) -> str | None:
        """The name of the file of the voice the user gave ``name`` (None: a voice with no sample, or none given)."""
        voice = None if name in self.cast.voices else self.voices.get(name)
        return voice.audio.name if voice is not None and voice.audio is not None else None


def voice_refused(index: int, asked: dict, choices: list[dict], speaker: str) -> str | None:
    """Why a line left without a voice cannot be voiced as ``asked`` (not one of its ``choices``, see
    :meth:`Casting.choices`), or None."""
    if asked in choices:
        return None
    if not choices:
        return (
            f"line {index}: the source has no speech of its own or of a voice to voice it from; give {speaker} a "
            f"voice with --voice {speaker}=FILE"
        )
    said = {"line": "its own speech", "speaker": "{}'s clip", "given": "the voice given for {}"}
    can = [said[c["voice"]].format(c.get("speaker")) for c in choices]
    return f"line {index} can be voiced from {', '.join(can)}; not from {asked.get('speaker') or asked.get('voice')!r}"


def cast_from_source(
    engine,
    options: SourceOptions,
    dub: Script,
    given: dict[str, Voice],
    checks: dict[int, dict],
    *,
    input_path: Path,
    has_bed: bool,
    step: Callable[[str], None],
    chosen: dict[int, str] | None = None,
    moved: dict[int, str] | None = None,
    progress: Callable[[float, float], None] | None = None,
) -> Casting:
    """The dub's voices (and per-line clips) from its source; speakers the user gave a voice (``given``) keep it.
    ``checks``: the voice check's verdicts so far (a line that failed with its own clip uses its speaker's);
    ``chosen``: the clip ("line" or "speaker") an editor chose for a line, and ``moved``: the voice they moved it
    to (see ``source_cast``); ``progress``: the source's
    transcription (seconds done, in all), when it came without subtitles."""
    asr, trusted = engine.asr(), ()
    if options.subs is not None and options.language and asr.available() and not asr.hears(options.language):
        # An English-only model would hear English words in any speech: the subtitles are taken as they are.
        trusted = (
            f"{Path(options.source).name} speaks {options.language}, which {asr.name} (--asr-model) does not hear: "
            f"its subtitles ({Path(options.subs).name}) are taken as they are, not checked against the audio",
        )
        asr = None
    summary = source_summary(
        options, engine.preset.voice, asr=asr, device=engine.device, status=step, progress=progress, dub=dub
    )
    notes = trusted + tuple(f"{Path(options.source).name}: {note}" for note in summary.notes)
    cast, voices, script, unvoiced = _voiced(summary, dub, options.match, given, checks, chosen, moved)
    if summary.heard is not None and options.heard_at is not None:
        notes += (
            f"{Path(options.source).name} came without subtitles: {options.heard_at} is the original as "
            f"{engine.asr().name} heard it, {len(summary.original.lines)} lines, each labelled with its voice; "
            "check it, correct its words and labels there, and run again",
        )
    elif summary.heard is not None:
        cast = replace(cast, heard=(heard_file(options), summary.heard))
        notes += (
            f"{Path(options.source).name} came without subtitles: {cast.heard[0]} is the original as "
            f"{engine.asr().name} heard it, {len(summary.original.lines)} lines, each labelled with its voice; "
            "check it, correct its words and labels, and pass it as --source-subs next time",
        )
    if unvoiced and len(unvoiced) == len(script.lines):
        raise OmnidubError(f"{input_path}: {unvoiced_note(unvoiced, summary, cast)[0].partition(': ')[2]}")
    dropped = [line for line in script.lines if line.index in unvoiced]
    script = replace(script, lines=tuple(line for line in script.lines if line.index not in unvoiced))
    check_source_cast(script, voices, summary, input_path)
    notes += tuple(unvoiced_note(unvoiced, summary, cast))
    review = sorted(i for i, r in cast.references.items() if r.review and i not in unvoiced)
    if review:
        notes += (
            f"line(s) {line_ranges(review)}: their voice is a guess or comes from a clip that is not a clean one; "
            "listen to them (each line's reference in the manifest says why)",
        )
    bed = summary.accompaniment if summary.accompaniment is not None and not has_bed else None
    left = tuple((line, unvoiced_why(line.index, line.speaker, summary, cast)) for line in dropped)
    like = given_likeness(dropped, cast, given, engine.source_encoder)
    return Casting(cast, voices, assign_languages(script, voices), bed, notes, left, like)


def _voiced(summary, dub: Script, match: str, given: dict[str, Voice], checks, chosen, moved) -> tuple:
    """The source's cast for ``dub`` (see ``source_cast``), every speaker's voice, the script with its speakers,
    and the lines left without a voice (index -> speaker)."""
    cast = source_cast(summary, dub, match, given, checks, chosen, moved)
    voices = {**cast.voices, **given}
    script = assign_speakers(dub, cast)
    return cast, voices, script, unvoiced_lines(script, voices, summary, cast)


def left_without_voice(
    casting: Casting, dub: Script, match: str, given: dict[str, Voice], checks, chosen, moved
) -> dict[int, str]:
    """The lines of ``dub`` the source would leave without a voice with these choices of an editor (see
    ``cast_from_source``), each with why: the source's analysis as ``casting`` holds it, nothing read again."""
    summary = casting.cast.summary
    cast, _, _, unvoiced = _voiced(summary, dub, match, given, checks, chosen, moved)
    return {index: unvoiced_why(index, speaker, summary, cast) for index, speaker in unvoiced.items()}


def given_likeness(
    lines: list[Line], cast: SourceCast, given: dict[str, Voice], encoder: Callable
) -> dict[int, dict[str, float]]:
    """For each of ``lines`` (left without a voice) whose own speech was long enough to embed, how like it each
    voice the user gave with a sample is: the source's speaker encoder's cosine, as a voice of the source is judged
    by its centroid (a file recorded elsewhere than the film reads a little less like any of the film's voices than
    the film's own clips do). ``encoder``: gives the source's speaker encoder (loaded only when a line has speech
    to judge by and a voice was given a sample); each file is embedded once."""
    from omnidub.media import load_audio
    from omnidub.source.audio import ANALYSIS_RATE
    from omnidub.source.summary import likeness_to

    owned = {
        line.index: reference.original[0]
        for line in lines
        if (reference := cast.references.get(line.index))
        and reference.original
        and reference.original[0] in cast.summary.own
    }
    files = {name: v.audio for name, v in sorted(given.items()) if v.audio is not None and name not in cast.voices}
    if not owned or not files:
        return {}
    embedded = {}
    for name, path in files.items():
        found = encoder().embed(load_audio(path, ANALYSIS_RATE), ANALYSIS_RATE)
        if found is not None:
            embedded[name] = found[0]
    return {
        index: {name: likeness_to(cast.summary, original, e) for name, e in embedded.items()}
        for index, original in owned.items()
    }


def reference_files(cast: SourceCast) -> dict[int, str]:
    """Where each line's reference clip sits in the output folder (``references/NNNN-SPEAKER.wav``)."""
    return {
        index: f"{REFERENCES}/{index:04d}-{safe_name(ref.speaker or 'speaker')}.wav"
        for index, ref in cast.references.items()
        if ref.kind not in ("none", "given")  # "given": the user's own file, no clip of the source
    }


def reference_clips(cast: SourceCast) -> dict[str, Path]:
    """Each reference file of the output folder and the cached file it is a copy of: the clips, and the original
    as heard when the source came without subtitles."""
    files = reference_files(cast)
    found = {
        relative: cast.summary.clip_path(
            cast.references[index].start, cast.references[index].end, cast.references[index].parts
        )
        for index, relative in files.items()
    }
    if cast.heard is not None:
        found[cast.heard[0]] = cast.heard[1]
    return found


def source_files(cast: SourceCast, options: SourceOptions, folder) -> set[str]:
    """What the source puts in the output folder (see :func:`reference_clips`), and the original subtitles when they
    lie in it: the original as heard, passed back as --source-subs from the folder, is read, never removed."""
    return set(reference_clips(cast)) | {name for name in [folder.relative(options.subs)] if name}


def heard_file(options: SourceOptions) -> str:
    """Where the original as heard sits in the output folder, beside the clips: ``references/<stem>.original.srt``."""
    from omnidub.source.heard import original_name

    return f"{REFERENCES}/{original_name(Path(options.source))}"


def reference_records(cast: SourceCast, entries: list[LineEntry], checks: dict[int, dict]) -> dict[int, dict]:
    """Each line's reference as its manifest record holds it: the source span, transcript, why it is not the
    line's own clip, the file to hear it, and the voice check's verdict (``checks``)."""
    files = reference_files(cast)
    records = {}
    for entry in entries:
        reference = cast.references.get(entry.index)
        if reference is None:
            continue
        record = reference_record(reference, files.get(entry.index))
        verdict = checks.get(entry.index)
        if verdict is not None and verdict.get("clip") in (reference.sha256, _own_clip(cast, entry.index)):
            record["check"] = verdict
        records[entry.index] = record
    return records


def _own_clip(cast: SourceCast, index: int) -> str | None:
    """The hash of the dubbed line's own original clip (also when the check sent it to its speaker's)."""
    reference = cast.references[index]
    if not reference.original:
        return None
    own = cast.summary.line_clips.get(reference.original[0])
    if own is None or own.problem is not None:
        return None
    from omnidub.source.clips import clip_key

    return cast.summary.hashes.get(clip_key(own.start, own.end, own.parts))


def voice_check(
    cast: SourceCast, entries: list[LineEntry], out_dir: Path, *, encoder, judged: set[int]
) -> dict[int, dict]:
    """Hear every line rendered from its own original clip against each speaker's voice in the source; return the
    verdicts of lines not ``judged`` before (failing: closer to another speaker than to its own, or less like its
    own than the speaker's lines in the source ever are: the source's own calibration, not an absolute threshold).
    ``encoder``: a callable giving the source's speaker encoder, made only when a line is heard."""
    verdicts, made = {}, None
    centroids = cast.summary.centroids
    for entry in entries:
        reference = cast.references.get(entry.index)
        if reference is None or reference.kind != "line" or not entry.done or entry.index in judged:
            continue
        made = made or encoder()
        found = hear(out_dir / entry.file, made)
        if found is None or reference.speaker not in centroids:  # kept, so a rerun does not ask again
            verdicts[entry.index] = {
                "clip": reference.sha256,
                "passed": None,
                "why": "too little speech to judge"
                if found is None
                else f"the source gave no voice of {reference.speaker} to compare with",
            }
            continue
        similarity = {name: float(np.dot(found, c)) for name, c in centroids.items()}
        own = similarity.pop(reference.speaker)
        nearest = max(similarity, key=similarity.get) if similarity else None
        verdict = {
            "clip": reference.sha256,
            "similarity": round(own, 4),
            "nearest": nearest,
            "nearest_similarity": round(similarity[nearest], 4) if nearest else None,
        }
        calibration = cast.summary.calibration.get(reference.speaker)
        if nearest is not None and similarity[nearest] > own:
            verdict.update(
                passed=False,
                why=f"the voice check heard it closer to {nearest} "
                f"({similarity[nearest]:.2f}) than to {reference.speaker} ({own:.2f})",
            )
        elif calibration is not None and own < calibration.floor:
            verdict.update(
                passed=False,
                why=f"the voice check heard it {own:.2f} like {reference.speaker}, under "
                f"{calibration.floor:.2f}, the least {reference.speaker}'s own lines in "
                "the source reach",
            )
        else:
            verdict["passed"] = True
        verdicts[entry.index] = verdict
    return verdicts


def hear(segment: Path, encoder) -> np.ndarray | None:
    """A rendered line's voice (its embedding by the source's speaker model; None when it holds too little speech)."""
    from omnidub.voices import load_audio

    found = encoder.embed(load_audio(segment, 16000), 16000)
    return None if found is None else found[0]
