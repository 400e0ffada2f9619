"""The pace model: a line's natural length from its phonemes, judged on real synthesized speech it was not fitted on
(tests/data/pace_speech.json, the lines held out of the fit), one prediction for the fit choice and the render, and a
clear fallback without espeak-ng."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from test_cli import run

from omnidub import duration, pace
from omnidub.script import Line, Script
from omnidub.translate import Pair, translate_script

SPEECH = Path(__file__).parent / "data" / "pace_speech.json"
DATA = Path(__file__).parents[1] / "omnidub" / "data"
# A voice of one synthesizer in English and in the other language: a clone keeps its clip's pace across languages.
PAIRS = (
    ("espeak-ng/en-us", "espeak-ng/pt-br"),
    ("mbrola/us1", "mbrola/br4"),
    ("rhvoice/clb", "rhvoice/leticia"),
    ("espeak-ng/en-us", "espeak-ng/es"),
    ("mbrola/us2", "mbrola/es1"),
    ("festival/kal_diphone", "festival/el_diphone"),
    ("pico/en-US", "pico/es-ES"),
)


@pytest.fixture(scope="module")
def held_out() -> tuple[list[dict], dict]:
    """The lines the model was not fitted on, and every voice's real seconds for them."""
    if pace.unavailable():
        pytest.skip(pace.unavailable())
    data = json.loads(SPEECH.read_text(encoding="utf-8"))
    every = data["held_out_every"]
    keep = [k for k in range(len(data["lines"])) if k % every == every - 1]
    voices = {name: np.array(v["seconds"])[keep] for name, v in data["voices"].items()}
    languages = {name: v["language"] for name, v in data["voices"].items()}
    return [data["lines"][k] for k in keep], {"seconds": voices, "language": languages}


def corr(a, b) -> float:
    return float(np.corrcoef(np.asarray(a, dtype=float), np.asarray(b, dtype=float))[0, 1])


def test_held_out_lengths_follow_real_speech_of_every_voice_in_english_portuguese_and_spanish(held_out):
    lines, voices = held_out
    assert len(lines) >= 70 and {"en", "pt", "es"} <= set(voices["language"].values())
    for name, real in voices["seconds"].items():
        language = voices["language"][name]
        predicted = [pace.base_seconds(line[language], language) for line in lines]
        assert corr(predicted, real) > 0.93, name


def test_held_out_translations_are_predicted_to_fit_where_real_speech_fits(held_out):
    """Each line's translation predicted at the pace of the English line's real speech, as a clone from that clip
    is: the ratio follows the real one, and the predicted fit (at the 1.25x cap) agrees with the real fit, on every
    pair more often than counting characters did."""
    lines, voices = held_out
    agreed, counted = [], []
    for english, other in PAIRS:
        language = voices["language"][other]
        s_en, s_to = voices["seconds"][english], voices["seconds"][other]
        clip = [pace.Pace(line["en"], s, "en") for line, s in zip(lines, s_en)]
        predicted = np.array([pace.natural_seconds(line[language], language, p) for line, p in zip(lines, clip)])
        characters = np.array(
            [duration.natural_seconds(line[language], p.text, p.seconds) for line, p in zip(lines, clip)]
        )
        real_fit = s_to <= 1.25 * s_en
        agreed.append(np.mean((predicted <= 1.25 * s_en) == real_fit))
        counted.append(np.mean((characters <= 1.25 * s_en) == real_fit))
        assert corr(predicted / s_en, s_to / s_en) > 0.45, (english, other)
        assert 0.85 <= np.median(predicted / s_to) <= 1.15, (english, other)  # no language-wide bias
        assert agreed[-1] >= max(counted[-1], 0.65), (english, other, agreed[-1], counted[-1])
    assert np.mean(agreed) >= 0.8 and np.mean(agreed) >= np.mean(counted) + 0.2, (agreed, counted)


