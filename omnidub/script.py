"""Input files (SRT, WebVTT, plain scripts) parsed into timed, speaker-labelled lines.

Label and cleanup rules, in the order they apply to each cue:

- Markup is removed: HTML-style tags (<i>, <b>, <u>, <font ...>), ASS overrides ({\\an8}), VTT timestamps;
  entities (&amp;) are decoded and a leading dialogue dash ("- ") is dropped. A cue whose rows after the first open
  with a dash ("- Ready?\n- Yes.") holds several speakers' lines: each dashed row is a line of its own (an unlabelled
  one is not the row before's speaker), the cue's time shared by estimated length, and a note says so.
- A speaker label is `<v NAME>` (WebVTT), `NAME: text` or `[NAME] text`, only at the start of a cue line.
  `NAME:` is at most 3 words and 32 characters with no sentence punctuation (a title like "Dr." is fine), and
  in subtitles every word starts with a capital letter (so "so: what now" and "Well, note this: ..." stay
  text; plain scripts accept lower-case names). `[NAME]` is one or two
  capitalised or ALL-CAPS words that are neither an OmniVoice non-verbal tag nor a common sound word
  ([APPLAUSE], [Music], [LAUGHS] ...). A cue whose lines carry different labels is split into one line per
  speaker, its time shared by estimated length; an unlabelled line continues the previous speaker.
- The cast comes first: a `[NAME]` or `NAME:` that names a speaker of the cast (``speakers``, compared without
  case) is that speaker's label whatever its spelling ([JEAN_LUC], [dr who]); a note says so where the rules
  above alone would have read it as a sound description or as text.
- Sound descriptions ([door slams], (laughs)) and lyric lines (any line with a music note) are removed; OmniVoice's
  own non-verbal tags ([laughter], [sigh], [question-en] ...) are kept, lower-cased.
- A cue left with nothing speakable (no letters or digits beyond non-verbal tags) is skipped and reported.
"""

from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from omnidub.duration import natural_seconds
from omnidub.errors import OmnidubError
from omnidub.inputs import (
    SUFFIXES,
    Cue,
    Inputs,
    clock,
    find_inputs,
    parse_cues,
    preview,
    read_input_text,
)
from omnidub.lightweight import omnivoice_module
from omnidub.records import same_slot as slot_of_both

__all__ = [
    "DEFAULT_SPEAKER",
    "SUFFIXES",
    "Inputs",
    "Line",
    "Script",
    "check_language",
    "edited_text",
    "estimate_natural_seconds",
    "find_inputs",
    "line_ranges",
    "read_script",
]

DEFAULT_SPEAKER = "default"

NONVERBAL_TAGS = (
    "laughter",
    "sigh",
    "confirmation-en",
    "question-en",
    "question-ah",
    "question-oh",
    "question-ei",
    "question-yi",
    "surprise-ah",
    "surprise-oh",
    "surprise-wa",
    "surprise-yo",
    "dissatisfaction-hnn",
)

# Words that open SDH sound descriptions; "[APPLAUSE] Thank you" is a sound, not a speaker called APPLAUSE.
SOUND_WORDS = frozenset(
    """applause beep beeping bell bells breathing buzzing cheering cheers chuckles chuckling clapping coughs
    coughing crash crowd crying door engine explosion footsteps gasps gasping groans grunts gunshot gunshots
    inaudible indistinct knocking laughing laughs music noise phone ringing screaming screams shouting sighs
    silence singing sirens sniffles sobbing static thunder whispering whispers wind""".split()
)

# A line longer than this is a mistake (a pasted document, a missing blank line): it would plan minutes of audio.
MAX_LINE_CHARACTERS = 2000
# A cue this long is probably a typo'd timestamp; every stem runs to the end of the last cue.
LONG_CUE_SECONDS = 600.0


@dataclass(frozen=True)
class Line:
    index: int
    speaker: str
    text: str
    start: float
    end: float
    language: str | None
    where: str = ""  # the cue or script line it came from ("cue 3", "line 12"), for messages


@dataclass(frozen=True)
class Script:
    lines: tuple[Line, ...]
    skipped: tuple[str, ...]
    warnings: tuple[str, ...]
    timed: bool


