"""Timelines, timecodes and subtitles on one frame grid, read back as an editor's import would (fast).

Each timeline is read by hand (the EDL's event lines, the FCP 7 XML with ElementTree) and by the OpenTimelineIO
adapters, and every clip is checked against the frame the test computes itself from the line's start."""

from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ET
from fractions import Fraction
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np
import pytest
import soundfile as sf

from omnidub.outputs.mix import Placement

RATE = 24000  # segments stay at the model's rate
RATES = [Fraction(24), Fraction(25), Fraction(30000, 1001), Fraction(24000, 1001), Fraction(60)]
# (speaker, start, samples): starts between frames at every rate, on half frames at 25 (0.3 s is frame 7.5), the
# issue's 16.35 s (frame 408.75 at 25), one past an hour (where 30000/1001's timecode runs 3.6 s behind the
# clock), and BOB speaking over himself (a second lane).
LINES = [
    ("ALICE", 0.3, 63_360),
    ("BOB", 3.8, 72_000),
    ("ALICE", 7.82, 46_080),
    ("BOB", 10.25, 62_400),
    ("BOB", 11.0, 24_000),
    ("ALICE", 16.35, 65_280),
    ("ALICE", 3725.37, 50_000),
]


def place(folder: Path, lines=LINES, flags: dict[int, tuple[str, ...]] | None = None) -> list[Placement]:
    (folder / "segments").mkdir(parents=True, exist_ok=True)
    placements = []
    for i, (speaker, start, samples) in enumerate(lines, 1):
        path = folder / "segments" / f"{i:04d}-{speaker}.wav"
        sf.write(path, np.zeros(samples, np.float32), RATE)
        placements.append(
            Placement(
                path, start, speaker, samples / RATE, f"line {i}", i, flags=(flags or {}).get(i, ()), sha256=f"sha-{i}"
            )
        )
    return placements


def expected(p: Placement, rate: Fraction) -> tuple[int, int]:
    """The record-in frame (nearest to the start, a half frame up) and the whole frames that cover the segment."""
    record_in = math.floor(Fraction(repr(p.start)) * rate + Fraction(1, 2))
    return record_in, max(1, math.ceil(Fraction(round(p.seconds * RATE), RATE) * rate))


def frames_of(timecode: str, base: int) -> int:
    """A non-drop-frame HH:MM:SS:FF as a frame count."""
    hours, minutes, seconds, frames = map(int, timecode.split(":"))
    return ((hours * 60 + minutes) * 60 + seconds) * base + frames


def path_of(url: str, folder: Path) -> Path:
    parsed = urlparse(url)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else (folder / unquote(url)).resolve()


TIMECODE = r"(\d\d:\d\d:\d\d:\d\d)"
EVENT = re.compile(rf"^(\d{{3}})\s+(\S+)\s+(A|V)\s+C\s+{TIMECODE} {TIMECODE} {TIMECODE} {TIMECODE}\s*$")


def read_edl(path: Path) -> dict:
    """The title, frame-code mode and events of a CMX 3600 list, parsed line by line."""
    found = {"title": None, "fcm": None, "events": []}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("TITLE:"):
            found["title"] = line.split(":", 1)[1].strip()
        elif line.startswith("FCM:"):
            found["fcm"] = line.split(":", 1)[1].strip()
        elif match := EVENT.match(line):
            found["events"].append(
                {"kind": match[3], "src": (match[4], match[5]), "rec": (match[6], match[7]), "comments": []}
            )
        elif line.startswith("*") and found["events"]:
            found["events"][-1]["comments"].append(line[1:].strip())
    return found


def read_fcp(path: Path) -> dict:
    """The sequence's rate and, per audio track, its name and clips, read from the XML as an import would."""
    sequence = ET.parse(path).getroot().find("./project/children/sequence")
    timebase, ntsc = int(sequence.findtext("rate/timebase")), sequence.findtext("rate/ntsc") == "TRUE"
    tracks = []
    for track in sequence.findall("media/audio/track"):
        clips = []
        for item in track.findall("clipitem"):
            number = {tag: int(item.findtext(tag)) for tag in ("start", "end", "in", "out")}
            clips.append(
                {
                    **number,
                    "name": item.findtext("name"),
                    "url": item.findtext("file/pathurl"),
                    "file_frames": int(item.findtext("file/duration")),
                    "markers": [(m.findtext("name"), m.findtext("comment")) for m in item.findall("marker")],
                }
            )
        tracks.append({"name": track.get("MZ.TrackName"), "clips": clips})
    rate = Fraction(timebase * 1000, 1001) if ntsc else Fraction(timebase)
    return {"rate": rate, "tracks": tracks}


