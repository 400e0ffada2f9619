"""Films built from a seed for the source-cloning tests and measurements: several synthetic voices (Debian's flite,
festival and espeak-ng), a music bed at a chosen level under the speech with an effect burst, and subtitles timed
the way real ones are (leading and trailing the speech by up to a quarter second, some cues condensed). The
generator knows the truth: who speaks where, and the words actually spoken.

    film = make_film(folder, seed=3, bed_db=10)    # film.audio (a .wav), film.subs (labelled .srt), film.truth
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

RATE = 16000
SPEECH_RMS = 0.1
CACHE = Path(tempfile.gettempdir()) / "omnidub-film-voices"

# name -> (synthesizer, voice). BRUNO and KEN are the similar pair: two male diphone voices of one synthesizer.
VOICES = {
    "NORA": ("flite", "slt"),
    "OWEN": ("flite", "rms"),
    "BRUNO": ("festival", "kal_diphone"),
    "KEN": ("festival", "ked_diphone"),
    "MAYA": ("festival", "cmu_us_slt_arctic_hts"),
    "IRIS": ("espeak-ng", "en-us+f4"),
    # One espeak-ng voice variant in two accents: HANK and ROSS are alike (CAM++ 0.66 between them against 0.85
    # within each). CRAIG is HANK's variant in a Scottish accent: 0.84, as alike as HANK's own lines (the same
    # timbre, told apart only by how the words are said).
    "HANK": ("espeak-ng", "en-us+m4"),
    "ROSS": ("espeak-ng", "en-gb+m4"),
    "CRAIG": ("espeak-ng", "en-gb-scotland+m4"),
    "JUNE": ("espeak-ng", "en-us+f1"),
    # The scenes' cast (tests/scenes.py): synthesizers and voices the films above do not use.
    "ABE": ("flite", "awb"),
    "PHIL": ("espeak-ng", "en-us+m2"),
    "ECHO": ("espeak-ng", "en-gb+Annie"),
    "WREN": ("espeak-ng", "en-us+whisperf"),
    "GRETA": ("espeak-ng", "de+f2"),
    "ELIO": ("festival", "el_diphone"),
    "PACO": ("festival", "el_diphone"),
    "LUCIA": ("espeak-ng", "es+f3"),
    "TOMAS": ("espeak-ng", "es-419+m3"),
    "ROSA": ("espeak-ng", "es+Annie"),
    "NIEVES": ("espeak-ng", "es+whisper"),
    "JORGE": ("espeak-ng", "pt-br+m6"),
    # The held-out cast (tests/scenes.py, cast="other"; tools/measure_scene.py --cast other): three synthesizers none
    # of the above use, Debian's non-free voices (mbrola-us3, mbrola-en1, libttspico-utils, rhvoice-english), not
    # installed for the tests.
    "CASS": ("pico", "en-US"),
    "GWEN": ("pico", "en-GB"),
    "BRAM": ("mbrola", "mb-us3"),
    "HUGO": ("mbrola", "mb-en1"),
    "DELL": ("rhvoice", "clb"),
    "FINN": ("rhvoice", "alan"),
}
CAST = ("NORA", "OWEN", "BRUNO", "KEN")

SENTENCES = [
    "We should leave before the rain starts, the road gets flooded near the bridge.",
    "I checked the map twice and the station is only a short walk from here.",
    "Nobody told me the meeting had moved to the other building this morning.",
    "If you keep the receipt, they will give you the money back next week.",
    "The old lighthouse was closed for years before they painted it again.",
    "Could you pass me the notebook on the table by the window?",
    "My brother fixed the engine himself and it still runs perfectly.",
    "They found the missing letters in a box under the stairs.",
    "Every evening the baker sells the last loaves at half the price.",
    "I would rather walk than wait another hour for the bus.",
    "The garden looks wonderful since you planted the roses along the fence.",
    "She wrote the whole report on the train home last night.",
    "Turn left at the church and follow the river until the mill.",
    "Our neighbours are moving to the coast at the end of the summer.",
    "The museum opens late on Thursdays, so we still have time.",
    "He promised to call as soon as the plane landed safely.",
    "I never understood why the clock in the hall runs backwards.",
    "Bring warm clothes, the nights in the mountains are very cold.",
    "The children built a raft and sailed it across the pond.",
    "We ran out of coffee, so I bought tea for everyone instead.",
    "That painting has hung in the kitchen since my grandmother was young.",
    "Please lock the back door when you leave the office tonight.",
    "The concert was cancelled because the singer lost her voice.",
    "You can borrow my bicycle, but the brakes are a little weak.",
]
SHORT = ["Yes, of course.", "Not today.", "Really?", "Fine, thank you.", "Let us go."]


@dataclass(frozen=True)
class Film:
    """A generated film: its audio, labelled and unlabelled subtitles, and the truth (see :func:`make_film`)."""

    folder: Path
    audio: Path
    subs: Path
    unlabelled: Path
    truth: dict

    @property
    def lines(self) -> list[dict]:
        return self.truth["lines"]

    def speakers_in(self, start: float, end: float) -> set[str]:
        """Who truly speaks between start and end (any overlap of 50 ms or more)."""
        return {t["speaker"] for t in self.truth["speech"] if min(t["end"], end) - max(t["start"], start) > 0.05}

    def clip_voices(self, clip) -> set[str]:
        """Who truly speaks in a clip (in each part of a joined one: the silence between them holds nobody)."""
        parts = getattr(clip, "parts", ()) or ((clip.start, clip.end),)
        return set().union(*(self.speakers_in(a, b) for a, b in parts))

    def voice_in(self, start: float, end: float) -> str | None:
        """The voice that truly speaks most between start and end (None: nobody does)."""
        spoken = {}
        for t in self.truth["speech"]:
            shared = min(t["end"], end) - max(t["start"], start)
            if shared > 0:
                spoken[t["speaker"]] = spoken.get(t["speaker"], 0.0) + shared
        return max(spoken, key=spoken.get) if spoken else None


def available() -> bool:
    """Whether the synthesizers the films need are installed."""
    return all(shutil.which(tool) for tool in ("flite", "text2wave", "espeak-ng"))


def speak(voice: str, texts: list[str]) -> list[np.ndarray]:
    """Each text spoken by a voice at RATE, trimmed, at SPEECH_RMS; cached on disk by voice and text."""
    tool, name = VOICES[voice]
    CACHE.mkdir(parents=True, exist_ok=True)
    paths = [CACHE / (hashlib.sha256(f"{tool}:{name}:{t}".encode()).hexdigest()[:20] + ".wav") for t in texts]
    todo = [(t, p) for t, p in zip(texts, paths) if not p.is_file()]
    tmp = {p: p.with_suffix(f".{os.getpid()}.tmp") for _, p in todo}  # two test workers may make the same line
    if todo and tool == "festival":
        # One festival process per voice: loading it costs a second or two.
        script = [f"(voice_{name})"] + [
            f'(utt.save.wave (utt.synth (Utterance Text "{t}")) "{tmp[p]}" \'riff)' for t, p in todo
        ]
        commands = CACHE / f"{os.getpid()}.scm"
        # Festival reads its scripts as Latin-1: a Spanish voice's accents in UTF-8 are spelled out byte by byte.
        commands.write_text("\n".join(script) + "\n", encoding="latin-1", errors="replace")
        subprocess.run(["festival", "--batch", str(commands)], check=True, capture_output=True)
        commands.unlink()
    for t, p in todo:
        if tool == "flite":
            subprocess.run(["flite", "-voice", name, "-t", t, "-o", str(tmp[p])], check=True, capture_output=True)
        elif tool in ("espeak-ng", "mbrola"):  # mbrola's diphone voices are spoken through espeak-ng ("mb-us3")
            subprocess.run(["espeak-ng", "-v", name, "-w", str(tmp[p]), t], check=True, capture_output=True)
        elif tool == "pico":
            wav = tmp[p].with_suffix(".wav")  # pico2wave writes only to a name ending .wav
            subprocess.run(["pico2wave", "-l", name, "-w", str(wav), t], check=True, capture_output=True)
            wav.replace(tmp[p])
        elif tool == "rhvoice":
            rhvoice = ["RHVoice-test", "-p", name, "-o", str(tmp[p])]
            subprocess.run(rhvoice, input=t.encode(), check=True, capture_output=True)
        tmp[p].replace(p)
    result = []
    for p in paths:
        audio, rate = sf.read(p, dtype="float32")
        if audio.ndim == 2:
            audio = audio.mean(axis=1)
        if rate != RATE:
            import soxr

            audio = soxr.resample(audio, rate, RATE)
        loud = np.nonzero(np.abs(audio) > 0.02 * np.abs(audio).max())[0]
        audio = audio[loud[0] : loud[-1] + 1]
        result.append((SPEECH_RMS * audio / np.sqrt(np.mean(audio**2))).astype(np.float32))
    return result


def music(seconds: float, rng: np.random.Generator) -> np.ndarray:
    """A music-like bed (a random chord progression with harmonics, a pulse, noise) of unit RMS, with an effect
    burst (a door slam: a decaying noise thump) somewhere in the middle."""
    t = np.arange(int(seconds * RATE)) / RATE
    out = np.zeros_like(t)
    bar = rng.uniform(1.6, 2.4)
    for k in range(int(seconds / bar) + 1):
        part = (t >= k * bar) & (t < (k + 1) * bar)
        local = t[part] - k * bar
        envelope = np.minimum(1.0, local / 0.05) * np.exp(-local / 1.2)
        root = rng.choice([98.0, 110.0, 130.8, 146.8])
        for f in (root, root * 1.26, root * 1.5):
            for h, amp in ((1, 1.0), (2, 0.5), (3, 0.25), (4, 0.12)):
                out[part] += amp * envelope * np.sin(2 * np.pi * f * h * t[part])
    pulse = 0.5
    for k in range(int(seconds / pulse)):
        a = int(k * pulse * RATE)
        n = min(int(0.12 * RATE), t.size - a)
        local = np.arange(n) / RATE
        out[a : a + n] += 1.2 * np.exp(-local / 0.04) * np.sin(2 * np.pi * (55 + 50 * np.exp(-local / 0.02)) * local)
    out /= np.sqrt(np.mean(out**2))
    out += 0.15 * rng.standard_normal(t.size)
    burst = int(rng.uniform(0.3, 0.7) * t.size)
    n = min(int(0.6 * RATE), t.size - burst)
    out[burst : burst + n] += 4.0 * np.exp(-np.arange(n) / RATE / 0.12) * rng.standard_normal(n)
    return out / np.sqrt(np.mean(out**2))


def mixed(pieces: list, seconds: float, bed_db: float | None, rng: np.random.Generator) -> np.ndarray:
    """The film's sound: each piece of speech at its start, over music ``bed_db`` under the speech (None: none)."""
    mix = np.zeros(int(seconds * RATE), np.float64)
    if bed_db is not None:
        mix += SPEECH_RMS * 10 ** (-bed_db / 20) * music(seconds, rng)
    for start, audio in pieces:
        a = int(round(start * RATE))
        mix[a : a + audio.size] += audio
    return np.clip(mix, -1, 1).astype(np.float32)


