"""Input files (SRT, WebVTT, plain scripts) parsed into timed, speaker-labelled lines.

Label and cleanup rules, in the order they apply to each cue:

- Markup is removed: HTML-style tags (<i>, <b>, <u>, <font ...>), ASS overrides ({\\an8}), VTT timestamps;
  entities (&amp;) are decoded and a leading dialogue dash ("- ") is dropped.
- A speaker label is `<v NAME>` (WebVTT), `NAME: text` or `[NAME] text`, only at the start of a cue line.
  `NAME:` is at most 3 words and 32 characters with no sentence punctuation (a title like "Dr." is fine), and
  in subtitles every word starts with a capital letter (so "so: what now" and "Well, note this: ..." stay
  text; plain scripts accept lower-case names). `[NAME]` is one or two
  capitalised or ALL-CAPS words that are neither an OmniVoice non-verbal tag nor a common sound word
  ([APPLAUSE], [Music], [LAUGHS] ...). A cue whose lines carry different labels is split into one line per
  speaker, its time shared by estimated length; an unlabelled line continues the previous speaker.
- Sound descriptions ([door slams], (laughs)) and lyric lines (any line with a music note) are removed; OmniVoice's
  own non-verbal tags ([laughter], [sigh], [question-en] ...) are kept, lower-cased.
- A cue left with nothing speakable (no letters or digits beyond non-verbal tags) is skipped and reported.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path

from omnidub.duration import natural_seconds
from omnidub.errors import OmnidubError
from omnidub.lightweight import omnivoice_module

DEFAULT_SPEAKER = "default"

NONVERBAL_TAGS = (
    "laughter", "sigh", "confirmation-en", "question-en", "question-ah", "question-oh", "question-ei",
    "question-yi", "surprise-ah", "surprise-oh", "surprise-wa", "surprise-yo", "dissatisfaction-hnn",
)

# Words that open SDH sound descriptions; "[APPLAUSE] Thank you" is a sound, not a speaker called APPLAUSE.
SOUND_WORDS = frozenset(
    """applause beep beeping bell bells breathing buzzing cheering cheers chuckles chuckling clapping coughs
    coughing crash crowd crying door engine explosion footsteps gasps gasping groans grunts gunshot gunshots
    inaudible indistinct knocking laughing laughs music noise phone ringing screaming screams shouting sighs
    silence singing sirens sniffles sobbing static thunder whispering whispers wind""".split()
)

SUFFIXES = (".srt", ".vtt", ".txt")
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


@dataclass(frozen=True)
class Script:
    lines: tuple[Line, ...]
    skipped: tuple[str, ...]
    warnings: tuple[str, ...]
    timed: bool


@dataclass(frozen=True)
class _Cue:
    where: str  # "cue 3" or "line 12", for messages
    start: float | None
    end: float | None
    body: str  # raw payload, lines joined by "\n"
    line: int = 0  # line number of the payload's first row in the file (0: unknown)


_NONVERBAL_RE = re.compile(r"\[(" + "|".join(re.escape(t) for t in NONVERBAL_TAGS) + r")\]", re.IGNORECASE)
_ASS_RE = re.compile(r"\{\\[^}]*\}")
_VOICE_RE = re.compile(r"^\s*<v(?:\.[^\s>]*)?\s+([^>]+)>", re.IGNORECASE)
_TAG_RE = re.compile(r"</?[A-Za-z][^<>]*>|</?\d[\d:.]*>|</>")
_DASH_RE = re.compile(r"^\s*[-\u2010-\u2015]\s+")
_COLON_LABEL_RE = re.compile(r"^\s*([^\W\d_][^:]{0,31}?)\s*:(?:\s+|$)(.*)$", re.DOTALL)
_BRACKET_LABEL_RE = re.compile(r"^\s*\[([^\[\]]{1,32})\]\s*(.*)$", re.DOTALL)
_NAME_WORD_RE = re.compile(r"^(?:[A-Z][A-Za-z'.\-]*|[A-Z0-9'.\-]+)$")
_MUSIC_RE = re.compile("[\u266a\u266b\u266c\u2669]")
_SOUND_RE = re.compile(r"\[[^\[\]]*\]|\([^()]*\)")
_TITLE_RE = re.compile(r"^(?:Mr|Mrs|Ms|Mx|Dr|Prof|St|Sr|Jr|MR|MRS|MS|DR|PROF)\.\s*")
_SPEAKABLE_RE = re.compile(r"[^\W_]")
_TIME = r"(?:(\d+):)?(\d{1,2}):(\d{1,2})(?:[.,](\d{1,3}))?"
_TIMING_RE = re.compile(rf"^\s*{_TIME}\s*-->\s*{_TIME}(?:\s+.*)?$")
_LOOSE_TIMING_RE = re.compile(r"^\s*\d+:\d+")  # a row that was meant as a timing, however malformed
# An opening voice tag that never closes: "<v ALICE Hello" would be read aloud.
_OPEN_VOICE_RE = re.compile(r"^\s*<v(?:[\s.][^>]*)?$", re.IGNORECASE)
# Terminal escapes (CSI, OSC and two-character ones) and any other control character but line breaks and tabs.
_CONTROL_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?|[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SCRIPT_TIMING_RE = re.compile(rf"^\s*\[\s*{_TIME}\s*-->\s*{_TIME}\s*\]\s*(.*)$")


def read_script(path, *, language: str | None = None, gap: float = 0.4) -> Script:
    """Parse an .srt, .vtt or .txt script into lines; OmnidubError names the file and cue/line on bad input."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise OmnidubError(f"{path}: unknown input type {path.suffix or '(no extension)'!r}; use .srt, .vtt or a .txt script")
    text = _read_text(path)
    if not text.strip():
        raise OmnidubError(f"{path}: the file is empty")
    if language is not None:
        check_language(language, "--language")
    notes: list[str] = []  # text outside any cue, found by the parsers
    if suffix == ".srt":
        cues, label_case = _parse_srt(path, text, notes), True
    elif suffix == ".vtt":
        cues, label_case = _parse_vtt(path, text, notes), True
    else:
        cues, label_case = _parse_txt(path, text), False

    timed = all(c.start is not None for c in cues)
    skipped: list[str] = []
    pieces: list[tuple[_Cue, str, str, float | None, float | None]] = []
    for cue in cues:
        if cue.start is not None and cue.end < cue.start:
            raise OmnidubError(f"{path}: {cue.where}: ends at {_clock(cue.end)}, before it starts at {_clock(cue.start)}")
        _check_voice_tags(path, cue)
        if cue.start is not None and cue.end - cue.start > LONG_CUE_SECONDS:
            notes.append(f"{cue.where} lasts {_clock(cue.end - cue.start)} (a timestamp typo?); the programme runs to its end")
        parts, reason = _speech_parts(cue.body, capitalised_labels=label_case)
        if not parts:
            skipped.append(f"{cue.where}: {reason} ({_preview(cue.body)})")
            continue
        if cue.start is not None and cue.end == cue.start:
            skipped.append(f"{cue.where}: zero length ({_preview(cue.body)})")
            continue
        for speaker, words in parts:
            if len(words) > MAX_LINE_CHARACTERS:
                raise OmnidubError(
                    f"{path}: {cue.where}: {len(words):,} characters of text; a line may hold at most "
                    f"{MAX_LINE_CHARACTERS:,} (split it into shorter lines)"
                )
        for (speaker, words), (start, end) in zip(parts, _share_time(cue, [w for _, w in parts])):
            pieces.append((cue, speaker, words, start, end))
    if not pieces:
        detail = f"; skipped: {'; '.join(skipped[:3])}" if skipped else ""
        raise OmnidubError(f"{path}: no speakable lines{detail}")

    lines: list[Line] = []
    clock = 0.0
    for index, (_cue, speaker, words, start, end) in enumerate(pieces, 1):
        if not timed:
            start, end = clock, clock + estimate_natural_seconds(words)
            clock = end + gap
        lines.append(Line(index, speaker, words, round(start, 3), round(end, 3), language))
    warnings = _overlaps(lines, {line.index: cue.where for line, (cue, *_) in zip(lines, pieces)}) if timed else []
    return Script(tuple(lines), tuple(skipped), tuple(notes + warnings), timed)


