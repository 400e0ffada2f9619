"""The README's measured figures are written by scripts from committed data, and a figure edited by hand is caught."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "readme-figures"
# Wherever the blocks live: the README, or the docs pages it links to.
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def check(*files) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--check", *map(str, files)], capture_output=True, text=True)


def test_every_generated_block_is_there_and_matches_its_data():
    result = check(*PAGES)
    assert result.returncode == 0, result.stderr


def test_a_figure_edited_by_hand_is_caught_and_written_back(tmp_path):
    page = tmp_path / "page.md"
    text = "".join(path.read_text(encoding="utf-8") for path in PAGES)
    page.write_text(text.replace("| **0.72** |", "| **0.73** |"), encoding="utf-8")
    result = check(page)
    assert result.returncode == 1 and "voice-calibration" in result.stderr
    subprocess.run([sys.executable, str(SCRIPT), str(page)], check=True)
    assert check(page).returncode == 0
