"""The offline engine: Mozilla's Firefox Translations models (MPL-2.0, 20-40 MB a direction) run by fxtranslate,
a compiled engine for them. A model is fetched on first use into omnidub's cache, or read from a local folder;
a pair without a direct model goes through English.

The engine decodes greedily and gives one translation, so the alternatives are made honestly another way, each
labelled with how: the line whole, its sentences one by one, the source with the glossary's terms placed in it,
and (English sources) the source without a leading filler word ("Well," "Oh,") that a dub can drop.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path

from omnidub.errors import OmnidubError
from omnidub.translate.base import Candidate, Pair, Progress, Request

PIVOT = "en"
# Fillers a subtitler drops first when a line runs long; only English sources, whose fillers are known: one that
# leads the line ("Well, ..."), one set off by commas inside it ("..., you know, ..."), and a word or two said twice
# ("I, I think", "No, no, no").
_FILLER = re.compile(
    r"^(?:well|oh|so|now|okay|ok|yeah|um|uh|er|look|listen|hey|right|you know|i mean)\s*[,.!…]+\s+(?=\w)",
    re.IGNORECASE,
)
_INNER_FILLER = re.compile(r",\s*(?:you know|i mean|like|um|uh|er|kind of|sort of)\s*,", re.IGNORECASE)
_REPEATED = re.compile(r"\b(\w+(?:\s+\w+)?)(?:\s*[,.…-]*\s+\1\b)+", re.IGNORECASE)
_MODEL_FILE = re.compile(r"^model\.([a-z]{2,3})([a-z]{2,3})\..*bin$")


class FirefoxEngine:
    """Firefox Translations through fxtranslate, from omnidub's cache (fetched on first use) or local folders."""

    name = "firefox"
    uses_context = False
    batch = 16

    def __init__(
        self,
        pair: Pair,
        folders: tuple[Path, ...] = (),
        status: Callable[[str], None] = lambda _: None,
        beside: bool = False,
    ) -> None:
        self.pair = pair
        self._legs, self.model = _load(pair, tuple(Path(f) for f in folders), status, beside)

    def settings(self) -> dict:
        return {"alternatives": ["whole line", "sentence by sentence", "glossary placed", "without fillers, repeats"]}

    def candidates(
        self, requests: list[Request], pair: Pair, glossary, progress: Progress | None = None
    ) -> dict[int, list[Candidate]]:
        found = {}
        for request in requests:
            found[request.index] = self._line(request.text, glossary)
        return found

    def shorten(self, requests, pair, glossary):
        return None  # nothing to ask: every alternative it has is already among the candidates

    def _line(self, text: str, glossary) -> list[Candidate]:
        made: dict[str, str] = {}

        def add(translation: str, how: str) -> None:
            translation = translation.strip()
            if translation and translation not in made:
                made[translation] = how

        add(self._translate(text, whole=True), "whole line")
        add(self._translate(text, whole=False), "sentence by sentence")
        placed = glossary.placed(text)
        if placed != text:
            add(self._translate(placed, whole=True), "glossary terms placed in the source")
        if self.pair.source == "en":
            shorter, dropped = without_fillers(text)
            if dropped:
                add(self._translate(shorter, whole=True), f"source without {', '.join(map(repr, dropped))}")
        return [Candidate(t, how) for t, how in made.items()]

    def translate(self, texts: list[str]) -> list[str]:
        """Each text translated whole (the meaning check's back-translation)."""
        return [self._translate(text, whole=True) for text in texts]

    def _translate(self, text: str, whole: bool) -> str:
        for leg in self._legs:
            text = leg.translate(text) if whole else leg.translate_long(text)
        return text


def without_fillers(text: str) -> tuple[str, list[str]]:
    """An English line without its fillers and repetitions ("Well, I, I think..." -> "I think..."), and what was
    dropped (nothing: the line as it is)."""
    dropped, shorter = [], text
    while True:
        lead = _FILLER.match(shorter)
        if not lead:
            break
        dropped.append(lead.group(0).strip())
        shorter = shorter[lead.end() :]
    while inner := _INNER_FILLER.search(shorter):  # fillers in a row share their commas: one at a time
        dropped.append(inner.group(0).strip(" ,"))
        shorter = shorter[: inner.start()] + "," + shorter[inner.end() :]
    for repeated in _REPEATED.finditer(shorter):
        dropped.append(repeated.group(0)[len(repeated.group(1)) :].strip(" ,"))
    shorter = _REPEATED.sub(lambda m: m.group(1), shorter)
    shorter = " ".join(shorter.split())
    if not dropped or not re.search(r"\w", shorter):
        return text, []
    return shorter[:1].upper() + shorter[1:], dropped


