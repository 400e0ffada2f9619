"""Measure `omnidub dub` on a whole episode (tools/make_episode.py): time and peak memory per stage from a cold
cache, a rerun with nothing changed, a rerun after three lines of the translation were edited by hand (only those
render), and a real SIGINT in each stage, each followed by the run that goes on.

Usage: python tools/measure_episode.py EPISODE_DIR --work DIR [--asr-model tiny.en] [--preset fast]
       [--interrupts | --only-interrupts | --again] [--json FILE]

Runs offline (HF_HUB_OFFLINE) with --model synthetic:tiny, each part in a cache of its own under DIR (the synthetic
model linked in), so that the cold run hears, analyses, translates, renders and checks everything. The timed runs
are in this process, through the library (omnidub.api's Session.dubbing, as the command runs it), with resident
memory sampled every 0.2 s; the interrupted ones are the command itself, in a child process, stopped with SIGINT.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

STAGE_LINES = {  # the heading the command prints as each stage begins
    "hear": "hearing the source",
    "voices": "casting the source's voices",
    "translate": "translating",
    "render": "rendering",
    "check": "checking the dub",
}


class Recorder:
    """The dub's listener for the timed runs (an omnidub.progress.Listener): when each stage began, and the resident
    memory's peak in each (sampled every 0.2 s in a thread)."""

    def __init__(self):
        import psutil

        self.process = psutil.Process()
        self.stages: list[list] = []  # [name, started, peak bytes]
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.2):
            rss = self.process.memory_info().rss
            if self.stages:
                self.stages[-1][2] = max(self.stages[-1][2], rss)

    def stage(self, name: str, text: str) -> None:
        self.stages.append([name, time.monotonic(), self.process.memory_info().rss])
        print(f"  {time.monotonic() - self.started:7.1f} s  {text}", flush=True)

    def close(self) -> dict:
        self._stop.set()
        self._thread.join()
        end = time.monotonic()
        found = {}
        for k, (name, started, peak) in enumerate(self.stages):
            until = self.stages[k + 1][1] if k + 1 < len(self.stages) else end
            found[name] = {"seconds": round(until - started, 1), "peak_rss_gb": round(peak / 1e9, 2)}
        found["total"] = {"seconds": round(end - self.started, 1)}
        return found


def listener():
    """A Recorder with every other hook of omnidub's Listener doing nothing."""
    from omnidub.progress import Listener

    return type("Recording", (Recorder, Listener), {})()


def fresh_cache(folder: Path) -> Path:
    """An empty omnidub cache with the synthetic model linked in (built once, elsewhere)."""
    from omnidub.synthetic import build_synthetic

    model = build_synthetic("tiny")
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "synthetic").mkdir(parents=True)
    (folder / "synthetic" / model.name).symlink_to(model, target_is_directory=True)
    return folder


def timed_dub(video: Path, out: Path, args) -> tuple[dict, object]:
    """One dub through the library, as the command runs it; its stages' times and memory, and what it did."""
    from omnidub.api import Session

    recorder = listener()
    session = Session("synthetic:tiny", "cpu", args.preset, args.asr_model)
    try:
        dubbed = session.dubbing(video, "pt", out_dir=out, listener=recorder).run()
    finally:
        session.close()
    return recorder.close(), dubbed


def statuses(render: Path) -> dict:
    from omnidub.journal import read_entries

    counted: dict = {}
    for entry in read_entries(render):
        counted[entry.status] = counted.get(entry.status, 0) + 1
        if entry.status != "cached":
            counted.setdefault("lines", []).append(entry.index)
    return counted


def edit_three(translation: Path) -> list[int]:
    """Three lines of the translation changed by hand (the 10th, 100th and 200th): their cue numbers."""
    text = translation.read_text(encoding="utf-8")
    blocks = text.strip().split("\n\n")
    changed = []
    for k in (9, 99, 199):
        if k < len(blocks):
            lines = blocks[k].split("\n")
            lines[2] = lines[2].rstrip(".?!") + ", sem dúvida."
            blocks[k] = "\n".join(lines)
            changed.append(int(lines[0]))
    translation.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
    return changed


