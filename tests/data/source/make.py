"""Build the source-cloning fixtures: a short scene of three synthetic voices over a music-like bed.

Needs Debian's `flite` and `espeak-ng` (only to regenerate; the tests read the committed files):

    python tests/data/source/make.py

Writes scene.opus (the source: mono Opus, 16 kHz), original.srt (labelled cues), original-unlabelled.srt,
truth.json (who really speaks in each cue), dub.srt (a Spanish translation on the same cues) and
dub-retimed.srt (the translation retimed: merged, shifted and extra cues).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import av
import numpy as np
import soundfile as sf

HERE = Path(__file__).resolve().parent
RATE = 16000
SEED = 22

VOICES = {
    "ALICE": ["flite", "-voice", "slt"],
    "BOB": ["flite", "-voice", "rms"],
    "CAROL": ["espeak-ng", "-v", "en-us+f4", "-s", "150"],
}

# (speaker, text, pause before it in seconds, Spanish translation). A negative pause overlaps the speech before.
SCENE = [
    (
        "ALICE",
        "Good morning everyone. Thank you all for coming in so early today.",
        0.6,
        "Buenos días a todos. Gracias por venir tan temprano hoy.",
    ),
    (
        "BOB",
        "No problem at all. The coffee here is worth the trip.",
        0.7,
        "No hay problema. El café de aquí vale el viaje.",
    ),
    (
        "ALICE",
        "We have a lot to cover before the launch next week.",
        0.8,
        "Tenemos mucho que tratar antes del lanzamiento de la semana que viene.",
    ),
    ("CAROL", "Is the new design ready for testing?", 0.7, "¿Está listo el nuevo diseño para las pruebas?"),
    (
        "BOB",
        "Almost. The team finished the last screens yesterday evening.",
        0.7,
        "Casi. El equipo terminó las últimas pantallas ayer por la tarde.",
    ),
    ("CAROL", "Great.", 0.6, "Genial."),
    (
        "ALICE",
        "Then let us review the schedule and the budget together.",
        0.8,
        "Entonces repasemos juntos el calendario y el presupuesto.",
    ),
    ("BOB", "I brought all the numbers with me.", -0.45, "Traje todos los números."),
    (
        "CAROL",
        "The users asked for a simpler way to share their files, so we changed the whole menu.",
        0.8,
        "Los usuarios pidieron una forma más sencilla de compartir sus archivos, así que cambiamos todo el menú.",
    ),
    # Alice's cue also covers Bob's reply, which has no cue of its own: a mis-timed subtitle.
    ("ALICE", "That sounds very promising.", 0.7, "Eso suena muy prometedor."),
    (
        "BOB",
        "Let me show you the first results on the big screen.",
        0.9,
        "Dejadme enseñaros los primeros resultados en la pantalla grande.",
    ),
    (
        "CAROL",
        "I will take notes for everyone who could not make it.",
        0.7,
        "Tomaré notas para todos los que no pudieron venir.",
    ),
]
UNCUED = {9: ("BOB", "Indeed it does.", 0.25)}  # spoken right after scene line 9 (0-based), inside its cue


def speak(speaker: str, text: str, folder: Path) -> np.ndarray:
    path = folder / "line.wav"
    command = VOICES[speaker]
    if command[0] == "flite":
        subprocess.run([*command, "-t", text, "-o", str(path)], check=True)
    else:
        subprocess.run([*command, "-w", str(path), text], check=True)
    audio, rate = sf.read(path, dtype="float32")
    if rate != RATE:
        import soxr

        audio = soxr.resample(audio, rate, RATE)
    loud = np.nonzero(np.abs(audio) > 0.02 * np.abs(audio).max())[0]
    audio = audio[loud[0] : loud[-1] + 1]
    return 0.12 * audio / np.sqrt(np.mean(audio**2))  # every voice at the same speech level


def bed(seconds: float, rng: np.random.Generator) -> np.ndarray:
    """A music-like bed: a slow chord progression with harmonics, a kick and a hi-hat, about 14 dB under the speech."""
    t = np.arange(int(seconds * RATE)) / RATE
    out = np.zeros_like(t)
    chords = [(110.0, 138.6, 164.8), (98.0, 123.5, 146.8), (87.3, 110.0, 130.8), (98.0, 123.5, 146.8)]
    bar = 2.0
    for k, chord in enumerate(chords * int(seconds // (bar * len(chords)) + 1)):
        part = (t >= k * bar) & (t < (k + 1) * bar)
        local = t[part] - k * bar
        envelope = np.minimum(1.0, local / 0.05) * np.exp(-local / 1.5)
        for f in chord:
            for h, amp in ((1, 1.0), (2, 0.4), (3, 0.2)):
                out[part] += amp * envelope * np.sin(2 * np.pi * f * h * t[part])
    beat = 0.5
    for k in range(int(seconds / beat)):
        start = int(k * beat * RATE)
        n = min(int(0.15 * RATE), t.size - start)
        local = np.arange(n) / RATE
        out[start : start + n] += (
            1.5 * np.exp(-local / 0.04) * np.sin(2 * np.pi * (60 + 60 * np.exp(-local / 0.02)) * local)
        )
        hat = int(start + beat / 2 * RATE)
        m = min(int(0.04 * RATE), max(0, t.size - hat))
        out[hat : hat + m] += 0.5 * np.exp(-np.arange(m) / RATE / 0.01) * np.diff(rng.standard_normal(m + 1))
    return (0.12 * 10 ** (-14 / 20)) * out / np.sqrt(np.mean(out**2))


def clock(seconds: float) -> str:
    ms = int(round(seconds * 1000))
    return f"{ms // 3600000:02d}:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d}"


def write_srt(path: Path, cues: list[tuple[float, float, str]]) -> None:
    blocks = [f"{k}\n{clock(a)} --> {clock(b)}\n{text}\n" for k, (a, b, text) in enumerate(cues, 1)]
    path.write_text("\n".join(blocks), encoding="utf-8")


def main() -> None:
    rng = np.random.default_rng(SEED)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        pieces, spans, uncued, cursor = [], [], [], 0.5
        for i, (speaker, text, pause, _) in enumerate(SCENE):
            audio = speak(speaker, text, folder)
            start = cursor + pause
            pieces.append((start, audio))
            end = start + audio.size / RATE
            speech_end = end
            if i in UNCUED:
                who, said, gap = UNCUED[i]
                extra = speak(who, said, folder)
                pieces.append((end + gap, extra))
                speech_end = end + gap + extra.size / RATE
                uncued.append(
                    {
                        "after_line": i + 1,
                        "speaker": who,
                        "text": said,
                        "speech": [round(end + gap, 3), round(speech_end, 3)],
                    }
                )
            spans.append((start, speech_end))
            cursor = max(cursor, speech_end)
        seconds = cursor + 1.0
    mix = bed(seconds, rng)
    for start, audio in pieces:
        a = int(round(start * RATE))
        mix[a : a + audio.size] += audio
    mix = np.clip(mix, -1, 1).astype(np.float32)

    # Cues start 0.1 s before the speech and linger 0.3 s after it, but never into the next speech.
    cues = []
    for i, (start, end) in enumerate(spans):
        following = spans[i + 1][0] if i + 1 < len(spans) else seconds
        cue_end = end + 0.3 if following < end else min(end + 0.3, following - 0.05)
        cues.append((max(0.0, start - 0.1), cue_end))
    write_srt(HERE / "original.srt", [(a, b, f"{s}: {text}") for (a, b), (s, text, _, _) in zip(cues, SCENE)])
    write_srt(HERE / "original-unlabelled.srt", [(a, b, text) for (a, b), (_, text, _, _) in zip(cues, SCENE)])
    write_srt(HERE / "dub.srt", [(a, b, f"{s}: {es}") for (a, b), (s, _, _, es) in zip(cues, SCENE)])
    retimed = [
        (cues[0][0] + 0.3, cues[0][1] + 0.3, f"ALICE: {SCENE[0][3]}"),
        # one dub cue over two original cues of different speakers: matches several
        (cues[1][0], cues[2][1], f"BOB: {SCENE[1][3]} {SCENE[2][3]}"),
    ]
    retimed += [(a - 0.2, b - 0.2, f"{s}: {es}") for (a, b), (s, _, _, es) in zip(cues[3:], SCENE[3:])]
    retimed.append((seconds - 0.9, seconds - 0.2, "ALICE: Hasta luego."))  # over no original cue
    write_srt(HERE / "dub-retimed.srt", retimed)
    # Each line's speech runs from its speaker's first word to the last word heard in its cue (uncued speech too).
    rows = [
        json.dumps({"line": k, "speaker": s, "speech": [round(a, 3), round(b, 3)]})
        for k, ((a, b), (s, _, _, _)) in enumerate(zip(spans, SCENE), 1)
    ]
    text = '{"seconds": %s,\n "lines": [\n  %s\n ],\n "uncued": %s}\n' % (
        round(seconds, 3),
        ",\n  ".join(rows),
        json.dumps(uncued),
    )
    (HERE / "truth.json").write_text(text, encoding="utf-8")
    encode_opus(HERE / "scene.opus", mix)


def encode_opus(path: Path, audio: np.ndarray) -> None:
    with av.open(str(path), "w", format="ogg") as out:
        stream = out.add_stream("libopus", rate=RATE, layout="mono")
        stream.bit_rate = 32000
        for start in range(0, audio.size, 960):
            frame = av.AudioFrame.from_ndarray(audio[None, start : start + 960].copy(), format="flt", layout="mono")
            frame.sample_rate, frame.pts = RATE, start
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)


if __name__ == "__main__":
    main()
