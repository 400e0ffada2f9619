"""The eval's report: as JSON (every figure, every sentence) and in the terminal (the figures, then the sentences
that differ, worst first, with both transcripts)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from omnidub import __version__
from omnidub.eval.results import EvalReport, Pair, Side

UNITS = "percent: each wer, delta, ci and detectable is in WER (or CER) percentage points"


def _round(value, places: int = 4):
    return None if value is None else round(float(value), places)


def _side(side: Side) -> dict:
    return {
        "config": side.config.given,
        "label": side.config.label,
        "folder": str(side.out_dir),
        "wer": _round(side.wer),
        "corpus_wer": _round(side.corpus_wer),
        "perfect": side.perfect,
        "rtf": _round(side.rtf),
        "seconds": _round(side.seconds, 3),
        "audio_seconds": _round(side.audio_seconds, 3),
        "timed": side.timed,
        "rendered": side.rendered,
        "cached": side.cached,
        "model": side.model,
        "settings": side.settings,
    }


def _heard(judged) -> dict:
    return {"transcript": judged.transcript, "errors": judged.errors, "wer": _round(judged.rate)}


def _line(pair: Pair) -> dict:
    return {
        "index": pair.a.index,
        "speaker": pair.speaker,
        "text": pair.a.text,
        "language": pair.a.language,
        "metric": pair.a.metric,
        "units": pair.a.units,
        "delta": _round(pair.delta),
        "a": _heard(pair.a),
        "b": _heard(pair.b),
    }


def p_method(report: EvalReport) -> str:
    """The p-value's test, as the report names it."""
    p = report.paired
    how = "exact: every sign pattern of the differing sentences" if p.exact else f"{p.resamples:,} random sign patterns"
    return f"two-sided paired permutation test of the mean difference, {how}"


def eval_json(report: EvalReport) -> dict:
    """Every figure of the report as a JSON object (``a``, ``b``, ``delta``, ``ci``, ``p``, ``differing``,
    ``sentences``, and the rest)."""
    p = report.paired
    return {
        "omnidub": __version__,
        "generator": "omnidub eval",
        "corpus": str(report.corpus),
        "sentences": report.sentences,
        "corpus_sentences": report.total,
        "metric": report.metric,
        "units": UNITS,
        "a": _side(report.a),
        "b": _side(report.b),
        "delta": _round(p.delta),
        "ci": [_round(p.ci[0]), _round(p.ci[1])],
        "confidence": p.confidence,
        "p": _round(p.p, 6),
        "test": p_method(report),
        "resamples": p.resamples,
        "seed": report.seed,
        "differing": p.differing,
        "standard_error": _round(p.standard_error),
        "detectable": _round(p.detectable),
        "detectable_80": _round(p.detectable_80),
        "perfect": {"a": report.a.perfect, "b": report.b.perfect},
        "judge": {
            "model": report.judge.model,
            "device": report.judge.device,
            "strength": report.judge.strength,
            "note": report.judge.note,
        },
        "machine": report.machine,
        "synthetic": report.synthetic,
        "changes": list(report.changes),
        "notes": list(report.notes),
        "left_out": [{"index": i, "why": why} for i, why in report.left_out],
        "differing_lines": [pair.a.index for pair in report.differing()],
        "lines": [_line(pair) for pair in report.pairs],
    }


def _points(value: float | None, sign: bool = True) -> str:
    if value is None:
        return "-"
    return f"{value:+.2f}" if sign else f"{value:.2f}"


def print_eval(report: EvalReport, out: Console) -> None:
    """The report for a person: both sides' figures, the paired difference, the sentences that differ."""
    p, a, b = report.paired, report.a, report.b
    metric = report.metric.upper()
    table = Table(
        title=f"omnidub eval: {report.sentences} sentences of {escape(str(report.corpus))}, judged by "
        f"{escape(report.judge.model)} on {report.judge.device}",
        title_justify="left",
    )
    table.add_column("")
    table.add_column(f"A: {escape(a.config.label)}", justify="right")
    table.add_column(f"B: {escape(b.config.label)}", justify="right")
    table.add_row(f"{metric} (mean per sentence)", f"{a.wer:.2f} %", f"{b.wer:.2f} %")
    table.add_row(f"corpus {metric}", f"{a.corpus_wer:.2f} %", f"{b.corpus_wer:.2f} %")
    table.add_row("perfect sentences", f"{a.perfect} of {report.sentences}", f"{b.perfect} of {report.sentences}")
    table.add_row("RTF", *(f"{s.rtf:.2f}" if s.rtf is not None else "-" for s in (a, b)))
    table.add_row(
        "synthesis seconds",
        *(f"{s.seconds:.1f} for {s.audio_seconds:.1f} s of audio" if s.seconds is not None else "-" for s in (a, b)),
    )
    table.add_row("rendered / cached now", *(f"{s.rendered} / {s.cached}" for s in (a, b)))
    table.add_row(
        "ran as",
        *(
            escape(
                f"{s.model.get('backend')} {s.model.get('device')} {s.model.get('dtype')}, "
                f"{s.settings.get('steps')} steps, {s.settings.get('cfg')}"
            )
            for s in (a, b)
        ),
    )
    out.print(table)
    out.print(
        f"[bold]B − A: {_points(p.delta)} {metric} points[/], {p.confidence:.0%} CI "
        f"[{_points(p.ci[0])}, {_points(p.ci[1])}] (bootstrap, {p.resamples:,} resamples), p = {p.p:.3g} "
        f"({escape(p_method(report))})",
        soft_wrap=True,
    )
    if p.detectable is None:
        reach = "no sentence differs, so the corpus's spread says nothing about what it could detect"
    else:
        reach = (
            f"the smallest difference this corpus calls significant is ±{p.detectable:.2f} points "
            f"(±{p.detectable_80:.2f} to find it 4 times in 5)"
        )
    out.print(f"{p.differing} of {report.sentences} sentences differ; {reach}", soft_wrap=True)
    out.print(f"judge: {escape(report.judge.model)}, {escape(report.judge.note)}", soft_wrap=True)
    machine = report.machine
    where = f"{machine['cpu']} ({machine['matrix_units']}), {machine['cores']} cores" + (
        f", {machine['gpu']}" if machine.get("gpu") else ""
    )
    out.print(f"machine: {escape(where)}", soft_wrap=True)
    for change in report.changes:
        if change["asked"]:
            out.print(
                f"B changes {escape(str(change['key']))}: {escape(str(change['a']))} → {escape(str(change['b']))}",
                soft_wrap=True,
            )
    for note in report.notes:
        out.print(f"[yellow]note:[/] {escape(note)}", soft_wrap=True)
    for index, why in report.left_out:
        out.print(f"[yellow]left out:[/] sentence {index}: {escape(why)}", soft_wrap=True)
    differing = report.differing()
    if differing:
        out.print("\n[bold]Sentences that differ, worst first[/] (B − A in points):")
        for pair in differing:
            out.print(f"  {pair.a.index:>4}  {_points(pair.delta):>7}  {escape(pair.a.text)}", soft_wrap=True)
            out.print(f"        A ({pair.a.rate:.0f} %): {escape(pair.a.transcript or '')}", soft_wrap=True)
            out.print(f"        B ({pair.b.rate:.0f} %): {escape(pair.b.transcript or '')}", soft_wrap=True)