def estimate_natural_seconds(text: str) -> float:
    """Seconds OmniVoice would take to say `text` with no reference (upstream's rule-based fallback)."""
    return natural_seconds(text)


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise OmnidubError(f"{path}: no such file") from None
    except OSError as exc:
        raise OmnidubError(f"{path}: cannot read ({exc.strerror})") from None
    if data.startswith(b"\xef\xbb\xbf"):
        encoding = "utf-8-sig"
    elif data.startswith((b"\xff\xfe", b"\xfe\xff")):
        encoding = "utf-16"
    elif b"\x00" in data:
        raise OmnidubError(f"{path}: looks like UTF-16 without a byte-order mark; save it as UTF-8 (or UTF-16 with a BOM)")
    else:
        encoding = "utf-8"
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise OmnidubError(
            f"{path}: line {line}: not valid {encoding.upper().removesuffix('-SIG')} text (byte 0x{data[exc.start]:02x}); "
            "save the file as UTF-8 or UTF-16 with a byte-order mark"
        ) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _parse_srt(path: Path, text: str, notes: list[str]) -> list[_Cue]:
    import srt

    for number, row in enumerate(text.split("\n"), 1):
        if "-->" in row:  # srt accepts 00:75:00; out-of-range fields are refused here as in WebVTT and scripts
            _check_range(path, f"line {number}", row)
    cues: list[_Cue] = []
    cursor = 0
    try:
        for sub in srt.parse(text):
            at = text.find(sub.content, cursor) if sub.content else -1
            first = text.count("\n", 0, at) + 1 if at >= 0 else 0
            cursor = at + len(sub.content) if at >= 0 else cursor
            # A blank line ends a cue: whatever srt folded into it after one belongs to no cue.
            body, *rest = re.split(r"\n[ \t]*\n", sub.content, maxsplit=1)
            if rest and rest[0].strip():
                stray = at + len(sub.content) - len(rest[0]) + (len(rest[0]) - len(rest[0].lstrip()))
                where = f"line {text.count(chr(10), 0, stray) + 1}" if at >= 0 else f"after cue {sub.index}"
                notes.append(f"{where}: text outside any cue, not spoken: {_preview(rest[0])}")
            cues.append(_Cue(f"cue {sub.index}", sub.start.total_seconds(), sub.end.total_seconds(), body, first))
    except srt.SRTParseError as exc:
        # The unmatched block starts at expected_start; actual_start is where parsing picked up again.
        offset = exc.expected_start + len(exc.unmatched_content) - len(exc.unmatched_content.lstrip())
        line = text.count("\n", 0, offset) + 1
        block = exc.unmatched_content.strip().split("\n")
        number = block[0].strip() if block and block[0].strip().isdigit() else None
        where = f"cue {number} (line {line})" if number else f"line {line}"
        after = f" after {cues[-1].where}" if cues and not number else ""
        raise OmnidubError(f"{path}: {where}: malformed subtitle block{after}: {_preview(' / '.join(block[:2]))}") from None
    except ValueError as exc:  # srt raises plain ValueError for some impossible timestamps
        raise OmnidubError(f"{path}: malformed timestamp ({exc})") from None
    return cues


