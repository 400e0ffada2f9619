"""An LLM as translator, through any OpenAI-compatible chat endpoint (Ollama, llama.cpp's server, vLLM, a hosted
one): given the scene, the speakers, the glossary and each line's length budget, asked for JSON alternatives per
line. Every answer is checked (each line asked answered once, none invented, none empty, in the target language);
a bad answer is asked again, and refused after the last try."""

from __future__ import annotations

import json
import os
import re
import threading
import time
import unicodedata
from dataclasses import dataclass, replace

from omnidub.errors import OmnidubError
from omnidub.translate.base import Candidate, Pair, Progress, Request, Unanswered
from omnidub.translate.language import wrong_language

# The longest wait a 429 or 503 may ask for (Retry-After) before a batch is given up.
MAX_RETRY_AFTER = 30.0

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
# A reasoning model's thoughts before its answer (qwen3, deepseek-r1 through some servers).
_THOUGHT = re.compile(r"^\s*<think>.*?</think>", re.DOTALL)
# A speaker's label opening a translation ("ALICE: ..."), and the markup an answer may dress a line in (longest first).
_LABEL = re.compile(r"^\s*([^\W\d][\w .'-]{0,40}?)\s*:\s+")
_DASH = re.compile(r"^\s*[-\u2010-\u2015]\s*\S")
_MARKUP = ("**", "__", "*", "`")
_QUOTED = re.compile(r'["“«]([^"“”«»]*)["”»]')  # a translation given inside quotation marks, none within
# What an answer adds around the words to say: an action between asterisks, in lower case, opening the line or a
# sentence ("*suspira* Tudo bem.", "Rá. *risos* Vamos."), and a note or stage direction in brackets ("(pensativa)",
# "[Nota: ...]", "(Alternativa: ...)").
_ACTION = re.compile(r"(?:^|(?<=[.!?…]))\s*(?<!\*)\*([^\W\d_A-Z][^*]*)\*(?!\*)\s*(?=$|[^\w\s]*$|[^\W\d_a-z])")
_ASIDE = {"(": re.compile(r"\s*\([^()]*\)"), "[": re.compile(r"\s*\[[^\[\]]*\]")}
# A stage direction set off by a dash after a sentence or before one ("Tá, tá. — suspira", "— rindo — Vamos."): a
# direction of how it is said, from a list (a dash in dialogue also marks a pause or a turn, which is said).
_DIRECTIONS = (
    r"suspira(?:ndo)?|suspiro|ri|rindo|risos?|risadas?|sorri(?:ndo)?|pausa|tosse|tossindo|pigarreia|boceja(?:ndo)?|"
    r"hesita(?:ndo)?|gagueja(?:ndo)?|chora(?:ndo)?|grita(?:ndo)?|sussurra(?:ndo)?|murmura(?:ndo)?|bufa|resmunga(?:ndo)?|"
    r"baixinho|em voz baixa|engole em seco|irônic[oa]|sarcástic[oa]|pensativ[oa]|nervos[oa]|envergonhad[oa]|"
    r"ríe|riendo|risas|susurra(?:ndo)?|tose|sighs?|sighing|laughs?|laughing|chuckles?|coughs?|whispers?|whispering"
)
_DASHED = re.compile(
    rf"(?:(?<=[.!?…])\s*[\u2013\u2014-]\s*(?:{_DIRECTIONS})\s*[.!…]?\s*$"
    rf"|^\s*[\u2013\u2014-]?\s*(?:{_DIRECTIONS})\s*[\u2013\u2014]\s*)",
    re.IGNORECASE,
)


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
    """An answer that breaks the rules: what was wrong with it, and how long the endpoint asked to wait."""

    def __init__(self, text: str, wait: float | None = None) -> None:
        super().__init__(text)
        self.wait = wait


