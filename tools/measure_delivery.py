"""Time a review's delivery after one retake, made whole and then patched, on a copy of a rendered folder.

    python tools/measure_delivery.py RENDERED_FOLDER [--work /tmp/omnidub-delivery] [--lines 5,120]

On a copy of the folder, in one review: the first line given is retaken and delivered whole (no earlier delivery
recorded to patch), then each other line is retaken and delivered, patching the delivery before. Prints, per
delivery, its seconds, the seconds each writer took (stems and mix, dubbed video, subtitles, timelines), what the
audio did and the load average, as JSON. The folder itself is only read.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


TIMES: dict = {}


def timed_writers() -> None:
    """Wrap each writer's write so its seconds land in ``TIMES``."""
    from omnidub.outputs import writers

    for writer in writers.WRITERS:
        cls = type(writer)
        real = cls.write

        def write(self, programme, done, real=real):
            began = time.perf_counter()
            try:
                return real(self, programme, done)
            finally:
                TIMES[self.name] = round(time.perf_counter() - began, 2)

        cls.write = write


def deliveries(folder: Path, lines: list[int]) -> list[dict]:
    from omnidub.api import Session
    from omnidub.outputs.patch import STATE_FILE
    from omnidub.review import Action, Review

    session, project = Session.reopen(folder)
    desk = Review(session, project, speaker_model="none")
    desk.open()

    def settle():
        while desk.status()["busy"] or desk.status()["queued"] or not desk._actions.empty():
            time.sleep(0.05)

    found = []
    try:
        settle()
        for n, line in enumerate(lines):
            desk.submit(Action("retake", line, {}))
            settle()
            if n == 0:
                (folder / STATE_FILE).unlink(missing_ok=True)
            TIMES.clear()
            load = os.getloadavg()[0]
            began = time.perf_counter()
            delivery = desk.editor.deliver(desk.project)
            seconds = time.perf_counter() - began
            found.append(
                {
                    "line": line,
                    "seconds": round(seconds, 1),
                    "writers": dict(TIMES),
                    "audio": delivery.mixed,
                    "load_before": round(load, 2),
                    "load_after": round(os.getloadavg()[0], 2),
                }
            )
            print(json.dumps(found[-1]), file=sys.stderr, flush=True)
    finally:
        desk.close(deliver=False)
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--work", type=Path, default=Path("/tmp/omnidub-delivery"))
    parser.add_argument("--lines", default="5,120")
    args = parser.parse_args()
    from omnidub.hardware import cpu_name

    timed_writers()
    shutil.rmtree(args.work, ignore_errors=True)
    shutil.copytree(args.folder, args.work, symlinks=True)
    try:
        found = deliveries(args.work, [int(n) for n in args.lines.split(",")])
    finally:
        shutil.rmtree(args.work, ignore_errors=True)
    print(json.dumps({"cpu": cpu_name(), "cores": os.cpu_count(), "deliveries": found}, indent=1))


if __name__ == "__main__":
    main()
