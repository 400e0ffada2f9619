"""render --source: each line cloned from the original line it translates (or its speaker's clip, with the
reason), one identity per character, the voice check in auto, and reruns that never lose a line's clone.

The scene (tests/data/source, see its README): three voices over a music bed, English cues with and without
labels, a Spanish dub on the same cues. The tiny model renders noise; what is checked is where every line's
voice comes from.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from typer.testing import CliRunner

from omnidub.cli import app
from omnidub.journal import read_entries

DATA = Path(__file__).parent / "data" / "source"
TRUTH = {t["line"]: t["speaker"] for t in json.loads((DATA / "truth.json").read_text())["lines"]}
runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def statuses(out: Path) -> dict[int, str]:
    return {e.index: e.status for e in read_entries(out)}


@pytest.fixture(scope="module")
def args(tiny_model_dir, whisper_tiny_en, tmp_path_factory):
    preset = tmp_path_factory.mktemp("preset") / "preset.toml"
    preset.write_text("steps = 2\n")
    return [
        "--source",
        DATA / "scene.opus",
        "--source-subs",
        DATA / "original.srt",
        "--model",
        "synthetic:tiny",
        "--asr-model",
        whisper_tiny_en,
        "--preset",
        preset,
    ]


@pytest.fixture(scope="module")
def by_line(args, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("by-line") / "out"
    result = run("render", DATA / "dub.srt", *args, "--voice-match", "line", "--out", out)
    assert result.exit_code == 0, result.output
    return out


def test_each_line_is_cloned_from_the_original_line_it_translates_or_says_why_not(by_line):
    lines = {line["index"]: line for line in manifest(by_line)["lines"]}
    from omnidub.script import read_script

    original = {line.index: line for line in read_script(DATA / "original.srt").lines}  # same cues as the dub
    for index, line in lines.items():
        reference = line["reference"]
        assert reference["speaker"] == line["speaker"] == TRUTH[index]  # one identity per character
        assert reference["original"] == [index] and reference["match"] == "index"
        if reference["kind"] == "line":
            assert reference["fallback"] is None
            assert reference["start"] < original[index].end and reference["end"] > original[index].start
        else:
            assert reference["kind"] == "speaker" and reference["fallback"]
        assert (by_line / reference["file"]).is_file()
    # The traps of the scene: a 0.8 s line, two lines spoken over each other, a cue that also holds another voice.
    assert "shorter than" in lines[6]["reference"]["fallback"]
    assert "cut to" in lines[7]["reference"]["note"] and "overlaps" in lines[8]["reference"]["fallback"]
    # Line 10: another voice heard over its end is cut out and the line cloned from its own speech before it, padded
    # (or, where the windows hear it closer to that voice as a whole, from its speaker's clip).
    ten = lines[10]["reference"]
    assert ten["kind"] == "speaker" or ten["note"].startswith("joined: its own speech"), ten
    own = [i for i, line in lines.items() if line["reference"]["kind"] == "line" and i != 10]
    assert own == [1, 2, 3, 4, 5, 7, 9, 11, 12]
    # A line's own clip is its own voice: it never also serves as another speaker's.
    clips = {}
    for line in lines.values():
        clips.setdefault(line["reference"]["sha256"], set()).add(line["speaker"])
    assert all(len(speakers) == 1 for speakers in clips.values())


def test_editing_one_dubbed_line_renders_that_line_again_with_the_same_clip(by_line, args, tmp_path):
    import shutil

    from omnidub.folder import Ledger

    out = tmp_path / "out"
    shutil.copytree(by_line, out)
    dub = tmp_path / "dub.srt"
    dub.write_text((DATA / "dub.srt").read_text().replace("No hay problema.", "Ningún problema."))
    data = manifest(out)
    data["input"] = str(dub.resolve())  # as if it had been rendered from this copy
    (out / "manifest.json").write_text(json.dumps(data))
    Ledger(out / ".omnidub" / "ledger.jsonl").record("manifest.json", out / "manifest.json")
    before = {line["index"]: line["reference"]["sha256"] for line in data["lines"]}
    result = run("render", dub, *args, "--voice-match", "line", "--out", out)
    assert result.exit_code == 0, result.output
    assert [i for i, s in statuses(out).items() if s == "rendered"] == [2]
    assert {line["index"]: line["reference"]["sha256"] for line in manifest(out)["lines"]} == before


def test_speaker_match_gives_every_line_its_characters_one_clip(by_line, args, tmp_path):
    out = tmp_path / "out"
    result = run("render", DATA / "dub.srt", *args, "--voice-match", "speaker", "--out", out)
    assert result.exit_code == 0, result.output
    lines = manifest(out)["lines"]
    assert {line["reference"]["kind"] for line in lines} == {"speaker"}
    for speaker in ("ALICE", "BOB", "CAROL"):
        assert len({line["reference"]["sha256"] for line in lines if line["speaker"] == speaker}) == 1


@pytest.mark.slow  # over 10 s of CPU: pytest -m slow runs it, as CI does
def test_an_unlabelled_dub_takes_its_speakers_from_the_unlabelled_original(args, tmp_path):
    plain = tmp_path / "plain.srt"
    plain.write_text(
        "".join(
            row.split(": ", 1)[-1] if ": " in row else row
            for row in (DATA / "dub.srt").read_text().splitlines(keepends=True)
        )
    )
    source = [a if a != DATA / "original.srt" else DATA / "original-unlabelled.srt" for a in args]
    out = tmp_path / "out"
    result = run("render", plain, *source, "--voice-match", "speaker", "--out", out)
    assert result.exit_code == 0, result.output
    speakers = {line["index"]: line["speaker"] for line in manifest(out)["lines"]}
    assert set(speakers.values()) == {"S1", "S2", "S3"}
    # The groups are the characters (named in order of first appearance).
    names = {"ALICE": "S1", "BOB": "S2", "CAROL": "S3"}
    assert speakers == {index: names[TRUTH[index]] for index in TRUTH}
    assert sorted(p.name for p in (out / "stems").iterdir()) == ["S1.wav", "S2.wav", "S3.wav"]


def test_auto_sends_a_line_that_sounds_like_someone_else_back_to_its_speakers_clip(args, tmp_path, monkeypatch):
    from omnidub import casting

    heard = []

    def hear(segment: Path, encoder):
        # The tiny model renders noise: say what each line sounds like. Line 2 (BOB) comes out like ALICE.
        index = int(segment.name[:4])
        heard.append(index)
        return centroids["ALICE" if index == 2 else TRUTH[index]]

    centroids = {}
    real_cast = casting.cast_from_source

    def cast_from_source(*args, **kwargs):
        found = real_cast(*args, **kwargs)
        centroids.update(found.cast.summary.centroids)
        return found

    monkeypatch.setattr(casting, "hear", hear)
    monkeypatch.setattr(casting, "cast_from_source", cast_from_source)
    import omnidub.project

    monkeypatch.setattr(omnidub.project, "cast_from_source", cast_from_source)
    out = tmp_path / "out"
    result = run("render", DATA / "dub.srt", *args, "--out", out)  # --voice-match auto is the default
    assert result.exit_code == 0, result.output
    # the lines cloned from their own clip (and line 10 where its own speech clones it: see above), each heard once
    assert sorted(heard) in ([1, 2, 3, 4, 5, 7, 9, 11, 12], [1, 2, 3, 4, 5, 7, 9, 10, 11, 12])
    lines = {line["index"]: line for line in manifest(out)["lines"]}
    second = lines[2]["reference"]
    assert second["kind"] == "speaker" and "closer to ALICE" in second["fallback"]
    assert second["check"]["passed"] is False and second["check"]["nearest"] == "ALICE"
    assert lines[3]["reference"]["kind"] == "line" and lines[3]["reference"]["check"]["passed"] is True
    assert "line(s) 2 sounded like someone else" in result.stderr
    # Every line's audio was made by this run, line 2's twice: the summary counts each line once, as rendered.
    assert "12: 12 rendered, 0 cached, 0 failed" in result.output
    assert set(statuses(out).values()) == {"rendered"}
    # A rerun keeps every verdict: nothing is heard or rendered again.
    heard.clear()
    result = run("render", DATA / "dub.srt", *args, "--out", out)
    assert result.exit_code == 0, result.output
    assert heard == [] and set(statuses(out).values()) == {"cached"}
    assert manifest(out)["lines"][1]["reference"] == second


def test_a_line_whose_speakers_clip_may_not_be_its_voice_keeps_its_own_when_the_voice_check_fails(
    args, tmp_path, monkeypatch
):
    # Every line rendered from its own clip comes out unlike its voice. Line 3's group is a guess (said here by its
    # reference, as an unsure line voiced from its own speech says it): it keeps its own clip, flagged with why;
    # the others go to their speaker's clip. A rerun renders nothing again.
    from dataclasses import replace

    import numpy as np

    from omnidub import casting
    from omnidub.source import cast

    real_references = cast.line_references

    def line_references(dub, summary):
        return tuple(
            replace(r, own_only="its voice is unsure (a test)") if r.index == 3 else r
            for r in real_references(dub, summary)
        )

    heard = []

    def hear(segment: Path, encoder):
        heard.append(int(segment.name[:4]))
        return np.ones(192) / np.sqrt(192)  # like no voice of the source

    monkeypatch.setattr(cast, "line_references", line_references)
    monkeypatch.setattr(casting, "hear", hear)
    out = tmp_path / "out"
    result = run("render", DATA / "dub.srt", *args, "--out", out)
    assert result.exit_code == 0, result.output
    references = {line["index"]: line["reference"] for line in manifest(out)["lines"]}
    assert references[3]["kind"] == "line" and references[3]["check"]["passed"] is False
    assert "may not be its voice: its voice is unsure (a test)" in references[3]["review"]
    moved = [i for i in heard if i != 3]
    assert moved and all(references[i]["kind"] == "speaker" for i in moved)
    assert "line(s) 3 sounded like someone else with their own original clip, but their speaker's clip" in result.stderr
    heard.clear()
    result = run("render", DATA / "dub.srt", *args, "--out", out)
    assert result.exit_code == 0, result.output
    assert heard == [] and set(statuses(out).values()) == {"cached"}


def test_source_flags_are_checked_before_anything_starts(tmp_path):
    result = run("render", DATA / "dub.srt", "--source-subs", DATA / "original.srt")
    assert result.exit_code == 2 and "--source-subs goes with --source" in result.stderr
    # Without its subtitles the source is transcribed: with no ASR model here, one line names both ways out.
    result = run(
        "render",
        DATA / "dub.srt",
        "--source",
        DATA / "scene.opus",
        "--model",
        "synthetic:tiny",
        "--dry-run",
        "--out",
        tmp_path / "heard",
    )
    assert result.exit_code == 2 and "Traceback" not in result.output
    [message] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert "no original subtitles" in message and "--source-subs FILE" in message and "--asr-model" in message
    assert not (tmp_path / "heard").exists()
    result = run(
        "render",
        DATA / "dub.srt",
        "--source",
        DATA / "scene.opus",
        "--source-subs",
        DATA / "original.srt",
        "--voice-match",
        "everything",
    )
    assert result.exit_code == 2 and "--voice-match everything" in result.stderr
    text = tmp_path / "not-audio.mp4"
    text.write_text("hello")
    result = run(
        "render",
        DATA / "dub.srt",
        "--source",
        text,
        "--source-subs",
        DATA / "original.srt",
        "--model",
        "synthetic:tiny",
        "--out",
        tmp_path / "out",
    )
    assert result.exit_code == 2 and "not-audio.mp4" in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.slow  # over 10 s of CPU: pytest -m slow runs it, as CI does
def test_separate_cuts_from_the_vocals_and_the_rest_becomes_the_bed(args, tmp_path):
    from conftest import EXAMPLES

    from omnidub.source.separate import build_random_separator

    model = build_random_separator(tmp_path / "model")
    cast = tmp_path / "voices.toml"  # a random separator isolates no speech: every voice is given here
    cast.write_text(
        "".join(
            f'[{name}]\naudio = "{EXAMPLES / "voices" / "alice.wav"}"\ntext = "Good morning, '
            'everyone. Thanks for coming in early. I know the traffic was terrible today."\n'
            for name in ("ALICE", "BOB", "CAROL")
        )
    )
    out = tmp_path / "out"
    result = run(
        "render",
        DATA / "dub.srt",
        *args,
        "--separate",
        model,
        "--voices",
        cast,
        "--out",
        out,
        "--only",
        "1",
        "--timeline",
        "none",
    )
    assert result.exit_code == 0, result.output
    data = manifest(out)
    assert data["delivery"]["bed"].endswith("accompaniment.flac") and (out / data["delivery"]["bed_mix"]).is_file()
    assert "background" not in result.stderr  # the clips carry no background once it is separated


@pytest.fixture(scope="module")
def scene_video(tmp_path_factory) -> Path:
    """The scene as a video: a small picture over the scene's own sound."""
    from conftest import make_video

    from omnidub.media import load_audio

    sound = load_audio(DATA / "scene.opus", 16000)
    video = tmp_path_factory.mktemp("video") / "scene.mp4"
    make_video(video, sound.size / 16000, fps=5, rate=16000, sound=sound)
    return video


