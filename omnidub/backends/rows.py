"""Which rows share a forward under each CFG layout: shared by the torch and ONNX Runtime backends.

A line needs a conditional row (style + text + reference codes + targets) and an unconditional row (targets
only) per step. A segment is (line, is_conditional); a row is a list of segments laid side by side; a group
is the rows of one forward.
"""

from __future__ import annotations

Segment = tuple[int, bool]


def row_groups(cond_lengths: list[int], target_lengths: list[int], kind: str) -> list[list[list[Segment]]]:
    """``padded``: all 2B rows in one forward; ``trimmed``: rows of equal length together, one forward per
    length; ``packed``: each line's two rows side by side in one row, all lines in one forward; ``joined``:
    every row of every line side by side in one row (one forward, each segment attending only to itself)."""
    cond = [[(i, True)] for i in range(len(cond_lengths))]
    uncond = [[(i, False)] for i in range(len(cond_lengths))]
    if kind == "padded":
        return [cond + uncond]
    if kind == "trimmed":
        by_length: dict[int, list] = {}
        for row in cond + uncond:
            line, conditional = row[0]
            by_length.setdefault(cond_lengths[line] if conditional else target_lengths[line], []).append(row)
        return list(by_length.values())
    if kind == "packed":
        return [[[(i, True), (i, False)] for i in range(len(cond_lengths))]]
    if kind == "joined":
        return [[[seg for i in range(len(cond_lengths)) for seg in ((i, True), (i, False))]]]
    raise ValueError(f"unknown cfg layout {kind!r}")
