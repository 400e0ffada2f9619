"""``omnidub voices extract`` through the command line: outputs render accepts, the folder guard, bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_cli import one_error_line, run

from omnidub.voices import load_voices

DATA = Path(__file__).parent / "data" / "source"


def relabelled(tmp_path: Path, names: dict[int, str], keep=None) -> Path:
    """original.srt with some cues' labels changed (and only the cues in `keep`, when given)."""
    blocks = (DATA / "original.srt").read_text().strip().split("\n\n")
    out = []
    for block in blocks:
        number, timing, text = block.split("\n", 2)
        cue = int(number)
        if keep is not None and cue not in keep:
            continue
        if cue in names:
            text = names[cue] + ":" + text.split(":", 1)[1]
        out.append(f"{len(out) + 1}\n{timing}\n{text}")
    path = tmp_path / "original.srt"
    path.write_text("\n\n".join(out) + "\n")
    return path


@pytest.fixture(scope="module")
def extracted(tmp_path_factory, whisper_tiny_en):
    out = tmp_path_factory.mktemp("voices")
    result = run(
        "voices",
        "extract",
        DATA / "scene.opus",
        "--subs",
        DATA / "original.srt",
        "--out",
        out,
        "--asr-model",
        whisper_tiny_en,
        "--json",
    )
    return out, result


def test_extract_writes_clips_and_a_voices_toml_render_accepts(extracted):
    out, result = extracted
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [s["speaker"] for s in report["speakers"]] == ["ALICE", "BOB", "CAROL"]
    voices = load_voices(out / "voices.toml", [], [])  # omnidub's own loader, as render --voices uses it
    assert set(voices) == {"ALICE", "BOB", "CAROL"}
    for speaker, voice in voices.items():
        entry = next(s for s in report["speakers"] if s["speaker"] == speaker)
        assert voice.audio == out / f"{speaker}.wav" and voice.audio.is_file()
        # The clips' language is the source's: it finds the clip's words, and is never taken for the dub's.
        assert voice.text == entry["clip"]["text"] and voice.reference_language == "en" and voice.language is None
        assert entry["candidates"][0]["scores"]["total"] == entry["clip"]["scores"]["total"]
    assert json.loads((out / "extract.json").read_text())["speakers"] == report["speakers"]
    assert "background" in result.stderr  # said once: no separation
    assert sorted(p.name for p in out.iterdir()) == [
        ".omnidub",
        "ALICE.wav",
        "BOB.wav",
        "CAROL.wav",
        "extract.json",
        "voices.toml",
    ]
    assert not (out / ".omnidub" / "lock").exists()  # held while it wrote, let go since


def test_a_clip_is_a_reference_render_keeps_whole(extracted):
    import soundfile as sf

    from omnidub.config import VoiceOptions
    from omnidub.voices import prepare_reference

    out, _ = extracted
    voice = load_voices(out / "voices.toml", [], [])["BOB"]
    reference = prepare_reference(voice, sample_rate=24000, options=VoiceOptions(), asr=None)
    assert not reference.trimmed and reference.text == voice.text and "warning" not in reference.note
    assert sf.info(voice.audio).samplerate == 24000


@pytest.mark.slow  # the scene's voices extracted twice more: about 16 s of CPU
def test_a_rerun_replaces_its_own_files_and_nothing_else(extracted, tmp_path):
    from omnidub.folder import Ledger

    out, _ = extracted
    folder = tmp_path / "voices"
    shutil.copytree(out, folder)
    # A previous extract's file (its ledger says so) that this one does not write again is removed; a user's
    # file beside them is never touched.
    (folder / "OLD.wav").write_bytes(b"old clip")
    Ledger(folder / ".omnidub" / "ledger.jsonl").record("OLD.wav", folder / "OLD.wav")
    (folder / "notes.txt").write_text("mine")
    result = run(
        "voices", "extract", DATA / "scene.opus", "--subs", relabelled(tmp_path, {}, keep=range(1, 6)), "--out", folder
    )
    assert result.exit_code in (0, 1), result.output
    assert not (folder / "OLD.wav").exists() and (folder / "notes.txt").read_text() == "mine"
    # A clip someone changed is moved aside, never overwritten.
    clip = next(p for p in folder.glob("*.wav") if ".changed-" not in p.name)
    changed = clip.read_bytes()[:-2] + b"\x01\x02"
    clip.write_bytes(changed)
    result = run("voices", "extract", DATA / "scene.opus", "--subs", DATA / "original.srt", "--out", folder)
    assert result.exit_code in (0, 1), result.output
    [aside] = folder.glob(f"{clip.stem}.changed-*.wav")
    assert aside.read_bytes() == changed and f"{clip.name} was changed after omnidub wrote it" in result.stderr
    # A folder of someone else's files is refused, whatever it holds.
    other = tmp_path / "other"
    other.mkdir()
    (other / "extract.json").write_text("{}")
    assert "extract.json that omnidub did not write" in one_error_line(
        run("voices", "extract", DATA / "scene.opus", "--subs", DATA / "original.srt", "--out", other)
    )
    assert (other / "extract.json").read_text() == "{}"
    (other / "extract.json").unlink()
    (other / "mine.wav").write_bytes(b"RIFF")
    assert "holds files omnidub did not write" in one_error_line(
        run("voices", "extract", DATA / "scene.opus", "--subs", DATA / "original.srt", "--out", other)
    )