_NONVERBAL_RE = re.compile(r"\[(" + "|".join(re.escape(t) for t in NONVERBAL_TAGS) + r")\]", re.IGNORECASE)
_ASS_RE = re.compile(r"\{\\[^}]*\}")
_VOICE_RE = re.compile(r"^\s*<v(?:\.[^\s>]*)?\s+([^>]+)>", re.IGNORECASE)
_TAG_RE = re.compile(r"</?[A-Za-z][^<>]*>|</?\d[\d:.]*>|</>")
_DASH_RE = re.compile(r"^\s*[-\u2010-\u2015]\s+")
# A name may open with a symbol ("🎬 Ånna:"); _label_like then asks for a letter in it.
_COLON_LABEL_RE = re.compile(r"^\s*([^\s\d_:][^:]{0,31}?)\s*:(?:\s+|$)(.*)$", re.DOTALL)
_BRACKET_LABEL_RE = re.compile(r"^\s*\[([^\[\]]{1,32})\]\s*(.*)$", re.DOTALL)
_MUSIC_RE = re.compile("[\u266a\u266b\u266c\u2669]")
_SOUND_RE = re.compile(r"\[[^\[\]]*\]|\([^()]*\)")
_TITLE_RE = re.compile(r"^(?:Mr|Mrs|Ms|Mx|Dr|Prof|St|Sr|Jr|MR|MRS|MS|DR|PROF)\.\s*")
_SPEAKABLE_RE = re.compile(r"[^\W_]")
# An opening voice tag that never closes: "<v ALICE Hello" would be read aloud.
_OPEN_VOICE_RE = re.compile(r"^\s*<v(?:[\s.][^>]*)?$", re.IGNORECASE)
# Terminal escapes (CSI, OSC and two-character ones) and any other control character but line breaks and tabs.
_CONTROL_RE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)


def read_script(path, *, language: str | None = None, gap: float = 0.4, speakers=frozenset()) -> Script:
    """Parse an .srt, .vtt or .txt script into lines; OmnidubError names the file and cue/line on bad input.

    ``speakers`` are the cast's names: a bracketed or colon label naming one of them is always a label."""
    path = Path(path)
    text = read_input_text(path)
    if language is not None:
        check_language(language, "--language")
    notes: list[str] = []  # text outside any cue, found by the parsers
    cues = parse_cues(path, text, notes)
    label_case = path.suffix.lower() != ".txt"  # subtitles' labels are capitalised; scripts' need not be

    timed = all(c.start is not None for c in cues)
    cast = {name.casefold(): name for name in speakers}
    by_cast: dict[str, str] = {}  # labels only the cast made labels: the name -> the first cue that had one
    skipped: list[str] = []
    pieces: list[tuple[Cue, str, str, float | None, float | None]] = []
    for cue in cues:
        if cue.start is not None and cue.end < cue.start:
            raise OmnidubError(f"{path}: {cue.where}: ends at {clock(cue.end)}, before it starts at {clock(cue.start)}")
        _check_voice_tags(path, cue)
        if cue.start is not None and cue.end - cue.start > LONG_CUE_SECONDS:
            notes.append(
                f"{cue.where} lasts {clock(cue.end - cue.start)} (a timestamp typo?); the programme runs to its end"
            )
        parts, reason = _speech_parts(
            cue.body, capitalised_labels=label_case, cast=cast, by_cast=by_cast, where=cue.where
        )
        if not parts:
            skipped.append(f"{cue.where}: {reason} ({preview(cue.body)})")
            continue
        if cue.start is not None and cue.end == cue.start:
            skipped.append(f"{cue.where}: zero length ({preview(cue.body)})")
            continue
        for _, words in parts:
            if len(words) > MAX_LINE_CHARACTERS:
                raise OmnidubError(
                    f"{path}: {cue.where}: {len(words):,} characters of text; a line may hold at most "
                    f"{MAX_LINE_CHARACTERS:,} (split it into shorter lines)"
                )
        if len(parts) > 1 and dialogue_dashes(cue.body) and any(s == DEFAULT_SPEAKER for s, _ in parts):
            # Labelled rows say who speaks; unlabelled ones are new lines the reader should know were made.
            notes.append(
                f"{cue.where}: dialogue dashes: {len(parts)} speakers' lines, read as {len(parts)} lines, the cue's "
                "time shared by how long each takes to say"
            )
        for (speaker, words), (start, end) in zip(parts, _share_time(cue, [w for _, w in parts])):
            pieces.append((cue, speaker, words, start, end))
    if not pieces:
        detail = f"; skipped: {'; '.join(skipped[:3])}" if skipped else ""
        raise OmnidubError(f"{path}: no speakable lines{detail}")

    pieces, merged = _one_spelling(pieces, cast)
    notes += merged
    lines: list[Line] = []
    at = 0.0
    for index, (cue, speaker, words, start, end) in enumerate(pieces, 1):
        if not timed:
            start, end = at, at + estimate_natural_seconds(words)
            at = end + gap
        lines.append(Line(index, speaker, words, round(start, 3), round(end, 3), language, cue.where))
    notes += [
        f"{where}: {label} is read as the speaker {name!r}, a name in the cast (without the cast it would be "
        f"{'a sound description' if label.startswith('[') else 'text'})"
        for name, (where, label) in by_cast.items()
    ]
    warnings = _overlaps(lines, [id(cue) for cue, *_ in pieces]) if timed else []
    return Script(tuple(lines), tuple(skipped), tuple(notes + warnings), timed)


