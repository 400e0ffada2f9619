"""The paired evaluation (``omnidub eval``): the same sentences, seeds and voice under two configurations, each
sentence heard by one judge, and the difference in WER compared pair by pair, with its confidence interval,
p-value and the count of sentences that differ at all."""

from omnidub.eval.configs import Configuration, parse_configuration
from omnidub.eval.corpus import bundled_corpus, read_corpus
from omnidub.eval.judge import Judge, Judged, Spoken, describe, judge
from omnidub.eval.report import eval_json, print_eval
from omnidub.eval.results import EvalReport, Pair, Side, differing, pair_up
from omnidub.eval.run import EvalListener, EvalOptions, Evaluation, Interrupted
from omnidub.eval.stats import Paired, paired

__all__ = [
    "Configuration",
    "EvalListener",
    "EvalOptions",
    "EvalReport",
    "Evaluation",
    "Interrupted",
    "Judge",
    "Judged",
    "Pair",
    "Paired",
    "Side",
    "Spoken",
    "bundled_corpus",
    "describe",
    "differing",
    "eval_json",
    "judge",
    "pair_up",
    "paired",
    "parse_configuration",
    "print_eval",
    "read_corpus",
]
