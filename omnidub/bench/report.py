"""The bench report, one formatter for both faces: the terminal table (fitted to the terminal's width) and the
README's markdown (``scripts/bench-table``), both read from the JSON ``bench --json`` writes, so a figure in
the README is exactly what the run printed."""

from __future__ import annotations

SHORT = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "int8": "int8"}
# The terminal table's columns, narrowest set first; wider terminals get the rest.
CORE = ("row", "cfg", "dtype", "s/line", "×row", "against")
WIDE = ("steps", "ref", "min-max", "s/audio s", "×stock", "MB")


def short(dtype: str) -> str:
    return SHORT.get(dtype, dtype)


def x(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}x"


def cells(row: dict, lines: int) -> dict[str, str]:
    """One row's figures by column name (empty figures for a skipped row)."""
    out = {
        "row": row["name"],
        "cfg": row["cfg"],
        "dtype": short(row["dtype"]),
        "steps": str(row["steps"]),
        "ref": f"{row['reference_seconds']:.1f}",
    }
    if row.get("skipped"):
        return out
    out.update(
        {
            "s/line": f"{row['seconds_per_line']:.2f}",
            "min-max": f"{row['min_seconds'] / lines:.2f}-{row['max_seconds'] / lines:.2f}",
            "s/audio s": f"{row['rtf']:.2f}",
            "×row": x(row.get("speedup")),
            "against": row.get("against") or "",
            "×stock": x(row.get("speedup_vs_stock")),
            "MB": f"{row['peak_mb']:.0f}",
        }
    )
    return out


def notes(data: dict, bold=lambda text: text) -> list[str]:
    """Every figure beside the table, one sentence each: the peer comparison, drift, compile, the ceiling and how
    close the fast path gets to it, the step profile, the kernels, what the first-use probe chose, the load."""
    out, lines = [], len(data["lines"])
    by_name = {row["name"]: row for row in data["rows"]}
    for dtype, v in data.get("versus_peer", {}).items():
        if "paired" not in v:  # older JSON: pair the runs of each repeat here
            peer = by_name["peer" if by_name.get("peer", {}).get("dtype") == dtype else "peer-dtype"]
            v = {**v, "paired": [a / b for a, b in zip(peer["runs"], by_name[v["ours"]]["runs"])]}
        ratio = bold(f"{v['speedup']:.2f}x")
        figures = (
            f"{v['ours_seconds'] / lines:.2f} vs {v['peer_seconds'] / lines:.2f} s per line; repeat by repeat "
            f"{', '.join(f'{r:.2f}x' for r in v.get('paired', []))}"
        )
        if data.get("headline"):
            out.append(
                f"omnidub as render gets it (Session) vs the peer recipe on its own upstream model, both "
                f"{short(dtype)}: {ratio} (row {v['ours']}, {figures})."
            )
        else:  # a run of the bench before its headline rows were the user's path (2026-12-02)
            peer = "peer" if dtype == by_name.get("peer", {}).get("dtype") else "peer-dtype"
            out.append(
                f"row {v['ours']} against row {peer}, both {short(dtype)}: {ratio} ({figures}). Not the user's "
                "path: this run's peer row ran upstream's generate on the model omnidub had loaded and fused, "
                "and its omnidub row probed inside the bench; docs/speed.md has what a user gets."
            )
    for what, said in (data.get("paths") or {}).items():
        out.append(f"path here, {what}: {said}" if what.startswith("render") else f"{said}.")
    for row in data["rows"]:
        drift = row.get("drift")
        if drift:
            logits = (
                f"first-step logits max |Δ| {drift['logits_max_abs_diff']:.2g}, argmax agreement "
                f"{drift['argmax_agreement']:.2%}, "
                if "logits_max_abs_diff" in drift
                else ""
            )
            if "cached_step" in drift:  # the prefix cache: its first step is a full pass
                logits = (
                    f"approximate: first-step logits max |Δ| {drift['first_step_logits_max_abs_diff']:.2g} (a "
                    f"full pass), step {drift['cached_step'] + 1}'s logits (its first cache at its stalest) max "
                    f"|Δ| {drift['cached_logits_max_abs_diff']:.2g}, argmax agreement "
                    f"{drift['cached_argmax_agreement']:.2%}, "
                )
            cost = f"; published WER cost: {drift['published_wer_cost']}" if drift.get("published_wer_cost") else ""
            if drift.get("measure_cost"):  # runs since omnidub eval existed say how to measure it on your sentences
                cost += f"; its WER cost on your sentences: `{drift['measure_cost']}`"
            out.append(
                f"{row['name']} ({short(row['dtype'])}) against {drift['against']}: {logits}final tokens "
                f"agreement {drift['final_token_agreement']:.2%}{cost}."
            )
        if row.get("compile_seconds") is not None:
            out.append(f"compiling took {row['compile_seconds']:.0f} s in the warm-up run (not in the row).")
    out += _ceiling(data)
    for dtype, p in (data.get("step_profile") or {}).items():
        out += _profile(dtype, p)
    kernels = data.get("kernels") or {}
    for key in (k for k in kernels if k not in ("shapes", "tokens", "note")):
        values = kernels[key].values() if isinstance(kernels[key], dict) else [kernels[key]]
        label = key if " " in key else f"{key} aten"
        out.append(f"GEMM kernels, {short(label.split()[0])} {label.split()[1]}: {', '.join(sorted(set(values)))}.")
    for dtype, results in (data.get("probes") or {}).items():
        for r in results:
            out.append(f"first-use probe, {short(dtype)}: {r['what']} {r['choice']} ({r['evidence']}).")
    for what, value in (data.get("recorded") or {}).items():
        out.append(f"recorded for this machine (--record): {what} {value.get('choice', '')}".rstrip() + ".")
    for dtype, choice in (data.get("layout_choice") or {}).items():  # older JSON
        out.append(f"`--cfg auto` here in {short(dtype)}: {choice['choice']} (measured in this run).")
    load = (data.get("machine") or {}).get("load_average")
    if load:
        out.append(
            f"load average (1, 5, 15 min) before the run {', '.join(map(str, load['before']))}; after "
            f"{', '.join(map(str, load['after']))} (other work on this machine shares its cores)."
        )
    return out


