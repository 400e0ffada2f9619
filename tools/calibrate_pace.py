"""Calibrate omnidub's pace model against real synthesized speech, and measure it.

    python tools/calibrate_pace.py measure   # synthesize tools/pace_lines.tsv, write tests/data/pace_speech.json
    python tools/calibrate_pace.py fit       # fit the per-language rates, write omnidub/data/pace.json
    python tools/calibrate_pace.py report    # the held-out figures (docs/translate.md, "Pace")

The synthesizers come from Debian (main: espeak-ng, flite, festival with kal/ked/slt; contrib and non-free:
mbrola with its br1, br4, es1, es3, us1, us2 voices, festvox-ellpc11k (festival's Spanish), rhvoice with
rhvoice-english and rhvoice-brazilian-portuguese, libttspico-utils: add `contrib non-free` to the apt sources'
components first). A voice whose program or voice files are missing is skipped and said (a later `measure --voice`
adds it, keeping the others). Speech length is the synthesized file with leading and trailing silence trimmed by
upstream OmniVoice's rule (-50 dBFS), the rule omnidub applies to its own renders.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import soundfile as sf

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LINES = ROOT / "tools" / "pace_lines.tsv"
SPEECH = ROOT / "tests" / "data" / "pace_speech.json"
MODEL = ROOT / "omnidub" / "data" / "pace.json"
LANGUAGES = ("en", "pt", "es")
# One in four lines (by position) is held out of the fit: the figures and the tests judge the model on those.
HELD_OUT_EVERY = 4

# voice name -> (synthesizer, language, how to call it). Several voices per synthesizer where they differ in pace.
VOICES = {
    "espeak-ng/en-us": ("espeak-ng", "en", ["espeak-ng", "-v", "en-us", "-w", "{out}", "{text}"]),
    "espeak-ng/pt-br": ("espeak-ng", "pt", ["espeak-ng", "-v", "pt-br", "-w", "{out}", "{text}"]),
    "espeak-ng/es": ("espeak-ng", "es", ["espeak-ng", "-v", "es", "-w", "{out}", "{text}"]),
    "mbrola/us1": ("mbrola", "en", ["espeak-ng", "-v", "mb-us1", "-w", "{out}", "{text}"]),
    "mbrola/us2": ("mbrola", "en", ["espeak-ng", "-v", "mb-us2", "-w", "{out}", "{text}"]),
    "mbrola/br1": ("mbrola", "pt", ["espeak-ng", "-v", "mb-br1", "-w", "{out}", "{text}"]),
    "mbrola/br4": ("mbrola", "pt", ["espeak-ng", "-v", "mb-br4", "-w", "{out}", "{text}"]),
    "mbrola/es1": ("mbrola", "es", ["espeak-ng", "-v", "mb-es1", "-w", "{out}", "{text}"]),
    "mbrola/es3": ("mbrola", "es", ["espeak-ng", "-v", "mb-es3", "-w", "{out}", "{text}"]),
    "flite/slt": ("flite", "en", ["flite", "-voice", "slt", "-t", "{text}", "-o", "{out}"]),
    "flite/rms": ("flite", "en", ["flite", "-voice", "rms", "-t", "{text}", "-o", "{out}"]),
    "flite/awb": ("flite", "en", ["flite", "-voice", "awb", "-t", "{text}", "-o", "{out}"]),
    "festival/kal_diphone": ("festival", "en", ["text2wave", "-eval", "(voice_kal_diphone)", "-o", "{out}"]),
    "festival/slt_hts": ("festival", "en", ["text2wave", "-eval", "(voice_cmu_us_slt_arctic_hts)", "-o", "{out}"]),
    "festival/el_diphone": ("festival", "es", ["text2wave", "-eval", "(voice_el_diphone)", "-o", "{out}"]),
    "rhvoice/clb": ("rhvoice", "en", ["RHVoice-test", "-p", "clb", "-o", "{out}"]),
    "rhvoice/alan": ("rhvoice", "en", ["RHVoice-test", "-p", "alan", "-o", "{out}"]),
    "rhvoice/leticia": ("rhvoice", "pt", ["RHVoice-test", "-p", "Leticia-F123", "-o", "{out}"]),
    "pico/en-US": ("pico", "en", ["pico2wave", "-l", "en-US", "-w", "{out}", "{text}"]),
    "pico/es-ES": ("pico", "es", ["pico2wave", "-l", "es-ES", "-w", "{out}", "{text}"]),
}


def read_lines() -> list[dict[str, str]]:
    with LINES.open(encoding="utf-8", newline="") as f:
        return [dict(row) for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]


def speech_seconds(path: Path) -> float:
    """The file's length with leading and trailing silence trimmed by upstream's rule."""
    from omnidub.backends.onnx.audio import remove_silence

    audio, rate = sf.read(str(path), dtype="float32", always_2d=True)
    trimmed = remove_silence(audio.mean(axis=1), rate, 0, 0, 0)
    return trimmed.size / rate


def synthesize(voice: str, text: str, work: Path) -> float:
    synthesizer, language, command = VOICES[voice]
    out = work / f"{abs(hash((voice, text)))}.wav"
    args = [part.format(out=out, text=text) for part in command]
    # festival and RHVoice read the text from stdin; festival's Spanish voice reads Latin-1.
    stdin = None if "{text}" in command else text.encode("latin-1" if synthesizer == "festival" else "utf-8")
    subprocess.run(args, input=stdin, check=True, capture_output=True, timeout=120)
    try:
        return round(speech_seconds(out), 3)
    finally:
        out.unlink(missing_ok=True)


def measure(args) -> None:
    lines = read_lines()
    known = json.loads(SPEECH.read_text(encoding="utf-8")) if SPEECH.exists() and not args.fresh else {}
    voices = {}
    with tempfile.TemporaryDirectory(prefix="omnidub-pace-") as tmp:
        for voice, (synthesizer, language, command) in VOICES.items():
            if args.voice and voice not in args.voice:
                if voice in known.get("voices", {}):
                    voices[voice] = known["voices"][voice]
                continue
            if shutil.which(command[0]) is None:
                print(f"{voice}: {command[0]} is not installed; skipped", file=sys.stderr)
                continue
            texts = [line[language] for line in lines]
            try:
                synthesize(voice, texts[0], Path(tmp))
            except subprocess.CalledProcessError as exc:  # the program is here, the voice is not
                print(f"{voice}: {exc.stderr.decode(errors='replace').strip()[:200]}; skipped", file=sys.stderr)
                continue
            with ThreadPoolExecutor(args.jobs) as pool:
                seconds = list(pool.map(synthesize, [voice] * len(texts), texts, [Path(tmp)] * len(texts)))
            voices[voice] = {"synthesizer": synthesizer, "language": language, "seconds": seconds}
            print(f"{voice}: {len(seconds)} lines, {sum(seconds):.0f} s of speech", file=sys.stderr)
    data = {
        "about": "Real synthesized speech: seconds per line (silence trimmed at the edges), per voice; "
        "regenerate with tools/calibrate_pace.py measure",
        "held_out_every": HELD_OUT_EVERY,
        "lines": lines,
        "voices": voices,
    }
    write_speech(data)
    print(f"wrote {SPEECH.relative_to(ROOT)}", file=sys.stderr)


def write_speech(data: dict) -> None:
    """The measurements, one line of text or one voice a row (small, and readable in a diff)."""
    rows = [f'"about": {json.dumps(data["about"])}', f'"held_out_every": {data["held_out_every"]}']
    lines = ",\n".join(json.dumps(line, ensure_ascii=False) for line in data["lines"])
    voices = ",\n".join(f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in data["voices"].items())
    text = "{\n" + ",\n".join(rows) + ',\n"lines": [\n' + lines + '\n],\n"voices": {\n' + voices + "\n}\n}\n"
    assert json.loads(text) == data
    SPEECH.write_text(text, encoding="utf-8")


def held_out(k: int) -> bool:
    return k % HELD_OUT_EVERY == HELD_OUT_EVERY - 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="synthesize every line with every voice and measure its speech")
    m.add_argument("--voice", action="append", help="measure only this voice (the others are kept)")
    m.add_argument("--jobs", type=int, default=2)
    m.add_argument("--fresh", action="store_true", help="forget voices measured before")
    sub.add_parser("fit", help="fit the per-language rates on the lines not held out")
    sub.add_parser("report", help="the held-out figures, before (upstream's estimator) and after")
    args = parser.parse_args()
    {"measure": measure, "fit": fit, "report": report}[args.command](args)


# Voices of one synthesizer in two languages: a line cloned from a clip keeps the clip's voice and pace, as a
# synthesizer keeps its own in both. (English voice, voice of the translation.)
PAIRS = (
    ("espeak-ng/en-us", "espeak-ng/pt-br"),
    ("mbrola/us1", "mbrola/br4"),
    ("mbrola/us2", "mbrola/br1"),
    ("rhvoice/clb", "rhvoice/leticia"),
    ("espeak-ng/en-us", "espeak-ng/es"),
    ("mbrola/us1", "mbrola/es3"),
    ("mbrola/us2", "mbrola/es1"),
    ("festival/kal_diphone", "festival/el_diphone"),
    ("pico/en-US", "pico/es-ES"),
)
# Feature sets compared in the report (indices into pace.FEATURES); FITTED is the one the model uses: long vowels
# and stress helped a line's length a little within a language and hurt the ratio across languages.
SETS = {
    "phones alike": None,  # consonants + vowels as one count, and the line's constant
    "consonants, vowels": (0, 1, 7),
    "+ long vowels, stress": (0, 1, 2, 3, 7),
    "+ words, pauses": (0, 1, 4, 5, 6, 7),
    "all": (0, 1, 2, 3, 4, 5, 6, 7),
}
FITTED = "+ words, pauses"


def load_speech() -> dict:
    return json.loads(SPEECH.read_text(encoding="utf-8"))


def feature_rows(lines, language: str, columns=None) -> np.ndarray:
    from omnidub import pace

    rows = []
    for line in lines:
        found = pace.features(line[language], language)
        if found is None:
            raise SystemExit(f"espeak-ng cannot phonemize {language}: {pace.unavailable()}")
        if columns is None:  # phones alike: consonants + vowels, and the line's constant
            rows.append((found[0] + found[1], found[7]))
        else:
            rows.append(tuple(found[c] for c in columns))
    return np.array(rows, dtype=float)


def fit_weights(x: np.ndarray, seconds: list[np.ndarray]) -> np.ndarray:
    """Weights w (non-negative) and a pace a_v per voice so that each voice's seconds ~ a_v * x @ w, in relative
    error (a long line counts no more than a short one); the voices' paces average 1 (geometric mean), so w is
    the language's base rate."""
    from scipy.optimize import nnls

    paces = np.ones(len(seconds))
    w = np.zeros(x.shape[1])
    for _ in range(50):
        a = np.vstack([p * x / s[:, None] for p, s in zip(paces, seconds)])
        w, _ = nnls(a, np.ones(a.shape[0]))
        predicted = x @ w
        paces = np.array([np.sum(predicted / s) / np.sum((predicted / s) ** 2) for s in seconds])
        scale = np.exp(np.mean(np.log(paces)))
        paces, w = paces / scale, w * scale
    return w, paces