@pytest.mark.slow  # about 8 s or more: pytest -m slow runs it, as CI does
def test_a_source_video_is_the_dubbed_video_and_the_header_says_what_it_carries(scene_video, tiny_model_dir, tmp_path):
    preset = tmp_path / "preset.toml"
    preset.write_text("steps = 2\n")
    common = [
        "--source",
        scene_video,
        "--source-subs",
        DATA / "original.srt",
        "--model",
        "synthetic:tiny",
        "--preset",
        preset,
        "--voice-match",
        "speaker",
        "--only",
        "1",
        "--timeline",
        "none",
    ]
    out = tmp_path / "out"
    result = run("render", DATA / "dub.srt", *common, "--out", out)
    assert result.exit_code == 0, result.output
    notes = " ".join(result.stderr.split())  # the console wraps long notes
    # The source is named as what is read, the new file as what is written: never as if scene.mp4 were overwritten.
    assert f"the dubbed video will be {out / 'scene.dub.mp4'}: scene.mp4's picture with the dub as its sound" in notes
    assert "scene.mp4 itself is only read" in notes
    assert "the dubbed video carries the dialogue only" in notes
    assert all(flag in notes for flag in ("--bed FILE", "--separate MODEL", "--keep-original"))
    assert (out / "scene.dub.mp4").is_file() and manifest(out)["delivery"]["source_video"].endswith("scene.mp4")
    # Naming the video, and keeping its own audio beside the dub: neither note.
    out = tmp_path / "kept"
    result = run("render", DATA / "dub.srt", *common, "--video", scene_video, "--keep-original", "--out", out)
    assert result.exit_code == 0, result.output
    notes = " ".join(result.stderr.split())
    assert "the dubbed video will be" not in notes and "dialogue only" not in notes
    assert (out / "scene.dub.mp4").is_file()