def _parse_vtt(path: Path, text: str, notes: list[str]) -> list[_Cue]:
    # Parsed by hand: webvtt-py silently drops cues with malformed timings, and line numbers matter here.
    rows = text.split("\n")
    if not rows[0].lstrip("\ufeff").startswith("WEBVTT"):
        raise OmnidubError(f"{path}: line 1: a WebVTT file must start with 'WEBVTT'")
    cues: list[_Cue] = []
    i = 1
    while i < len(rows):
        if not rows[i].strip():
            i += 1
            continue
        first = i
        block = []
        while i < len(rows) and rows[i].strip():
            block.append(rows[i])
            i += 1
        if block[0].startswith(("NOTE", "STYLE", "REGION")) and "-->" not in block[0]:
            continue
        timing_at = 0 if "-->" in block[0] else 1
        if timing_at >= len(block) or "-->" not in block[timing_at]:
            if not any(_LOOSE_TIMING_RE.match(row) for row in block):
                # No timing anywhere: text between cues, which WebVTT players ignore too.
                notes.append(f"line {first + 1}: text outside any cue, not spoken: {_preview(' / '.join(block))}")
                continue
            raise OmnidubError(f"{path}: line {first + timing_at + 1}: expected a cue timing 'start --> end', got {_preview(block[min(timing_at, len(block) - 1)])}")
        where = f"cue at line {first + timing_at + 1}"
        start, end, _ = _parse_timing(path, where, block[timing_at], _TIMING_RE)
        cues.append(_Cue(where, start, end, "\n".join(block[timing_at + 1 :]), first + timing_at + 2))
    return cues