def split(data) -> tuple[list[int], list[int]]:
    n = len(data["lines"])
    return [k for k in range(n) if not held_out(k)], [k for k in range(n) if held_out(k)]


def fit_languages(data, columns) -> dict[str, np.ndarray]:
    """Each language's weights on the fit lines: English's base is its voices' average pace; another language's is
    scaled so that a synthesizer's voices in it and in English speak at one pace (as a clone speaks a line at its
    clip's pace, whatever the languages)."""
    train, _ = split(data)
    lines = [data["lines"][k] for k in train]
    weights, paces = {}, {}
    for language in LANGUAGES:
        names = [name for name, v in data["voices"].items() if v["language"] == language]
        x = feature_rows(lines, language, columns)
        seconds = [np.array(data["voices"][name]["seconds"], dtype=float)[train] for name in names]
        weights[language], found = fit_weights(x, seconds)
        paces.update(zip(names, found))
    for language in LANGUAGES:
        ratios = [np.log(paces[o] / paces[e]) for e, o in PAIRS if data["voices"][o]["language"] == language]
        weights[language] = weights[language] * (float(np.exp(np.mean(ratios))) if ratios else 1.0)
    return weights


def fit(args) -> None:
    from omnidub import pace

    data = load_speech()
    columns = SETS[FITTED]
    fitted = fit_languages(data, columns)
    languages = {}
    for language, w in fitted.items():
        every = [0.0] * len(pace.FEATURES)  # features left out weigh nothing
        for c, v in zip(columns, w):
            every[c] = round(float(v), 5)
        languages[language] = every
        print(f"{language}: " + ", ".join(f"{n} {v:.4f}" for n, v in zip(pace.FEATURES, every)))
    # A language not calibrated: the calibrated ones' average weights.
    default = np.mean([languages[lang] for lang in LANGUAGES], axis=0)
    model = {
        "about": "omnidub's pace model: seconds per feature of a line's phonemes at each language's base rate "
        "(English: the calibrated synthesizers' average; the others scaled to the pace of the same synthesizers' "
        "English voices); fitted by tools/calibrate_pace.py fit",
        "version": 1,
        "phonemizer": pace.phonemizer(),
        "features": list(pace.FEATURES),
        "languages": languages,
        "default": [round(float(v), 5) for v in default],
    }
    MODEL.write_text(json.dumps(model, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {MODEL.relative_to(ROOT)}", file=sys.stderr)


def corr(a, b) -> float:
    return float(np.corrcoef(np.asarray(a, dtype=float), np.asarray(b, dtype=float))[0, 1])


def compare_features(data) -> None:
    """Which features measurably help, each set fitted on the fit lines and judged on the held-out ones: the median
    relative error of a line's length within a language (each voice's own pace fitted on the fit lines), and across
    languages the correlation of the predicted and real length ratio and the fit agreement (1.25x cap) over PAIRS."""
    train, test = split(data)
    held = [data["lines"][k] for k in test]
    print("| features | median error, en | pt | es | r ratio (mean of pairs) | fit agrees (mean of pairs) |")
    print("|---|---|---|---|---|---|")
    for label, columns in SETS.items():
        weights = fit_languages(data, columns)
        x = {lang: feature_rows(held, lang, columns) for lang in LANGUAGES}
        errors = []
        for language in LANGUAGES:
            found = []
            x_train = feature_rows([data["lines"][k] for k in train], language, columns)
            for v in (v for v in data["voices"].values() if v["language"] == language):
                s_train, s_test = np.array(v["seconds"])[train], np.array(v["seconds"])[test]
                p = x_train @ weights[language]
                a = np.sum(p / s_train) / np.sum((p / s_train) ** 2)
                found += list(np.abs(a * (x[language] @ weights[language]) - s_test) / s_test)
            errors.append(np.median(found))
        rs, agree = [], []
        for en, other in PAIRS:
            language = data["voices"][other]["language"]
            s_en = np.array(data["voices"][en]["seconds"])[test]
            s_to = np.array(data["voices"][other]["seconds"])[test]
            predicted = (x[language] @ weights[language]) / (x["en"] @ weights["en"]) * s_en
            rs.append(corr(predicted / s_en, s_to / s_en))
            agree.append(np.mean((predicted <= 1.25 * s_en) == (s_to <= 1.25 * s_en)))
        marked = f"**{label}**" if label == FITTED else label
        print(
            f"| {marked} | " + " | ".join(f"{e:.1%}" for e in errors) + f" | {np.mean(rs):.3f} | {np.mean(agree):.1%} |"
        )
    print()


def clip_paces(data) -> None:
    """A line predicted at the pace of another clip of the same voice (the render's case): the clip a line of
    about 3 s from the fit lines, or a one-word line; the relative error of the held-out lines' lengths."""
    from omnidub import duration, pace

    train, test = split(data)
    lines = data["lines"]
    print(
        "| clip | language | median error, characters | median error, phonemes | "
        "90th pct, characters | 90th pct, phonemes |"
    )
    print("|---|---|---|---|---|---|")
    for label, pick in (("about 3 s", lambda s: np.argmin(np.abs(s - 3.0))), ("shortest", np.argmin)):
        for language in LANGUAGES:
            before, after = [], []
            for v in (v for v in data["voices"].values() if v["language"] == language):
                seconds = np.array(v["seconds"])
                k = train[int(pick(seconds[train]))]
                ref, s_ref = lines[k][language], float(seconds[k])
                for j in test:
                    real = seconds[j]
                    text = lines[j][language]
                    before.append(abs(duration.natural_seconds(text, ref, s_ref) - real) / real)
                    after.append(
                        abs(pace.natural_seconds(text, language, pace.Pace(ref, s_ref, language)) - real) / real
                    )
            print(
                f"| {label} | {language} | {np.median(before):.1%} | {np.median(after):.1%} | "
                f"{np.percentile(before, 90):.1%} | {np.percentile(after, 90):.1%} |"
            )
    print()


def report(args) -> None:
    from omnidub import duration, pace

    data = load_speech()
    _, test = split(data)
    lines = [data["lines"][k] for k in test]
    voices = data["voices"]
    print(f"held out: {len(lines)} of {len(data['lines'])} lines; model: {pace.model()}\n")
    compare_features(data)
    clip_paces(data)
    print("| voice | language | r length, characters | r length, phonemes |")
    print("|---|---|---|---|")
    for name, voice in voices.items():
        language, real = voice["language"], np.array(voice["seconds"])[test]
        before = [duration.natural_seconds(line[language]) for line in lines]
        after = [pace.base_seconds(line[language], language) for line in lines]
        print(f"| {name} | {language} | {corr(before, real):.3f} | {corr(after, real):.3f} |")
    print()
    for cap in (1.25, 1.0):
        print(f"speed-up cap {cap}:\n")
        print(
            "| English voice -> voice | r ratio, characters | r ratio, phonemes | predicted / real, characters | "
            "predicted / real, phonemes | fit agrees, characters | fit agrees, phonemes | fits, real |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for en, other in PAIRS:
            if en not in voices or other not in voices:
                continue
            language = voices[other]["language"]
            s_en, s_to = np.array(voices[en]["seconds"])[test], np.array(voices[other]["seconds"])[test]
            before = np.array([duration.natural_seconds(line[language], line["en"], s) for line, s in zip(lines, s_en)])
            after = np.array(
                [
                    pace.natural_seconds(line[language], language, pace.Pace(line["en"], s, "en"))
                    for line, s in zip(lines, s_en)
                ]
            )
            real_fit = s_to <= cap * s_en
            agree = [np.mean((predicted <= cap * s_en) == real_fit) for predicted in (before, after)]
            print(
                f"| {en} -> {other} | {corr(before / s_en, s_to / s_en):.3f} | {corr(after / s_en, s_to / s_en):.3f} "
                f"| {np.median(before / s_to):.2f} | {np.median(after / s_to):.2f} "
                f"| {agree[0]:.1%} | {agree[1]:.1%} "
                f"| {np.mean(real_fit):.1%} |"
            )
        print()


if __name__ == "__main__":
    main()