@pytest.mark.slow  # over 10 s on a first run (the source analysed): pytest -m slow runs it, as CI does
def test_a_voice_without_a_clean_clip_never_refuses_the_dub(args, tmp_path):
    # BOB speaks only line 8 here (his other cues are gone), under the end of ALICE's line 7: no clean clip, so he
    # gets his own speech with hers cut away, labelled, and his line is flagged for review. EVE says one word
    # ("Great.", 0.5 s): no usable speech at all, so her line is left unrendered, every other line rendered, exit 1
    # and one line naming the flag that gives her a voice. The dubbed lines over the cues taken out match no
    # original line: each is placed with its nearest original line's voice, flagged.
    plain, source = eve_scene(args, tmp_path)
    out = tmp_path / "out"
    result = run("render", plain, *source, "--voice-match", "line", "--out", out)
    assert result.exit_code == 1, result.output
    said = [line for line in result.output.splitlines() if "--voice EVE=FILE" in line]
    assert len(said) == 1 and "line(s) 6 not rendered" in said[0], result.output
    assert statuses(out) == {i: "rendered" for i in TRUTH if i != 6}
    references = {line["index"]: line["reference"] for line in manifest(out)["lines"]}
    bob = references[8]
    assert bob["speaker"] == "BOB" and bob["kind"] == "speaker" and "not a clean one" in bob["review"]
    truth = json.loads((DATA / "truth.json").read_text())["lines"]
    others = [t["speech"] for t in truth if t["speaker"] != "BOB"]
    assert all(b <= bob["start"] or a >= bob["end"] for a, b in others)  # BOB's speech alone
    for i in (2, 5, 11):
        assert references[i]["match"] == "none" and "no original line was heard under it" in references[i]["review"]
    assert all(references[i]["review"] is None for i in references if i not in (2, 5, 8, 11))
    # The review lists EVE's line, in no row, with why and the flag that gives her a voice.
    from test_review import open_desk

    desk = open_desk(out)
    try:
        state = desk.state()
    finally:
        desk.close(deliver=False)
    [left] = state["unvoiced"]
    assert (left["index"], left["speaker"], left["text"]) == (6, "EVE", plain_text(plain, 6))
    assert "--voice EVE=FILE" in left["why"] and 6 not in {line["index"] for line in state["lines"]}
    assert manifest(out)["unvoiced"] == [left]  # as omnidub qa lists it
    # Having heard it, the editor voices it from the page: from the clip of a voice of the source (EVE's own 0.5 s is
    # under the 1 s a reference needs), CAROL's, who truly says it; rendered at once. An undo leaves it without a
    # voice again, and a voice given again is delivered and kept on reopening.
    assert {"voice": "speaker", "speaker": "CAROL"} in left["choices"], left["choices"]
    assert all(c["voice"] == "speaker" for c in left["choices"])
    voiced = voice_from_the_page(out, 6, {"voice": "speaker", "speaker": "CAROL"})
    assert (voiced["reference"]["kind"], voiced["speaker"]) == ("speaker", "CAROL"), voiced
    assert voiced["reference"]["review"].startswith("the editor chose CAROL's clip"), voiced
    after = manifest(out)
    assert after["unvoiced"] == [] and set(statuses(out)) == set(TRUTH), after["unvoiced"]
    assert set(statuses(out).values()) <= {"rendered", "cached"}, statuses(out)
    desk = open_desk(out)
    try:
        state = desk.state()
        assert state["unvoiced"] == [] and 6 in {line["index"] for line in state["lines"]}
    finally:
        desk.close(deliver=False)