def test_a_one_second_line_translated_to_a_line_as_long_is_predicted_to_fit():
    """'I know.' in a slot of exactly 1.0 s, translated 'Eu sei.' (as long in real speech): it fits with room to
    spare; counting characters with upstream's short-line boost called it 1.59 s, an overflow. (The slot is longer
    than any voice says 'I know.' in: it is taken at the slowest pace a cue is read at, not as 1.0 s of speech.)"""
    script = Script((Line(1, "A", "I know.", 0.0, 1.0, "en"), Line(2, "B", "Yes.", 1.0, 2.0, "en")), (), (), True)
    translation = translate_script(script, _Answers({"I know.": "Eu sei.", "Yes.": "Sim."}), Pair("en", "pt"))
    first = translation.choices[0]
    assert first.fits and not first.sized[0].overflow
    assert 0.4 <= first.sized[0].natural <= 1.0
    assert duration.natural_seconds("Eu sei.", "I know.", 1.0) > 1.25  # what the fit used to see


def test_a_short_reply_s_cue_is_read_at_a_pace_a_voice_speaks_not_as_speech_all_through():
    """'Sure.' shown for 2.2 s with the next cue 0.3 s after: taken as 2.2 s of speech, 'Claro.' (two syllables to
    one) was predicted 2.2 s and flagged too long even sped up; no voice says 'Sure.' that slowly."""
    script = Script((Line(1, "A", "Sure.", 5.0, 7.2, "en"), Line(2, "B", "Come on.", 7.5, 9.7, "en")), (), (), True)
    translation = translate_script(script, _Answers({"Sure.": "Claro.", "Come on.": "Vamos lá."}), Pair("en", "pt"))
    first = translation.choices[0]
    assert first.fits and first.sized[0].natural <= 1.6 * pace.base_seconds("Claro.", "pt") + 0.04
    # A cue that speech fills is read as it was: a long line in a short cue keeps its pace.
    said = "I told you we would be late if we stopped for coffee on the way."
    rushed = translate_script(
        Script((Line(1, "A", said, 0.0, 2.0, "en"),), (), (), True),
        _Answers({said: "Eu te disse que chegaríamos atrasados se parássemos para um café no caminho."}),
        Pair("en", "pt"),
    ).choices[0]
    assert rushed.pace.seconds == 2.0


def test_the_plan_and_the_fit_choice_give_one_length_for_one_text_and_clip(tmp_path):
    """A Portuguese line cloned from an English reference: the render's plan (the CLI's dry run) and the
    translation's fit choice predict the same natural length for it."""
    import soundfile as sf

    voices = tmp_path / "voices.toml"
    transcript = (DATA / "alice-3s.txt").read_text(encoding="utf-8").strip()
    voices.write_text(
        f'[A]\naudio = "{DATA / "alice-3s.wav"}"\ntext = "{transcript}"\nlanguage = "pt"\nreference_language = "en"\n'
    )
    texts = ["Eu não sei o que dizer, sinceramente.", "Sim.", "Vamos embora daqui antes que seja tarde demais!"]
    script = tmp_path / "lines.srt"
    script.write_text(
        "".join(f"{k}\n00:00:0{2 * k},000 --> 00:00:0{2 * k + 1},500\nA: {t}\n\n" for k, t in enumerate(texts, 1)),
        encoding="utf-8",
    )
    result = run(
        "render",
        script,
        "--voices",
        voices,
        "--model",
        "synthetic:tiny",
        "--out",
        tmp_path / "o",
        "--dry-run",
        "--json",
    )
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["pace"] == pace.model() and plan["pace"].startswith("phonemes")
    clip = pace.Pace(transcript, sf.info(str(DATA / "alice-3s.wav")).duration, "en")
    from omnidub.translate.fit import Pace, size

    assert Pace is pace.Pace
    from omnidub.translate import Candidate, Glossary

    for planned in plan["lines"]:
        line = Line(planned["index"], "A", "original", planned["start"], planned["end"], "en")
        [sized] = size([Candidate(planned["text"], "engine")], line, None, clip, 1.25, Glossary(), "pt")
        assert sized.natural == pytest.approx(planned["natural"], abs=1e-6)


