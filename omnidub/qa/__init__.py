"""Quality check of a rendered output folder: intelligibility, voice, timing and level of every line."""

from omnidub.qa.manifest import manifest_references, read_manifest
from omnidub.qa.outputs import report_json, write_reports
from omnidub.qa.page import render_html
from omnidub.qa.report import print_report
from omnidub.qa.results import FLAG_LABELS, MARK_LABELS, LineCheck, QaSettings, Report, SpeakerVoice, VoiceMatch
from omnidub.qa.run import Heard, check_lines, hear, run_qa
from omnidub.qa.scoring import metric_for
from omnidub.qa.verdict import FAILED, PASSED, UNCHECKED, Finding, Tally, Verdict, hearing_order
from omnidub.qa.voice import SpeakerEncoder, speaker_encoder

__all__ = [
    "FAILED",
    "FLAG_LABELS",
    "Heard",
    "MARK_LABELS",
    "PASSED",
    "UNCHECKED",
    "Finding",
    "LineCheck",
    "QaSettings",
    "Report",
    "SpeakerEncoder",
    "SpeakerVoice",
    "Tally",
    "Verdict",
    "VoiceMatch",
    "check_lines",
    "hear",
    "hearing_order",
    "manifest_references",
    "metric_for",
    "print_report",
    "read_manifest",
    "render_html",
    "report_json",
    "run_qa",
    "speaker_encoder",
    "write_reports",
]
