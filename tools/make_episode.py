"""Build an episode to dub: a 22-minute video of 300 lines spoken by six voices of Debian's synthesizers (flite,
festival, espeak-ng; tests/films.py) over a music bed 12 dB under the speech, with its labelled English subtitles
and the truth (who says what, where). The picture is a bar moving over black (64x48, 5 frames a second), so the
dub's video path runs too.

Usage: python tools/make_episode.py OUT_DIR [--lines 300] [--minutes 22] [--seed 7] [--bed 12]

Writes OUT_DIR/episode.mp4, OUT_DIR/episode.en.srt and OUT_DIR/truth.json; nothing of it is committed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

CAST = ("NORA", "OWEN", "BRUNO", "MAYA", "IRIS", "HANK")  # flite slt, rms; festival kal; HTS slt; espeak-ng f4, m4

# Sentences made from parts, so that 300 lines are 300 different things to translate and to say.
OPENERS = ["", "", "", "Listen, ", "Well, ", "Honestly, ", "You know, ", "Look, "]
SUBJECTS = ["my brother", "the neighbour", "your cousin", "the old captain", "our teacher", "the night guard",
            "the new doctor", "my aunt", "the baker", "the mayor", "the tall stranger", "the driver"]  # fmt: skip
ACTIONS = ["left the keys", "found a letter", "lost the map", "hid the money", "painted the door", "fixed the radio",
           "sold the boat", "opened the box", "forgot the tickets", "broke the window", "moved the car",
           "locked the gate"]  # fmt: skip
PLACES = ["in the kitchen", "at the station", "behind the church", "near the river", "by the harbour", "on the train",
          "at the market", "under the bridge", "in the garden", "at the museum", "on the roof",
          "in the old mill"]  # fmt: skip
TIMES = ["this morning", "last night", "before the storm", "after lunch", "on Sunday", "an hour ago",
         "during the concert", "before anyone woke up"]  # fmt: skip
QUESTIONS = ["Did {s} really {a_base} {p}?", "Why would {s} {a_base} {p} {t}?", "Who told you that {s} {a} {p}?",
             "Are you sure {s} {a} {t}?"]  # fmt: skip
STATEMENTS = ["{o}{s} {a} {p} {t}.", "{o}I think {s} {a} {p}.", "{o}Nobody believes that {s} {a} {t}.",
              "{o}{s} {a} {p}, and then everybody went home.", "I saw that {s} {a} {p} {t}."]  # fmt: skip
REPLIES = ["Yes.", "No.", "Fine.", "Really?", "Of course.", "Not today.", "I know.", "Maybe later.", "Go on.", "Why?",
           "Thank you.", "Be careful."]  # fmt: skip
BASE = {"left": "leave", "found": "find", "lost": "lose", "hid": "hide", "painted": "paint", "fixed": "fix",
        "sold": "sell", "opened": "open", "forgot": "forget", "broke": "break", "moved": "move",
        "locked": "lock"}  # fmt: skip


def sentences(count: int, rng: np.random.Generator) -> list[str]:
    """``count`` different lines: statements and questions of 6-16 words, with a one- or two-word reply now and
    then (a fifth of them), as dialogue has."""
    made: list[str] = []
    seen: set[str] = set()
    while len(made) < count:
        if made and rng.random() < 0.2:
            text = str(rng.choice(REPLIES))
            if made[-1] in REPLIES:
                continue
        else:
            action = str(rng.choice(ACTIONS))
            verb, rest = action.split(" ", 1)
            fill = dict(
                o=str(rng.choice(OPENERS)),
                s=str(rng.choice(SUBJECTS)),
                a=action,
                a_base=f"{BASE[verb]} {rest}",
                p=str(rng.choice(PLACES)),
                t=str(rng.choice(TIMES)),
            )
            template = str(rng.choice(QUESTIONS if rng.random() < 0.3 else STATEMENTS))
            text = template.format(**fill)
            text = text[0].upper() + text[1:]
            if text in seen:
                continue
        seen.add(text)
        made.append(text)
    return made


def make_episode(folder: Path, *, lines: int = 300, minutes: float = 22.0, seed: int = 7, bed_db: float = 12.0):
    """The episode's video, subtitles and truth in ``folder``; returns their paths."""
    from films import RATE, mixed, speak, write_srt

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    texts = sentences(lines, rng)
    order = [CAST[0]]
    for _ in range(lines - 1):  # no voice twice in a row
        order.append(str(rng.choice([v for v in CAST if v != order[-1]])))
    spoken: dict[int, np.ndarray] = {}
    for voice in CAST:
        mine = [k for k in range(lines) if order[k] == voice]
        said = list(dict.fromkeys(texts[k] for k in mine))  # a reply said twice is spoken once (speak wants each once)
        audio = dict(zip(said, speak(voice, said)))
        for k in mine:
            spoken[k] = audio[texts[k]]
    speech = sum(a.size for a in spoken.values()) / RATE
    # Gaps share out what the speech leaves of the running time, each between 0.3 s and several seconds.
    room = max(minutes * 60 - speech - 2.0, lines * 0.3)
    weights = rng.gamma(2.0, 1.0, lines)
    gaps = 0.3 + (room - 0.3 * lines) * weights / weights.sum()
    pieces, cues, rows, at = [], [], [], 1.0
    for k in range(lines):
        start = at + gaps[k]
        end = start + spoken[k].size / RATE
        pieces.append((start, spoken[k]))
        lead, trail = rng.uniform(-0.2, 0.2, 2)
        previous = rows[-1]["speech"][1] if rows else 0.0
        cue = (max(start - abs(lead), previous + 0.05), end + abs(trail))
        cues.append((cue[0], cue[1], f"{order[k]}: {texts[k]}"))
        rows.append({"line": k + 1, "speaker": order[k], "said": texts[k], "speech": [round(start, 3), round(end, 3)]})
        at = end
    seconds = at + 2.0
    for k in range(lines - 1):  # a cue never runs into the next one's speech
        a, b, text = cues[k]
        cues[k] = (a, min(b, rows[k + 1]["speech"][0] - 0.05), text)
    sound = mixed(pieces, seconds, bed_db, rng)
    video, subs = folder / "episode.mp4", folder / "episode.en.srt"
    _video(video, sound, RATE, seconds)
    write_srt(subs, cues)
    truth = {"seed": seed, "bed_db": bed_db, "seconds": round(seconds, 3), "cast": list(CAST), "lines": rows}
    (folder / "truth.json").write_text(json.dumps(truth, indent=1), encoding="utf-8")
    return video, subs


