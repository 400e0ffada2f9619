"""Voices from the source: reference clips cut from the original video or audio, per speaker or per line.

extracted = extract_folder(source, subs, out)                      # omnidub voices extract
extraction = extract_voices(audio, original, encoder=..., asr=..., options=ExtractOptions(assess_lines=True))
references = extraction.references(dub_script)                     # per dubbed line: its clip, or why not
"""

from omnidub.source.analysis import Analysis
from omnidub.source.api import Extracted, extract_folder, no_clip_error, open_asr
from omnidub.source.audio import CLIP_RATE, SourceAudio, check_subtitles, read_source
from omnidub.source.clips import Candidate, ClipOptions, Scores, clip_samples
from omnidub.source.extract import Extraction, ExtractOptions, extract_voices
from omnidub.source.lines import (
    LINE_FLOOR,
    LineClip,
    LineReference,
    line_references,
    samples_hash,
)
from omnidub.source.match import LineMatch, match_lines, same_cues
from omnidub.source.speakers import Grouping, LineSpeaker

__all__ = [
    "CLIP_RATE",
    "LINE_FLOOR",
    "Analysis",
    "Candidate",
    "ClipOptions",
    "ExtractOptions",
    "Extracted",
    "Extraction",
    "Grouping",
    "LineClip",
    "LineMatch",
    "LineReference",
    "LineSpeaker",
    "Scores",
    "SourceAudio",
    "check_subtitles",
    "clip_samples",
    "extract_folder",
    "extract_voices",
    "line_references",
    "match_lines",
    "no_clip_error",
    "open_asr",
    "read_source",
    "same_cues",
    "samples_hash",
]
