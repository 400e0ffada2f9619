"""The conditional input of a line, built without torch: style tokens, text tokens, reference codes, masked targets.

Same tokens as upstream's ``_prepare_inference_inputs`` (checked in the tests): the text tokenizer runs through
``tokenizers`` on the checkpoint's ``tokenizer.json``; language and voice-design rules come from omnivoice's
torch-free tables.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import numpy as np

from omnidub.backends.onnx.layout import Item
from omnidub.errors import OmnidubError
from omnidub.lightweight import omnivoice_module, voice_design_rules

# Upstream tokenizes these tags on their own, so their ids do not depend on the words around them.
_NONVERBAL = re.compile(
    r"\[(laughter|sigh|confirmation-en|question-en|question-ah|question-oh|question-ei|question-yi|"
    r"surprise-ah|surprise-oh|surprise-wa|surprise-yo|dissatisfaction-hnn)\]"
)
_CJK = r"[\u4e00-\u9fff]"


class PromptBuilder:
    """Turns (text, frames, reference, language, instruct) into an :class:`Item`, as upstream lays it out."""

    def __init__(self, tokenizer_file: Path, codebooks: int, mask_id: int):
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.codebooks = codebooks
        self.mask_id = mask_id

    def item(
        self,
        text: str,
        frames: int,
        ref_text: str | None = None,
        ref_codes: np.ndarray | None = None,
        language: str | None = None,
        instruct: str | None = None,
        denoise: bool = True,
    ) -> Item:
        style = "<|denoise|>" if denoise and ref_codes is not None else ""
        style += f"<|lang_start|>{language or 'None'}<|lang_end|><|instruct_start|>{instruct or 'None'}<|instruct_end|>"
        style_ids = self.tokenizer.encode(style).ids
        text_ids = self._text_ids(f"<|text_start|>{combine_text(text, ref_text)}<|text_end|>")
        ref = (
            np.zeros((self.codebooks, 0), dtype=np.int64)
            if ref_codes is None
            else np.asarray(ref_codes, dtype=np.int64)
        )
        parts = [
            np.tile(np.asarray(style_ids + text_ids, dtype=np.int64), (self.codebooks, 1)),
            ref,
            np.full((self.codebooks, frames), self.mask_id, dtype=np.int64),
        ]
        input_ids = np.concatenate(parts, axis=1)
        audio_mask = np.zeros(input_ids.shape[1], dtype=bool)
        audio_mask[len(style_ids) + len(text_ids) :] = True
        return Item(input_ids, audio_mask, frames)

    def _text_ids(self, text: str) -> list[int]:
        ids, last = [], 0
        for match in _NONVERBAL.finditer(text):
            ids += (
                self.tokenizer.encode(text[last : match.start()], add_special_tokens=False).ids
                if match.start() > last
                else []
            )
            ids += self.tokenizer.encode(match.group(), add_special_tokens=False).ids
            last = match.end()
        if last < len(text):
            ids += self.tokenizer.encode(text[last:], add_special_tokens=False).ids
        return ids or self.tokenizer.encode(text).ids


def combine_text(text: str, ref_text: str | None = None) -> str:
    """The reference transcript and the line as one string, cleaned as upstream cleans it."""
    full = f"{ref_text.strip()} {text.strip()}" if ref_text else text.strip()
    full = re.sub(r"[\r\n]+", "", full).replace("\uff08", "(").replace("\uff09", ")")
    full = re.sub(r"[ \t]+", " ", full)
    return re.sub(rf"(?<={_CJK})\s+|\s+(?={_CJK})", "", full)


def resolve_language(language: str | None) -> str | None:
    """A language id or name -> upstream's id; unknown or "none" -> None (language-agnostic), as upstream does."""
    if language is None or language.lower() == "none":
        return None
    table = omnivoice_module("lang_map")
    if language in table.LANG_IDS:
        return language
    return table.LANG_NAME_TO_ID.get(language.lower())


def resolve_instruct(instruct: str | None, text: str = "") -> str | None:
    """Validate and normalise a voice-design instruct with upstream's tables and rules; a bad item is an error."""
    if instruct is None or not instruct.strip():
        return None
    rules = voice_design_rules()
    valid = rules.valid
    items = [item.strip().lower() for item in re.split(r"\s*[,，]\s*", instruct.strip()) if item]
    for item in items:
        if item not in valid:
            close = difflib.get_close_matches(item, valid, n=1, cutoff=0.6)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise OmnidubError(f"unsupported voice-design item {item!r} in {instruct!r}{hint}")
    dialect = any(item.endswith("话") for item in items)
    accent = any(" accent" in item for item in items)
    if dialect and accent:
        raise OmnidubError("cannot mix a Chinese dialect and an English accent in one instruct")
    use_zh = True if dialect else False if accent else bool(rules.chinese.search(text))
    table = rules.en_to_zh if use_zh else rules.zh_to_en
    items = [table.get(item, item) for item in items]
    for category in rules.exclusive:
        hits = [item for item in items if item in category]
        if len(hits) > 1:
            raise OmnidubError(f"conflicting voice-design items: {' vs '.join(hits)} (one per category)")
    chinese = any(re.search(_CJK, item) for item in items)
    return ("，" if chinese else ", ").join(items)
