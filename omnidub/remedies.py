"""What would make a line that runs late fit: a shorter text (omnidub translate's shorter candidates, or words the
editor types), a higher speed-up cap, or the silence after its slot; each predicted as the plan would render it.

A new seed gives a line the same length (its length is planned from its words and its voice's pace), so a line that
failed on timing alone is fixed by one of these, never by a retake. Every prediction is the render's own: the pace
model's natural length (:func:`omnidub.pace.natural_seconds`) fitted to the slot as the plan fits it
(:func:`omnidub.timing.fit_line`). Pure: the review publishes a line's :class:`Fitting` and asks here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from omnidub.pace import Pace, natural_seconds
from omnidub.script import Line
from omnidub.timing import Fit, fit_line

# A line's own speed-up cap may be set from 1 to this (Project.set_edit); past it nothing is offered.
MOST_SPEEDUP = 4.0


@dataclass(frozen=True)
class Fitting:
    """What a line's timing is predicted from: the line as it says now (its slot and language), the last moment it
    may end (``limit``: None when nothing follows), its voice's pace, the preset's speed-up cap and the line's own
    fitting rules, and the shorter texts omnidub translate offers for it (candidates whose checks found nothing that
    changes what it says)."""

    line: Line
    limit: float | None
    pace: Pace
    preset_cap: float
    fit: Fit = Fit()
    candidates: tuple[str, ...] = ()

    @property
    def cap(self) -> float:
        return self.fit.max_speedup or self.preset_cap

    def sized(self, text: str, fit: Fit | None = None) -> dict:
        """``text`` said in this line's voice and fitted to its slot (``fit``: other rules than the line's own):
        its natural length, the length it is rendered at, its speed-up, how far it runs past the last moment it may
        end, and whether it fits."""
        natural = natural_seconds(text, self.line.language, self.pace)
        target = fit_line(self.line, natural, self.limit, self.preset_cap, fit or self.fit)
        return {
            "natural": round(natural, 3),
            "length": round(target.target, 3),
            "speed": round(target.speed, 3),
            "over": round(target.overflow, 3),
            "fits": target.overflow <= 0,
        }


def offer(fitting: Fitting) -> dict:
    """The line's timing as it stands and its remedies, each with its predicted length against the room it has:
    the shorter candidates (most faithful first), the speed-up cap it would need, and the gap after its slot."""
    line, now = fitting.line, fitting.sized(fitting.line.text)
    room = None if fitting.limit is None else round(max(fitting.limit - line.start, 0.0), 3)
    remedies = []
    for text in fitting.candidates:
        sized = fitting.sized(text)
        if sized["natural"] < now["natural"]:
            remedies.append({"kind": "text", "text": text, **sized, "action": "edit", "args": {"text": text}})
    if room:
        needed = math.ceil(now["natural"] / room * 100) / 100  # the smallest cap, in hundredths, that fits
        cap = min(max(needed, 1.0), MOST_SPEEDUP)
        if cap > fitting.cap:
            sized = fitting.sized(line.text, Fit(cap, fitting.fit.borrow))
            remedies.append(
                {"kind": "speed", "max_speedup": cap, "needed": needed, **sized, "action": "edit",
                 "args": {"max_speedup": cap}}
            )  # fmt: skip
        gap = round(max(fitting.limit - line.end, 0.0), 3)
        if gap > 0 and not fitting.fit.borrow:
            sized = fitting.sized(line.text, Fit(fitting.fit.max_speedup, True))
            remedy = {"kind": "borrow", "gap": gap, **sized, "action": "edit", "args": {"borrow": True}}
            if (sized["length"], sized["over"]) == (now["length"], now["over"]):
                remedy["why"] = "it already runs into that gap at its speed-up cap: borrowing it changes nothing"
            remedies.append(remedy)
    return {
        "index": line.index,
        "text": line.text,
        "language": line.language,
        "start": line.start,
        "slot": round(line.end - line.start, 3),
        "room": room,  # seconds from its start to the last moment it may end (None: nothing follows)
        "cap": fitting.cap,
        **now,
        "remedies": remedies,
    }


def preview(fitting: Fitting, text: str) -> dict:
    """Words the editor typed, predicted in the line's voice and fitted to its slot with its own rules."""
    return {"text": text, **fitting.sized(text)}


def moved(fitting: Fitting, start: float, end: float, limit: float | None) -> dict:
    """The line's words as it says them now, predicted in its voice and fitted to another slot (``limit``: the last
    moment it may end there): what the timeline shows while a slot's edge is dragged."""
    from dataclasses import replace

    line = replace(fitting.line, start=start, end=end)
    sized = replace(fitting, line=line, limit=limit).sized(line.text)
    return {"start": start, "end": end, "slot": round(end - start, 3), **sized}