def _parse_txt(path: Path, text: str) -> list[_Cue]:
    cues: list[_Cue] = []
    for number, row in enumerate(text.split("\n"), 1):
        row = row.lstrip("\ufeff").strip()
        if not row or row.startswith("#"):
            continue
        where = f"line {number}"
        start = end = None
        if row.startswith("[") and "-->" in row.split("]", 1)[0]:
            start, end, row = _parse_timing(path, where, row, _SCRIPT_TIMING_RE)
        cues.append(_Cue(where, start, end, row, number))
    timed = [c for c in cues if c.start is not None]
    if timed and len(timed) != len(cues):
        untimed = next(c for c in cues if c.start is None)
        raise OmnidubError(
            f"{path}: {untimed.where} has no timestamp but {timed[0].where} has one; time every line or none"
        )
    return cues


def _parse_timing(path: Path, where: str, row: str, pattern: re.Pattern) -> tuple[float, float, str]:
    """Start and end seconds of a timing row, and whatever follows the timing."""
    match = pattern.match(row)
    if not match:
        raise OmnidubError(f"{path}: {where}: malformed timestamp {_preview(row)}; expected HH:MM:SS.mmm --> HH:MM:SS.mmm")
    groups = match.groups()
    _check_range(path, where, row, groups)
    rest = groups[8] if len(groups) > 8 else ""
    return _seconds(groups[0:4]), _seconds(groups[4:8]), rest or ""


def _check_range(path: Path, where: str, row: str, groups=None) -> None:
    """Minutes and seconds run 00-59 in every format (``00:75:00`` is a typo, not 01:15:00)."""
    if groups is None:
        match = _TIMING_RE.match(row)
        if not match:
            return  # not a timing omnidub reads itself; the SRT parser judges it
        groups = match.groups()
    for hours, minutes, seconds, _ in (groups[0:4], groups[4:8]):
        if int(minutes) > 59 or int(seconds) > 59:
            raise OmnidubError(
                f"{path}: {where}: timestamp out of range in {_preview(row)}; minutes and seconds run from 00 to 59"
            )


def _seconds(groups) -> float:
    hours, minutes, seconds, fraction = groups
    millis = int((fraction or "0").ljust(3, "0"))
    return int(hours or 0) * 3600 + int(minutes) * 60 + int(seconds) + millis / 1000


def _check_voice_tags(path: Path, cue: _Cue) -> None:
    for k, row in enumerate(cue.body.split("\n")):
        if ">" not in row and _OPEN_VOICE_RE.match(row):
            where = f"line {cue.line + k}" if cue.line else cue.where
            raise OmnidubError(f"{path}: {where}: voice tag without its closing '>': {_preview(row)}; write <v NAME>text")


def check_language(language: str, where: str) -> str:
    """A language as OmniVoice knows it (an id such as ``en`` or an English name such as ``German``); anything
    else is an error offering the close matches."""
    lang_map = omnivoice_module("lang_map")
    if language in lang_map.LANG_IDS or language.lower() in lang_map.LANG_NAME_TO_ID or language.lower() == "none":
        return language
    import difflib

    base = re.split(r"[-_]", language.lower())[0]  # en-US: OmniVoice takes the language, not the region
    # Names only: among 2-3 letter ids everything is close to everything.
    close = ([base] if base in lang_map.LANG_IDS else []) + difflib.get_close_matches(language.lower(), list(lang_map.LANG_NAME_TO_ID), n=3, cutoff=0.6)
    hint = f"; close matches: {', '.join(dict.fromkeys(close))}" if close else ""
    raise OmnidubError(
        f"{where}: unknown language {language!r}{hint} (OmniVoice takes a language id like en or an English name like German)"
    )