def _load(pair: Pair, folders: tuple[Path, ...], status, beside: bool = False) -> tuple[list, str]:
    """The engines for each leg of ``pair`` (one, or two through English) and the models' identity; ``beside``:
    a model folder lying beside one of ``folders`` will do (the meaning check's way back)."""
    try:
        import fxtranslate
    except ImportError:
        raise OmnidubError(
            "the offline engine needs fxtranslate: pip install fxtranslate (or choose --engine llm)"
        ) from None
    if pair.source == pair.target:
        raise OmnidubError(f"--from and --to are both {pair.source}: nothing to translate")
    if folders:
        return _from_folders(fxtranslate, pair, folders, beside)
    from omnidub.files import cache_home

    cache = cache_home() / "translate" / "firefox"
    direct, pivot = f"{pair.source}-{pair.target}", [f"{pair.source}-{PIVOT}", f"{PIVOT}-{pair.target}"]
    try:
        cached = {entry["name"] for entry in fxtranslate.Cache(str(cache)).list_cached()}
    except (ValueError, OSError):
        cached = set()
    if direct not in cached and not set(pivot) <= cached:
        status(
            f"fetching the Firefox Translations model {pair.source}->{pair.target} (20-40 MB a direction, once; "
            f"kept in {cache})"
        )
        try:
            fxtranslate.discovery.add_models(pair.source, pair.target, str(cache), True)
            cached = {entry["name"] for entry in fxtranslate.Cache(str(cache)).list_cached()}
        except ValueError as exc:
            raise OmnidubError(_fetch_error(pair, str(exc))) from None
    names = [direct] if direct in cached else pivot
    try:
        engine = fxtranslate.Translator.load(pair.source, pair.target, str(cache))
        files = [(name, fxtranslate.Cache(str(cache)).pair_files(name)) for name in names]
    except ValueError as exc:
        raise OmnidubError(_fetch_error(pair, str(exc))) from None
    identity = " ".join(f"{name}:" + ",".join(f"{file}:{size}" for file, size, _ in listed) for name, listed in files)
    # Translator.load goes through English itself where there is no direct model.
    return [engine], "firefox " + identity


def _fetch_error(pair: Pair, text: str) -> str:
    where = f"{pair.source}->{pair.target}"
    if "unreachable" in text or "dns" in text.lower() or "connect" in text.lower():
        return (
            f"no Firefox Translations model for {where} in omnidub's cache, and the model server cannot be reached "
            "(offline?): connect once to fetch it, or pass a model folder with --mt-model DIR"
        )
    if "pivot" in text or "no direct" in text.lower() or "neither" in text.lower():
        return f"Firefox Translations has no model for {where}, direct or through English (--engine llm may have)"
    return f"the Firefox Translations model for {where} could not be fetched: {text.splitlines()[0][:200]}"


def _from_folders(fxtranslate, pair: Pair, folders: tuple[Path, ...], beside: bool = False) -> tuple[list, str]:
    """Engines from local folders (each a Firefox Translations model: model*.bin, vocab*.spm, lex*.bin): the folder
    whose model's file name says it translates --from into --to, else two through English. Folders of other
    directions are passed over (the meaning check reads its way back from them); a single folder whose file names
    do not say its languages is taken for the pair asked."""
    named: dict[tuple[str, str], Path] = {}
    for folder in folders:
        model, _, _ = _files(folder)
        found = _MODEL_FILE.match(model.name)
        if found:
            named.setdefault((found[1], found[2]), folder)
        elif len(folders) == 1:
            return _engines(fxtranslate, folders)
        else:
            raise OmnidubError(f"--mt-model {folder}: its model's file name does not say its languages")
    chain = _chain(pair, named)
    if chain is None and beside:
        # Model folders usually sit side by side (enpt-*, pten-*): the way back is looked for beside those given.
        for folder in folders:
            for sibling in sorted(p for p in folder.resolve().parent.iterdir() if p.is_dir()):
                found = _MODEL_FILE.match(next(iter(sorted(sibling.glob("model*.bin"))), Path("-")).name)
                if found and (found[1], found[2]) not in named and list(sibling.glob("*.spm")):
                    named[found[1], found[2]] = sibling
        chain = _chain(pair, named)
    if chain is None:
        (a, b), folder = next(iter(named.items()))
        if not any(a == pair.source for a, _ in named):
            raise OmnidubError(f"--mt-model {folder}: a {a}->{b} model, where {pair.source}->... is needed")
        given = ", ".join(f"{a}->{b}" for a, b in named)
        raise OmnidubError(f"--mt-model: the folders translate {given}, none of it {pair.source}->{pair.target}")
    return _engines(fxtranslate, tuple(chain))


def _chain(pair: Pair, named: dict[tuple[str, str], Path]) -> list[Path] | None:
    """The folders that translate ``pair``: one direct, else two through English, else None."""
    if (pair.source, pair.target) in named:
        return [named[pair.source, pair.target]]
    if (pair.source, PIVOT) in named and (PIVOT, pair.target) in named:
        return [named[pair.source, PIVOT], named[PIVOT, pair.target]]
    return None


def _engines(fxtranslate, chain: tuple[Path, ...]) -> tuple[list, str]:
    engines, identity = [], []
    for folder in chain:
        model, vocabs, lexes = _files(folder)
        # Most pairs share one vocabulary; CJK pairs have a source and a target one (srcvocab*, trgvocab*).
        source_vocab = next((v for v in vocabs if v.name.startswith("srcvocab")), vocabs[0])
        trg_vocab = next((v for v in vocabs if v.name.startswith("trgvocab")), source_vocab)
        data = model.read_bytes()
        try:
            engines.append(
                fxtranslate.Translator(
                    data,
                    source_vocab.read_bytes(),
                    trg_vocab.read_bytes(),
                    lexes[0].read_bytes() if lexes else None,
                )
            )
        except ValueError as exc:
            raise OmnidubError(f"--mt-model {folder}: not a Firefox Translations model ({exc})") from None
        identity.append(hashlib.sha256(data).hexdigest()[:16])
    return engines, "firefox " + " ".join(identity)


def _files(folder: Path) -> tuple[Path, list[Path], list[Path]]:
    if not folder.is_dir():
        raise OmnidubError(f"--mt-model {folder}: no such folder")
    models = sorted(p for p in folder.glob("model*.bin"))
    vocabs = sorted(folder.glob("*.spm"))
    if not models or not vocabs:
        raise OmnidubError(
            f"--mt-model {folder}: not a Firefox Translations model folder (it needs model*.bin and vocab*.spm)"
        )
    return models[0], vocabs, sorted(folder.glob("lex*.bin"))