def _ceiling(data: dict) -> list[str]:
    out = []
    peaks = []
    for dtype, value in data.get("matmul_gflops", {}).items():
        kinds = value if isinstance(value, dict) else {"aten": value}
        peaks.append(f"{short(dtype)} " + " / ".join(f"{v:,.0f} GFLOP/s ({k})" for k, v in kinds.items()))
    if peaks:
        size = data.get("matmul_size", 2048)
        what = (
            f"fastest of {size}³ and {size // 2}³, torch's GEMM / oneDNN packed"
            if data.get("ceiling") == "best"
            else f"{size}³"
        )
        out.append(f"matmul ceiling ({what}): {'; '.join(peaks)}.")
    floor = data.get("floor") or {}
    if floor:
        out.append(
            f"row {floor['row']} does {floor['achieved_gflops']:,.0f} GFLOP/s of useful transformer work over "
            f"its whole wall time: {floor['fraction_of_peak']:.0%} of the matmul ceiling."
        )
    return out


def _profile(dtype: str, p: dict) -> list[str]:
    if "gemms" not in p:  # older JSON: parts only
        return [
            f"one decoding step in {short(dtype)}: " + ", ".join(f"{k} {v:.0%}" for k, v in p["share"].items()) + "."
        ]
    parts = sorted(p["ms"].items(), key=lambda kv: -kv[1])
    gemm_ms = sum(v for k, v in p["ms"].items() if k.startswith("gemm"))
    others = ", ".join(f"{k} {v:.0f} ms ({p['share'][k]:.0%})" for k, v in parts if not k.startswith("gemm"))
    gemms = ", ".join(
        f"{k[5:]} {g['ms']:.0f} ms at {g['gflops']:,.0f} GFLOP/s"
        + (f" ({g['fraction_of_peak']:.0%} of the ceiling)" if g.get("fraction_of_peak") else "")
        for k, g in p["gemms"].items()
    )
    return [
        f"one decoding step in {short(dtype)} ({p['layout']}, {p['gemm']} GEMMs), {p['parts_ms']:.0f} ms in parts "
        f"(uninstrumented {p['uninstrumented_ms']:.0f} ms): GEMMs {gemm_ms:.0f} ms "
        f"({gemm_ms / p['parts_ms']:.0%}): {gemms}; {others}."
    ]