def endpoint(url: str) -> tuple[str, str, bool]:
    """--llm-url as (the address to write and request, its query to send but never write, whether it held
    credentials); one line for an address that is not one."""
    from urllib.parse import urlsplit, urlunsplit

    shown = "--llm-url: give the endpoint's address, e.g. http://127.0.0.1:11434/v1"
    try:
        parts = urlsplit((url or "").strip())
        parts.port  # noqa: B018 - reading it checks it
        host = parts.hostname
    except ValueError as exc:
        raise OmnidubError(f"{shown} ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise OmnidubError(f"{shown} (an http:// or https:// address{', not ' + parts.scheme if parts.scheme else ''})")
    if not host:
        raise OmnidubError(f"{shown} (no host)")
    netloc = parts.netloc.rpartition("@")[2]
    clean = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
    return clean, parts.query, bool(parts.username or parts.password)


def max_tokens(requests: list[Request], alternatives: int) -> int:
    """An answer's token budget: generous for every alternative of every line (a translation rarely runs past
    twice the original's characters, a token is at least one character), so only a model that loops hits it."""
    return 256 + sum(32 + alternatives * 2 * max(len(r.text), r.characters or 0) for r in requests)


def _request(url: str, query: str, body: dict, headers: dict, timeout: float, done: dict) -> None:
    """POST ``body`` and read the answer whole, giving up at the deadline between two reads (the watchdog in
    ``LlmEngine._post`` bounds a read that never returns)."""
    import httpx

    deadline = time.monotonic() + timeout
    try:
        with httpx.Client(timeout=timeout) as client:
            params = httpx.QueryParams(query) if query else None
            with client.stream("POST", url, json=body, headers=headers, params=params) as answer:
                chunks = []
                for chunk in answer.iter_bytes():
                    chunks.append(chunk)
                    if time.monotonic() > deadline:
                        done["timeout"] = True
                        return
                done.update(status=answer.status_code, retry_after=answer.headers.get("retry-after"))
                done["body"] = b"".join(chunks)
    except httpx.TimeoutException:
        done["timeout"] = True
    except httpx.HTTPError as exc:
        done["error"] = _first(exc)


def _seconds(retry_after: str | None) -> float | None:
    """Retry-After in seconds (a number, or an HTTP date), None when absent or unreadable."""
    if not retry_after:
        return None
    try:
        return max(0.0, float(retry_after))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(retry_after)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class LlmEngine:
    """Translation by an OpenAI-compatible chat completions endpoint; the key (if any) from OMNIDUB_LLM_KEY."""

    name = "llm"
    uses_context = True
    batch = 8

    def __init__(self, options: LlmOptions) -> None:
        url, query, credentials = endpoint(options.url)
        if not options.model:
            raise OmnidubError("--engine llm needs --llm-model NAME (the model the endpoint serves)")
        # The address as written anywhere (translate.json, the cache key, notes, errors): no credentials, no query.
        self.options = replace(options, url=url)
        self._query = query  # sent with each request, never written
        self.model = f"{options.model} at {url}"
        self.notes: list[str] = []  # answers asked again, and why
        if credentials:
            self.notes.append(
                f"--llm-url holds credentials: they are not used (nor written anywhere); the key comes from "
                f"{KEY_VARIABLE}"
            )
        self._gave_up: str | None = None  # the endpoint stopped answering in time: the rest is not asked

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
        """Each line's candidates. A line answered badly (not in the target language, empty, missing) is asked
        again alone, the batch's other lines kept; an answer that breaks the batch (malformed, a line not asked for)
        is asked again whole. Lines still without an answer after the tries raise :class:`Unanswered` with the
        others' candidates."""
        found: dict[int, list[Candidate]] = {}
        asking, problem, attempt = list(requests), "", 0
        for attempt in range(1, self.options.tries + 1):
            if self._gave_up:
                break
            try:
                try:
                    content = self._post(
                        self._payload(asking, pair, glossary, shorten), max_tokens(asking, self.options.alternatives)
                    )
                except Unanswered as exc:
                    raise Unanswered(str(exc), found) from None
                answered, bad = self._checked(content, asking, pair, "shortened" if shorten else "llm")
            except Refused as exc:
                problem = str(exc)
                self.notes.append(f"{_span(asking)}: answer {attempt} refused ({problem})")
                if exc.wait is not None:
                    if exc.wait > MAX_RETRY_AFTER:
                        break
                    time.sleep(exc.wait)
                continue
            found.update(answered)
            if not bad:
                return found
            problem = "; ".join(f"line {index}: {why}" for index, why in bad.items())
            self.notes.append(f"{_span(asking)}: answer {attempt} refused for {problem}")
            asking = [r for r in asking if r.index in bad]
        if self._gave_up:
            raise Unanswered(self._gave_up, found)
        times = f"{attempt} time{'s' if attempt > 1 else ''}"
        raise Unanswered(f"the LLM's answers for {_span(asking)} were refused {times} (last: {problem})", found)

    def _payload(self, requests: list[Request], pair: Pair, glossary, shorten: bool) -> dict:
        payload = {
            "from": pair.source,
            "to": pair.target_name,
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
        return payload

    def _post(self, payload: dict, tokens: int) -> str:
        """The answer's content, read within --llm-timeout from the request's start to the answer's last byte."""
        o = self.options
        body = {
            "model": o.model,
            "temperature": o.temperature,
            "max_tokens": tokens,
            "response_format": {"type": "json_object"},
            "messages": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": json.dumps(payload, ensure_ascii=False)},
            ],
        }
        headers = {}
        if os.environ.get(KEY_VARIABLE):
            headers["Authorization"] = f"Bearer {os.environ[KEY_VARIABLE]}"
        url = o.url + "/chat/completions"
        # A watchdog: the request runs in a thread that is waited for until the deadline, whatever the server
        # does (httpx's timeout is per read, so a server dripping a byte a second would never time out).
        done: dict = {}
        worker = threading.Thread(target=_request, args=(url, self._query, body, headers, o.timeout, done), daemon=True)
        worker.start()
        worker.join(o.timeout)
        if worker.is_alive() or done.get("timeout"):
            self._gave_up = f"the LLM at {o.url} did not answer within {o.timeout:g} s"
            raise Unanswered(self._gave_up)
        if "error" in done:
            raise OmnidubError(f"the LLM at {o.url} does not answer ({done['error']})")
        status, retry_after, data = done["status"], done.get("retry_after"), done["body"]
        if status in (401, 403):
            raise OmnidubError(f"the LLM at {o.url} refused the key (HTTP {status}); set {KEY_VARIABLE}")
        if status == 404:
            raise OmnidubError(f"the LLM at {o.url} has no chat completions (HTTP 404); is --llm-url right?")
        if status in (429, 503):
            wait = _seconds(retry_after)
            asked = f"asked to wait {wait:g} s" if wait is not None else "no Retry-After"
            if wait is not None and wait > MAX_RETRY_AFTER:
                asked += f", longer than the {MAX_RETRY_AFTER:g} s omnidub waits"
            raise Refused(f"HTTP {status}, {asked}", wait if wait is not None else 1.0)
        if status >= 400:
            raise Refused(f"HTTP {status}")
        try:
            answer = json.loads(data)
            choice = answer["choices"][0]
            if choice.get("finish_reason") == "length":
                raise Refused(f"cut at max_tokens ({tokens})")
            return str(choice["message"]["content"])
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise Refused("not a chat completion") from None

    def _checked(
        self, content: str, requests: list[Request], pair: Pair, how: str
    ) -> tuple[dict[int, list[Candidate]], dict[int, str]]:
        """The lines answered well, and why each other line asked has no usable answer; :class:`Refused` for an
        answer that breaks the batch or answers no line well."""
        try:
            data = _json(content)
        except ValueError:
            raise Refused("malformed JSON") from None
        lines = data.get("lines") if isinstance(data, dict) else None
        if not isinstance(lines, list):
            raise Refused('no "lines" list')
        asked = {r.index: r for r in requests}
        speakers = _speakers(requests)
        found: dict[int, list[Candidate]] = {}
        bad: dict[int, str] = {}
        for entry in lines:
            index = entry.get("id") if isinstance(entry, dict) else None
            if isinstance(index, str) and index.strip().isdigit():
                index = int(index)
            if index not in asked:
                raise Refused(f"a line that was not asked for ({str(index)[:20]})")
            if index in found or index in bad:
                raise Refused(f"line {index} answered twice")
            texts = entry.get("translations")
            if isinstance(texts, str):
                texts = [texts]
            if not isinstance(texts, list) or not texts:
                raise Refused(f"line {index} has no translations")
            kept, why = [], None
            for k, text in enumerate(_alternatives(texts, asked[index].text), 1):
                # One cue's text is one line: a newline inside an answer can never become a cue of its own, and one
                # that opens another line (a speaker's label, a dialogue dash) refuses the answer.
                raw = text if isinstance(text, str) else ""
                text, why = _as_said(" ".join(raw.split()), asked[index], speakers)
                why = why or _another_line(raw, asked[index].text, speakers)
                why = why or ("empty" if not text else wrong_language(text, asked[index].text, pair))
                if why is None and text not in [c.text for c in kept]:
                    kept.append(Candidate(text, f"{how} {k}"))
            if kept:
                found[index] = kept
            else:
                bad[index] = why or "no translation"
        for index in asked:
            if index not in found and index not in bad:
                bad[index] = "missing from the answer"
        if len(bad) == len(asked):  # nothing usable: the answer as a whole is refused
            raise Refused("; ".join(f"line {index}: {why}" for index, why in bad.items()))
        return found, bad


def _speakers(requests: list[Request]) -> dict[str, str]:
    """The scene's speakers an answer might name, folded -> as written: those of the lines asked and of the lines
    around them (given to the LLM as "NAME: text")."""
    names = [r.speaker for r in requests]
    names += [line.split(":", 1)[0] for r in requests for line in (*r.before, *r.after) if ":" in line]
    return {name.strip().casefold(): name.strip() for name in names if name and name.strip()}


def _as_said(text: str, request: Request, speakers: dict[str, str]) -> tuple[str, str | None]:
    """A translation as its line will be spoken, and why it cannot be (None: it can). The answer's own dress comes
    off: the line's speaker's label opening it ("ALICE: Olá.", as the scene around it was written), and markup,
    emoji, quotation marks around it, actions between asterisks, asides in brackets and directions after a dash that
    the original has none of ("**Perfeito**", "Vamos. 😊", "*suspira* Tudo bem.", "(pensativa)", "Tá. — suspira"),
    which would be said aloud. Another speaker's label opening it refuses it: the answer may be another line's."""
    label = _speaker_label(text, speakers)
    if label and not _LABEL.match(request.text):
        name, end = label
        if name.casefold() != request.speaker.strip().casefold():
            return text, f"it opens with {name}'s label, another speaker's"
        text = text[end:].strip()
    for bracket, aside in _ASIDE.items():
        if bracket not in request.text:
            text = aside.sub("", text)
    if "*" not in request.text:
        text = _ACTION.sub(" ", text)
    if not re.search(r"[\u2013\u2014]|\s-\s", request.text):
        text = _DASHED.sub("", text)
    text = re.sub(r"\s+([.,!?…])", r"\1", " ".join(text.split()))
    for mark in _MARKUP:
        if mark not in request.text:
            text = re.sub(rf"{re.escape(mark)}(\S(?:.*?\S)?){re.escape(mark)}", r"\1", text)
    if not any(_emoji(c) for c in request.text):  # an emoji would be said, or garble the line
        text = " ".join("".join(c for c in text if not _emoji(c)).split())
    quoted = _QUOTED.fullmatch(text)
    if quoted and not _QUOTED.fullmatch(request.text.strip()):
        text = quoted.group(1).strip()
    return text, None


def _speaker_label(text: str, speakers: dict[str, str]) -> tuple[str, int] | None:
    """The speaker of the scene whose label opens ``text`` ("BOB: ..."), and where the label ends; None if none."""
    label = _LABEL.match(text)
    if label is None or label.group(1).strip().casefold() not in speakers:
        return None
    return speakers[label.group(1).strip().casefold()], label.end()


def _another_line(text: str, original: str, speakers: dict[str, str]) -> str | None:
    """Why an answer holds another line as well as its own (None: it does not): after a line break, a speaker's label
    or a dialogue dash ("Eu os tenho.\n\nBOB: Perfeito."), or a speaker's label after a sentence ("... aqui. BOB:
    Perfeito."), where the original has none. Flattened into the line, the other would be said in this one's voice."""
    for line in text.splitlines()[1:]:
        label = _speaker_label(line, speakers)
        if label and not _LABEL.match(original):
            return f"it holds another line, {label[0]}'s, after a line break"
        if _DASH.match(line) and "\n" not in original:
            return "it holds another line, after a line break and a dialogue dash"
    for name in speakers.values():
        if re.search(rf"[.!?…]\s+{re.escape(name)}\s*:\s", text, re.IGNORECASE) and f"{name}:" not in original:
            return f"it holds another line, {name}'s, after a sentence"
    return None


def _emoji(c: str) -> bool:
    """An emoji or pictograph ("😊", "👍", "🌙"): a symbol past the arrows; not the degree, copyright or trademark
    signs a line may say."""
    return ord(c) >= 0x2190 and unicodedata.category(c) == "So"


def _alternatives(texts: list, original: str) -> list:
    """An answer's translations of one line, one a string: two written in one, "Ela sabe? / Ela conhece?", are two
    (a dub would say both), where the original has no slash."""
    if "/" in original:
        return texts
    return [part for text in texts for part in (text.split(" / ") if isinstance(text, str) else [text])]


def _json(content: str):
    """The answer's JSON: fenced, after a reasoning model's thoughts, or inside a sentence ("Here you go: {...}")."""
    text = _FENCE.sub("", _THOUGHT.sub("", content).strip())
    try:
        return json.loads(text)
    except ValueError:
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end < start:
            raise
        return json.loads(text[start : end + 1])


def _span(requests: list[Request]) -> str:
    """The lines asked, as a reader writes them: "line 4", "lines 1-8", "lines 2, 5"."""
    from omnidub.script import line_ranges

    return f"line{'s' if len(requests) > 1 else ''} {line_ranges(r.index for r in requests)}"


def _first(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