def eve_scene(args: list, tmp_path: Path) -> tuple[Path, list]:
    """The scene with BOB speaking only line 8 and EVE only line 6's one word (see the test above): the dub
    unlabelled, and the render's arguments with that original."""
    blocks = (DATA / "original.srt").read_text().strip().split("\n\n")
    kept = [b.replace("CAROL: Great", "EVE: Great") for k, b in enumerate(blocks, 1) if k not in (2, 5, 11)]
    original = tmp_path / "original.srt"
    original.write_text("\n\n".join(f"{k}\n{b.split(chr(10), 1)[1]}" for k, b in enumerate(kept, 1)) + "\n")
    plain = tmp_path / "plain.srt"
    plain.write_text(
        "".join(
            row.split(": ", 1)[-1] if ": " in row else row
            for row in (DATA / "dub.srt").read_text().splitlines(keepends=True)
        )
    )
    return plain, [a if a != DATA / "original.srt" else original for a in args]


@pytest.mark.slow  # over 10 s on a first run (the source analysed): pytest -m slow runs it, as CI does
def test_a_line_left_without_a_voice_is_voiced_in_the_review_with_a_voice_the_user_gave(args, tmp_path):
    # EVE's one word is left without a voice (see above); the user gave CAROL a voice of their own (ALICE's bundled
    # sample). The review offers it beside the source's clips, by its file: the editor hears that file and voices
    # EVE's line with it. The line becomes CAROL's, cloned from the file, with no clip of the source beside it.
    plain, source = eve_scene(args, tmp_path)
    sample = Path(__file__).parents[1] / "examples" / "voices" / "alice.wav"
    said = "Good morning, everyone. Thanks for coming in early. I know the traffic was terrible today."
    out = tmp_path / "out"
    given = ["--voice", f"CAROL={sample}", "--voice-text", f"CAROL={said}"]
    result = run("render", plain, *source, "--voice-match", "line", *given, "--out", out)
    assert result.exit_code == 1, result.output
    [left] = manifest(out)["unvoiced"]
    assert left["index"] == 6 and left["choices"][-1] == {"voice": "given", "speaker": "CAROL"}, left
    assert {"voice": "speaker", "speaker": "CAROL"} not in left["choices"]  # CAROL's voice is the user's, not a clip
    assert left["given"] == {"CAROL": "alice.wav"} and left["clips"][-1] is None, left
    # how like EVE's own speech CAROL's file is, judged as the source's voices are (EVE's one word was embedded)
    assert set(left["likeness"]) == {"ALICE", "BOB", "CAROL"} and -1 <= left["likeness"]["CAROL"] <= 1, left
    voiced = voice_from_the_page(out, 6, {"voice": "given", "speaker": "CAROL"}, given=sample)
    reference = voiced["reference"]
    assert (reference["kind"], voiced["speaker"]) == ("given", "CAROL") and statuses(out)[6] == "rendered", voiced
    assert reference["start"] is None and reference["file"] is None, reference
    assert reference["review"].startswith("the editor chose CAROL's voice (alice.wav)"), reference
    after = manifest(out)
    assert after["unvoiced"] == [] and set(statuses(out)) == set(TRUTH), after["unvoiced"]
    # Asked on the page to retake it from its own clip (EVE's one word, under the 1 s a reference needs), the line is
    # refused with why and keeps CAROL's voice: it does not go back to the lines without a voice.
    refused = retake_from_the_page(out, 6, "line")
    assert "line 6 cannot be voiced from its own clip" in refused and "keeps the voice it has" in refused, refused
    kept = next(line for line in manifest(out)["lines"] if line["index"] == 6)
    assert kept["reference"]["kind"] == "given" and manifest(out)["unvoiced"] == [], kept
    # A rerun with the same voices keeps the choice, and the line's audio; without CAROL's voice the choice has
    # nothing to stand on: the line is left without a voice again, said so, and nothing else is lost.
    result = run("render", plain, *source, "--voice-match", "line", *given, "--out", out)
    assert result.exit_code == 0, result.output
    assert statuses(out)[6] == "cached" and manifest(out)["unvoiced"] == [], result.output
    result = run("render", plain, *source, "--voice-match", "line", "--out", out)
    assert result.exit_code == 1, result.output
    assert [u["index"] for u in manifest(out)["unvoiced"]] == [6] and 6 not in statuses(out), result.output


