"""The paired evaluation: every sentence of a corpus rendered under two configurations with the same seed and
voice, each heard by one judge, and the two compared sentence by sentence.

Each configuration renders the corpus as an ordinary render of an untimed script into a folder of its own under
the eval's folder, through the library's public face: its line cache, journal, lock and ledger make an
interrupted eval continue where it stopped and let a later eval that shares a configuration reuse its audio.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from omnidub.errors import ArgumentError, OmnidubError
from omnidub.eval.configs import Configuration, parse_configuration
from omnidub.eval.corpus import Corpus, existing_script, place_script, read_corpus
from omnidub.eval.judge import Judge, Judged, Spoken, describe, heard_key, judge
from omnidub.eval.results import RENDER_FAILED, EvalReport, Side, pair_up
from omnidub.eval.stats import RESAMPLES, paired
from omnidub.files import write_text_atomic
from omnidub.models import DEFAULT_MODEL
from omnidub.progress import Listener

TIMINGS = "timings.json"  # in the eval's folder: each rendered line's synthesis time, by key, across runs
HEARD = "heard.json"  # and what the judge heard in each sentence's audio, by judge and audio, across runs
_GENERATOR = "omnidub eval"
# Settings that say nothing about a line's audio, left out when the two sides' settings are compared.
_UNHEARD = {"name", "description", "max_wer", "max_cer", "min_voice_similarity", "max_program_hours", "compile"}


@dataclass(frozen=True)
class EvalOptions:
    """What to compare (``a`` and ``b``: CONFIG arguments), on which sentences (``corpus``; None: the bundled
    English corpus), in which voice (``voices``/``voice``/``voice_text``, as a render takes them; none: the
    bundled voice), judged by ``asr_model``; ``resamples`` for the bootstrap and permutation test, ``seed`` for
    the sentences' seeds and the statistics' draws."""

    a: str
    b: str
    corpus: Path | None = None
    voices: Path | None = None
    voice: tuple[str, ...] = ()
    voice_text: tuple[str, ...] = ()
    language: str | None = None
    asr_model: str | None = None
    model: str = DEFAULT_MODEL
    device: str = "auto"
    seed: int = 0
    resamples: int = RESAMPLES
    out_dir: Path | None = None


class EvalListener:
    """What an eval tells as it goes (the command line shows it); the default says nothing."""

    def render_listener(self) -> Listener:
        """The listener of one configuration's render."""
        return Listener()

    def rendering(self, side: str, config: Configuration, out_dir: Path) -> None:
        """``side`` ("A", "B" or "A and B") starts rendering into ``out_dir``."""

    def loading(self, what: str):
        return contextlib.nullcontext()

    def note(self, text: str) -> None: ...

    def judging(self, done: int, total: int) -> None: ...


class Interrupted(Exception):
    """The eval was asked to stop; what is rendered stays, and the same command continues."""


@dataclass
class _Rendered:
    config: Configuration
    out_dir: Path
    job: object = None
    rendered: int = 0
    cached: int = 0
    sides: list[str] = field(default_factory=list)