def write_truth(folder: Path, *, seed, bed_db, seconds: float, cast, lines: list, speech: list) -> dict:
    """What the generator knows of its film (truth.json): every line and every stretch of speech, who said it."""
    truth = {
        "seed": seed,
        "bed_db": bed_db,
        "seconds": round(seconds, 3),
        "cast": list(cast),
        "lines": lines,
        "speech": speech,
    }
    (folder / "truth.json").write_text(json.dumps(truth, indent=1), encoding="utf-8")
    return truth


def clock(seconds: float) -> str:
    ms = int(round(max(seconds, 0.0) * 1000))
    return f"{ms // 3600000:02d}:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d}"


def write_srt(path: Path, cues: list[tuple[float, float, str]]) -> None:
    blocks = [f"{k}\n{clock(a)} --> {clock(b)}\n{text}\n" for k, (a, b, text) in enumerate(cues, 1)]
    path.write_text("\n".join(blocks), encoding="utf-8")


def make_film(
    folder: Path,
    *,
    seed: int = 0,
    bed_db: float | None = 10.0,
    cast: tuple[str, ...] = CAST,
    lines: int = 16,
    short: int = 2,
    condensed: int = 2,
    offset: float = 0.25,
    shift: float = 0.0,
    two_voice_cue: bool = True,
    gaps: tuple[float, float] = (0.5, 1.1),
) -> Film:
    """A film of `lines` cues spoken by `cast` (each voice at least three times, in a random order), `short` of
    them under 1.5 s, over a bed `bed_db` dB under the speech (None: no bed). Cues lead the speech and trail it by
    up to `offset` s; `condensed` cues say only part of what is spoken; with `two_voice_cue` one cue also covers
    another voice's uncued reply. `shift` moves every cue by that many seconds (subtitles that do not fit); `gaps`:
    the shortest and longest silence between two lines."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    order = [cast[k % len(cast)] for k in range(lines)]
    rng.shuffle(order)
    for k in range(1, lines):  # no voice twice in a row, so every cue has a neighbour of another voice
        if order[k] == order[k - 1]:
            swap = next(
                (
                    j
                    for j in range(lines)
                    if order[j] != order[k]
                    and (j == 0 or order[j - 1] != order[k])
                    and (j + 1 >= lines or order[j + 1] != order[k])
                ),
                None,
            )
            if swap is not None:
                order[k], order[swap] = order[swap], order[k]
    texts = list(rng.permutation(SENTENCES))[:lines]
    for k in rng.choice(lines, size=short, replace=False):
        texts[k] = str(rng.choice(SHORT))
    spoken = {}
    for voice in dict.fromkeys(order):
        mine = [k for k in range(lines) if order[k] == voice]
        for k, audio in zip(mine, speak(voice, [texts[k] for k in mine])):
            spoken[k] = audio
    long_lines = [k for k in range(lines) if len(texts[k].split()) > 6]
    squeezed = set(rng.choice(long_lines, size=min(condensed, len(long_lines)), replace=False).tolist())
    reply = None
    if two_voice_cue:
        reply = int(rng.choice([k for k in long_lines if k not in squeezed and k + 1 < lines]))
    pieces, rows, speech, cursor = [], [], [], 0.8
    for k in range(lines):
        start = cursor + rng.uniform(*gaps)
        end = start + spoken[k].size / RATE
        pieces.append((start, spoken[k]))
        speech.append({"speaker": order[k], "start": round(start, 3), "end": round(end, 3), "line": k + 1})
        row = {"line": k + 1, "speaker": order[k], "said": texts[k], "speech": [round(start, 3), round(end, 3)]}
        cursor = end
        if k == reply:
            other = next(v for v in cast if v != order[k] and v != order[k + 1])
            [extra] = speak(other, ["Indeed it does."])
            a = end + 0.3
            pieces.append((a, extra))
            cursor = a + extra.size / RATE
            speech.append({"speaker": other, "start": round(a, 3), "end": round(cursor, 3), "line": None})
            row["uncued"] = {"speaker": other, "said": "Indeed it does.", "speech": [round(a, 3), round(cursor, 3)]}
        rows.append(row)
    seconds = cursor + 1.0
    mix = mixed(pieces, seconds, bed_db, rng)
    cues = []
    for k, row in enumerate(rows):
        a, b = row["speech"]
        if "uncued" in row:
            b = row["uncued"]["speech"][1]
        previous = rows[k - 1]["speech"][1] if k else 0.0
        following = rows[k + 1]["speech"][0] if k + 1 < len(rows) else seconds
        lead, trail = rng.uniform(-offset, offset), rng.uniform(-offset, offset)
        cue_start = min(max(a - lead, previous + 0.05), a + 0.2)
        cue_end = max(min(b + trail, following - 0.05), b - 0.2)
        text = row["said"]
        if k in squeezed:  # a condensed subtitle: the first words only
            words = text.rstrip(".?").split()
            text = " ".join(words[: max(3, len(words) // 2)]) + "."
            row["condensed"] = True
        row["cue"] = [round(cue_start + shift, 3), round(cue_end + shift, 3)]
        row["text"] = text
        cues.append((cue_start + shift, cue_end + shift, row["speaker"], text))
    audio = folder / "film.wav"
    sf.write(audio, mix, RATE, subtype="PCM_16")
    subs, unlabelled = folder / "film.en.srt", folder / "film.unlabelled.srt"
    write_srt(subs, [(a, b, f"{s}: {t}") for a, b, s, t in cues])
    write_srt(unlabelled, [(a, b, t) for a, b, _, t in cues])
    truth = write_truth(folder, seed=seed, bed_db=bed_db, seconds=seconds, cast=cast, lines=rows, speech=speech)
    return Film(folder, audio, subs, unlabelled, truth)


# A quick exchange: five voices in two similar pairs (flite's and festival's HTS build of one speaker, slt; the
# two male diphone voices of one synthesizer) and one apart.
DIALOGUE_CAST = ("NORA", "MAYA", "BRUNO", "KEN", "OWEN")
# Built differently: one espeak-ng variant in two accents, flite's and festival's builds of one speaker, and a
# third espeak-ng voice; run longer, with replies up to 0.3 s late.
ACCENT_CAST = ("HANK", "ROSS", "NORA", "MAYA", "JUNE")
TWIN_CAST = ("HANK", "CRAIG", "NORA", "MAYA", "JUNE")  # one pair the speaker model cannot tell apart
REPLIES = ["Yes.", "Fine.", "No."]


def make_dialogue(
    folder: Path,
    *,
    seed: int = 0,
    bed_db: float | None = 6.0,
    lines: int = 14,
    cast: tuple[str, ...] = DIALOGUE_CAST,
    quick: float = 0.15,
) -> Film:
    """A film of quick dialogue: `lines` sentences by `cast` (each voice twice at least, never twice in a row) and
    three one-word replies, three quarters of the turns 0.02-`quick` s apart; two turns overlap by 0.3-0.6 s, one
    line is cut off mid-sentence by the next voice. Cues lead and trail the speech by up to 0.15 s and, where the
    voices are quick, touch; where they overlap, so do the cues. The truth says who speaks where (the interrupted line's
    words are those of the part spoken, in proportion to its time)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1000 + seed)
    order = [cast[k % len(cast)] for k in range(lines)]
    while True:
        rng.shuffle(order)
        if all(a != b for a, b in zip(order, order[1:])):
            break
    texts = [str(t) for t in rng.permutation(SENTENCES)[:lines]]
    # One-word replies after three lines, by a voice other than that line's and the next one's.
    after = sorted(rng.choice(range(1, lines - 1), size=3, replace=False).tolist())
    turns = []
    for k in range(lines):
        turns.append([order[k], texts[k]])
        if k in after:
            who = str(rng.choice([v for v in cast if v != order[k] and (k + 1 >= lines or v != order[k + 1])]))
            turns.append([who, REPLIES[after.index(k)]])
    for voice in dict.fromkeys(t[0] for t in turns):
        mine = [t for t in turns if t[0] == voice]
        for turn, audio in zip(mine, speak(voice, [t[1] for t in mine])):
            turn.append(audio)
    long_turns = [k for k in range(1, len(turns)) if len(turns[k][1].split()) > 2 and len(turns[k - 1][1].split()) > 2]
    overlapped = set(rng.choice(long_turns, size=2, replace=False).tolist())
    interrupted = int(rng.choice([k for k in long_turns if k not in overlapped and k - 1 not in overlapped]))
    rows, pieces, cursor = [], [], 0.8
    for k, (voice, text, audio) in enumerate(turns):
        said = text
        if k + 1 == interrupted:  # cut off at 55-65 % of its length; the next voice starts right there
            keep = rng.uniform(0.55, 0.65)
            audio = audio[: int(audio.size * keep)].copy()
            audio[-160:] *= np.linspace(1, 0, 160, dtype=np.float32)
            words = text.split()
            said = " ".join(words[: max(1, round(len(words) * keep))])
        if k == 0:
            start = cursor
        elif k in overlapped:
            start = cursor - rng.uniform(0.3, 0.6)
        elif k == interrupted:
            start = cursor - 0.05
        elif rng.uniform() < 0.75:
            start = cursor + rng.uniform(0.02, quick)
        else:
            start = cursor + rng.uniform(0.3, 0.6)
        end = start + audio.size / RATE
        pieces.append((start, audio))
        rows.append(
            {
                "line": k + 1,
                "speaker": voice,
                "said": said,
                "speech": [round(start, 3), round(end, 3)],
                **({"overlapped": True} if k in overlapped else {}),
                **({"interrupted": True} if k + 1 == interrupted else {}),
                **({"reply": True} if len(text.split()) == 1 else {}),
            }
        )
        cursor = max(cursor, end)
    seconds = cursor + 1.0
    mix = mixed(pieces, seconds, bed_db, rng)
    cues = []
    for k, row in enumerate(rows):
        a, b = row["speech"]
        cue = [a - rng.uniform(0, 0.15), b + rng.uniform(0, 0.15)]
        if k and cues[-1][1] > cue[0] and rows[k - 1]["speech"][1] <= a:  # quick, not overlapping: cues touch
            cues[-1][1] = cue[0] = max(rows[k - 1]["speech"][1], min(cue[0], cues[-1][1]))
        cues.append(cue)
    for row, (a, b) in zip(rows, cues):
        row["cue"] = [round(a, 3), round(b, 3)]
        row["text"] = row["said"] + ("..." if row.get("interrupted") else "")
    audio_path = folder / "film.wav"
    sf.write(audio_path, mix, RATE, subtype="PCM_16")
    subs, unlabelled = folder / "film.en.srt", folder / "film.unlabelled.srt"
    write_srt(subs, [(*row["cue"], f"{row['speaker']}: {row['text']}") for row in rows])
    write_srt(unlabelled, [(*row["cue"], row["text"]) for row in rows])
    speech = [
        {"speaker": r["speaker"], "start": r["speech"][0], "end": r["speech"][1], "line": r["line"]} for r in rows
    ]
    truth = write_truth(folder, seed=seed, bed_db=bed_db, seconds=seconds, cast=cast, lines=rows, speech=speech)
    return Film(folder, audio_path, subs, unlabelled, truth)


def extract_labelled(film, encoder):
    """The voices ``voices extract`` finds in a film from its labelled subtitles (no ASR), every line assessed."""
    from omnidub.script import read_script
    from omnidub.source import ExtractOptions, extract_voices, read_source

    return extract_voices(
        read_source(film.audio),
        read_script(film.subs),
        encoder=encoder,
        asr=None,
        options=ExtractOptions(assess_lines=True),
    )
