"""Scenes built differently from the films (tests/films.py): voices of other synthesizers and languages, heard
through other channels (a telephone line, a reverberant stairwell, a whisper 10 dB under the others), back-channels
("Mm-hm.") spoken over the other voice's sentence (cued, and one only in the audio), full-level overlaps, a
dialogue-dash cue holding two speakers, laughter and a cough inside lines, and a jazz-and-effects bed. The
generator knows the truth: who speaks where (each voice's sound as it reaches the film, tails included).

    scene = make_scene(folder, seed=0)                   # English, with accents of other languages' voices
    scene = make_scene(folder, seed=0, language="es")    # Spanish
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import soundfile as sf
from films import RATE, SENTENCES, SPEECH_RMS, Film, speak, write_srt, write_truth

# Six characters: one in the room (flite's Scottish awb), one on the telephone, one in a stairwell, one who only
# whispers, a German voice and a Spanish diphone voice speaking English.
SCENE_CAST = ("ABE", "PHIL", "ECHO", "WREN", "GRETA", "ELIO")
ESCENA_CAST = ("PACO", "TOMAS", "ROSA", "NIEVES", "LUCIA", "JORGE")
CHANNELS = {"PHIL": "phone", "ECHO": "room", "WREN": "whisper", "TOMAS": "phone", "ROSA": "room", "NIEVES": "whisper"}
WHISPER_DB = 10.0
# The held-out cast (cast="other"): synthesizers and channels the scenes above do not use (SVOX Pico, mbrola's
# diphones, RHVoice; a walkie-talkie, a voice across a hall, one behind a door 10 dB under), two Pico voices alike,
# six overlapping turns, a street bed. Its voices are Debian non-free packages the tests do not install: see
# :func:`other_available`.
OTHER_CAST = ("CASS", "BRAM", "DELL", "FINN", "GWEN", "HUGO")
CHANNELS.update({"BRAM": "radio", "DELL": "far", "FINN": "door"})
QUIET = ("whisper", "door")  # the channels of a cast's quiet voice, who says only short lines


def available() -> bool:
    """Whether every synthesizer and voice the scenes need is installed: the films' tools, and festival's Spanish
    diphone voice (Debian's festvox-ellpc11k, in non-free: CI installs it; without it the scenes are skipped)."""
    from films import available as tools

    if not tools() or not shutil.which("festival"):
        return False
    listed = subprocess.run(
        ["festival", "--batch", "(print (voice.list))"], capture_output=True, text=True, timeout=60
    ).stdout
    return "el_diphone" in listed


def other_available() -> bool:
    """Whether the held-out cast's synthesizers are installed (mbrola-us3, mbrola-en1, libttspico-utils,
    rhvoice-english)."""
    return all(shutil.which(tool) for tool in ("mbrola", "pico2wave", "RHVoice-test", "espeak-ng"))


WORDS = {
    "other": {
        "sentences": [
            "The landlord called again about the broken window in the kitchen.",
            "If the ferry is late we will miss the last bus into town.",
            "She painted the whole fence on Saturday without asking anyone for help.",
            "Nobody noticed the dog had eaten half of the birthday cake.",
            "The museum moved the old maps into a room on the top floor.",
            "My uncle still keeps every letter he received during the war.",
            "We waited an hour at the border before they let the truck through.",
            "The river rose so fast that the farmers moved the sheep at night.",
            "I left my umbrella on the train and of course it started raining.",
            "Their new restaurant serves fish that was caught the same morning.",
            "The printer on the second floor has been broken for a week.",
            "He learned to sail on a lake in the mountains when he was twelve.",
            "Somebody parked a van across the gate and nobody can get out.",
            "The choir practises in the old chapel every Thursday evening.",
            "Bring the ladder round to the back, the gutter is full of leaves.",
            "The last train leaves at midnight, so we have plenty of time.",
            "She found a wallet on the beach with two hundred euros inside.",
            "Grandmother's garden was full of tomatoes and sunflowers that year.",
        ],
        "whispered": ["Is anyone out there?", "Open up, it's me.", "I'll wait right here."],
        "back": ["Okay.", "Yeah.", "Sure."],
        "dash": ("Coming?", "Not now."),
    },
    "en": {
        "sentences": SENTENCES,
        "whispered": ["Over here, quickly.", "Quiet, they can hear us.", "Not yet, wait."],
        "back": ["Mm-hm.", "Right.", "Uh-huh."],
        "dash": ("Ready?", "Yes."),
    },
    "es": {
        "sentences": [
            "Tenemos que salir antes de que empiece la lluvia.",
            "He mirado el mapa dos veces y la estación está muy cerca.",
            "Nadie me dijo que la reunión era en el otro edificio.",
            "Si guardas el recibo te devolverán el dinero la semana que viene.",
            "El viejo faro estuvo cerrado muchos años antes de que lo pintaran.",
            "Mi hermano arregló el motor él solo y todavía funciona perfectamente.",
            "Encontraron las cartas perdidas en una caja debajo de la escalera.",
            "Cada tarde el panadero vende los últimos panes a mitad de precio.",
            "Prefiero caminar que esperar otra hora al autobús de la noche.",
            "El jardín está precioso desde que plantaste las rosas junto a la valla.",
            "Escribió todo el informe en el tren de vuelta a casa anoche.",
            "Gira a la izquierda en la iglesia y sigue el río hasta el molino.",
            "Nuestros vecinos se mudan a la costa al final del verano.",
            "El museo abre tarde los jueves, así que todavía tenemos tiempo.",
            "Prometió llamar en cuanto el avión aterrizara sin problemas.",
            "Trae ropa de abrigo, las noches en la montaña son muy frías.",
            "Los niños construyeron una balsa y cruzaron el estanque con ella.",
            "Se acabó el café, así que compré té para todos los demás.",
        ],
        "whispered": ["Aquí, deprisa.", "Silencio, nos oyen.", "Todavía no, espera."],
        "back": ["Ajá.", "Claro.", "Ya."],
        "dash": ("¿Listo?", "Sí."),
    },
}


def telephone(audio: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A telephone line: band-passed to 300-3400 Hz, softly clipped, with a faint hiss."""
    from scipy.signal import butter, sosfilt

    sos = butter(4, [300, 3400], btype="bandpass", fs=RATE, output="sos")
    band = sosfilt(sos, audio)
    band = np.tanh(3.0 * band / (np.abs(band).max() + 1e-9)) / 3.0
    return band + 0.003 * rng.standard_normal(band.size)


def stairwell(audio: np.ndarray, rng: np.random.Generator, rt60: float = 0.9) -> np.ndarray:
    """The voice in a reverberant room: convolved with a synthetic impulse response (a direct path, a few early
    reflections and an exponentially decaying noise tail of ``rt60`` s)."""
    from scipy.signal import fftconvolve

    n = int(1.2 * RATE)
    t = np.arange(n) / RATE
    response = 0.5 * rng.standard_normal(n) * np.exp(-6.9 * t / rt60)
    response[: int(0.01 * RATE)] = 0.0
    response[0] = 1.0
    for delay, gain in ((0.013, 0.6), (0.021, 0.45), (0.034, 0.35), (0.047, 0.3)):
        response[int(delay * RATE)] += gain * rng.choice([-1, 1])
    return fftconvolve(audio, response)[: audio.size + int(0.6 * RATE)]


def radio(audio: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A walkie-talkie: band-passed to 500-2600 Hz, hard clipped, a burst of squelch noise before and after."""
    from scipy.signal import butter, sosfilt

    band = sosfilt(butter(6, [500, 2600], btype="bandpass", fs=RATE, output="sos"), audio)
    band = np.clip(band / (np.abs(band).max() + 1e-9), -0.4, 0.4)
    band = band + 0.02 * rng.standard_normal(band.size)
    squelch = 0.3 * rng.standard_normal(int(0.12 * RATE)) * np.linspace(1, 0, int(0.12 * RATE))
    return np.concatenate([squelch, band, squelch[::-1]])


def door(audio: np.ndarray) -> np.ndarray:
    """A voice behind a closed door: low-passed at 700 Hz."""
    from scipy.signal import butter, sosfilt

    return sosfilt(butter(4, 700, "lowpass", fs=RATE, output="sos"), audio)


def through(voice: str, audio: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A voice's line as it reaches the film (its channel), trimmed to where it sounds, at its level."""
    kind = CHANNELS.get(voice)
    if kind == "phone":
        audio = telephone(audio, rng)
    elif kind == "room":
        audio = stairwell(audio, rng)
    elif kind == "radio":
        audio = radio(audio, rng)
    elif kind == "far":  # across a hall: a long tail
        audio = stairwell(audio, rng, rt60=1.6)
    elif kind == "door":
        audio = door(audio)
    loud = np.nonzero(np.abs(audio) > 0.02 * np.abs(audio).max())[0]
    audio = audio[loud[0] : loud[-1] + 1]
    db = {"whisper": WHISPER_DB, "door": WHISPER_DB, "far": 4.0}.get(kind, 0.0)
    return (SPEECH_RMS * 10 ** (-db / 20) * audio / np.sqrt(np.mean(audio**2))).astype(np.float32)


def laughter(rng: np.random.Generator) -> np.ndarray:
    """A laugh: four or five breathy "ha"s, a pulse train through two vowel formants with noise."""
    from scipy.signal import butter, sosfilt

    out = []
    pitch = rng.uniform(160, 260)
    for _ in range(int(rng.integers(4, 6))):
        n = int(0.13 * RATE)
        t = np.arange(n) / RATE
        pulses = (np.sin(2 * np.pi * pitch * t) > 0.95).astype(np.float64) + 0.4 * rng.standard_normal(n)
        voiced = sum(
            sosfilt(butter(2, [f * 0.85, f * 1.15], "bandpass", fs=RATE, output="sos"), pulses) for f in (800, 1250)
        )
        out += [voiced * np.hanning(n), np.zeros(int(0.07 * RATE))]
        pitch *= 0.95
    return np.concatenate(out)


def cough(rng: np.random.Generator) -> np.ndarray:
    """A cough: two bursts of low-passed noise, each with a sharp attack."""
    from scipy.signal import butter, sosfilt

    parts = []
    for length, gain in ((0.25, 1.0), (0.18, 0.6)):
        n = int(length * RATE)
        burst = sosfilt(butter(2, 2000, "lowpass", fs=RATE, output="sos"), rng.standard_normal(n))
        parts += [gain * burst * np.exp(-np.arange(n) / RATE / 0.08), np.zeros(int(0.12 * RATE))]
    return np.concatenate(parts)


def with_noise(audio: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """The line with ``noise`` (at the line's level) put in at its quietest moment between 35 % and 65 % of it."""
    frame = int(0.03 * RATE)
    a, b = int(0.35 * audio.size), int(0.65 * audio.size)
    energy = np.convolve(audio[a:b] ** 2, np.ones(frame), mode="same")
    at = a + int(np.argmin(energy))
    noise = (SPEECH_RMS * noise / np.sqrt(np.mean(noise**2))).astype(np.float32)
    return np.concatenate([audio[:at], noise, audio[at:]])


def street(seconds: float, rng: np.random.Generator) -> np.ndarray:
    """A street bed of unit RMS: low traffic rumble, cars passing (a swelling, falling whoosh), a horn, footsteps."""
    from scipy.signal import butter, sosfilt

    n = int(seconds * RATE)
    out = sosfilt(butter(2, 250, "lowpass", fs=RATE, output="sos"), rng.standard_normal(n))
    out /= np.sqrt(np.mean(out**2))
    for _ in range(int(seconds / 6) + 1):
        m = int(rng.uniform(2.0, 4.0) * RATE)
        whoosh = sosfilt(butter(2, [200, 1800], btype="bandpass", fs=RATE, output="sos"), rng.standard_normal(m))
        a = int(rng.uniform(0, seconds) * RATE)
        out[a : a + m] += (3.0 * np.hanning(m) ** 2 * whoosh)[: n - a]
    u = np.arange(int(0.5 * RATE)) / RATE
    a = int(rng.uniform(0.2, 0.8) * n)
    out[a : a + u.size] += (0.8 * (np.sign(np.sin(2 * np.pi * 400 * u)) + np.sign(np.sin(2 * np.pi * 500 * u))))[
        : n - a
    ]
    return out / np.sqrt(np.mean(out**2))


def jazz(seconds: float, rng: np.random.Generator) -> np.ndarray:
    """A jazz-and-effects bed of unit RMS: a walking bass, a swung ride cymbal, piano chords on the off-beats,
    glasses clinking, footsteps and a door."""
    from scipy.signal import butter, sosfilt

    n = int(seconds * RATE)
    out = np.zeros(n)
    beat = 60 / rng.uniform(120, 150)

    def place(at: float, sound: np.ndarray) -> None:
        a = int(at * RATE)
        if a < n:
            out[a : a + sound.size] += sound[: n - a]

    roots = [110.0, 146.8, 98.0, 130.8]
    hiss = sosfilt(butter(4, 5000, "highpass", fs=RATE, output="sos"), rng.standard_normal(int(0.2 * RATE)))
    for k in range(int(seconds / beat) + 1):
        t = np.arange(int(beat * RATE)) / RATE
        root = roots[(k // 4) % len(roots)] * (2 ** (rng.choice([0, 2, 4, 5, 7]) / 12))
        place(k * beat, 0.9 * np.exp(-t / 0.25) * (np.sin(2 * np.pi * root * t) + 0.3 * np.sin(4 * np.pi * root * t)))
        ride = 0.25 * hiss * np.exp(-np.arange(hiss.size) / RATE / 0.06)
        place(k * beat, ride)
        if k % 2:
            place(k * beat + 2 * beat / 3, 0.6 * ride)  # the swung eighth
        if rng.uniform() < 0.4:  # piano comping: a seventh chord
            chord = root * 2 * np.array([1.0, 1.26, 1.5, 1.78])
            u = np.arange(int(0.7 * RATE)) / RATE
            place(k * beat + beat / 2, 0.25 * sum(np.exp(-u / 0.4) * np.sin(2 * np.pi * f * u) for f in chord))
    for _ in range(int(seconds / 8) + 1):  # glasses clinking
        u = np.arange(int(0.3 * RATE)) / RATE
        place(
            rng.uniform(0, seconds),
            0.8 * np.exp(-u / 0.08) * sum(np.sin(2 * np.pi * f * u) for f in (2600, 3900, 5200)),
        )
    for k in range(8):  # footsteps
        m = int(0.08 * RATE)
        place(
            seconds * 0.6 + 0.55 * k,
            1.5
            * sosfilt(butter(2, 300, "lowpass", fs=RATE, output="sos"), rng.standard_normal(m))
            * np.exp(-np.arange(m) / RATE / 0.02),
        )
    m = int(0.6 * RATE)
    place(rng.uniform(0.3, 0.5) * seconds, 4.0 * np.exp(-np.arange(m) / RATE / 0.12) * rng.standard_normal(m))  # a door
    return out / np.sqrt(np.mean(out**2))


def make_scene(
    folder: Path,
    *,
    seed: int = 0,
    bed_db: float | None = 8.0,
    language: str = "en",
    lines: int = 16,
    overlaps: int | None = None,
    cast: str = "scene",
) -> Film:
    """A scene of `lines` sentences by the cast's five speaking voices (each at least twice, never twice in a row),
    three whispered lines by the sixth, one dialogue-dash cue ("- Ready?\\n- Yes.") of two voices, three
    back-channels spoken over a sentence at full level (two cued, one only in the audio), `overlaps` turns starting
    0.4-1.0 s under the end of the one before, a laugh inside two lines and a cough inside one, over a jazz bed
    `bed_db` dB under the speech. Most turns follow 0.05-0.3 s after the one before. ``cast="other"``: the held-out
    cast (English; see OTHER_CAST), six overlapping turns by default, over a street bed instead."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    other = cast == "other"
    if other and language != "en":
        raise ValueError("the held-out cast speaks English only")
    rng = np.random.default_rng(7000 + seed + (100 if language == "es" else 0) + (200 if other else 0))
    words = WORDS["other" if other else language]
    overlaps = (6 if other else 4) if overlaps is None else overlaps
    cast = OTHER_CAST if other else SCENE_CAST if language == "en" else ESCENA_CAST
    whisperer = next(v for v in cast if CHANNELS.get(v) in QUIET)
    speaking = [v for v in cast if v != whisperer]
    order = [speaking[k % len(speaking)] for k in range(lines)]
    while True:
        rng.shuffle(order)
        if all(a != b for a, b in zip(order, order[1:])):
            break
    texts = [str(t) for t in rng.permutation(words["sentences"])[:lines]]
    turns = [{"speaker": v, "said": t, "kind": "line"} for v, t in zip(order, texts)]
    # The whispered lines, each after a sentence, apart from each other.
    for k, at in enumerate(sorted(rng.choice(range(1, lines), size=3, replace=False).tolist(), reverse=True)):
        turns.insert(at, {"speaker": whisperer, "said": words["whispered"][k], "kind": "whisper"})
    at = int(rng.integers(2, len(turns) - 1))
    q, a = words["dash"]
    first = next(v for v in speaking if v != turns[at - 1]["speaker"])
    second = next(v for v in speaking if v not in (first, turns[at]["speaker"]))
    turns[at:at] = [{"speaker": first, "said": q, "kind": "dash"}, {"speaker": second, "said": a, "kind": "dash"}]
    for voice in dict.fromkeys(t["speaker"] for t in turns):
        mine = [t for t in turns if t["speaker"] == voice]
        for turn, audio in zip(mine, speak(voice, [t["said"] for t in mine])):
            turn["audio"] = audio
    sentences = [k for k, t in enumerate(turns) if t["kind"] == "line"]
    noisy = rng.choice(sentences, size=3, replace=False).tolist()
    for k, noise in zip(noisy, ("laugh", "laugh", "cough")):
        turns[k]["audio"] = with_noise(turns[k]["audio"], laughter(rng) if noise == "laugh" else cough(rng))
        turns[k]["noise"] = noise
    for turn in turns:
        turn["audio"] = through(turn["speaker"], turn["audio"], rng)
    long = [k for k in sentences if k not in noisy and turns[k]["audio"].size / RATE >= 2.5]
    hosts = sorted(rng.choice(long, size=3, replace=False).tolist())
    follows = [k for k in sentences if k - 1 in sentences and k not in hosts and k - 1 not in hosts]
    overlapped = set(rng.choice(follows, size=min(overlaps, len(follows)), replace=False).tolist())
    backs = []
    for n, k in enumerate(hosts):
        listener = str(rng.choice([v for v in speaking if v != turns[k]["speaker"]]))
        [audio] = speak(listener, [words["back"][n]])
        backs.append(
            {
                "host": k,
                "speaker": listener,
                "said": words["back"][n],
                "audio": through(listener, audio, rng),
                "cued": n < 2,
            }
        )
    rows, pieces, cursor = [], [], 0.8
    for k, turn in enumerate(turns):
        if k == 0:
            start = cursor
        elif k in overlapped:
            start = cursor - rng.uniform(0.4, 1.0)
        elif turn["kind"] == "dash" and turns[k - 1]["kind"] == "dash":
            start = cursor + rng.uniform(0.1, 0.25)
        elif rng.uniform() < 0.75:
            start = cursor + rng.uniform(0.05, 0.3)
        else:
            start = cursor + rng.uniform(0.4, 0.8)
        end = start + turn["audio"].size / RATE
        pieces.append((start, turn["audio"]))
        row = {"speaker": turn["speaker"], "said": turn["said"], "speech": [round(start, 3), round(end, 3)]}
        row.update({flag: True for flag in ("overlapped",) if k in overlapped})
        if turn["kind"] != "line":
            row[turn["kind"]] = True
        if "noise" in turn:
            row["noise"] = turn["noise"]
        rows.append(row)
        for back in backs:
            if back["host"] == k:
                b = start + rng.uniform(0.4, 0.6) * (end - start)
                pieces.append((b, back["audio"]))
                back_row = {
                    "speaker": back["speaker"],
                    "said": back["said"],
                    "speech": [round(b, 3), round(b + back["audio"].size / RATE, 3)],
                    "backchannel": True,
                }
                if back["cued"]:
                    rows.append(back_row)
                else:
                    row["uncued"] = back_row  # spoken over the line, in no cue
        cursor = max(cursor, end)
    seconds = cursor + 1.0
    mix = np.zeros(int(seconds * RATE))
    if bed_db is not None:
        mix += SPEECH_RMS * 10 ** (-bed_db / 20) * (street if other else jazz)(seconds, rng)
    for start, audio in pieces:
        a = int(round(start * RATE))
        mix[a : a + audio.size] += audio
    mix = np.clip(mix, -1, 1).astype(np.float32)
    # Cues lead and trail the speech by up to 0.15 s; quick turns' cues touch; the dash cue holds both voices.
    cues = []
    for k, row in enumerate(rows):
        a, b = row["speech"]
        if row.get("backchannel"):
            cue = [a - 0.05, b + 0.1]
        else:
            cue = [a - rng.uniform(0, 0.15), b + rng.uniform(0, 0.15)]
            before = next((c for c, r in zip(reversed(cues), reversed(rows[:k])) if not r.get("backchannel")), None)
            prev = next((r for r in reversed(rows[:k]) if not r.get("backchannel")), None)
            if before is not None and before[1] > cue[0] and prev["speech"][1] <= a:
                before[1] = cue[0] = max(prev["speech"][1], min(cue[0], before[1]))
        cues.append(cue)
    for k, row in enumerate(rows):
        if row.get("dash") and k + 1 < len(rows) and rows[k + 1].get("dash"):
            cues[k][1] = cues[k + 1][1]
            cues[k + 1][0] = cues[k][0]
    order = sorted(range(len(rows)), key=lambda k: (cues[k][0], k))
    rows, cues = [rows[k] for k in order], [cues[k] for k in order]
    for k, (row, (a, b)) in enumerate(zip(rows, cues)):
        row["line"] = k + 1
        row["cue"] = [round(a, 3), round(b, 3)]
        row["text"] = row["said"]
    labelled, plain, k = [], [], 0
    while k < len(rows):
        row = rows[k]
        if row.get("dash"):
            other = rows[k + 1]
            labelled.append((*row["cue"], f"- {row['speaker']}: {row['said']}\n- {other['speaker']}: {other['said']}"))
            plain.append((*row["cue"], f"- {row['said']}\n- {other['said']}"))
            k += 2
            continue
        labelled.append((*row["cue"], f"{row['speaker']}: {row['said']}"))
        plain.append((*row["cue"], row["said"]))
        k += 1
    audio_path = folder / "film.wav"
    sf.write(audio_path, mix, RATE, subtype="PCM_16")
    subs, unlabelled = folder / f"film.{language}.srt", folder / "film.unlabelled.srt"
    write_srt(subs, labelled)
    write_srt(unlabelled, plain)
    speech = [
        {"speaker": r["speaker"], "start": r["speech"][0], "end": r["speech"][1], "line": r["line"]} for r in rows
    ]
    speech += [
        {
            "speaker": r["uncued"]["speaker"],
            "start": r["uncued"]["speech"][0],
            "end": r["uncued"]["speech"][1],
            "line": None,
        }
        for r in rows
        if "uncued" in r
    ]
    truth = write_truth(folder, seed=seed, bed_db=bed_db, seconds=seconds, cast=cast, lines=rows, speech=speech)
    truth["language"] = language
    return Film(folder, audio_path, subs, unlabelled, truth)