def header(data: dict) -> list[str]:
    machine = data["machine"]
    where = machine.get("gpu") or machine["cpu"]
    flags = "".join(
        f" --{k.replace('_', '-')}" + ("" if v is True else f" {v}")
        for k, v in (data.get("options") or {}).items()
        if v not in (None, False, "") and k not in ("model", "quick") and not (k == "device" and v == "auto")
    )
    units = f", {machine['matrix_units']}" if machine.get("matrix_units") else ""
    out = [
        f"`omnidub bench --model {data['model']}{flags}` on {where}{units} ({machine['cores']} cores, "
        f"{machine['threads']} thread{'' if machine['threads'] == 1 else 's'}), torch {machine['torch']}, "
        f"{data.get('date') or 'undated'}; "
        f"{len(data['lines'])} line(s), median of {data['repeat']} interleaved runs (min-max in brackets)."
    ]
    if machine.get("cpu_flags"):
        out.append(f"CPU flags: {' '.join(machine['cpu_flags'])}.")
    if machine.get("isa_limits"):
        out.append(f"Libraries held to fewer instructions than the CPU has: {machine['isa_limits']}.")
    return out


def markdown(data: dict) -> str:
    """The README's table and notes for one bench JSON."""
    lines_n = len(data["lines"])
    out = header(data) + [
        "",
        "| # | row | steps | cfg | dtype | ref s | s per line | s per audio s | × against | against | MB added |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for i, row in enumerate(data["rows"], 1):
        c = cells(row, lines_n)
        figures = (
            [row["skipped"], "", "", "", ""]
            if row.get("skipped")
            else [f"{c['s/line']} ({c['min-max']})", c["s/audio s"], c["×row"], c["against"], c["MB"]]
        )
        values = [str(i), row["title"], c["steps"], c["cfg"], c["dtype"], c["ref"], *figures]
        out.append("| " + " | ".join(v.replace("|", "/") for v in values) + " |")
    out.append("")
    out += [f"- {note}" for note in notes(data, bold=lambda text: f"**{text}**")]
    return "\n".join(out) + "\n"


def print_bench(data: dict, console) -> None:
    """The rows as a table that fits the terminal (the core columns at 80; every column from 120), then what each
    row is, every note, and the machine."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    data = data.to_json() if hasattr(data, "to_json") else data
    lines_n = len(data["lines"])
    columns = CORE[:1] + WIDE[:2] + CORE[1:4] + WIDE[2:3] + CORE[4:] + WIDE[3:] if console.width >= 120 else CORE
    table = Table(
        title=f"omnidub bench · {data['model']} · {lines_n} line(s) · median of {data['repeat']}",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 1),
        collapse_padding=True,
    )
    for column in columns:
        table.add_column(
            column, justify="left" if column in ("row", "cfg", "dtype", "against") else "right", no_wrap=True
        )
    for i, row in enumerate(data["rows"], 1):
        c = cells(row, lines_n)
        table.add_row(*[escape(f"{i} {c['row']}" if col == "row" else c.get(col, "")) for col in columns])
    console.print(table)
    console.print(
        "s/line: median wall seconds per line · ×row: speed against the row named in 'against'"
        + (
            " · s/audio s: wall seconds per second of audio (every row makes the same audio length) · MB: "
            "peak memory the row added above the resident models"
            if console.width >= 120
            else ""
        ),
        highlight=False,
    )
    for i, row in enumerate(data["rows"], 1):
        extra = f" — {row['skipped']}" if row.get("skipped") else (f" ({row['note']})" if row.get("note") else "")
        # escape: "pip install 'omnidub[bench]'" is text, not a rich style tag.
        console.print(escape(f"  {i}. {row['name']}: {row['title']}{extra}"), highlight=False)
    for note in notes(data):
        console.print(escape(note), highlight=False)
    for line in header(data):
        console.print(escape(line.replace("`", "")), highlight=False)