class Evaluation:
    """A paired evaluation of two configurations; everything that can be checked is checked when it is made."""

    def __init__(self, options: EvalOptions, listener: EvalListener | None = None):
        from omnidub.asr import Asr
        from omnidub.hardware import guess_device
        from omnidub.voices import load_voices

        self.options = options
        self.listener = listener or EvalListener()
        self.stopping = False
        self._current = None
        self._checked = False
        if options.resamples < 1:
            raise OmnidubError(f"resamples must be at least 1, got {options.resamples}")
        self.voice, self.voice_text = tuple(options.voice), tuple(options.voice_text)
        if not (options.voices or self.voice):
            # A first run needs no voice of its own: the bundled one speaks (a 3 s clip with its transcript).
            data = resources.files("omnidub").joinpath("data")
            self.voice = (str(data.joinpath("alice-3s.wav")),)
            self.voice_text = (data.joinpath("alice-3s.txt").read_text(encoding="utf-8").strip(),)
            self.notes = ["no voice given: omnidub's bundled voice (data/alice-3s.wav) speaks every sentence"]
        else:
            self.notes = []
        voice_map = load_voices(options.voices, list(self.voice), list(self.voice_text))
        self.corpus: Corpus = read_corpus(options.corpus, language=options.language, voices=voice_map)
        self.a = parse_configuration(
            options.a, flag="--a", model=options.model, device=options.device, seed=options.seed
        )
        self.b = parse_configuration(
            options.b, flag="--b", model=options.model, device=options.device, seed=options.seed
        )
        stem = "bundled" if self.corpus.bundled else self.corpus.path.stem
        self.out_dir = Path(options.out_dir) if options.out_dir else Path("output") / f"eval-{stem}"
        if (self.out_dir / ".omnidub").exists() or (self.out_dir / "manifest.json").exists():
            raise OmnidubError(
                f"{self.out_dir} is a render's output folder; give the eval a folder of its own with --out"
            )
        if self.out_dir.exists() and not self.out_dir.is_dir():
            raise OmnidubError(f"--out {self.out_dir} is a file, not a folder")
        self.asr = Asr(options.asr_model, device=guess_device(options.device))
        self.judge = describe(self.asr)

    def request_stop(self) -> None:
        """Finish the sentences in flight, then stop (what is rendered stays; the same command continues)."""
        self.stopping = True
        if self._current is not None:
            self._current.request_stop()

    def run(self) -> EvalReport:
        """Render both configurations (each sentence once per distinct configuration), judge, compare."""
        self.check()
        timings = _read_timings(self.out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        script = place_script(self.corpus, self.out_dir)
        renders: dict[str, _Rendered] = {}
        for side, config in (("A", self.a), ("B", self.b)):
            renders.setdefault(config.folder, _Rendered(config, self.out_dir / config.folder)).sides.append(side)
        try:
            for render in renders.values():  # every folder claimed and planned before anything slow starts
                render.job = open_render(render.config, script, render.out_dir, self, self.listener.render_listener())
            for render in renders.values():
                self.listener.rendering(" and ".join(render.sides), render.config, render.out_dir)
                _record(timings, render.out_dir)  # a killed run's lines, from its journal
                self._current, render.job = render.job, None
                summary = run_render(self._current)
                render.rendered, render.cached = summary.rendered, summary.cached
                self._current = None
                gc.collect()  # the model goes before the next configuration's loads
                _record(timings, render.out_dir)
                _write_timings(self.out_dir, timings)
                if summary.interrupted or self.stopping:
                    raise Interrupted(
                        f"{summary.rendered + summary.cached} of {summary.lines} sentences of "
                        f"{render.config.label} are done"
                    )
        finally:
            for render in renders.values():
                if render.job is not None:
                    render.job.close()
        return self._compare(renders, timings)

    def check(self) -> None:
        """The judge can load and hears the corpus's languages: said before anything renders (a judge named by
        size is known by its name; a folder, or one not downloaded yet, is loaded now)."""
        from omnidub.asr import whisper_language

        if self._checked:
            return
        existing_script(self.out_dir)  # the eval's own files in --out, if any, are omnidub's
        _read_timings(self.out_dir)
        _read_heard(self.out_dir)
        others = sorted({whisper_language(line.language) for line in self.corpus.lines} - {None, "en"})
        folder = self.asr.installed is None and Path(self.asr.name).expanduser().is_dir()
        english_only = None if folder else self.asr.name.endswith(".en")  # a folder says so once loaded
        if not self.asr.available() or (others and english_only is None):
            with self.listener.loading(f"the judge {self.asr.name}"):
                english_only = self.asr.english_only()  # loads it: a judge that cannot load fails now
        if english_only and others:
            raise ArgumentError(
                "asr_model",
                f"the judge {self.asr.name} is English-only and the corpus is in "
                f"{', '.join(others)}: give a multilingual {{arg}}NAME (small, large-v3) or "
                "{arg}PATH",
            )
        self._checked = True

    def _judging(self, done: int, total: int) -> None:
        self.listener.judging(done, total)
        if self.stopping and done < total:
            raise Interrupted(f"judging stopped after {done} of {total} sentences; every sentence's audio is kept")

    def _compare(self, renders: dict[str, _Rendered], timings: dict) -> EvalReport:
        from omnidub.journal import read_entries
        from omnidub.records import read_json

        entries = {folder: read_entries(r.out_dir) for folder, r in renders.items()}
        results: dict[str, dict[int, Judged | str]] = {folder: {} for folder in renders}
        spoken, owner = [], []
        for folder, render in renders.items():
            for entry in entries[folder]:
                if entry.done:
                    spoken.append(Spoken(entry.index, entry.text, entry.language, render.out_dir / entry.file))
                    owner.append(folder)
                else:
                    results[folder][entry.index] = (
                        f"{RENDER_FAILED} under {render.config.label}: {entry.error or entry.status}"
                    )
        known = _read_heard(self.out_dir)
        before = set(known)
        reused = sum(heard_key(self.asr, sentence) in before for sentence in spoken)
        try:
            found = judge(self.asr, spoken, self._judging, known=known)
        finally:
            if set(known) != before:  # what was heard stays heard, even when judging stopped
                _write_kept(self.out_dir / HEARD, known)
        if reused:
            self.notes.append(
                f"the judge had heard {reused} of the {len(spoken)} sentences' audio before ({HEARD}): "
                "not transcribed again"
            )
        for folder, heard in zip(owner, found, strict=True):
            results[folder][heard.index] = heard
        speakers = {i: line.speaker for i, line in enumerate(self.corpus.lines, 1)}
        pairs, left_out = pair_up(speakers, results[self.a.folder], results[self.b.folder])
        if len(pairs) < 2:
            detail = f" ({left_out[0][1]})" if left_out else ""
            raise OmnidubError(f"only {len(pairs)} sentence(s) could be compared under both configurations{detail}")
        stats = paired(
            [p.a.rate for p in pairs],
            [p.b.rate for p in pairs],
            resamples=self.options.resamples,
            seed=self.options.seed,
        )
        manifests = {folder: read_json(r.out_dir) or {} for folder, r in renders.items()}
        sides = {}
        for name, config in (("a", self.a), ("b", self.b)):
            render, manifest = renders[config.folder], manifests[config.folder]
            judged = [getattr(p, name) for p in pairs]
            seconds, audio, timed = _time_of(entries[config.folder], timings)
            sides[name] = Side(
                config=config,
                out_dir=render.out_dir,
                model=manifest.get("model") or {},
                settings=manifest.get("settings") or {},
                rendered=render.rendered,
                cached=render.cached,
                seconds=seconds,
                audio_seconds=audio,
                timed=timed,
                wer=sum(j.rate for j in judged) / len(judged),
                corpus_wer=100.0 * sum(j.errors for j in judged) / max(1, sum(j.units for j in judged)),
                perfect=sum(j.errors == 0 for j in judged),
            )
        metrics = sorted({p.a.metric for p in pairs})
        changes = _changes(sides["a"], sides["b"])
        return EvalReport(
            corpus=self.corpus.path,
            total=len(self.corpus.lines),
            a=sides["a"],
            b=sides["b"],
            paired=stats,
            pairs=tuple(pairs),
            judge=self.judge,
            machine=_machine(sides["a"], sides["b"], self.judge),
            metric="+".join(metrics),
            seed=self.options.seed,
            changes=tuple(changes),
            notes=tuple(self.notes + _notes(sides["a"], sides["b"], changes, len(pairs))),
            left_out=tuple(left_out),
            synthetic=self.a.synthetic or self.b.synthetic,
        )


def open_render(config: Configuration, script: Path, out_dir: Path, evaluation: Evaluation, listener: Listener):
    """The configuration's render of the corpus script, as a job of the library's public face (``Session`` and
    its ``job``), its folder claimed and planned; nothing renders until :func:`run_render`. These two functions
    are the only place an eval meets the session."""
    from omnidub.api import Session
    from omnidub.outputs.deliver import DeliveryOptions

    options = evaluation.options
    session = Session(config.model, options.device, config.preset, options.asr_model, backend=config.backend)
    session.engine.on_load = evaluation.listener.loading
    session.engine.on_note = evaluation.listener.note
    job = session.job(
        [script],
        out_dir=out_dir,
        voices=options.voices,
        voice=list(evaluation.voice),
        voice_text=list(evaluation.voice_text),
        language=evaluation.corpus.language,
        listener=listener,
        delivery=DeliveryOptions(sample_rate=24000, loudness=None, timelines=()),
    )
    try:
        job.open()
    except BaseException:
        job.close()
        raise
    return job


def run_render(job):
    """Render what the job's plan left to render, let go of its folder and workers; returns its Summary."""
    try:
        return job.run()[0].result()
    finally:
        job.close()
        job.engine.close()


def _read_timings(out_dir: Path) -> dict:
    """The synthesis time of every line the eval's configurations rendered, by key: [seconds, audio seconds]."""
    lines = _read_kept(out_dir / TIMINGS)
    return {k: v for k, v in lines.items() if isinstance(v, list) and len(v) == 2}


def _read_heard(out_dir: Path) -> dict:
    """What judges heard in the sentences' audio before, by :func:`~omnidub.eval.judge.heard_key`."""
    from omnidub.eval.judge import judged_from

    kept = {}
    for key, record in _read_kept(out_dir / HEARD).items():
        with contextlib.suppress(TypeError, ValueError):
            judged_from(record)
            kept[key] = record
    return kept


def _read_kept(path: Path) -> dict:
    """The ``lines`` of one of the eval's own files (empty where it is missing); another's is refused."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = None
    if not isinstance(data, dict) or data.get("generator") != _GENERATOR:
        raise OmnidubError(
            f"{path} is not omnidub's (omnidub never replaces a file it did not write); choose another --out"
        )
    lines = data.get("lines")
    return lines if isinstance(lines, dict) else {}


def _write_kept(path: Path, lines: dict) -> None:
    write_text_atomic(path, json.dumps({"generator": _GENERATOR, "lines": lines}, indent=1) + "\n")


def _write_timings(out_dir: Path, timings: dict) -> None:
    _write_kept(out_dir / TIMINGS, timings)


def _record(timings: dict, out_dir: Path) -> None:
    """Keep the synthesis time of every line the folder's records say was rendered (a cached line's record
    carries none: its time is the one kept when it was rendered)."""
    from omnidub.journal import read_entries

    for entry in read_entries(out_dir):
        if entry.status == "rendered" and entry.render_seconds > 0 and entry.duration:
            timings[entry.key] = [entry.render_seconds, entry.duration]


def _time_of(entries, timings: dict) -> tuple[float | None, float | None, int]:
    """Synthesis seconds, audio seconds and how many lines they cover, from the recorded times."""
    known = [timings[e.key] for e in entries if e.done and e.key in timings]
    if not known:
        return None, None, 0
    return sum(s for s, _ in known), sum(a for _, a in known), len(known)


def _changes(a: Side, b: Side) -> list[dict]:
    """What differs between the two sides as they rendered (settings and model identity), and whether one of
    the configurations asked for it (named it, or its preset or model differs there)."""
    named = set(a.config.named) | set(b.config.named)
    presets = {k for k, v in a.config.preset.to_json().items() if b.config.preset.to_json().get(k) != v}
    found = []
    for where, left, right in (("settings", a.settings, b.settings), ("model", a.model, b.model)):
        for key in sorted(set(left) | set(right)):
            if key in _UNHEARD or left.get(key) == right.get(key):
                continue
            asked = key in named or key in presets
            if where == "model":
                asked = asked or a.config.model != b.config.model or a.config.backend != b.config.backend
            found.append({"key": key, "a": left.get(key), "b": right.get(key), "asked": asked})
    return found


def _notes(a: Side, b: Side, changes: list[dict], sentences: int) -> list[str]:
    notes = []
    synthetic = sorted({side.config.model for side in (a, b) if side.config.synthetic})
    if synthetic:
        notes.append(
            f"{' and '.join(synthetic)} is a random-weight model: its audio is noise, so the WER means "
            "nothing (this run tests the eval's mechanics only)"
        )
    for side, name in ((a, "A"), (b, "B")):
        asked = side.config.preset.engine.dtype
        ran = side.model.get("dtype")
        if asked != "auto" and ran and ran != asked:
            notes.append(f"{name} asked for dtype {asked} and rendered in {ran} ({side.model.get('backend')})")
        if side.timed < sentences:
            notes.append(
                f"{name}'s RTF covers {side.timed} of its sentences: the others were rendered before this "
                "eval kept their times"
            )
    unasked = [c for c in changes if not c["asked"]]
    if unasked:
        what = "; ".join(f"{c['key']} {c['a']} → {c['b']}" for c in unasked)
        notes.append(
            f"A and B also differ in what neither configuration named: {what}; the difference may come from that too"
        )
    if a.out_dir == b.out_dir:
        notes.append("A and B are the same configuration: rendered once, so the difference is zero by construction")
    return notes


def _machine(a: Side, b: Side, judge: Judge) -> dict:
    from omnidub.hardware import cpu_name, gpu_name
    from omnidub.measured import matrix_units

    gpu = None
    for side in (a, b):
        if str(side.model.get("device", "")).startswith("cuda"):
            try:
                gpu = gpu_name("cuda")
            except Exception:  # noqa: BLE001 - a name only; an ONNX Runtime run may have no torch CUDA
                gpu = None
            break
    return {
        "cpu": cpu_name(),
        "matrix_units": matrix_units(),
        "cores": os.cpu_count(),
        "gpu": gpu,
        "a_device": a.model.get("device"),
        "b_device": b.model.get("device"),
        "judge_device": judge.device,
    }
