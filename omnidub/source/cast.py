"""The cast of a render taken from the source (``render --source``): one voice per character, cut from the
original, and, per dubbed line, the original line's own clip where it is good enough.

The analysis of the source (voice activity, speaker embeddings, ASR, clip choice) is done once and kept in
omnidub's cache under a key over everything it was made from; renders, reruns and plans reuse it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from omnidub.asr import Asr
from omnidub.config import VoiceOptions
from omnidub.errors import OmnidubError
from omnidub.files import cache_home, did_you_mean, write_text_atomic
from omnidub.keys import file_digest
from omnidub.script import DEFAULT_SPEAKER, RUNS_SHOWN, SAID_ONE_BY_ONE, Script, line_ranges, read_script
from omnidub.source.clips import clip_key
from omnidub.source.lines import NO_SPEECH, LineReference, line_references
from omnidub.source.summary import SourceSummary, load, save, summarize
from omnidub.voices import Voice

MATCHES = ("auto", "line", "speaker")
CUES_NAME = "cues.json"  # an analysis made at a dub's cues (no subtitles): its source's key and those cue times
VERSION = 36  # of the analysis: a new one analyses every source again


@dataclass(frozen=True)
class SourceOptions:
    """Where the voices come from: the original video or audio and its subtitles in the language spoken there
    (``subs`` None: the source is transcribed, and the original as heard written beside the reference clips).

    ``match``: ``line`` clones each dubbed line from the original line it translates (its speaker's clip where that
    line's own is not good enough); ``speaker`` uses each speaker's one clip; ``auto`` is ``line``, with every line
    whose result sounds like another speaker (or too little like its own) rendered again from its speaker's clip."""

    source: Path
    subs: Path | None
    match: str = "auto"
    separate: str | None = None  # a Demucs model: clips cut from the isolated vocals
    speakers: int | None = None  # voices in an unlabelled original (None: chosen by the data)
    language: str | None = None  # spoken in the source
    names: tuple[tuple[str, str], ...] = ()  # --names: voices found in the source -> the dub's names
    # Without subtitles: where a person corrects the original as heard (a dub's voices/<stem>.original.srt); None:
    # the render places it beside the clips (references/<stem>.original.srt).
    heard_at: Path | None = None

    def check(self) -> None:
        if self.match not in MATCHES:
            raise OmnidubError(f"--voice-match {self.match}: use {', '.join(MATCHES)}")
        for label, path in (("--source", self.source), ("--source-subs", self.subs)):
            if path is not None and not Path(path).is_file():
                raise OmnidubError(
                    f"{label} {path}: "
                    f"{'a folder, not a file' if Path(path).is_dir() else 'no such file' + did_you_mean(path)}"
                )


@dataclass(frozen=True)
class SourceCast:
    """The voices a dub gets from its source."""

    summary: SourceSummary
    references: dict[int, LineReference]  # dubbed line -> where its voice comes from
    voices: dict[str, Voice]  # speaker -> the voice of its chosen clip
    lines: dict[int, Voice] = field(default_factory=dict)  # dubbed line -> its own clip's voice
    # A source without subtitles: the original as heard, its name in the output folder and the cached file.
    heard: tuple[str, Path] | None = None

    def speaker_of(self, index: int) -> str | None:
        reference = self.references.get(index)
        return reference.speaker if reference is not None else None


def analysis_key(options: SourceOptions, voice: VoiceOptions, asr: Asr | None, cues: Script | None = None) -> str:
    """A key over everything the analysis depends on: the source's and subtitles' bytes (without subtitles, the ASR
    model that hears the source, and the times of the dub's cues it is cut at), and every option."""
    digest = hashlib.sha256(f"omnidub-source-v{VERSION}\0".encode())
    for path in (options.source, options.subs):
        if path is not None:
            file_digest(path, digest)
    fields = {
        "speakers": options.speakers,
        "language": options.language,
        "separate": options.separate,
        "names": [list(pair) for pair in options.names],
        "asr": asr.name if asr else None,
        "voice": [voice.reference_seconds, list(voice.reference_window)],
    }
    if options.subs is None:
        fields["heard_by"] = asr.identity() if asr else None
        if cues is not None:
            fields["cues"] = _times(cues)
    digest.update(json.dumps(fields, sort_keys=True).encode())
    return digest.hexdigest()


def source_summary(
    options: SourceOptions,
    voice: VoiceOptions,
    *,
    asr: Asr | None,
    device: str,
    status: Callable[[str], None],
    progress: Callable[[float, float], None] | None = None,
    dub: Script | None = None,
) -> SourceSummary:
    """The source's summary from the cache, else analysed now (and kept). ``asr``: an Asr, or None. Without
    subtitles the source is transcribed first (``progress`` hears the seconds done and in all); that needs an ASR
    model (one line naming --source-subs and --asr-model when there is none). ``dub``: the script being dubbed;
    without subtitles, the lines heard are cut at its timed cues (see :func:`omnidub.source.heard.at_cues`), except
    where the dub was made from the lines heard (``heard_at``: ``omnidub dub``), whose cues they already are."""
    from omnidub.source.audio import CLIP_RATE, check_subtitles, read_source
    from omnidub.source.clips import ClipOptions
    from omnidub.source.extract import ExtractOptions, extract_voices

    if options.subs is None:
        from omnidub.source.heard import transcriber

        asr = transcriber(asr, options.language, "--source-subs")
        original = None
    else:
        asr = asr if asr is not None and asr.available() else None
        original = read_script(options.subs, language=options.language)
    cues = dub if options.subs is None and options.heard_at is None and dub is not None and dub.timed else None
    folder = cache_home() / "source" / analysis_key(options, voice, asr, cues)
    source_key = analysis_key(options, voice, asr)  # the same source and options at any cues
    found = load(folder, original)
    if found is not None and cues is not None and not (folder / CUES_NAME).is_file():
        _record_cues(folder, source_key, cues)  # kept by an earlier build
    elif found is None and cues is not None:
        found = _at_earlier_cues(source_key, cues)
    if found is not None:
        return found
    separator = None
    if options.separate:
        from omnidub.source.separate import load_separator

        separator = load_separator(options.separate, device)  # a model that is not there is said before any work
    status(f"analysing the voices of {Path(options.source).name} (once; kept for every later run)")
    audio = read_source(options.source, CLIP_RATE)
    if original is not None:
        check_subtitles(original, options.subs, audio)
    separation = None
    if separator is not None:
        from omnidub.source.separate import separate

        status(f"separating the vocals with {options.separate}")
        separation = separate(separator, Path(options.source), options.separate)
    heard = None
    if original is None:
        from omnidub.source.heard import at_cues, hear_source, heard_in_cues

        heard_audio = separation.vocals if separation else audio
        heard = hear_source(
            heard_audio,
            asr,
            source=Path(options.source),
            language=options.language,
            separate=options.separate,
            progress=progress,
            status=status,
        )
        if cues is not None:
            heard = at_cues(heard, cues)
            heard = heard_in_cues(heard, cues, heard_audio, asr, options.language, status)
        original = heard.original
    from omnidub.embedding import source_encoder

    extraction = extract_voices(
        audio,
        original,
        encoder=source_encoder(device),
        asr=asr,
        options=ExtractOptions(
            clips=ClipOptions(voice=voice),
            speakers=options.speakers,
            language=options.language,
            assess_lines=True,
            names=dict(options.names),
        ),
        separation=separation,
        heard=heard,
    )
    summary = summarize(extraction, folder)
    save(summary)
    if cues is not None:
        _record_cues(folder, source_key, cues)
    return summary


def _times(cues: Script) -> list[list[float]]:
    return [[line.start, line.end] for line in cues.lines]


def _record_cues(folder: Path, source_key: str, cues: Script) -> None:
    """Beside an analysis made at a dub's cues: which source analysis it is, and those cue times."""
    write_text_atomic(folder / CUES_NAME, json.dumps({"source": source_key, "cues": _times(cues)}) + "\n")


def _at_earlier_cues(source_key: str, cues: Script) -> SourceSummary | None:
    """The analysis of this source made at the dub's cues as they were timed before, when the dub has as many cues
    and each still shares time with the one it was: a line retimed in the review, or the dub's text edited, keeps
    the analysis (its voices and each line's clip), where analysing the source again would stall the edit. A dub
    with a cue added or removed is analysed again at its cues."""
    now = _times(cues)
    for record in sorted((cache_home() / "source").glob(f"*/{CUES_NAME}")):
        try:
            data = json.loads(record.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        before = data.get("cues") if isinstance(data, dict) and data.get("source") == source_key else None
        if not isinstance(before, list) or len(before) != len(now):
            continue
        if all(min(b[1], n[1]) > max(b[0], n[0]) for b, n in zip(before, now)):
            found = load(record.parent, None)
            if found is not None:
                return found
    return None


def source_cast(
    summary: SourceSummary,
    dub: Script,
    match: str,
    given: dict[str, Voice],
    checked: dict[int, dict] | None = None,
    chosen: dict[int, str] | None = None,
    moved: dict[int, str] | None = None,
) -> SourceCast:
    """The voices of ``dub`` from the source. A speaker the user gave a voice (``given``) keeps it, clip and all.
    ``checked``: the voice check's verdicts (dubbed line -> {"clip": the own clip's hash, "passed", "why"}); a
    line that failed it with this same clip is sent to its speaker's clip. ``chosen``: lines an editor sent to
    their "line" (own) or "speaker" clip, which wins over both; a line left without a voice is voiced so where the
    choice is one of :func:`voice_choices`, a "speaker" clip being ``moved``'s voice for it (else its own), or by
    the voice the user gave ``moved``'s speaker ("given": the line becomes that speaker's)."""
    references = {}
    for reference in line_references(dub, summary):
        verdict = (checked or {}).get(reference.index) or {}
        choice = (chosen or {}).get(reference.index)
        why = None
        if reference.kind == "line" and choice == "speaker":
            why = "the editor chose the speaker's clip"
        elif reference.kind == "line" and choice == "line":
            why = None
        elif reference.kind == "line" and match == "speaker":
            why = "--voice-match speaker"
        elif reference.kind == "line" and verdict.get("clip") == reference.sha256 and verdict.get("passed") is False:
            why = verdict.get("why") or "the voice check"
            if reference.own_only:  # the speaker's clip may not be its voice: it stays on its own speech, said
                failed = f"the voice check failed ({why}), and {reference.speaker}'s clip may not be its voice"
                if reference.own_only not in (reference.review or ""):  # said once
                    failed += f": {reference.own_only}"
                review = "; ".join(filter(None, (reference.review, failed)))
                reference, why = replace(reference, review=review), None
        if reference.kind == "none" and choice in ("line", "speaker"):
            # A line left without a voice surely its own, voiced from the clip the editor chose having heard it.
            wanted = {"voice": "line"}
            if choice == "speaker":
                wanted = {"voice": "speaker", "speaker": (moved or {}).get(reference.index, reference.speaker)}
            if wanted in voice_choices(reference, summary):
                reference = chosen_voice(reference, wanted, summary)
        elif reference.kind == "none" and choice == "given" and (moved or {}).get(reference.index) in given:
            reference = given_voice(reference, given[moved[reference.index]])
        if why:
            clip = summary.speaker_clips.get(reference.speaker)
            review = reference.review
            if clip is not None and clip.fallback and not review:
                review = f"{reference.speaker}'s clip is not a clean one: {clip.fallback}"
            reference = LineReference(
                reference.index,
                reference.speaker,
                reference.original,
                reference.match,
                "speaker" if clip else "none",
                clip.start if clip else None,
                clip.end if clip else None,
                clip.text if clip else None,
                clip.sha256 if clip else None,
                why,
                review,
                parts=clip.parts if clip else (),
            )
        references[reference.index] = reference
    voices = {
        name: clip_voice(summary, name, clip.start, clip.end, clip.text, clip.parts)
        for name, clip in summary.speaker_clips.items()
        if name not in given
    }
    for reference in references.values():  # a speaker the source gave no clip, voiced by a line the editor chose
        if reference.kind == "line" and reference.speaker and reference.speaker not in voices | given:
            voices[reference.speaker] = clip_voice(
                summary, reference.speaker, reference.start, reference.end, reference.text, reference.parts
            )
    lines = {}
    for index, reference in references.items():
        if reference.kind == "line" and reference.speaker not in given:
            lines[index] = clip_voice(
                summary, reference.speaker, reference.start, reference.end, reference.text, reference.parts
            )
    return SourceCast(summary, references, voices, lines)


def voice_choices(reference: LineReference, summary: SourceSummary) -> list[dict]:
    """The clips an editor may voice a line left without one from, having heard it, each as the review asks for
    it: its own speech (``{"voice": "line"}``, where it has at least MIN_REFERENCE_SECONDS of it), and each voice's
    clip (``{"voice": "speaker", "speaker": NAME}``), the voices its own speech is most like first (where it was
    long enough to embed; else the voice it was grouped with first)."""
    from omnidub.voices.reference import MIN_REFERENCE_SECONDS

    own = _own_clip(reference, summary)
    choices = []
    if own is not None and own.problem != NO_SPEECH and clip_key(own.start, own.end, own.parts) in summary.hashes:
        if own.speech_seconds >= MIN_REFERENCE_SECONDS:
            choices.append({"voice": "line"})
    like = summary.likeness.get(reference.original[0], {}) if reference.original else {}
    names = sorted(summary.speaker_clips, key=lambda name: (-like.get(name, 2.0 * (name == reference.speaker)), name))
    return choices + [{"voice": "speaker", "speaker": name} for name in names]


def chosen_voice(reference: LineReference, choice: dict, summary: SourceSummary) -> LineReference:
    """A line's reference once an editor chose its clip (one of :func:`voice_choices`): its own speech however
    doubted, or a voice's clip (the line becomes that voice's), with why it was left without one kept as the reason
    to listen to it."""
    name = choice.get("speaker", reference.speaker)
    said = f"the editor chose {'its own speech' if choice['voice'] == 'line' else name + chr(39) + 's clip'}"
    review = f"{said}; it was left without a voice: {reference.fallback}"
    start, end, text, sha256, parts = choice_clip(reference, choice, summary)
    return replace(
        reference,
        speaker=name,
        kind=choice["voice"],
        start=start,
        end=end,
        text=text,
        sha256=sha256,
        fallback=said if choice["voice"] == "speaker" else None,
        review=review,
        parts=parts,
        own_only="",
    )


def given_voice(reference: LineReference, voice: Voice) -> LineReference:
    """A line left without a voice once an editor gave it the voice the user gave a speaker (``--voice NAME=FILE``
    or voices.toml): the line becomes that speaker's, with no clip of the source (kind "given"), and why it was left
    without one kept as the reason to listen to it."""
    said = f"the editor chose {voice.speaker}'s voice" + (f" ({voice.audio.name})" if voice.audio else "")
    return replace(
        reference,
        speaker=voice.speaker,
        kind="given",
        start=None,
        end=None,
        text=None,
        sha256=None,
        fallback=said,
        review=f"{said}; it was left without a voice: {reference.fallback}",
        parts=(),
        own_only="",
    )


def choice_clip(reference: LineReference, choice: dict, summary: SourceSummary) -> tuple:
    """The clip a choice (one of :func:`voice_choices`) voices a line from: its span, words, samples' hash and parts
    (a joined clip's pieces of the source). The review plays it, by its hash, for the editor to hear before choosing."""
    if choice["voice"] == "speaker":
        clip = summary.speaker_clips[choice["speaker"]]
        return clip.start, clip.end, clip.text, clip.sha256, clip.parts
    own = _own_clip(reference, summary)
    return own.start, own.end, own.text, summary.clip_hash(own.start, own.end, own.parts), own.parts


def _own_clip(reference: LineReference, summary: SourceSummary):
    """The own clip of the original line a dubbed line translates (its best match), or None."""
    return summary.line_clips.get(reference.original[0]) if reference.original else None


def unvoiced_lines(
    script: Script, voices: dict[str, Voice], summary: SourceSummary, cast: SourceCast | None = None
) -> dict[int, str]:
    """Dubbed lines whose speaker the source gives no usable speech and the user no voice, or whose own voice cannot
    be told and no voice of the source may stand in for it (``cast``: its references): line -> its speaker. They are
    left unrendered; every other line is rendered."""
    from omnidub.voices import voice_for

    found = {}
    for line in script.lines:
        reference = cast.references.get(line.index) if cast is not None else None
        if reference is not None and reference.kind != "none":
            continue  # a clip of the source voices it
        refused = reference is not None and reference.kind == "none" and reference.speaker in summary.speaker_clips
        if refused and reference.speaker in cast.voices:  # a voice the user gave stands in: the line is theirs
            found[line.index] = line.speaker
        elif line.speaker in summary.missing:
            try:
                voice_for(line.speaker, voices)
            except OmnidubError:
                found[line.index] = line.speaker
    return found


def unvoiced_note(unvoiced: dict[int, str], summary: SourceSummary, cast: SourceCast | None = None) -> list[str]:
    """One line per speaker left without a voice: its lines, why, and the flag that gives it one; one per line whose
    own voice cannot be told, the first SAID_ONE_BY_ONE of them (the rest in one line)."""
    notes = []
    refused = sorted(i for i in unvoiced if _refused(i, unvoiced[i], summary, cast))
    for index in refused[:SAID_ONE_BY_ONE]:
        notes.append(f"line(s) {index} not rendered: {unvoiced_why(index, unvoiced[index], summary, cast)}")
    if len(refused) > SAID_ONE_BY_ONE:
        notes.append(
            f"line(s) {line_ranges(refused[SAID_ONE_BY_ONE:], RUNS_SHOWN)} not rendered either: no voice of the "
            "source is surely their own (each one's why is in the render's manifest.json and in omnidub review)"
        )
    said = set(refused)
    others = {i: s for i, s in unvoiced.items() if i not in said}
    for speaker in dict.fromkeys(others.values()):
        lines = line_ranges([i for i, s in others.items() if s == speaker], RUNS_SHOWN)
        notes.append(f"line(s) {lines} not rendered: {unvoiced_why(None, speaker, summary, cast)}")
    return notes


def unvoiced_why(index: int | None, speaker: str, summary: SourceSummary, cast: SourceCast | None = None) -> str:
    """Why a line left unrendered (see :func:`unvoiced_lines`; None: any line of ``speaker`` the source gives no
    usable speech) has no voice, and what gives it one."""
    if index is not None and _refused(index, speaker, summary, cast):
        return (
            f"no voice of the source is surely its own ({cast.references[index].fallback}); label its cue in the "
            "original subtitles, give it a voice with --voice SPEAKER=FILE, or hear it in omnidub review and voice it "
            "from a clip of the source"
        )
    return (
        f"the source gives {speaker} no usable speech ({summary.missing.get(speaker, 'none found')}); give {speaker} "
        f"a voice with --voice {speaker}=FILE, or hear its lines in omnidub review and voice each from a clip of the "
        "source"
    )


def _refused(index: int, speaker: str, summary: SourceSummary, cast: SourceCast | None) -> bool:
    """Whether a line was left unrendered for its own voice, not its speaker's: no voice of the source may stand in."""
    return cast is not None and index in cast.references and speaker not in summary.missing


def check_source_cast(script: Script, voices: dict[str, Voice], summary: SourceSummary, where) -> None:
    """One line naming the real cause when a dubbed line's speaker has no voice after the source was analysed
    (the source's speakers without usable speech aside: see :func:`unvoiced_lines`): the dub names a speaker the
    original does not."""
    from omnidub.source.analysis import labelled
    from omnidub.voices import voice_for

    known = dict.fromkeys(summary.speakers.values())
    for line in script.lines:
        try:
            voice_for(line.speaker, voices)
            continue
        except OmnidubError:
            pass
        at = f"{where}: {getattr(line, 'where', '') or f'line {line.index}'}"
        if line.speaker in summary.missing:
            continue
        if line.speaker == DEFAULT_SPEAKER:
            raise OmnidubError(
                f"{at}: the line matches no original line to take its speaker from, and there is no "
                "default voice; label it ('NAME: text') or add a default --voice FILE"
            )
        if not labelled(summary.original):
            names = ", ".join(known) or "none"
            raise OmnidubError(
                f"{at}: the dub names {line.speaker}, but the original subtitles name no speakers (the "
                f"voices found in the source are {names}): label the original's cues, or name the "
                f"voices with --names S1={line.speaker},..."
            )
        raise OmnidubError(
            f"{at}: the dub names {line.speaker}, but the original subtitles have no such speaker "
            f"(they name {', '.join(known)}); rename it, or add --voice {line.speaker}=FILE"
        )


def clip_voice(summary: SourceSummary, speaker: str, start: float, end: float, text: str, parts=()) -> Voice:
    """A voice whose reference is a clip of the source, with the original cue's words as its transcript."""
    return Voice(speaker, summary.clip_path(start, end, parts), text, None, None, None)


def assign_speakers(dub: Script, cast: SourceCast) -> Script:
    """Lines the dub leaves unlabelled take the speaker of the original line they translate."""
    from dataclasses import replace

    lines = tuple(
        replace(line, speaker=cast.speaker_of(line.index) or line.speaker) if line.speaker == DEFAULT_SPEAKER else line
        for line in dub.lines
    )
    return replace(dub, lines=lines)


def reference_record(reference: LineReference, file: str | None) -> dict:
    """A line's reference as the manifest keeps it."""
    return {
        "kind": reference.kind,
        "speaker": reference.speaker,
        "original": list(reference.original),
        "match": reference.match,
        "start": reference.start,
        "end": reference.end,
        "text": reference.text,
        "sha256": reference.sha256,
        "fallback": reference.fallback,
        "review": reference.review,
        **({"note": reference.note} if reference.note else {}),
        **({"parts": [list(p) for p in reference.parts]} if reference.parts else {}),
        "file": file,
    }