@pytest.mark.slow  # the scene's voices extracted: about 16 s of CPU
def test_a_speaker_with_no_usable_clip(tmp_path):
    out = tmp_path / "out"
    srt = relabelled(tmp_path, {6: "DAVE"})  # DAVE says one word, "Great."
    result = run("voices", "extract", DATA / "scene.opus", "--subs", srt, "--out", out)
    assert result.exit_code == 1, result.output
    warning = [line for line in result.stderr.splitlines() if "DAVE" in line]
    assert len(warning) == 1 and "has no clip" in warning[0], result.stderr
    report = json.loads((out / "extract.json").read_text())
    dave = next(s for s in report["speakers"] if s["speaker"] == "DAVE")
    assert dave["clip"] is None and "line 6" in dave["why_none"]
    assert set(load_voices(out / "voices.toml", [], [])) == {"ALICE", "BOB", "CAROL"}
    # When no speaker has a clip: one line, exit 2, and the report is still there to say why.
    alone = relabelled(tmp_path, {6: "DAVE"}, keep={6})
    out2 = tmp_path / "out2"
    message = one_error_line(run("voices", "extract", DATA / "scene.opus", "--subs", alone, "--out", out2))
    assert "no speaker has a usable clip: DAVE" in message
    assert (out2 / "extract.json").is_file() and not (out2 / "voices.toml").exists()


@pytest.mark.slow  # the scene's voices extracted, unlabelled: about 16 s of CPU
def test_unlabelled_with_a_given_number_of_speakers(tmp_path):
    out = tmp_path / "out"
    result = run(
        "voices",
        "extract",
        DATA / "scene.opus",
        "--subs",
        DATA / "original-unlabelled.srt",
        "--out",
        out,
        "--speakers",
        "3",
    )
    assert result.exit_code == 0, result.output
    assert "speakers: 3 speakers, as asked" in result.stdout
    report = json.loads((out / "extract.json").read_text())
    assert report["grouping"]["speakers"] == ["S1", "S2", "S3"]
    assert [g["line"] for g in report["grouping"]["lines"]] == list(range(1, 13))
    assert set(load_voices(out / "voices.toml", [], [])) == {"S1", "S2", "S3"}


def test_bad_sources_are_one_line(tmp_path):
    from test_source import _video_only

    video = tmp_path / "silent.mp4"
    _video_only(video)
    assert "has no audio stream" in one_error_line(
        run("voices", "extract", video, "--subs", DATA / "original.srt", "--out", tmp_path / "a")
    )
    short = tmp_path / "short.wav"
    import soundfile as sf

    sf.write(short, [0.0] * 16000 * 10, 16000)
    assert "line 12 ends at" in one_error_line(
        run("voices", "extract", short, "--subs", DATA / "original.srt", "--out", tmp_path / "b")
    )
    assert "not found" in one_error_line(
        run("voices", "extract", tmp_path / "missing.mkv", "--subs", DATA / "original.srt", "--out", tmp_path / "c")
    )
    untimed = tmp_path / "script.txt"
    untimed.write_text("ALICE: Good morning everyone.\nBOB: No problem at all.\n")
    assert "need times" in one_error_line(
        run("voices", "extract", DATA / "scene.opus", "--subs", untimed, "--out", tmp_path / "d")
    )
    assert not any((tmp_path / name).exists() for name in "abcd")


def test_separate_writes_the_accompaniment_and_records_it(tmp_path):
    pytest.importorskip("demucs")
    import soundfile as sf

    from omnidub.source import read_source
    from omnidub.source.separate import build_random_separator

    excerpt = tmp_path / "excerpt.wav"
    sf.write(excerpt, read_source(DATA / "scene.opus").cut(0, 9.0), 24000)
    model = build_random_separator(tmp_path / "model")
    out = tmp_path / "out"
    result = run(
        "voices", "extract", excerpt, "--subs", relabelled(tmp_path, {}, keep={1, 2}), "--out", out, "--separate", model
    )
    # A random-weight separator isolates no speech, so no clip: the accompaniment is kept all the same.
    assert "no speaker has a usable clip" in one_error_line(result)
    info = sf.info(out / "accompaniment.flac")
    assert info.channels == 2 and info.samplerate == 44100 and abs(info.duration - 9.0) < 0.05
    report = json.loads((out / "extract.json").read_text())
    assert report["separation"]["accompaniment"] == "accompaniment.flac"
    assert report["separation"]["model"] == str(model)
    from omnidub.folder import OutputFolder

    assert OutputFolder(out, record="extract.json").owns("accompaniment.flac")  # in its ledger, as written
    assert not any("background" in note for note in report["notes"])


@pytest.mark.slow  # the scene's voices extracted: about 12 s of CPU
def test_a_speaker_without_a_clean_clip_gets_its_best_one_labelled(tmp_path):
    out = tmp_path / "out"
    srt = relabelled(tmp_path, {}, keep={1, 3, 4, 6, 7, 8, 9, 10, 12})  # BOB speaks only line 8, under ALICE's 7
    result = run("voices", "extract", DATA / "scene.opus", "--subs", srt, "--out", out)
    assert result.exit_code == 0, result.output
    warning = [line for line in result.stderr.splitlines() if "BOB" in line]
    assert len(warning) == 1 and "has no clean clip" in warning[0], result.stderr
    report = json.loads((out / "extract.json").read_text())
    bob = next(s for s in report["speakers"] if s["speaker"] == "BOB")
    assert bob["why_none"] is None and "for want of a clean clip" in bob["clip"]["fallback"]
    assert "BOB: not a clean clip:" in (out / "voices.toml").read_text()
    assert set(load_voices(out / "voices.toml", [], [])) == {"ALICE", "BOB", "CAROL"}
