"""The cast: who speaks with which voice (voices.toml, --voice, --voice-text)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from omnidub.errors import OmnidubError
from omnidub.files import did_you_mean
from omnidub.media import audio_problem
from omnidub.script import DEFAULT_SPEAKER, check_language

VOICE_KEYS = ("audio", "text", "language", "reference_language", "speed", "instruct")
# How a voices.toml written by `voices extract` begins: in one written before reference_language existed,
# `language` is the clips' (the source's), as its second line said.
EXTRACTED = "# Written by omnidub voices extract"
MIN_SPEED, MAX_SPEED = 0.25, 4.0  # a voice's speaking-rate factor; past these, speech is no longer speech
_NAME_RE = re.compile(r"^[^\W\d][\w.'\- ]{0,31}$")


@dataclass(frozen=True)
class Voice:
    """A speaker's voice. ``language`` is the language of the lines it speaks (unless --language says another);
    ``reference_language`` the one spoken in its reference when that is another's (a clip cut from the source of
    a dub), which finds the reference's words and never sets the lines' language."""

    speaker: str
    audio: Path | None
    text: str | None
    language: str | None
    speed: float | None
    instruct: str | None
    reference_language: str | None = None

    @property
    def spoken(self) -> str | None:
        """The language spoken in the reference (what its recogniser listens for)."""
        return self.reference_language or self.language


def load_voices(voices_toml: Path | None, voice_args: list[str], voice_text_args: list[str]) -> dict[str, Voice]:
    """Merge voices.toml, then --voice, then --voice-text (later sources override earlier ones)."""
    voices: dict[str, Voice] = {}
    if voices_toml is not None:
        voices.update(_read_voices_toml(Path(voices_toml)))
    flagged: dict[str, str] = {}  # folded name -> the spelling an earlier --voice gave
    for arg in voice_args:
        speaker, audio = _split_voice_arg(arg)
        earlier = flagged.setdefault(speaker.casefold(), speaker)
        if earlier != speaker:
            raise OmnidubError(
                f"--voice {earlier}=... and --voice {speaker}=... name one speaker (speaker names are "
                "matched without case); give each speaker one --voice"
            )
        speaker = _same_speaker(speaker, voices)  # --voice anna=... overrides the file's [Anna]
        old = voices.get(speaker)
        # New audio makes any earlier transcript wrong; language and speed still describe the speaker.
        voices[speaker] = Voice(speaker, audio, None, old.language if old else None, old.speed if old else None, None)
    for arg in voice_text_args:
        speaker, text = _split_voice_text_arg(arg, voices)
        old = voices.get(speaker)
        if old is None or old.audio is None:
            known = ", ".join(sorted(voices)) or "none"
            raise OmnidubError(
                f"--voice-text {_short(arg)}: voice {speaker!r} has no reference audio to go with the transcript "
                f"(voices with audio: {known}); add --voice {'' if speaker == DEFAULT_SPEAKER else speaker + '='}FILE"
            )
        voices[speaker] = replace(old, text=text)
    return voices


def voice_for(speaker: str, voices: dict[str, Voice], *, where: str | None = None) -> Voice:
    """The voice for a speaker: exact name, then case-insensitive, then the default voice. ``where`` (e.g.
    "ep1.srt: cue 4") says where the speaker first speaks, for the error when it has no voice."""
    if speaker in voices:
        return voices[speaker]
    folded = [v for name, v in voices.items() if name.casefold() == speaker.casefold()]
    if len(folded) == 1:
        return folded[0]
    if DEFAULT_SPEAKER in voices:
        return voices[DEFAULT_SPEAKER]
    known = ", ".join(sorted(voices)) if voices else "none"
    at = f"{where}: " if where else ""
    if speaker == DEFAULT_SPEAKER:
        raise OmnidubError(
            f"{at}a line without a speaker label needs the default voice, and there is none (known voices: {known}); "
            "add a default --voice FILE, a [default] table in voices.toml, or a label such as 'NAME: text'; or "
            "take the voices from the original with --source VIDEO (its speakers name every line)"
        )
    close = close_voice(speaker, voices)
    hint = f"; did you mean {close}? (fix the label or the voice's name)" if close else ""
    raise OmnidubError(
        f"{at}no voice for speaker {speaker!r} and no default voice (known voices: {known}){hint}; "
        f"add --voice {speaker}=FILE, a default --voice FILE, or a [{speaker}] table in voices.toml"
    )


def close_voice(speaker: str, voices: dict[str, Voice]) -> str | None:
    """The voice whose name is closest to ``speaker`` (``OWAN`` -> ``OWEN``), if one is close."""
    import difflib

    names = {name.casefold(): name for name in voices if name != DEFAULT_SPEAKER}
    close = difflib.get_close_matches(speaker.casefold(), list(names), n=1, cutoff=0.6)
    return names[close[0]] if close else None


def misspelt_speakers(lines, voices: dict[str, Voice]) -> list[str]:
    """A note per speaker that takes the default voice while a voice no line uses has a close name: one of the
    two names is likely a typo (OWAN: in the subtitles, [OWEN] in voices.toml)."""
    folded = {name.casefold() for name in voices}
    speakers = dict.fromkeys(line.speaker for line in lines)
    unused = {
        name: voice
        for name, voice in voices.items()
        if name != DEFAULT_SPEAKER and not any(s.casefold() == name.casefold() for s in speakers)
    }
    notes = []
    for speaker in speakers:
        if speaker != DEFAULT_SPEAKER and speaker.casefold() not in folded:
            close = close_voice(speaker, unused)
            if close:
                notes.append(
                    f"{speaker} has no voice of its own and speaks in the default voice, while the voice {close} "
                    f"speaks no line: did you mean {close}? (fix the label or the voice's name)"
                )
    return notes


def check_cast(lines, voices: dict[str, Voice], source) -> None:
    """Every speaker of ``lines`` has a voice; else OmnidubError naming ``source`` (the input) and the first
    cue the speaker has (lines carry ``speaker`` and ``where``)."""
    first: dict[str, str] = {}
    for line in lines:
        first.setdefault(line.speaker, getattr(line, "where", "") or f"line {line.index}")
    for speaker in sorted(first):
        voice_for(speaker, voices, where=f"{source}: {first[speaker]}")


def _read_voices_toml(path: Path) -> dict[str, Voice]:
    try:
        text = path.read_text(encoding="utf-8-sig")
        data = tomllib.loads(text)
    except FileNotFoundError:
        raise OmnidubError(f"{path}: no such voices file{did_you_mean(path)}") from None
    except IsADirectoryError:
        raise OmnidubError(f"--voices {path} is a folder; give the voices.toml file in it") from None
    except OSError as exc:
        raise OmnidubError(f"--voices {path}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise OmnidubError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise OmnidubError(f"{path}: not valid TOML: {exc}") from None
    voices = {}
    extracted = text.startswith(EXTRACTED)
    for speaker, table in data.items():
        where = f"{path}: [{speaker}]"
        twin = next((known for known in voices if known.casefold() == speaker.casefold()), None)
        if twin is not None:
            raise OmnidubError(
                f"{where}: [{twin}] and [{speaker}] differ only in case, and speaker names are matched "
                "without case (labels 'ANNA:' and 'Anna:' are one speaker); merge them or rename one"
            )
        if not isinstance(table, dict):
            raise OmnidubError(
                f"{where}: expected a table like [{speaker}] with audio = ... and text = ..., got a plain value"
            )
        unknown = sorted(set(table) - set(VOICE_KEYS))
        if unknown:
            raise OmnidubError(f"{where}: unknown key(s) {', '.join(unknown)}; known keys: {', '.join(VOICE_KEYS)}")
        for key in ("audio", "text", "language", "reference_language", "instruct"):
            if key in table and not isinstance(table[key], str):
                raise OmnidubError(f"{where}: {key} must be a string")
        for key in ("language", "reference_language"):
            if table.get(key):
                check_language(table[key], f"{where}: {key}")
        if "audio" not in table and "instruct" not in table:
            raise OmnidubError(
                f'{where}: needs audio = "file" (with text = "transcript") or instruct = "voice description"'
            )
        speed = table.get("speed")
        if speed is not None and (
            isinstance(speed, bool) or not isinstance(speed, (int, float)) or not MIN_SPEED <= speed <= MAX_SPEED
        ):
            raise OmnidubError(f"{where}: speed must be a number from {MIN_SPEED:g} to {MAX_SPEED:g}, got {speed!r}")
        audio = None
        if "audio" in table:
            audio = Path(table["audio"]).expanduser()
            if not audio.is_absolute():
                audio = path.parent / audio
            problem = audio_problem(audio)
            if problem:
                raise OmnidubError(f"{where}: {problem}")
        words = table.get("text")
        if words is not None and not words.strip():
            words = None
        speed = float(speed) if speed is not None else None
        language, heard = table.get("language"), table.get("reference_language") or None
        if extracted and heard is None:  # an older extract's language is its clips', never the dub's
            language, heard = None, language
        voices[speaker] = Voice(speaker, audio, words, language, speed, table.get("instruct"), heard)
    return voices


def _split_voice_arg(arg: str) -> tuple[str, Path]:
    if Path(arg).expanduser().is_file():
        return DEFAULT_SPEAKER, Path(arg).expanduser()
    if "=" in arg:
        speaker, ref = arg.split("=", 1)
        speaker = speaker.strip()
        if speaker and not ref.strip():
            raise OmnidubError(f"--voice {_short(arg)}: no reference file after '='; write --voice {speaker}=FILE")
        if (
            speaker
            and "/" not in speaker
            and "\\" not in speaker
            and (Path(ref).expanduser().is_file() or _NAME_RE.match(speaker))
        ):
            ref_path = Path(ref).expanduser()
            problem = audio_problem(ref_path)
            if problem:
                raise OmnidubError(f"--voice {speaker}=...: {problem}")
            return speaker, ref_path
    if Path(arg).expanduser().is_dir():
        raise OmnidubError(
            f"--voice: {audio_problem(Path(arg).expanduser())} (use --voice FILE or --voice SPEAKER=FILE)"
        )
    raise OmnidubError(
        f"--voice: audio file not found: {arg}{did_you_mean(Path(arg).expanduser())} (use --voice FILE or "
        "--voice SPEAKER=FILE)"
    )


def _same_speaker(name: str, voices: dict[str, Voice]) -> str:
    """The cast's spelling of a speaker named without regard to case (names differing only in case are one)."""
    return next((known for known in voices if known.casefold() == name.casefold()), name)


def _split_voice_text_arg(arg: str, voices: dict[str, Voice]) -> tuple[str, str]:
    if "=" in arg:
        speaker, text = arg.split("=", 1)
        if _same_speaker(speaker, voices) in voices:
            return _same_speaker(speaker, voices), text.strip()
        if re.fullmatch(r"[^\W\d][\w.'\-]{0,31}", speaker):
            known = ", ".join(sorted(voices)) or "none"
            close = close_voice(speaker, voices)
            raise OmnidubError(
                f"--voice-text {_short(arg)}: no voice named {speaker!r} (known voices: {known})"
                f"{f'; did you mean {close}?' if close else ''}; "
                f"to give the default voice a transcript containing '=', write --voice-text {DEFAULT_SPEAKER}=TEXT"
            )
    return DEFAULT_SPEAKER, arg.strip()


def _short(text: str, limit: int = 48) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