def _one_spelling(pieces: list, cast: dict[str, str]) -> tuple[list, list[str]]:
    """Speaker labels that differ only in case ("Anna:", "ANNA:") name one speaker: the cast's spelling, else the
    first one the file uses. Returns the pieces relabelled and a note per speaker spelled more than one way."""
    spelling: dict[str, str] = {}
    seen: dict[str, dict[str, str]] = {}  # folded name -> each spelling -> where it first appears
    for cue, speaker, *_ in pieces:
        folded = speaker.casefold()
        spelling.setdefault(folded, cast.get(folded, speaker))
        seen.setdefault(folded, {}).setdefault(speaker, cue.where)
    notes = [
        f"{' and '.join(f'{name!r} ({where})' for name, where in spelled.items())} differ only in case: read as "
        f"one speaker, {spelling[folded]!r} (speaker names are matched without case)"
        for folded, spelled in seen.items()
        if len(spelled) > 1
    ]
    return [(cue, spelling[speaker.casefold()], *rest) for cue, speaker, *rest in pieces], notes


def line_count(n: int) -> str:
    """A number of lines as a reader writes it: "1 line", "3 lines"."""
    return f"{n} line" if n == 1 else f"{n} lines"


# Lines a terminal report says one by one, each with its why; the rest in one line by their numbers (an episode's
# hundreds would bury the summary; the files written hold every one).
SAID_ONE_BY_ONE = 10
# Runs of line numbers a line of a terminal report names ("1-3, 7, ...") before it counts the rest ("and 40 more").
RUNS_SHOWN = 20


def line_ranges(numbers, most: int | None = None) -> str:
    """Line numbers as a reader writes them: [1, 2, 3, 7] -> "1-3, 7"; past ``most`` runs, how many lines more
    ("1-3, 7 and 40 more")."""
    spans: list[list[int]] = []
    for n in sorted(numbers):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    said = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans[:most])
    more = sum(b - a + 1 for a, b in spans[most:]) if most is not None else 0
    return said + (f" and {more} more" if more else "")


def labelled_srt(lines, label) -> str:
    """Lines as SRT with their own numbers and times, each cue's text led by ``label(line)`` (a speaker label
    as ``read_script`` reads it back, or "")."""
    from datetime import timedelta

    import srt

    cues = [
        srt.Subtitle(
            index=line.index,
            start=timedelta(milliseconds=round(line.start * 1000)),
            end=timedelta(milliseconds=round(line.end * 1000)),
            content=f"{label(line)}{line.text}",
        )
        for line in lines
    ]
    return srt.compose(cues, reindex=False)


