"""Delivery that redoes only what changed: after a line changes in the review, its span alone is re-mixed, the result
sounds as a whole delivery of the same takes does, and a delivery cut short leaves the last one whole."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from test_review import HOST, copy_of, do, lines, open_desk, settle

from omnidub.outputs.patch import GAIN_TOLERANCE, STATE_FILE

# A kept gain differs from the one a whole delivery plans by at most GAIN_TOLERANCE dB: every sample by at most
# that ratio of the whole delivery's (plus the 24-bit step).
RATIO = 10 ** (GAIN_TOLERANCE / 20) - 1


@pytest.fixture
def folder(rendered, tmp_path) -> Path:
    return copy_of(rendered, tmp_path)


def audio(folder: Path) -> dict[str, np.ndarray]:
    return {
        p.relative_to(folder).as_posix(): sf.read(p, dtype="float64")[0]
        for p in [folder / "mix.wav", *sorted((folder / "stems").glob("*.wav"))]
    }


def how(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())["delivery"]["audio"]


def retaken(folder: Path, index: int) -> None:
    """Line ``index`` retaken in the review, which is then left without delivering."""
    desk = open_desk(folder)
    try:
        events = do(desk, "retake", index)
        assert not [e for e in events if e["type"] == "error"], events
    finally:
        desk.close(deliver=False)


def delivered(folder: Path) -> list[dict]:
    desk = open_desk(folder)
    try:
        return do(desk, "deliver")
    finally:
        desk.close(deliver=False)


def test_a_delivery_after_one_retake_rewrites_only_that_span_and_sounds_as_a_whole_delivery(folder, tmp_path):
    before = audio(folder)
    retaken(folder, 2)
    whole = tmp_path / "whole"
    shutil.copytree(folder, whole, symlinks=True)
    (whole / STATE_FILE).unlink()  # no earlier delivery to patch: this one is made whole

    delivered(folder)
    delivered(whole)
    patched = how(folder)
    assert patched["how"] == "patched", patched
    assert how(whole) == {"how": "whole", "why": "no earlier delivery recorded to patch"}
    # Only the mix and the retaken line's speaker's stem were rewritten, over the line's own time (and a margin).
    assert patched["rewritten"] == ["mix.wav", "stems/BOB.wav"] and patched["kept"] == ["stems/ALICE.wav"]
    line = lines(folder)[2]
    [(first, end)] = patched["spans"]
    assert first <= line["start"] and line["start"] + line["duration"] <= end <= line["start"] + line["duration"] + 1.5
    assert first >= lines(folder)[1]["start"] + lines(folder)[1]["duration"] - 1.5

    now, reference = audio(folder), audio(whole)
    rate = sf.info(folder / "mix.wav").samplerate
    for name, samples in reference.items():
        assert len(now[name]) == len(samples)
        assert np.max(np.abs(now[name] - samples)) <= RATIO * np.max(np.abs(samples)) + 2**-22, name
        if name in patched["kept"]:  # a kept stem is the file as it was, bit for bit
            assert np.array_equal(now[name], before[name])
    # Outside the span the mix is the samples of the delivery before.
    outside = np.ones(len(now["mix.wav"]), bool)
    outside[int(first * rate) : int(end * rate)] = False
    assert np.array_equal(now["mix.wav"][outside], before["mix.wav"][outside])
    assert not np.array_equal(now["mix.wav"], before["mix.wav"])
    for subtitles in ("scene.dub.srt", "scene.dub.vtt"):
        assert (folder / subtitles).read_bytes() == (whole / subtitles).read_bytes()
    loudness = [json.loads((f / "manifest.json").read_text())["loudness"]["mix"] for f in (folder, whole)]
    assert abs(loudness[0]["integrated"] - loudness[1]["integrated"]) <= GAIN_TOLERANCE + 0.02


def test_a_delivery_cut_short_leaves_the_last_one_readable_and_the_next_finishes_it(folder, monkeypatch):
    import omnidub.outputs.mix as mix

    retaken(folder, 3)
    before = {name: (folder / name).read_bytes() for name in audio(folder)}
    real = mix.rewrite

    def cut_short(paths, blocks):
        written = []

        def block(path, lo, hi):
            if written and path != written[-1]:
                raise RuntimeError("killed in the middle of the delivery")
            written.append(path)
            return blocks(path, lo, hi)

        real(paths, block)

    monkeypatch.setattr(mix, "rewrite", cut_short)
    events = delivered(folder)
    assert [e for e in events if e["type"] == "error"], events
    # The last delivery is as it was, whole and readable, with no temporary left beside it.
    assert {name: (folder / name).read_bytes() for name in before} == before
    assert all(len(samples) for samples in audio(folder).values())
    assert not [p for p in folder.rglob("*.tmp")]

    monkeypatch.setattr(mix, "rewrite", real)
    events = delivered(folder)
    assert any(e["type"] == "delivered" for e in events), events
    assert how(folder)["how"] == "patched" and "mix.wav" in how(folder)["rewritten"]
    assert (folder / "mix.wav").read_bytes() != before["mix.wav"]
    assert json.loads((folder / "manifest.json").read_text())["assembly"] is not None


def test_after_an_edit_posted_as_the_page_does_deliver_writes_the_new_mix(folder):
    from starlette.testclient import TestClient

    from omnidub.review.app import build_app

    before = (folder / "mix.wav").read_bytes()
    desk = open_desk(folder)
    try:
        client = TestClient(build_app(desk, {HOST}), base_url=f"http://{HOST}")
        client.get(f"/?token={desk.token}")
        page = {"Origin": f"http://{HOST}"}
        text = desk.state()["lines"][3]["text"]
        edit = {"text": "We never were, not once.", "was": text}
        assert client.post("/api/lines/4/edit", json=edit, headers=page).status_code == 202
        settle(desk)
        assert client.post("/api/deliver", json={}, headers=page).status_code == 202
        settle(desk)
        assert client.get("/api/state").json()["mix"] == "/media/mix"
    finally:
        desk.close(deliver=False)
    assert how(folder)["how"] == "patched" and how(folder)["rewritten"] == ["mix.wav", "stems/BOB.wav"]
    assert (folder / "mix.wav").read_bytes() != before
    assert lines(folder)[4]["text"] == "We never were, not once."


def test_a_change_that_moves_the_loudness_past_the_tolerance_is_delivered_whole_and_says_why(tmp_path):
    from omnidub.outputs.mix import Placement, deliver_audio
    from omnidub.outputs.patch import MixState

    rate, rng = 24000, np.random.default_rng(3)
    segments = tmp_path / "segments"
    segments.mkdir()

    def line(index: int, level: float) -> Placement:
        path = segments / f"{index}.wav"
        sf.write(path, (level * rng.standard_normal(rate * 2)).astype(np.float32), rate)
        return Placement(path, 3.0 * index, "A" if index % 2 else "B", 2.0, "", index)

    stems = {"A": tmp_path / "stems" / "A.wav", "B": tmp_path / "stems" / "B.wav"}
    (tmp_path / "stems").mkdir()

    def deliver(placements, fmt="wav"):
        mix = tmp_path / f"mix.{fmt}"
        made = deliver_audio(
            placements,
            {s: p.with_suffix(f".{fmt}") for s, p in stems.items()},
            mix,
            30.0,
            sample_rate=rate,
            fmt=fmt,
            previous=MixState.load(tmp_path),
            frame="same",
            out_dir=tmp_path,
        )
        made.state.save(tmp_path)
        return made

    placements = [line(i, 0.05) for i in range(8)]
    assert deliver(placements).how["how"] == "whole"
    placements[3] = line(3, 0.051)  # a little louder: within the tolerance, the gain is kept
    quiet = deliver(placements).how
    assert quiet["how"] == "patched" and "kept" in quiet["loudness"], quiet
    placements[5] = line(5, 0.5)  # twenty dB louder: the whole mix's gain moves
    loud = deliver(placements).how
    assert loud["how"] == "whole" and "past 0.1 dB" in loud["why"], loud
    placements[2] = line(2, 0.04)
    assert deliver(placements, "flac").how["how"] == "whole"  # another format: other files
