"""The seams: one module talks to omnivoice's internals, settings are checked once, the scheduler and the
journal keep their promises, and a line's audio does not depend on how it was batched."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
import soundfile as sf
from conftest import EXAMPLES, ROOT
from typer.testing import CliRunner

from omnidub.backends.base import Request
from omnidub.cli import app
from omnidub.config import load_preset
from omnidub.errors import OmnidubError
from omnidub.journal import JOURNAL, Journal, LineEntry, read_entries
from omnidub.scheduler import Budget, buckets

PACKAGE = ROOT / "omnidub"
UPSTREAM = PACKAGE / "backends" / "torch" / "upstream.py"
# The torch-free twin: omnivoice's pure-Python modules (and their private tables) for plans and the ONNX backend.
LIGHTWEIGHT = PACKAGE / "lightweight.py"
PRIVATE_USE = re.compile(
    r"from\s+omnivoice[\w.]*\s+import\s+[^\n]*\b_\w+"  # a private name imported from omnivoice
    r"|\.(_prepare_\w+|_estimate_\w+|_post_process\w*|_resolve_\w+|_generate_\w+|_preprocess_\w+)\b"  # a private method
    r"|\._(INSTRUCT|ZH_RE)\w*"  # omnivoice's private voice-design tables
    r"|torch\.cpu\._\w+"
)


def test_only_the_upstream_module_reaches_into_omnivoice_privates():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in (UPSTREAM, LIGHTWEIGHT):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if PRIVATE_USE.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
    # The pattern does find them where they are.
    assert PRIVATE_USE.search(UPSTREAM.read_text(encoding="utf-8"))
    assert PRIVATE_USE.search(LIGHTWEIGHT.read_text(encoding="utf-8"))


def test_omnivoice_is_pinned_below_the_next_minor():
    from packaging.requirements import Requirement

    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    [omnivoice] = [r for r in map(Requirement, project["dependencies"]) if r.name == "omnivoice"]
    # The private internals upstream.py reaches into were read in 0.2.1; a new minor may move them.
    assert omnivoice.specifier.contains("0.2.1") and omnivoice.specifier.contains("0.2.9")
    assert not omnivoice.specifier.contains("0.2.0") and not omnivoice.specifier.contains("0.3.0")


def _request(i: int, text: str) -> Request:
    return Request(text=text, id=str(i))


def test_buckets_respect_both_limits_and_hold_every_line_once():
    requests = [_request(i, "x" * n) for i, n in enumerate([50, 10, 40, 30, 20, 60, 5])]
    cost = lambda r: len(r.text)  # noqa: E731
    for budget in (Budget(lines=1), Budget(lines=3), Budget(lines=0, tokens=70), Budget(lines=2, tokens=100)):
        groups = buckets(requests, cost, budget)
        assert sorted(r.id for g in groups for r in g) == sorted(r.id for r in requests)
        for group in groups:
            assert not budget.lines or len(group) <= budget.lines
            assert not budget.tokens or len(group) == 1 or sum(map(cost, group)) <= budget.tokens
    # Longest first, so lines of similar length share a forward.
    assert [r.id for r in buckets(requests, cost, Budget(lines=2))[0]] == ["5", "0"]
    # A line over the token budget still renders, alone.
    assert [len(g) for g in buckets([_request(0, "x" * 500)], cost, Budget(lines=0, tokens=10))] == [1]


def _entry(index: int) -> LineEntry:
    return LineEntry(
        index=index,
        speaker="A",
        text=f"line {index}",
        language="en",
        start=float(index),
        end=index + 1.0,
        slot=1.0,
        natural=1.0,
        target=1.0,
        speed=1.0,
        limit_at=None,
        file=f"segments/{index:04d}-A.wav",
        base_key=f"k{index}",
        key=f"k{index}",
        seed=index,
        status="rendered",
        duration=1.0,
    )


def test_journal_appends_lines_ignores_a_torn_record_and_never_swallows_the_next(tmp_path):
    journal = Journal(tmp_path / JOURNAL)
    sizes = []
    for i in range(1, 51):
        journal.append(_entry(i))
        sizes.append((tmp_path / JOURNAL).stat().st_size)
    journal.close()
    # Each line adds one record of about the same size: bytes written grow linearly with the lines.
    steps = np.diff([0] + sizes)
    assert steps.max() < 2 * steps.min()
    with open(tmp_path / JOURNAL, "a", encoding="utf-8") as handle:
        handle.write('{"index": 51, "speaker": "A", "te')  # killed mid-write
    assert [e.index for e in read_entries(tmp_path)] == list(range(1, 51))
    # The next run appends after the fragment: its records start on a line of their own and all count.
    again = Journal(tmp_path / JOURNAL)
    again.append(_entry(52))
    again.append(_entry(53))
    again.close()
    assert [e.index for e in read_entries(tmp_path)] == [*range(1, 51), 52, 53]
    # Once the manifest holds them, the journal starts empty.
    (tmp_path / "manifest.json").write_text(json.dumps({"lines": [e.to_json() for e in read_entries(tmp_path)]}))
    again.clear()
    assert not (tmp_path / JOURNAL).exists()
    assert [e.index for e in read_entries(tmp_path)] == [*range(1, 51), 52, 53]


@pytest.mark.parametrize(
    "setting, message",
    [
        ("steps = 2.5", "steps must be a whole number from 1 to 1000, got 2.5"),
        ("steps = 1e9", "steps must be a whole number from 1 to 1000, got 1000000000.0 (a whole number is written"),
        ("steps = 0", "steps must be at least 1"),
        ("gap = -5", "gap must be at least 0"),
        ("guidance_scale = nan", "guidance_scale must be a finite number"),
        ('seed = "x"', "seed must be a whole number"),
        ('cfg = "fancy"', "cfg must be one of"),
        ("compile = 1", "compile must be true or false"),
        ("reference_window = [4.0, 2.0]", "reference_window must be two increasing"),
        ("turbo = true", "unknown setting(s) turbo"),
    ],
)
def test_every_preset_setting_is_checked_when_read(tmp_path, setting, message):
    path = tmp_path / "bad.toml"
    path.write_text(setting + "\n")
    with pytest.raises(OmnidubError, match=re.escape(message)):
        load_preset(str(path))


def test_presets_split_into_parts_and_flat_overrides_reach_them():
    fast = load_preset("fast")
    assert fast.engine.decode.steps == 12 and fast.voice.reference_seconds == 3.0 and fast.qa.max_wer == 0.2
    changed = fast.with_overrides(steps=8, dtype="float32", gap=1.0, seed=None)
    assert changed.engine.decode.steps == 8 and changed.engine.dtype == "float32" and changed.timing.gap == 1.0
    assert changed.seed == fast.seed and math.isclose(changed.engine.decode.guidance_scale, 2.0)


def test_debug_shows_the_cause_of_an_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("steps = [\n")
    runner = CliRunner()
    plain = runner.invoke(app, ["render", str(EXAMPLES / "dialogue.srt"), "--preset", str(bad), "--dry-run"])
    assert plain.exit_code == 2 and "Traceback" not in plain.output
    with pytest.raises(OmnidubError) as caught:
        runner.invoke(
            app,
            ["render", str(EXAMPLES / "dialogue.srt"), "--preset", str(bad), "--dry-run", "--debug"],
            catch_exceptions=False,
        )
    assert caught.value.__cause__ is not None  # the TOML parser's own error is kept for --debug


def test_token_budget_does_not_change_a_single_sample(tmp_path, tiny_model_dir, whisper_tiny_en):
    script = tmp_path / "five.txt"
    script.write_text("".join(f"{'A' if i % 2 else 'B'}: Line {i}{' with more words' * (i % 3)}.\n" for i in range(5)))
    preset = tmp_path / "p.toml"
    preset.write_text('steps = 3\ndtype = "float32"\nreference_seconds = 0\n')
    outs = {}
    for name, budget in (("small", "1"), ("large", "100000")):
        out = tmp_path / name
        result = CliRunner().invoke(
            app,
            [
                "render",
                str(script),
                "--voice",
                str(EXAMPLES / "voices" / "alice.wav"),
                "--voice-text",
                "Good morning, everyone. Thanks for coming in early. I know the traffic was terrible today.",
                "--model",
                "synthetic:tiny",
                "--preset",
                str(preset),
                "--batch-tokens",
                budget,
                "--out",
                str(out),
            ],
            catch_exceptions=False,
        )
        assert result.exit_code == 0, result.output
        outs[name] = out
    manifest = json.loads((outs["large"] / "manifest.json").read_text())
    assert manifest["settings"]["batch_tokens"] == 100000
    for line in manifest["lines"]:
        small, _ = sf.read(outs["small"] / line["file"])
        large, _ = sf.read(outs["large"] / line["file"])
        assert np.array_equal(small, large)