def retake_from_the_page(out: Path, index: int, clip: str) -> str:
    """Ask the review, through its own route, to retake a line from its own clip (``clip`` "line") or its
    speaker's ("speaker"), as its button does; the line must stay on the page, not among the lines without a voice.
    Returns what the desk said went wrong ("" when nothing did)."""
    from starlette.testclient import TestClient
    from test_review import HOST, open_desk, settle

    from omnidub.review.app import build_app

    desk = open_desk(out)
    errors: list[str] = []
    desk.subscribe(lambda event: errors.append(event["text"]) if event["type"] == "error" else None)
    try:
        client = TestClient(build_app(desk, {HOST}), base_url=f"http://{HOST}")
        assert client.get(f"/?token={desk.token}").status_code == 200
        answer = client.post(f"/api/lines/{index}/edit", json={"voice": clip}, headers={"Origin": f"http://{HOST}"})
        assert answer.status_code == 202, answer.text
        settle(desk)
        state = client.get("/api/state").json()
        assert index in {line["index"] for line in state["lines"]}, state["unvoiced"]
        assert index not in {u["index"] for u in state["unvoiced"]}
    finally:
        desk.close()
    return " ".join(errors)


def voice_from_the_page(out: Path, index: int, choice: dict, given: Path | None = None) -> dict:
    """Voice a line left without one through the review's own route (refused for a clip the folder does not offer
    it), deliver, undo it, deliver, voice it again and deliver on closing; returns the line as the manifest records
    it. ``given``: the file of the voice the user gave that ``choice`` names (no clip of the source is placed)."""
    from starlette.testclient import TestClient
    from test_review import HOST, open_desk, settle

    from omnidub.review.app import build_app

    desk = open_desk(out)
    try:
        client = TestClient(build_app(desk, {HOST}), base_url=f"http://{HOST}")
        assert client.get(f"/?token={desk.token}").status_code == 200
        page = {"Origin": f"http://{HOST}"}
        voice = f"/api/lines/{index}/voice"
        offered_not = ({"voice": "line"}, {"voice": "speaker", "speaker": "EVE"}, {"voice": "given", "speaker": "EVE"})
        for asked in (*offered_not, {"voice": "bob.wav"}, {}):
            answer = client.post(voice, json=asked, headers=page)
            assert answer.status_code == 400 and answer.json()["error"], answer.text
        assert client.post(f"/api/lines/{index + 100}/voice", json=choice, headers=page).status_code == 400
        # Each choice's clip is heard before it is chosen; a choice not offered is no clip.
        [left] = [u for u in client.get("/api/state").json()["unvoiced"] if u["index"] == index]
        k = left["choices"].index(choice)
        clip = client.get(f"/voice-clip/{index}/{k}?token={desk.token}")
        assert clip.status_code == 200 and clip.headers["content-type"] == "audio/wav", clip.text
        for missing in (f"{index}/{len(left['choices'])}", f"{index + 100}/0"):
            assert client.get(f"/voice-clip/{missing}?token={desk.token}").status_code == 404, missing
        assert client.get(f"/voice-clip/{index}/{k}").status_code == 403  # no token, not the page's own read
        said: list[str] = []
        desk.subscribe(lambda event: said.append(event["said"]) if event["type"] == "delivered" else None)
        for step in ("voice", "deliver", "undo", "deliver", "voice"):
            path = {"voice": voice, "undo": f"/api/lines/{index}/undo", "deliver": "/api/deliver"}[step]
            assert client.post(path, json=choice if step == "voice" else {}, headers=page).status_code == 202, step
            settle(desk)
            if step == "deliver":  # the line's clip lies beside it once delivered, and leaves with it
                placed = list((out / "references").glob(f"{index:04d}-*.wav"))
                assert bool(placed) == (len(said) == 1 and given is None), (len(said), placed)
                continue
            state = client.get("/api/state").json()
            shown = {line["index"] for line in state["lines"]}
            left = {u["index"] for u in state["unvoiced"]}
            assert (index in shown, index in left) == ((True, False) if step == "voice" else (False, True)), step
        # Each delivery says what changed: the line's new audio, then the line left without a voice again.
        assert f"new audio on 1 ({index})" in said[0] and f"left without a voice on 1 ({index})" in said[1], said
        [line] = [line for line in state["lines"] if line["index"] == index]
        assert line["key"] and line["speaker"] == choice.get("speaker", line["speaker"]), line
    finally:
        desk.close()  # delivers what was done
    voiced = next(line for line in manifest(out)["lines"] if line["index"] == index)
    # What was heard before choosing is the clip (or the file) the line is now voiced from.
    heard, _ = sf.read(io.BytesIO(clip.content), dtype="float32")
    kept, _ = sf.read(given or out / voiced["reference"]["file"], dtype="float32")
    assert heard.shape == kept.shape and np.abs(heard - kept).max() < 1e-3, (heard.shape, kept.shape)
    return voiced


def plain_text(script: Path, index: int) -> str:
    """The text of cue ``index`` of an SRT file."""
    import srt

    return next(cue.content for cue in srt.parse(script.read_text()) if cue.index == index)
