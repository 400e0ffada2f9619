"""The sentences an eval renders: read from a text file (one a line), a script or subtitles, and written into the
eval's folder as the untimed script every configuration renders."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from omnidub.errors import OmnidubError
from omnidub.files import write_text_atomic
from omnidub.plan import assign_languages
from omnidub.script import Line, read_script

BUNDLED = "eval-en.txt"  # in omnidub/data: English sentences for a first run
SCRIPT_NAME = "sentences.txt"
_HEADER = "# omnidub eval: the sentences every configuration renders"


@dataclass(frozen=True)
class Corpus:
    """The corpus as read: where it came from, its lines (speaker, text, language), the language given for all
    of them (None: each line's voice's, else the model's guess) and the cast's names it was read with."""

    path: Path
    lines: tuple[Line, ...]
    language: str | None = None
    cast: frozenset[str] = frozenset()
    bundled: bool = False


def bundled_corpus() -> Path:
    """The English corpus shipped with omnidub."""
    return Path(str(resources.files("omnidub").joinpath("data", BUNDLED)))


def read_corpus(path: Path | None, *, language: str | None = None, voices: dict | None = None) -> Corpus:
    """The sentences of ``path`` (None: the bundled English corpus, language ``en`` unless given), read as a
    render reads its input: an SRT or WebVTT file's cues, a script's lines (``SPEAKER: text`` gives a speaker),
    one sentence per line of plain text; each line takes its voice's language when none is given."""
    bundled = path is None
    path = bundled_corpus() if bundled else Path(path)
    if bundled and language is None:
        language = "en"
    voices = voices or {}
    script = read_script(path, language=language, speakers=frozenset(voices))
    lines = assign_languages(script, voices).lines if voices else script.lines
    if len(lines) < 2:
        raise OmnidubError(f"{path}: an eval needs at least two sentences, found {len(lines)}")
    return Corpus(path, lines, language, frozenset(voices), bundled)


def script_text(corpus: Corpus) -> str:
    """The corpus as an untimed script: one ``SPEAKER: text`` line per sentence, under omnidub's header."""
    rows = [_HEADER, f"# from {corpus.path.resolve()}"]
    rows += [f"{line.speaker}: {line.text}" for line in corpus.lines]
    return "\n".join(rows) + "\n"


def existing_script(out_dir: Path) -> str | None:
    """The script an earlier eval wrote into ``out_dir`` (None: there is none); a file of that name omnidub did
    not write is an error (omnidub never replaces it)."""
    path = Path(out_dir) / SCRIPT_NAME
    if not path.exists():
        return None
    try:
        old = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        old = None
    if old is None or not old.startswith(_HEADER + "\n"):
        raise OmnidubError(
            f"{path} is not omnidub's (omnidub never replaces a file it did not write); choose another --out"
        )
    return old


def place_script(corpus: Corpus, out_dir: Path) -> Path:
    """Write the corpus's script into the eval's folder (``sentences.txt``), or keep the one there when it says
    the same; a file of that name that omnidub did not write is never replaced."""
    path = Path(out_dir) / SCRIPT_NAME
    text = script_text(corpus)
    if existing_script(out_dir) == text:
        return path
    write_text_atomic(path, text)
    # Read back as the render will read it: each sentence must come back as it was.
    again = read_script(path, speakers=corpus.cast).lines
    for line, read in zip(corpus.lines, again + (None,) * (len(corpus.lines) - len(again))):
        if read is None or (read.speaker, read.text) != (line.speaker, line.text):
            raise OmnidubError(
                f"{corpus.path}: {line.where}: the sentence cannot be written as a script line that "
                f"reads back the same (speaker {line.speaker!r}, text {line.text!r})"
            )
    return path
