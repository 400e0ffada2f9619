"""A project's cast when its voices come from the source (``render --source``): the voices and per-line clips
the source gives, the clips placed in the output folder for a person to hear, and the voice check that sends a
line back to its speaker's clip when the actor's own line made it sound like someone else."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from omnidub.journal import LineEntry
from omnidub.names import safe_name
from omnidub.plan import assign_languages
from omnidub.source.cast import (SourceCast, assign_speakers, check_source_cast, reference_record, source_cast,
                                 source_summary)

REFERENCES = "references"  # the clips each line was cloned from, for a person to hear beside the dub


def cast_from_source(project, prepare: bool) -> SourceCast:
    """Take the project's voices (and per-line clips) from its source; speakers the user gave a voice keep it."""
    options = project.options.source
    summary = source_summary(options, project.preset.voice, asr=project.session.asr(), device=project.session.device,
                             status=project.listener.step)
    for note in summary.notes:
        project.note(f"{Path(options.source).name}: {note}")
    cast = source_cast(summary, project.dub, options.match, project.given_voices, project.voice_checks)
    voices = {**cast.voices, **project.given_voices}
    script = assign_speakers(project.dub, cast)
    check_source_cast(script, voices, summary, project.input_path)
    project.voices = voices
    project.script = assign_languages(script, voices)
    if summary.accompaniment is not None and project.options.delivery.bed is None:
        project.use_bed(summary.accompaniment)
    return cast


def reference_files(project, cast: SourceCast) -> dict[int, str]:
    """Where each line's reference clip sits in the output folder (``references/NNNN-SPEAKER.wav``)."""
    return {index: f"{REFERENCES}/{index:04d}-{safe_name(ref.speaker or 'speaker')}.wav"
            for index, ref in cast.references.items() if ref.kind != "none"}


def place_references(project, cast: SourceCast) -> None:
    """Copy each line's reference clip into the output folder (a person plays it beside the dubbed line)."""
    for index, relative in reference_files(project, cast).items():
        reference = cast.references[index]
        data = cast.summary.clip_path(reference.start, reference.end).read_bytes()
        if project.folder.status(relative) == "ours" and (project.folder.path / relative).read_bytes() == data:
            continue
        (project.folder.path / REFERENCES).mkdir(exist_ok=True)
        for said in project.folder.write_bytes(relative, data):
            project.note(said)


def reference_records(project, cast: SourceCast, entries: list[LineEntry]) -> None:
    """Each line's reference in its manifest record: the source span, transcript, why it is not the line's own
    clip, the file to hear it, and the voice check's verdict."""
    files = reference_files(project, cast)
    for entry in entries:
        reference = cast.references.get(entry.index)
        if reference is None:
            continue
        entry.reference = reference_record(reference, files.get(entry.index))
        verdict = project.voice_checks.get(entry.index)
        if verdict is not None and verdict.get("clip") in (reference.sha256, _own_clip(cast, entry.index)):
            entry.reference["check"] = verdict


def _own_clip(cast: SourceCast, index: int) -> str | None:
    """The hash of the dubbed line's own original clip (also when the check sent it to its speaker's)."""
    reference = cast.references[index]
    if not reference.original:
        return None
    own = cast.summary.line_clips.get(reference.original[0])
    return cast.summary.hashes.get((own.start, own.end)) if own is not None and own.problem is None else None


def voice_check(project, cast: SourceCast) -> dict[int, dict]:
    """Hear every line rendered from its own original clip against each speaker's voice in the source; return the
    verdicts of lines not judged before (failing: closer to another speaker than to its own, or less like its own
    than the speaker's lines in the source ever are: the source's own calibration, not an absolute threshold)."""
    from omnidub.embedding import source_encoder

    encoder, verdicts = None, {}
    centroids = cast.summary.centroids
    for entry in project.entries:
        reference = cast.references.get(entry.index)
        if reference is None or reference.kind != "line" or not entry.done or entry.index in project.voice_checks:
            continue
        encoder = encoder or source_encoder(project.session.device)
        found = hear(project.out_dir / entry.file, encoder)
        if found is None or reference.speaker not in centroids:  # kept, so a rerun does not ask again
            verdicts[entry.index] = {"clip": reference.sha256, "passed": None,
                                     "why": "too little speech to judge" if found is None else
                                     f"the source gave no voice of {reference.speaker} to compare with"}
            continue
        similarity = {name: float(np.dot(found, c)) for name, c in centroids.items()}
        own = similarity.pop(reference.speaker)
        nearest = max(similarity, key=similarity.get) if similarity else None
        verdict = {"clip": reference.sha256, "similarity": round(own, 4), "nearest": nearest,
                   "nearest_similarity": round(similarity[nearest], 4) if nearest else None}
        calibration = cast.summary.calibration.get(reference.speaker)
        if nearest is not None and similarity[nearest] > own:
            verdict.update(passed=False, why=f"the voice check heard it closer to {nearest} "
                                             f"({similarity[nearest]:.2f}) than to {reference.speaker} ({own:.2f})")
        elif calibration is not None and own < calibration.floor:
            verdict.update(passed=False, why=f"the voice check heard it {own:.2f} like {reference.speaker}, under "
                                             f"{calibration.floor:.2f}, the least {reference.speaker}'s own lines in "
                                             "the source reach")
        else:
            verdict["passed"] = True
        verdicts[entry.index] = verdict
    return verdicts


def hear(segment: Path, encoder) -> np.ndarray | None:
    """A rendered line's voice (its embedding by the source's speaker model; None when it holds too little speech)."""
    from omnidub.voices import load_audio

    found = encoder.embed(load_audio(segment, 16000), 16000)
    return None if found is None else found[0]


def earlier_verdicts(previous: dict) -> dict[int, dict]:
    """The voice check's verdicts a previous render recorded (kept while the line's own clip is the same)."""
    found = {}
    for record in previous.get("lines", []) if isinstance(previous.get("lines"), list) else []:
        check = (record.get("reference") or {}).get("check") if isinstance(record, dict) else None
        if isinstance(check, dict) and isinstance(record.get("index"), int) and "passed" in check:
            found[record["index"]] = check
    return found
