"""An LLM as translator, through any OpenAI-compatible chat endpoint (Ollama, llama.cpp's server, vLLM, a hosted
one): given the scene, the speakers, the glossary and each line's length budget, asked for JSON alternatives per
line. Every answer is checked (each line asked answered once, none invented, none empty, in the target language);
a bad answer is asked again, and refused after the last try."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from omnidub.errors import OmnidubError
from omnidub.translate.base import Candidate, Pair, Progress, Request
from omnidub.translate.language import wrong_language

KEY_VARIABLE = "OMNIDUB_LLM_KEY"
SYSTEM = (
    "You translate film dialogue for dubbing. Each line will be spoken in the time its slot allows, so a "
    "translation must be natural speech that can be said within its 'seconds' (about 'max_characters' characters). "
    "Keep every glossary term exactly as the glossary gives it. Translate only the lines under 'lines'; the scene "
    "around them is context. Answer with JSON only: "
    '{"lines": [{"id": <line id>, "translations": ["<most faithful>", "<shorter alternative>", ...]}]}, one entry '
    "per line asked, the alternatives most faithful first."
)
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


@dataclass(frozen=True)
class LlmOptions:
    """Where the endpoint is and how it is asked."""

    url: str
    model: str
    timeout: float = 60.0
    tries: int = 3
    alternatives: int = 3
    temperature: float = 0.3


class Refused(Exception):
    """An answer that breaks the rules: what was wrong with it."""


class LlmEngine:
    """Translation by an OpenAI-compatible chat completions endpoint; the key (if any) from OMNIDUB_LLM_KEY."""

    name = "llm"
    uses_context = True
    batch = 8

    def __init__(self, options: LlmOptions) -> None:
        if not options.url or not re.match(r"^https?://", options.url):
            raise OmnidubError(
                f"--llm-url {options.url!r}: give the endpoint's address, e.g. http://127.0.0.1:11434/v1"
            )
        if not options.model:
            raise OmnidubError("--engine llm needs --llm-model NAME (the model the endpoint serves)")
        self.options = options
        self.model = f"{options.model} at {options.url.rstrip('/')}"
        self.notes: list[str] = []  # answers asked again, and why

    def settings(self) -> dict:
        o = self.options
        return {"alternatives": o.alternatives, "temperature": o.temperature, "prompt": SYSTEM}

    def candidates(
        self, requests: list[Request], pair: Pair, glossary, progress: Progress | None = None
    ) -> dict[int, list[Candidate]]:
        return self._ask(requests, pair, glossary, shorten=False)

    def shorten(self, requests: list[Request], pair: Pair, glossary) -> dict[int, list[Candidate]]:
        return self._ask(requests, pair, glossary, shorten=True)

    def _ask(self, requests: list[Request], pair: Pair, glossary, shorten: bool) -> dict[int, list[Candidate]]:
        payload = {
            "from": pair.source,
            "to": pair.target,
            "glossary": {term: wanted for term, wanted in glossary.terms},
            "scene_before": list(requests[0].before),
            "scene_after": list(requests[-1].after),
            "alternatives": self.options.alternatives,
            "lines": [
                {
                    "id": r.index,
                    "speaker": r.speaker,
                    "text": r.text,
                    "seconds": r.seconds,
                    "max_characters": r.characters,
                }
                for r in requests
            ],
        }
        if shorten:
            payload["task"] = (
                "Every translation you gave of these lines is too long to say in its seconds: give shorter ones that "
                "keep the meaning (drop fillers, repetitions and what the picture shows)."
            )
        problem = ""
        for attempt in range(1, self.options.tries + 1):
            try:
                return self._checked(self._post(payload), requests, pair, "shortened" if shorten else "llm")
            except Refused as exc:
                problem = str(exc)
                self.notes.append(f"lines {_span(requests)}: answer {attempt} refused ({problem})")
        raise OmnidubError(
            f"the LLM's answers for lines {_span(requests)} were refused {self.options.tries} times (last: {problem}); "
            "no translation was written for them (lines translated before are kept for the next run)"
        )

    def _post(self, payload: dict) -> str:
        import httpx

        o = self.options
        body = {
            "model": o.model,
            "temperature": o.temperature,
            "response_format": {"type": "json_object"},
            "messages": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": json.dumps(payload, ensure_ascii=False)},
            ],
        }
        headers = {}
        if os.environ.get(KEY_VARIABLE):
            headers["Authorization"] = f"Bearer {os.environ[KEY_VARIABLE]}"
        url = o.url.rstrip("/") + "/chat/completions"
        try:
            answer = httpx.post(url, json=body, headers=headers, timeout=o.timeout)
        except httpx.TimeoutException:
            raise OmnidubError(f"the LLM at {o.url} did not answer within {o.timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise OmnidubError(f"the LLM at {o.url} does not answer ({_first(exc)})") from None
        if answer.status_code in (401, 403):
            raise OmnidubError(f"the LLM at {o.url} refused the key (HTTP {answer.status_code}); set {KEY_VARIABLE}")
        if answer.status_code == 404:
            raise OmnidubError(f"the LLM at {o.url} has no chat completions (HTTP 404 at {url}); is --llm-url right?")
        if answer.status_code >= 400:
            raise Refused(f"HTTP {answer.status_code}")
        try:
            return str(answer.json()["choices"][0]["message"]["content"])
        except (ValueError, KeyError, IndexError, TypeError):
            raise Refused("not a chat completion") from None

    def _checked(self, content: str, requests: list[Request], pair: Pair, how: str) -> dict[int, list[Candidate]]:
        try:
            data = json.loads(_FENCE.sub("", content.strip()))
        except ValueError:
            raise Refused("malformed JSON") from None
        lines = data.get("lines") if isinstance(data, dict) else None
        if not isinstance(lines, list):
            raise Refused('no "lines" list')
        asked = {r.index: r for r in requests}
        found: dict[int, list[Candidate]] = {}
        for entry in lines:
            index = entry.get("id") if isinstance(entry, dict) else None
            if isinstance(index, str) and index.strip().isdigit():
                index = int(index)
            if index not in asked:
                raise Refused(f"a line that was not asked for ({str(index)[:20]})")
            if index in found:
                raise Refused(f"line {index} answered twice")
            texts = entry.get("translations")
            if isinstance(texts, str):
                texts = [texts]
            if not isinstance(texts, list) or not texts:
                raise Refused(f"line {index} has no translations")
            kept, why = [], None
            for k, text in enumerate(texts, 1):
                text = text.strip() if isinstance(text, str) else ""
                why = "empty" if not text else wrong_language(text, asked[index].text, pair)
                if why is None and text not in [c.text for c in kept]:
                    kept.append(Candidate(text, f"{how} {k}"))
            if not kept:
                raise Refused(f"line {index}: {why}")
            found[index] = kept
        missing = [i for i in asked if i not in found]
        if missing:
            raise Refused(f"{len(lines)} lines for {len(asked)} asked (line {missing[0]} missing)")
        return found


def _span(requests: list[Request]) -> str:
    first, last = requests[0].index, requests[-1].index
    return str(first) if first == last else f"{first}-{last}"


def _first(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
