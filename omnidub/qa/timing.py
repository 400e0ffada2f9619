"""The timing checks: whether a line ends before the last moment it may end, and runs into no later line."""

from __future__ import annotations

import math
from dataclasses import dataclass

from omnidub.qa.manifest import number
from omnidub.qa.results import QaSettings
from omnidub.qa.verdict import Finding


@dataclass(frozen=True)
class Timing:
    slot: float
    overflow: float
    overlap: float
    overlap_line: int | None
    failures: tuple[Finding, ...]


def check_timing(
    entry: dict, duration: float, neighbours: list[dict], program_seconds: float | None, settings: QaSettings
) -> Timing:
    """Overflow past the line's room and overlap into later lines, for `duration` seconds of audio at its start."""
    start, end = number(entry.get("start")), number(entry.get("end"), default=math.inf)
    slot = end - start if math.isfinite(end) else duration
    spoken_end = start + duration
    # A render may run a line into the silence after its slot, up to its limit; only past that is it late.
    room_end, room = _room_end(entry, end, program_seconds)
    overflow = max(0.0, spoken_end - room_end) if math.isfinite(room_end) else 0.0
    overlap, overlap_line = _overlap(entry, spoken_end, start + slot, neighbours)
    failures = []
    if overflow > settings.timing_tolerance:
        failures.append(Finding("overflow", f"runs {overflow:.2f} s past {room}"))
    if overlap > settings.timing_tolerance:
        failures.append(Finding("overlap", f"runs {overlap:.2f} s into line {overlap_line}"))
    return Timing(slot, overflow, overlap, overlap_line, tuple(failures))


def _overlap(entry: dict, spoken_end: float, slot_end: float, neighbours: list[dict]) -> tuple[float, int | None]:
    """How far the line runs into a later line, and which; another speaker's line counts only past the
    line's own slot, since overlapping slots are what the script asked for."""
    start, index, speaker = number(entry.get("start")), entry.get("index"), entry.get("speaker")
    worst, which = 0.0, None
    for other in neighbours:
        other_start, other_index = number(other.get("start")), other.get("index")
        if other_index == index:
            continue
        if other.get("speaker") == speaker:
            if (other_start, number(other_index)) <= (start, number(index)):
                continue
            bound = other_start
        else:
            if other_start <= start:
                continue
            bound = max(other_start, slot_end)
        if spoken_end - bound > worst:
            worst, which = spoken_end - bound, other_index
    return worst, which


def _room_end(entry: dict, end: float, program_seconds: float | None) -> tuple[float, str]:
    """The last moment the line may end, and what sets it."""
    # "limit" in manifests of omnidub 0.1; a null limit means nothing follows the line.
    key = "limit_at" if "limit_at" in entry else "limit"
    if key not in entry:
        return end, "its slot"
    if entry[key] is None:
        if program_seconds is None:
            return math.inf, ""
        return program_seconds, "the programme's end"
    return number(entry[key], default=math.inf), "the silence after its slot"
