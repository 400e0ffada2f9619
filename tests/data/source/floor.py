"""Measure how long a clip must be for its voice to be known: the figures behind omnidub.source.lines.LINE_FLOOR.

For every clean line of the scene (no overlap, no second voice), clips of each length are cut at several offsets
inside its speech and embedded with GE2E; each is compared with the speakers' centroids made from the *other*
lines. A clip is placed right when it is closer to its own speaker than to any other and at least as close as the
QA voice check's threshold (0.72).

    python tests/data/source/floor.py
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
LENGTHS = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0)
CLEAN = (1, 2, 3, 4, 5, 9, 11, 12)


def main() -> None:
    warnings.simplefilter("ignore")
    from omnidub.embedding import SpeakerEncoder
    from omnidub.script import read_script
    from omnidub.source.analysis import analyse
    from omnidub.source.audio import ANALYSIS_RATE, read_source
    from omnidub.source.speakers import centroid

    encoder = SpeakerEncoder()
    analysis = analyse(read_script(HERE / "original.srt"), read_source(HERE / "scene.opus"), encoder)
    truth = {t["line"]: t for t in json.loads((HERE / "truth.json").read_text())["lines"]}
    rows = []
    for length in LENGTHS:
        own_sims, right = [], 0
        for index in CLEAN:
            speaker = analysis.speakers[index]
            others = {
                name: centroid([analysis.embeddings[i] for i in CLEAN if analysis.speakers[i] == name and i != index])
                for name in analysis.centroids
            }
            a, b = truth[index]["speech"]
            for offset in np.arange(0.0, max(b - a - length, 0.0) + 1e-9, 0.25):
                if a + offset + length > b + 1e-9:
                    break
                found = encoder.embed(analysis.track.cut(a + offset, a + offset + length), ANALYSIS_RATE)
                if found is None:
                    own_sims.append(0.0)
                    continue
                sims = {name: float(np.dot(found[0], c)) for name, c in others.items()}
                own_sims.append(sims[speaker])
                right += sims[speaker] >= 0.72 and all(sims[speaker] > v for n, v in sims.items() if n != speaker)
        rows.append(
            {
                "seconds": length,
                "clips": len(own_sims),
                "placed_right": round(right / len(own_sims), 3),
                "own_similarity_median": round(float(np.median(own_sims)), 3),
                "own_similarity_p10": round(float(np.percentile(own_sims, 10)), 3),
            }
        )
        print(json.dumps(rows[-1]))


if __name__ == "__main__":
    main()