@pytest.mark.parametrize("rate", RATES, ids=lambda r: f"{float(r):.3f}")
def test_every_timeline_the_manifest_and_the_subtitles_put_each_line_on_the_same_frame(tmp_path, rate):
    import opentimelineio as otio
    import srt

    from omnidub.outputs.frames import line_timecodes
    from omnidub.outputs.timeline import write_subtitles, write_timelines

    placements = place(tmp_path)
    fps = float(rate)
    written = write_timelines(placements, tmp_path / "dub", fps, ("otio", "edl", "fcpxml"), name="dub")
    assert sorted(p.name for p in written) == ["dub.ALICE.edl", "dub.BOB.edl", "dub.BOB__2_.edl", "dub.otio", "dub.xml"]
    want = {p.index: expected(p, rate) for p in placements}
    lane = {p.index: p.speaker for p in placements} | {5: "BOB (2)"}
    base = math.ceil(rate)
    # The manifest: start_tc is the record-in frame, rendered_end_tc the record-out, at the timecode base.
    manifest = {p.index: line_timecodes(p.start, p.start + 3.0, p.seconds, fps) for p in placements}
    for index, (record_in, length) in want.items():
        assert frames_of(manifest[index]["start_tc"], base) == record_in
        assert frames_of(manifest[index]["rendered_end_tc"], base) == record_in + length

    # EDL: one list per lane, titled for it, non-drop-frame; source length equals record length.
    for label, name in (("ALICE", "ALICE"), ("BOB", "BOB"), ("BOB (2)", "BOB__2_")):
        edl = read_edl(tmp_path / f"dub.{name}.edl")
        assert edl["title"] == f"dub {label}" and edl["fcm"] == "NON-DROP FRAME"
        indices = [i for i in want if lane[i] == label]
        assert len(edl["events"]) == len(indices)
        for event, index in zip(edl["events"], indices):
            src_in, src_out = (frames_of(tc, base) for tc in event["src"])
            rec_in, rec_out = (frames_of(tc, base) for tc in event["rec"])
            assert event["kind"] == "A" and src_in == 0 and rec_in == want[index][0]
            assert src_out - src_in == rec_out - rec_in == want[index][1]
            assert event["rec"] == (manifest[index]["start_tc"], manifest[index]["rendered_end_tc"])
            assert f"FROM CLIP: {placements[index - 1].path.resolve().as_uri()}" in event["comments"]

    # FCP 7 XML: tracks named for their lanes, clips at their frames, out - in equal to end - start.
    fcp = read_fcp(tmp_path / "dub.xml")
    assert fcp["rate"] == rate
    assert [t["name"] for t in fcp["tracks"]] == ["ALICE", "BOB", "BOB (2)"]
    for track in fcp["tracks"]:
        for clip in track["clips"]:
            index = int(clip["name"][:4])
            assert lane[index] == track["name"]
            assert (clip["start"], clip["in"]) == (want[index][0], 0)
            assert clip["end"] - clip["start"] == clip["out"] - clip["in"] == want[index][1] == clip["file_frames"]
            assert path_of(clip["url"], tmp_path) == placements[index - 1].path.resolve()

    # OTIO: whole frames at the exact rate, segments named relative to the timeline file.
    timeline = otio.adapters.read_from_file(str(tmp_path / "dub.otio"))
    seen = {}
    for track in timeline.audio_tracks():
        for clip in track.find_clips():
            where = clip.range_in_parent()
            index = clip.metadata["omnidub"]["index"]
            seen[index] = track.name
            assert where.start_time.rate == pytest.approx(fps)
            assert (where.start_time.value, where.duration.value) == want[index]
            assert clip.source_range.duration.value == want[index][1] and clip.source_range.start_time.value == 0
            url = clip.media_reference.target_url
            assert not urlparse(url).scheme and path_of(url, tmp_path) == placements[index - 1].path.resolve()
    assert seen == lane

    # The adapters' own readers agree: every clip on its frame, the XML's tracks named.
    for edl_name in ("ALICE", "BOB", "BOB__2_"):
        read = otio.adapters.read_from_file(str(tmp_path / f"dub.{edl_name}.edl"), rate=base)
        starts = [
            c.transformed_time_range(c.trimmed_range(), read.tracks).start_time.value
            for t in read.tracks
            for c in t.find_clips()
        ]
        assert starts == [want[i][0] for i in want if lane[i].replace(" (2)", "__2_") == edl_name]
    read = otio.adapters.read_from_file(str(tmp_path / "dub.xml"))
    assert [t.name for t in read.audio_tracks()] == ["ALICE", "BOB", "BOB (2)"]
    assert sorted(c.range_in_parent().start_time.value for t in read.audio_tracks() for c in t.find_clips()) == sorted(
        record_in for record_in, _ in want.values()
    )

    # The dubbed subtitles start on the same frames (to the millisecond SRT keeps).
    write_subtitles(placements, tmp_path / "dub.srt", tmp_path / "dub.vtt", fps)
    cues = list(srt.parse((tmp_path / "dub.srt").read_text(encoding="utf-8")))
    starts = [round(Fraction(c.start // srt.timedelta(milliseconds=1), 1000) * rate) for c in cues]
    assert starts == sorted(record_in for record_in, _ in want.values())


def test_the_frame_grid_takes_rates_as_editors_write_them_and_counts_timecode_without_drops():
    from omnidub.outputs.frames import FrameGrid

    ntsc30 = Fraction(30000, 1001)
    for given, exact in [
        (29.97, ntsc30),
        (23.976, Fraction(24000, 1001)),
        (59.94, Fraction(60000, 1001)),
        (30000 / 1001, ntsc30),
        (29.97003, ntsc30),
        (25.0, Fraction(25)),
        (12.5, Fraction(25, 2)),
        (30.0, Fraction(30)),
    ]:
        assert FrameGrid.at(given).rate == exact
    grid = FrameGrid.at(25)
    assert grid.frame(16.35) == 409 and grid.frame(0.3) == 8 and grid.frame(0.28) == 7  # 408.75, 7.5, 7.0
    assert grid.frames(2.64) == 66 and grid.frames(2.639) == 66 and grid.frames(2.641) == 67 and grid.frames(0.001) == 1
    assert grid.timecode(409) == "00:00:16:09" and FrameGrid.at(25).timecode(grid.frame(3661.52)) == "01:01:01:13"
    ntsc = FrameGrid.at(29.97)
    assert ntsc.timecode(ntsc.frame(3600.0)) == "00:59:56:12"  # 107892 frames: 3.6 s behind the clock
    assert ntsc.timecode(1800) == "00:01:00:00" and ntsc.smpte and not FrameGrid.at(12.5).smpte
    # A rate SMPTE does not define counts the frames within each second of the clock.
    ten, half = FrameGrid.at(10), FrameGrid.at(12.5)
    assert ten.timecode(ten.frame(12.3)) == "00:00:12:03" and ten.timecode(ten.frame(3661.95)) == "01:01:02:00"
    assert [half.timecode(f) for f in (12, 13, 24, 25)] == ["00:00:00:12", "00:00:01:00", "00:00:01:11", "00:00:02:00"]


def test_flagged_lines_get_a_marker_in_every_timeline(tmp_path):
    from omnidub.outputs.deliver import DeliveryOptions
    from omnidub.outputs.writers import Programme, TimelineWriter

    placements = place(tmp_path, LINES[:4], flags={2: ("compressed", "overflow")})
    # QA failed lines 1 and 3 and could not score 4's words (unchecked: not a failure); line 3's audio has changed
    # since, so its verdict no longer holds.
    qa = [
        {"index": 1, "verdict": "failed", "passed": False, "flags": ["wer"], "sha256": "sha-1"},
        {"index": 3, "verdict": "failed", "passed": False, "flags": ["voice"], "sha256": "an older take"},
        {"index": 4, "verdict": "unchecked", "passed": False, "flags": [], "sha256": "sha-4"},
    ]
    (tmp_path / "qa.json").write_text(json.dumps({"generator": "omnidub", "lines": qa}), encoding="utf-8")
    options = DeliveryOptions(timelines=("otio", "edl", "fcpxml"))
    programme = Programme(tmp_path, placements, {}, 14.0, 25.0, options, "film", video_seconds=12.0)
    assert TimelineWriter.marks(programme) == {1: ("QA: wer",), 2: ("overflow",), 4: ("past-video",)}
    TimelineWriter().write(programme, {})

    import opentimelineio as otio

    timeline = otio.adapters.read_from_file(str(tmp_path / "film.dub.otio"))
    markers = {
        c.metadata["omnidub"]["index"]: [(m.name, m.color) for m in c.markers]
        for t in timeline.audio_tracks()
        for c in t.find_clips()
    }
    assert markers == {1: [("QA: wer", "RED")], 2: [("overflow", "YELLOW")], 3: [], 4: [("past-video", "YELLOW")]}
    clips = {int(c["name"][:4]): c for t in read_fcp(tmp_path / "film.dub.xml")["tracks"] for c in t["clips"]}
    assert clips[2]["markers"] == [("overflow", "line 2: line 2")] and clips[3]["markers"] == []
    # An EDL locator sits at record time, as editors write them.
    [first, second] = read_edl(tmp_path / "film.dub.BOB.edl")["events"]
    assert f"LOC: {first['rec'][0]} YELLOW  OVERFLOW" in first["comments"]
    assert f"LOC: {second['rec'][0]} YELLOW  PAST-VIDEO" in second["comments"]


@pytest.mark.parametrize("fps", [1, 1.5, 12.5, 23.976, 25, 1000])
def test_every_clip_and_cue_holds_its_whole_line_at_any_accepted_rate(tmp_path, fps):
    import opentimelineio as otio
    import srt

    from omnidub.outputs.timeline import write_subtitles, write_timelines

    placements = place(tmp_path, [("ALICE", 0.3, 40_320), ("BOB", 4.2, 24_000)])  # 1.68 s, then 1.0 s
    write_timelines(placements, tmp_path / "dub", fps, ("otio",))
    clips = [c for t in otio.adapters.read_from_file(str(tmp_path / "dub.otio")).audio_tracks() for c in t.find_clips()]
    assert [c.source_range.duration.to_seconds() >= p.seconds for c, p in zip(clips, placements)] == [True, True]
    write_subtitles(placements, tmp_path / "dub.srt", tmp_path / "dub.vtt", fps)
    cues = list(srt.parse((tmp_path / "dub.srt").read_text(encoding="utf-8")))
    assert [(c.end - c.start).total_seconds() >= p.seconds - 0.0005 for c, p in zip(cues, placements)] == [True, True]