def _speech_parts(body: str, *, capitalised_labels: bool) -> tuple[list[tuple[str, str]], str]:
    """Split a cue into (speaker, clean text) parts, or return no parts and why it was skipped."""
    parts: list[list] = []  # [speaker, [texts]]
    body = _CONTROL_RE.sub("", body.replace("\t", " "))  # never spoken, never printed
    for raw in _ASS_RE.sub("", body).split("\n"):
        if _MUSIC_RE.search(raw):
            continue  # SDH marks sung lyrics with music notes; they are not dubbed as speech
        speaker = None
        voice = _VOICE_RE.match(raw)
        if voice:
            speaker, raw = voice.group(1).strip(), raw[voice.end() :]
        row = _DASH_RE.sub("", html.unescape(_TAG_RE.sub("", raw)))
        if speaker is None:
            speaker, row = _split_label(row, capitalised_labels)
        row = _clean(row)
        if speaker is not None and (not parts or parts[-1][0] != speaker):
            parts.append([speaker, []])
        elif not parts:
            parts.append([None, []])
        if row:
            parts[-1][1].append(row)
    result = []
    for speaker, texts in parts:
        text = " ".join(texts)
        if _SPEAKABLE_RE.search(_NONVERBAL_RE.sub("", text)):
            result.append((speaker or (result[-1][0] if result else DEFAULT_SPEAKER), text))
    if result:
        return result, ""
    if _NONVERBAL_RE.search(body):
        return [], "only a non-verbal tag"
    if _MUSIC_RE.search(body):
        return [], "music only"
    if _SOUND_RE.search(body):
        return [], "sound description only"
    return [], "nothing speakable"


def _split_label(row: str, capitalised: bool) -> tuple[str | None, str]:
    bracket = _BRACKET_LABEL_RE.match(row)
    if bracket and bracket.group(2).strip():
        name = bracket.group(1).strip()
        words = name.split()
        if (
            1 <= len(words) <= 2
            and all(_NAME_WORD_RE.match(w) for w in words)
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
            len(name.split()) <= 3
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


def _share_time(cue: _Cue, texts: list[str]) -> list[tuple[float | None, float | None]]:
    if cue.start is None or len(texts) == 1:
        return [(cue.start, cue.end)] * len(texts)
    weights = [estimate_natural_seconds(t) for t in texts]
    total, span, at = sum(weights), cue.end - cue.start, cue.start
    shares = []
    for w in weights:
        shares.append((at, at + span * w / total))
        at += span * w / total
    return shares


def _overlaps(lines: list[Line], where: dict[int, str]) -> list[str]:
    warnings = []
    active: list[Line] = []
    for line in sorted(lines, key=lambda l: (l.start, l.index)):
        active = [a for a in active if a.end > line.start]
        for other in active:
            amount = min(other.end, line.end) - line.start
            if where[other.index] == where[line.index]:
                continue  # parts of one split cue touch by construction
            if other.speaker == line.speaker:
                warnings.append(
                    f"{where[line.index]} overlaps {where[other.index]} by {amount:.2f} s, both spoken by {line.speaker}: "
                    "the two lines will play on top of each other"
                )
            else:
                warnings.append(
                    f"{where[line.index]} ({line.speaker}) overlaps {where[other.index]} ({other.speaker}) by {amount:.2f} s; "
                    "different speakers may overlap"
                )
        active.append(line)
    return warnings


def _clock(seconds: float) -> str:
    hours, rest = divmod(seconds, 3600)
    minutes, rest = divmod(rest, 60)
    return f"{int(hours):02d}:{int(minutes):02d}:{rest:06.3f}"


def _preview(text: str, limit: int = 40) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")