def _video(path: Path, sound: np.ndarray, rate: int, seconds: float, fps: int = 5) -> None:
    """A small mp4 (mpeg4 picture, AAC stereo sound) of ``sound`` under a bar moving over black."""
    import av

    with av.open(str(path), "w") as out:
        picture = out.add_stream("mpeg4", rate=fps)
        picture.width, picture.height, picture.pix_fmt = 64, 48, "yuv420p"
        audio = out.add_stream("aac", rate=rate, layout="stereo")
        for i in range(int(seconds * fps)):
            image = np.zeros((48, 64, 3), np.uint8)
            image[:, (i * 2) % 64] = 255
            for packet in picture.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                out.mux(packet)
        for packet in picture.encode():
            out.mux(packet)
        size = audio.codec_context.frame_size or 1024
        for start in range(0, len(sound), size):
            chunk = np.ascontiguousarray(np.stack([sound[start : start + size]] * 2))
            frame = av.AudioFrame.from_ndarray(chunk, format="fltp", layout="stereo")
            frame.sample_rate, frame.pts = rate, start
            for packet in audio.encode(frame):
                out.mux(packet)
        for packet in audio.encode():
            out.mux(packet)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--lines", type=int, default=300)
    parser.add_argument("--minutes", type=float, default=22.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--bed", type=float, default=12.0, help="dB the music lies under the speech")
    args = parser.parse_args()
    video, subs = make_episode(args.out, lines=args.lines, minutes=args.minutes, seed=args.seed, bed_db=args.bed)
    print(f"wrote {video} and {subs}")


if __name__ == "__main__":
    main()