def follow(before, now) -> dict[int, int]:
    """Where each line of an earlier version of an input is now: ``before`` and ``now`` are (number, text, start,
    end). A line is known by its slot and its text together: first every line whose slot and text are both as they
    were (a cue inserted, deleted or moved elsewhere only renumbers it, and the same words in another slot are
    another line); then a line whose words moved to another slot, where no other line left says them; then a line
    whose text changed in its own slot. A line with neither its slot nor its words is gone. Returns {earlier
    number: number now}."""
    found: dict[int, int] = {}
    left_before, left_now = list(before), list(now)

    def pair(old, new) -> None:
        found[old[0]] = new[0]
        left_before.remove(old)
        left_now.remove(new)

    def same_slot(a, b) -> bool:
        return slot_of_both((a[2], a[3]), (b[2], b[3]))

    def words(line) -> str:
        return " ".join(line[1].split())

    for old in list(left_before):  # the same words in the same slot
        new = next((n for n in left_now if same_slot(old, n) and words(n) == words(old)), None)
        if new is not None:
            pair(old, new)
    # The same words in another slot (a cue retimed, or the file shifted): paired in time order where each side
    # has as many lines saying them; where the counts differ, which one moved where cannot be told.
    said = {words(line) for line in left_before}
    for text in sorted(said):
        olds = sorted((b for b in left_before if words(b) == text), key=lambda line: line[2])
        news = sorted((n for n in left_now if words(n) == text), key=lambda line: line[2])
        if len(olds) == len(news):
            for old, new in zip(olds, news):
                pair(old, new)
    for old in list(left_before):  # another text in the same slot: the line was changed where it is
        new = next((n for n in left_now if same_slot(old, n)), None)
        if new is not None:
            pair(old, new)
    return found


def edited_text(text: str, where: str) -> str:
    """A line's text as an editor typed it, read by the rules a cue's text is read by (markup and control
    characters removed, sound descriptions and lyrics dropped, at most MAX_LINE_CHARACTERS): the clean text, or an
    OmnidubError saying why it cannot be spoken. A speaker label typed into it is not a label: the speaker stays."""
    if not isinstance(text, str):
        raise OmnidubError(f"{where}: the text must be text")
    parts, reason = _speech_parts(text.replace("\r", ""), capitalised_labels=True)
    if not parts:
        raise OmnidubError(f"{where}: {reason}, so there is nothing to say ({preview(text)})")
    clean = " ".join(words for _, words in parts)
    if len(clean) > MAX_LINE_CHARACTERS:
        raise OmnidubError(
            f"{where}: {len(clean):,} characters of text; a line may hold at most "
            f"{MAX_LINE_CHARACTERS:,} (split it into shorter lines)"
        )
    return clean


def estimate_natural_seconds(text: str) -> float:
    """Seconds OmniVoice would take to say `text` with no reference (upstream's rule-based fallback)."""
    return natural_seconds(text)


def _check_voice_tags(path: Path, cue: Cue) -> None:
    for k, row in enumerate(cue.body.split("\n")):
        if ">" not in row and _OPEN_VOICE_RE.match(row):
            where = f"line {cue.line + k}" if cue.line else cue.where
            raise OmnidubError(
                f"{path}: {where}: voice tag without its closing '>': {preview(row)}; write <v NAME>text"
            )


def check_language(language: str, where: str) -> str:
    """A language as OmniVoice knows it (an id such as ``en`` or an English name such as ``German``); anything
    else is an error offering the close matches."""
    lang_map = omnivoice_module("lang_map")
    if language in lang_map.LANG_IDS or language.lower() in lang_map.LANG_NAME_TO_ID or language.lower() == "none":
        return language
    import difflib

    typed = language.lower()
    base = re.split(r"[-_]", typed)[0]  # en-US: OmniVoice takes the language, not the region
    names = lang_map.LANG_NAME_TO_ID
    # Names only: among 2-3 letter ids everything is close to everything. A name the input begins ("sp") counts.
    begun = sorted(name for name in names if len(typed) >= 2 and name.startswith(typed))[:3]
    close = ([base] if base in lang_map.LANG_IDS else []) + [
        f"{name} ({names[name]})" for name in begun + difflib.get_close_matches(typed, list(names), n=3, cutoff=0.6)
    ]
    hint = f"; close matches: {', '.join(dict.fromkeys(close))}" if close else ""
    raise OmnidubError(
        f"{where}: unknown language {language!r}{hint} (OmniVoice takes a language id like en or an English name "
        "like German)"
    )