@pytest.mark.parametrize(
    "missing, said",
    [("phonemizer", "phonemizer package is not installed"), ("espeak-ng", "espeak-ng cannot be loaded")],
)
def test_without_espeak_ng_lengths_come_from_characters_and_one_line_says_so(missing, said, tmp_path, monkeypatch):
    if missing == "phonemizer":
        monkeypatch.setitem(sys.modules, "phonemizer", None)  # as if it were not installed
    else:  # no wheel's library, and the system's not where it is looked for
        monkeypatch.setitem(sys.modules, "espeakng_loader", None)
        monkeypatch.setenv("PHONEMIZER_ESPEAK_LIBRARY", str(tmp_path / "libespeak-ng.so.1"))
        from phonemizer.backend.espeak.wrapper import EspeakWrapper

        monkeypatch.setattr(EspeakWrapper, "_ESPEAK_LIBRARY", None)
    for cached in (pace._espeak, pace._phonemes):
        cached.cache_clear()
    try:
        import soundfile as sf

        texts = ("Hello there.", "See you tomorrow, then.", "Fine.")
        script = tmp_path / "lines.txt"
        script.write_text("".join(f"A: {t}\n" for t in texts), encoding="utf-8")
        transcript = (DATA / "alice-3s.txt").read_text(encoding="utf-8").strip()
        voice = ["--voice", f"A={DATA / 'alice-3s.wav'}", "--voice-text", f"A={transcript}"]
        result = run(
            "render", script, *voice, "--model", "synthetic:tiny", "--out", tmp_path / "o", "--dry-run", "--json"
        )
        assert result.exit_code == 0, result.output
        lines = [line for line in result.stderr.splitlines() if "predicted from characters" in line]
        assert len(lines) == 1 and said in lines[0], result.stderr
        plan = json.loads(result.stdout)
        assert plan["pace"] == pace.CHARACTERS
        seconds = sf.info(str(DATA / "alice-3s.wav")).duration
        assert [line["natural"] for line in plan["lines"]] == [
            pytest.approx(duration.natural_seconds(t, transcript, seconds), abs=1e-6) for t in texts
        ]
    finally:
        for cached in (pace._espeak, pace._phonemes):
            cached.cache_clear()


def test_each_line_is_sized_at_the_clip_it_will_be_cloned_from():
    """``paces`` by line index (the clip each line is cloned from) before the speaker's: a line cloned from a quick
    clip keeps the faithful long candidate that a slower clip would have passed over."""
    original = "I really do not know what to tell you about it."
    lines = tuple(Line(k, "A", original, 3.0 * k, 3.0 * k + 2.0, "en") for k in (1, 2, 3, 4))  # 4: the last runs on
    long = "Eu realmente não sei o que te dizer sobre isso, sinceramente."
    engine = _Answers({original: [long, "Não sei o que dizer."]})
    slow = pace.Pace(original, 4.0)  # no language: the source's
    quick = pace.Pace("Good morning, everyone. Thanks for coming in early.", 1.6, "en")
    chosen = translate_script(Script(lines, (), (), True), engine, Pair("en", "pt"), paces={"A": slow, 2: quick})
    assert [c.text for c in chosen.choices[:3]] == ["Não sei o que dizer.", long, "Não sei o que dizer."]
    assert chosen.choices[1].sized[0].natural < chosen.choices[0].sized[0].natural / 2


class _Answers:
    name, model, uses_context, batch = "scripted", "scripted-1", False, 8

    def __init__(self, answers: dict[str, str]):
        self.answers = answers

    def settings(self) -> dict:
        return {}

    def candidates(self, requests, pair, glossary, progress=None):
        from omnidub.translate import Candidate

        found = {r.index: self.answers[r.text] for r in requests}
        return {k: [Candidate(t, "engine") for t in ([a] if isinstance(a, str) else a)] for k, a in found.items()}

    def shorten(self, requests, pair, glossary):
        return None