def interrupted_runs(video: Path, work: Path, args) -> list[dict]:
    """The command stopped with a real SIGINT in each stage in turn (a fresh cache and folder), each run going on
    from what the last left; then a run to the end."""
    cache = fresh_cache(work / "cache-interrupts")
    out = work / "interrupts"
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "OMNIDUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "COLUMNS": "300"}
    command = [sys.executable, "-m", "omnidub", "dub", str(video), "--to", "pt", "--model", "synthetic:tiny"]
    command += ["--asr-model", args.asr_model, "--device", "cpu", "--preset", args.preset, "--out", str(out)]
    runs = []
    # Where each run is stopped, and how long after its stage's heading: a while into the work of the long ones.
    stops = (("hear", 30.0), ("voices", 0.0), ("translate", 2.0), ("render", 60.0), ("check", 0.3), (None, 0.0))
    for stage, delay in stops:
        started = time.monotonic()
        process = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
        said: list[str] = []
        reader = threading.Thread(target=said.extend, args=(process.stderr,), daemon=True)
        reader.start()
        sent, at = None, None
        while process.poll() is None:
            time.sleep(0.2)
            if stage is None or sent:
                continue
            heading = STAGE_LINES[stage]
            if at is None and any(line.strip() == heading for line in said):
                at = time.monotonic()
            if at is not None and time.monotonic() - at >= delay:
                process.send_signal(signal.SIGINT)
                sent = round(time.monotonic() - started, 1)
        reader.join(timeout=30)
        stdout = process.stdout.read()
        last = [line for line in "".join(said).splitlines() if line.strip()]
        run = {
            "stop_in": stage,
            "sigint_at_s": sent,
            "exit": process.returncode,
            "seconds": round(time.monotonic() - started, 1),
            "last_line": last[-1] if last else "",
            "review_said": "review the dub" in stdout,
        }
        if (out / "render").is_dir():
            run["render_journal"] = statuses(out / "render")
        print(f"  {json.dumps(run, ensure_ascii=False)}", flush=True)
        runs.append(run)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("episode", type=Path)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--asr-model", default="tiny.en")
    parser.add_argument("--preset", default="fast")
    parser.add_argument("--interrupts", action="store_true", help="also stop the command in each stage")
    parser.add_argument("--only-interrupts", action="store_true", help="only stop the command in each stage")
    parser.add_argument("--again", action="store_true", help="only the reruns, in the folder a cold run left in --work")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"
    from omnidub.cli.app import set_threads

    set_threads()  # as the command does, before torch loads
    from omnidub.hardware import cpu_name

    video = args.episode / "episode.mp4"
    truth = json.loads((args.episode / "truth.json").read_text())
    result = {
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "threads": os.environ.get("OMP_NUM_THREADS"),
        "load_before": [round(x, 2) for x in os.getloadavg()],
        "episode": {"seconds": truth["seconds"], "lines": len(truth["lines"]), "voices": len(truth["cast"])},
        "asr_model": args.asr_model,
        "preset": args.preset,
    }
    if args.only_interrupts:
        print("SIGINT in each stage, each run going on from the last", flush=True)
        result["interrupts"] = interrupted_runs(video, args.work, args)
        return report(result, args)
    out = args.work / "dub"
    if args.again:
        os.environ["OMNIDUB_CACHE"] = str(args.work / "cache")
        return reruns(video, out, args, result)
    os.environ["OMNIDUB_CACHE"] = str(fresh_cache(args.work / "cache"))
    shutil.rmtree(out, ignore_errors=True)
    print("cold run", flush=True)
    result["cold"], dubbed = timed_dub(video, out, args)
    result["cold"]["summary"] = {
        "lines": dubbed.summary.lines,
        "rendered": dubbed.summary.rendered,
        "failed": dubbed.summary.failed,
        "audio_seconds": round(dubbed.summary.audio_seconds, 1),
        "qa": dubbed.report.tally.headline() if dubbed.report else None,
        "exit_code": dubbed.exit_code,
        "spoken_as_predicted": f"{dubbed.predicted - len(dubbed.misjudged)} of {dubbed.predicted}",
    }
    heard = (out / "voices" / "episode.original.srt").read_text(encoding="utf-8")
    result["cold"]["heard_lines"] = len(re.findall(r"^\d+$", heard, re.M))
    reruns(video, out, args, result)


def reruns(video: Path, out: Path, args, result: dict) -> None:
    """A rerun with nothing changed, then one after three lines of the translation were edited by hand."""
    print("rerun, nothing changed", flush=True)
    result["rerun"], _ = timed_dub(video, out, args)
    result["rerun"]["journal"] = statuses(out / "render")
    print("rerun after three lines of the translation were edited", flush=True)
    result["edited_lines"] = edit_three(out / "translation" / "episode.pt.srt")
    result["edited"], _ = timed_dub(video, out, args)
    result["edited"]["journal"] = statuses(out / "render")
    if args.interrupts:
        print("SIGINT in each stage, each run going on from the last", flush=True)
        result["interrupts"] = interrupted_runs(video, args.work, args)
    report(result, args)


def report(result: dict, args) -> None:
    result["load_after"] = [round(x, 2) for x in os.getloadavg()]
    text = json.dumps(result, indent=2, ensure_ascii=False)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