def _speech_parts(
    body: str,
    *,
    capitalised_labels: bool,
    cast: dict[str, str] | None = None,
    by_cast: dict[str, tuple[str, str]] | None = None,
    where: str = "",
) -> tuple[list[tuple[str, str]], str]:
    """Split a cue into (speaker, clean text) parts, or return no parts and why it was skipped. ``cast`` maps
    folded names to the cast's own; ``by_cast`` collects labels that only the cast made labels."""
    parts: list[list] = []  # [speaker, [texts], opened by a dialogue dash]
    body = _CONTROL_RE.sub("", body.replace("\t", " "))  # never spoken, never printed
    dialogue = dialogue_dashes(body)
    for raw in _ASS_RE.sub("", body).split("\n"):
        if _MUSIC_RE.search(raw):
            continue  # SDH marks sung lyrics with music notes; they are not dubbed as speech
        speaker = None
        voice = _VOICE_RE.match(raw)
        if voice:
            speaker, raw = voice.group(1).strip(), raw[voice.end() :]
        plain = html.unescape(_TAG_RE.sub("", raw))
        dash = dialogue and bool(_DASH_RE.match(plain))
        row = _DASH_RE.sub("", plain)
        if speaker is None:
            speaker, row = _cast_label(
                row, cast or {}, by_cast if by_cast is not None else {}, where, capitalised_labels
            )
        if speaker is None:
            speaker, row = _split_label(row, capitalised_labels)
        row = _clean(row)
        if dash or (speaker is not None and (not parts or parts[-1][0] != speaker)):
            parts.append([speaker, [], dash])
        elif not parts:
            parts.append([None, [], dialogue])
        if row:
            parts[-1][1].append(row)
    result = []
    for speaker, texts, dash in parts:
        text = " ".join(texts)
        if _SPEAKABLE_RE.search(_NONVERBAL_RE.sub("", text)):
            # An unlabelled row after a dialogue dash is another voice than the row before: who, the source says.
            carried = DEFAULT_SPEAKER if dash or not result else result[-1][0]
            result.append((speaker or carried, text))
    if result:
        return result, ""
    if _NONVERBAL_RE.search(body):
        return [], "only a non-verbal tag"
    if _MUSIC_RE.search(body):
        return [], "music only"
    if _SOUND_RE.search(body):
        return [], "sound description only"
    return [], "nothing speakable"


def dialogue_dashes(body: str) -> bool:
    """Whether a cue holds two or more speakers' lines marked by dialogue dashes ("- Ready?\\n- Yes.", or a dash on
    the second row only): a row after the first opens with a dash."""
    rows = [html.unescape(_TAG_RE.sub("", _ASS_RE.sub("", row))) for row in body.split("\n") if row.strip()]
    return any(_DASH_RE.match(row) for row in rows[1:])


def _cast_label(row: str, cast: dict[str, str], by_cast: dict, where: str, capitalised: bool) -> tuple[str | None, str]:
    """A ``[NAME]`` or ``NAME:`` label naming a speaker of the cast: (the label as spelled, the rest of the row)."""
    if not cast:
        return None, row
    for pattern in (_BRACKET_LABEL_RE, _COLON_LABEL_RE):
        match = pattern.match(row)
        if match and match.group(2).strip() and match.group(1).strip().casefold() in cast:
            name = cast[match.group(1).strip().casefold()]
            # Said once per name, and only where the plain rules would have read it otherwise.
            if name not in by_cast and _split_label(row, capitalised)[0] is None:
                label = (
                    f"[{match.group(1).strip()}]" if pattern is _BRACKET_LABEL_RE else f"'{match.group(1).strip()}:'"
                )
                by_cast[name] = (where, label)
            return match.group(1).strip(), match.group(2)  # as spelled: _one_spelling gives it the cast's spelling
    return None, row


