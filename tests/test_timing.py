"""Slot fitting: natural length when it fits, capped speed-up, extension into silence, overflow."""

from __future__ import annotations

import pytest

from omnidub.duration import natural_seconds
from omnidub.errors import OmnidubError
from omnidub.script import Line
from omnidub.timing import plan


def line(index, start, end, speaker="A"):
    return Line(index, speaker, f"line {index}", start, end, "en")


def test_a_line_that_fits_keeps_its_natural_length_and_is_never_slowed_down():
    [target] = plan([line(1, 1.0, 5.0)], [2.0], max_speedup=1.25)
    assert (target.start, target.target, target.speed, target.flags) == (1.0, 2.0, 1.0, ())


def test_a_longer_line_is_sped_up_just_enough_to_fill_its_slot():
    [target] = plan([line(1, 0.0, 2.0)], [2.2], max_speedup=1.25)
    assert target.target == pytest.approx(2.0) and target.speed == pytest.approx(1.1)
    assert target.flags == ("compressed",)


def test_past_the_cap_it_runs_into_the_silence_before_the_next_line():
    first, second = plan([line(1, 0.0, 2.0), line(2, 4.0, 5.0, "B")], [3.0, 0.5], max_speedup=1.25)
    assert first.target == pytest.approx(2.4) and first.speed == pytest.approx(1.25)
    assert first.limit == pytest.approx(3.95) and first.overflow == 0
    assert first.flags == ("compressed", "extended")


def test_past_the_room_it_is_marked_overflow_at_the_cap():
    first, _ = plan([line(1, 0.0, 2.0), line(2, 2.2, 4.0, "B")], [4.0, 1.0], max_speedup=1.25)
    assert first.target == pytest.approx(3.2)
    assert first.overflow == pytest.approx(3.2 - 2.15)
    assert "overflow" in first.flags


def test_room_stops_at_the_next_line_of_any_speaker_including_an_overlapping_one():
    first, _, _ = plan(
        [line(1, 0.0, 2.0), line(2, 1.0, 3.0, "B"), line(3, 6.0, 7.0)], [3.0, 1.0, 1.0], max_speedup=1.25
    )
    # B starts inside A's slot, so A may not extend at all.
    assert first.limit == pytest.approx(2.0) and first.overflow == pytest.approx(0.4)


def test_the_last_line_may_extend_freely():
    [target] = plan([line(1, 0.0, 1.0)], [3.0], max_speedup=1.25)
    assert target.limit is None and target.overflow == 0 and target.target == pytest.approx(2.4)


def test_untimed_lines_are_laid_out_back_to_back_with_the_gap():
    targets = plan(
        [line(1, 0, 0), line(2, 0, 0), line(3, 0, 0)], [1.0, 2.0, 0.5], max_speedup=1.25, timed=False, gap=0.4
    )
    assert [t.start for t in targets] == pytest.approx([0.0, 1.4, 3.8])
    assert all(t.target == t.natural and not t.flags for t in targets)


def test_natural_length_follows_the_reference_pace():
    text = "Did you remember to book the hotel by the beach?"
    slow = natural_seconds(text, "One two three.", 3.0)
    fast = natural_seconds(text, "One two three.", 1.5)
    assert slow == pytest.approx(2 * fast, rel=0.05)
    assert natural_seconds(text, "One two three.", 3.0, speed=2.0) == pytest.approx(fast, rel=0.05)


def test_no_line_is_planned_longer_than_the_cap_whatever_its_slot():
    # A ten-hour slot gives a short line its natural length, not ten hours.
    [target] = plan([line(1, 0.0, 36000.0)], [1.5], max_speedup=1.25)
    assert target.target == 1.5 and target.end == 1.5
    # A natural length only an absurd voice pace can give is refused, naming the line.
    with pytest.raises(OmnidubError, match=r"line 2 \(B\) would take 900 minutes at its voice's pace"):
        plan([line(1, 0.0, 2.0), line(2, 3.0, 5.0, "B")], [1.0, 54000.0], max_speedup=1.25)