def _label_like(name: str) -> bool:
    """A name opens with a letter or a pictographic symbol (an emoji), and holds a letter."""
    return (name[0].isalpha() or unicodedata.category(name[0]) == "So") and any(c.isalpha() for c in name)


def _name_word(word: str) -> bool:
    """A word of a bracketed name: capitalised (in any script: "Ånna", "JEAN_LUC" aside) or all capitals and
    digits, or a pictographic symbol ("🎬")."""
    marks = "'.-"
    if all(unicodedata.category(c) in ("So", "Mn", "Cf") for c in word):  # an emoji, its selectors and joiners
        return unicodedata.category(word[0]) == "So"
    if word[0].isupper() and all(c.isalpha() or c in marks for c in word):
        return True
    return all(c.isupper() or c.isdigit() or c in marks for c in word) and any(not c.isdigit() for c in word)


def _split_label(row: str, capitalised: bool) -> tuple[str | None, str]:
    bracket = _BRACKET_LABEL_RE.match(row)
    if bracket and bracket.group(2).strip():
        name = bracket.group(1).strip()
        words = name.split()
        if (
            1 <= len(words) <= 2
            and all(_name_word(w) for w in words)
            and any(c.isalpha() for c in name)
            and words[0].lower() not in SOUND_WORDS
            and name.lower() not in NONVERBAL_TAGS
        ):
            return name, bracket.group(2)
        return None, row
    colon = _COLON_LABEL_RE.match(row)
    if colon:
        name = colon.group(1).strip()
        words = _TITLE_RE.sub("", name).split()
        if (
            _label_like(name)
            and len(name.split()) <= 3
            and not re.search(r"[.,!?;()\[\]\"]", _TITLE_RE.sub("", name))
            and (not capitalised or all(w[0].isupper() or w[0].lower() == w[0].upper() for w in words))
        ):
            return name, colon.group(2)
    return None, row


def _clean(text: str) -> str:
    tags: list[str] = []

    def keep(match: re.Match) -> str:
        tags.append(f"[{match.group(1).lower()}]")
        return f"\x00{len(tags) - 1}\x00"

    text = _NONVERBAL_RE.sub(keep, text)
    text = _SOUND_RE.sub(" ", text)
    text = re.sub("\x00(\\d+)\x00", lambda m: tags[int(m.group(1))], text)
    text = re.sub(r"\s+", " ", text).strip()
    # Removing "(laughs)" can leave " ," or a leading comma behind.
    text = re.sub(r"\s+([,.!?;:])", r"\1", text)
    return text.lstrip(",;: ").strip()


def _share_time(cue: Cue, texts: list[str]) -> list[tuple[float | None, float | None]]:
    if cue.start is None or len(texts) == 1:
        return [(cue.start, cue.end)] * len(texts)
    weights = [estimate_natural_seconds(t) for t in texts]
    total, span, at = sum(weights), cue.end - cue.start, cue.start
    shares = []
    for w in weights:
        shares.append((at, at + span * w / total))
        at += span * w / total
    return shares


def _overlaps(lines: list[Line], cues: list[int]) -> list[str]:
    """A note for every pair of lines from different cues that play at once (``cues``: each line's cue)."""
    warnings = []
    cue_of = {line.index: cue for line, cue in zip(lines, cues)}
    where = {line.index: line.where for line in lines}
    active: list[Line] = []
    for line in sorted(lines, key=lambda item: (item.start, item.index)):
        active = [a for a in active if a.end > line.start]
        for other in active:
            amount = min(other.end, line.end) - line.start
            if cue_of[other.index] == cue_of[line.index]:
                continue  # parts of one split cue touch by construction
            if other.speaker == line.speaker:
                warnings.append(
                    f"{where[line.index]} overlaps {where[other.index]} by {amount:.2f} s, both spoken by "
                    f"{line.speaker}: "
                    "the two lines will play on top of each other"
                )
            else:
                warnings.append(
                    f"{where[line.index]} ({line.speaker}) overlaps {where[other.index]} ({other.speaker}) by "
                    f"{amount:.2f} s; "
                    "different speakers may overlap"
                )
        active.append(line)
    return warnings
