"""The review server's routes: the page, its data and live events, the editor's actions, and the audio it plays.

Starlette (the ASGI toolkit FastAPI is built on, installed with omnivoice) with uvicorn: routing, static files,
file responses with byte ranges (so a player can seek), streamed server-sent events and a test client, and
nothing the page does not need (FastAPI's request models and generated API documentation).

Every request must carry the run's token (in the URL the server prints, then a same-site cookie) and come to the
address the server listens on (the Host header), or it is refused with 403; no CORS header is ever sent. A request
that changes something, or reads audio or a file, must come from the page itself. Nothing a request sends becomes a
path or a command: lines and takes are numbers, looked up in the project.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
from http.cookies import SimpleCookie
from importlib import resources

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from omnidub.errors import OmnidubError
from omnidub.review.desk import Action, NotReady, Review, Span, Stale
from omnidub.review.previews import PROGRAMME_SECONDS

# Routes that read audio, video or the folder's files: a page elsewhere could play them (an <audio> element sends
# the cookie of every port of the host), so they answer only the page itself, or a request carrying the token. The
# remedies too: each runs the pace model, which no other page may keep busy.
MEDIA = ("/media/", "/own-original/", "/voice-clip/", "/context/", "/programme", "/picture", "/files/", "/remedies/")
MEDIA_AT_ONCE = 2  # previews assembled at the same time; more wait their turn (each takes milliseconds)
RETRY_SECONDS = 2  # what a preview asked for before the source is decoded says to wait (the page waits for the event)

COOKIE = "omnidub_review"
# What the page may load and talk to: itself only.
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; media-src 'self'; style-src 'self'; "
    "script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}
STATIC = {"review.js": "text/javascript", "review.css": "text/css", "timeline.js": "text/javascript"}
BODY_LIMIT = 64 * 1024  # an action's body: a line's text is at most 2,000 characters
MAX_DEPTH = 4  # an action's body is one flat object


class Guard:
    """ASGI middleware: the token and Host checks in front of every route; ``closing`` is set when the server
    stops."""

    def __init__(self, app, token: str, hosts: set[str], closing: threading.Event):
        self.app, self.token, self.hosts, self.closing = app, token, hosts, closing

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if headers.get("host", "").lower() not in self.hosts:
            return await _refuse("this server answers only at its own address")(scope, receive, send)
        query = dict(_pairs(scope.get("query_string", b"").decode("latin-1")))
        cookie = SimpleCookie(headers.get("cookie", ""))
        given = query.get("token") or (cookie[COOKIE].value if COOKIE in cookie else "")
        if not secrets.compare_digest(given.encode(), self.token.encode()):
            return await _refuse("open the address omnidub review printed (it carries the run's token)")(
                scope, receive, send
            )
        if scope["method"] not in ("GET", "HEAD") and not _same_origin(headers, self.hosts):
            return await _refuse("only the review page itself can act (the request came from another origin)")(
                scope, receive, send
            )
        if scope["path"].startswith(MEDIA) and query.get("token") != self.token and not _own_read(headers):
            return await _refuse("only the review page itself can play this (the request came from elsewhere)")(
                scope, receive, send
            )
        set_cookie = query.get("token") == self.token

        async def send_with_cookie(message):
            if message["type"] == "http.response.start":
                extra = [(k.lower().encode(), v.encode()) for k, v in HEADERS.items()]
                if set_cookie:
                    extra.append((b"set-cookie", f"{COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict".encode()))
                message = {**message, "headers": list(message.get("headers", [])) + extra}
            await send(message)

        try:
            return await self.app(scope, receive, send_with_cookie)
        except asyncio.CancelledError:
            # The server stopped and gave up waiting for this response (a player that paused the download of a
            # long mix): it ends here, quietly, not as a traceback on the terminal.
            if not self.closing.is_set():
                raise


def _same_origin(headers: dict, hosts: set[str]) -> bool:
    """Whether a request that changes something comes from the page itself: its ``Origin`` is this server's, or
    (a browser that sends none) ``Sec-Fetch-Site`` says same-origin. Every port of one host is the same *site*,
    so the cookie alone proves nothing; a request with neither header is refused."""
    origin = headers.get("origin")
    if origin is not None:
        return origin.lower() in {f"http://{host}" for host in hosts}
    return headers.get("sec-fetch-site") == "same-origin"


def _own_read(headers: dict) -> bool:
    """Whether a read of audio or a file comes from the page itself (``Sec-Fetch-Site`` same-origin) or from the
    user (none: typed, or a bookmark). A browser sends it on every request; a request without it must carry the
    token in its URL."""
    return headers.get("sec-fetch-site") in ("same-origin", "none")


def _pairs(query: str):
    from urllib.parse import parse_qsl

    return parse_qsl(query, keep_blank_values=True)


def _refuse(why: str) -> Response:
    return Response(
        f"403: {why}\n",
        status_code=403,
        media_type="text/plain",
        headers={k: v for k, v in HEADERS.items() if k != "Content-Security-Policy"},
    )


def build_app(review: Review, hosts: set[str]):
    """The ASGI app of one review (``hosts``: the Host headers it answers to, e.g. {"127.0.0.1:8765"})."""

    def page_file(name: str) -> str:
        if name == "timeline.js":  # omnidub's one timeline, qa.html's too
            return resources.files("omnidub.qa").joinpath(name).read_text(encoding="utf-8")
        return resources.files("omnidub.review").joinpath("page", name).read_text(encoding="utf-8")

    async def index(request: Request) -> Response:
        return Response(page_file("index.html"), media_type="text/html; charset=utf-8")

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return Response("not found\n", status_code=404, media_type="text/plain")
        return Response(page_file(name), media_type=f"{STATIC[name]}; charset=utf-8")

    async def state(request: Request) -> Response:
        return JSONResponse(review.state())

    async def events(request: Request) -> Response:
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue = asyncio.Queue()
        stop = review.subscribe(lambda event: loop.call_soon_threadsafe(inbox.put_nowait, event))

        async def stream():
            quiet = 0.0
            try:
                yield "retry: 2000\n\n"
                while not review.closing.is_set():  # the server stopping ends every stream at once
                    try:
                        event = await asyncio.wait_for(inbox.get(), timeout=0.5)
                    except asyncio.TimeoutError:
                        quiet += 0.5
                        if quiet >= 15.0:  # keeps proxies and the browser from giving up on a quiet desk
                            quiet = 0.0
                            yield ": still here\n\n"
                        continue
                    quiet = 0.0
                    yield f"data: {json.dumps(event)}\n\n"
            finally:
                stop()

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"X-Accel-Buffering": "no"})

    async def act(request: Request) -> Response:
        kind = request.path_params["action"]
        index = request.path_params.get("index")
        try:
            body = await _json_body(request)
            review.submit(Action(kind, index, _arguments(kind, body)))
        except _Refused as exc:
            return JSONResponse({"error": exc.why}, status_code=exc.status)
        except Stale as exc:
            return JSONResponse({"error": str(exc)}, status_code=409)
        except OmnidubError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse({"queued": True, "status": review.status()}, status_code=202)

    def play(path) -> Response:
        if path is None or not path.is_file():
            return Response("not found\n", status_code=404, media_type="text/plain")
        return FileResponse(path, media_type="audio/wav" if path.suffix == ".wav" else None)

    async def media(request: Request) -> Response:
        params = request.path_params
        return play(review.media(params["what"], params.get("index"), params.get("take")))

    async def mix(request: Request) -> Response:
        return play(review.media("mix"))

    async def no_icon(request: Request) -> Response:
        return Response(status_code=204)  # the page has no icon; a browser asks anyway

    async def cancel(request: Request) -> Response:
        """Stop the long action in flight and drop the queue: at once, not queued behind them."""
        review.cancel()
        return JSONResponse({"cancelled": True, "status": review.status()}, status_code=202)

    turns = asyncio.Semaphore(MEDIA_AT_ONCE)  # made in the server's loop on the first request that needs it

    async def preview(request: Request, read, *args) -> Response:
        async with turns:
            return _wav(request, await _aside(review, read, *args))

    async def own_original(request: Request) -> Response:
        return await preview(request, review.own_original, request.path_params["index"])

    async def voice_clip(request: Request) -> Response:
        return await preview(request, review.voice_clip, request.path_params["index"], request.path_params["choice"])

    async def context(request: Request) -> Response:
        return await preview(request, review.context, request.path_params["index"])

    async def programme(request: Request) -> Response:
        try:
            span = _span(request.query_params)
        except _Refused as exc:
            return Response(f"{exc.status}: {exc.why}\n", status_code=exc.status, media_type="text/plain")
        return await preview(request, review.programme, span)

    async def remedies(request: Request) -> Response:
        """What would make a line fit its slot (``?text=``: the length of words the editor typed, in its voice)."""
        index, text = request.path_params["index"], request.query_params.get("text")
        try:
            slot = _slot(request.query_params)
            found = await _aside(review, review.remedies, index, text, slot)
        except OmnidubError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        if found is STOPPING:
            return JSONResponse({"error": "the review is stopping"}, status_code=503)
        if found is None:
            return JSONResponse({"error": f"no line {index} in this folder"}, status_code=404)
        return JSONResponse(found)

    routes = [
        Route("/", index),
        Route("/favicon.ico", no_icon),
        Route("/static/{name}", static),
        Route("/api/state", state),
        Route("/api/events", events),
        Route("/api/cancel", cancel, methods=["POST"]),  # before /api/{action}, which would take it for an action
        Route("/api/lines/{index:int}/{action}", act, methods=["POST"]),
        Route("/api/{action}", act, methods=["POST"]),
        Route("/media/mix", mix),
        Route("/media/{what}/{index:int}", media),
        Route("/media/{what}/{index:int}/{take:int}", media),
        # The desk's reads the page asks for as they are needed (the first own original decodes the source, a
        # context reads segments and the bed): made aside, so that stopping the server never waits for them.
        Route("/own-original/{index:int}", own_original),
        Route("/voice-clip/{index:int}/{choice:int}", voice_clip),
        Route("/picture", lambda request: _file(review.picture())),
        Route("/context/{index:int}", context),
        Route("/remedies/{index:int}", remedies),
        # The programme as the lines stand, over any span: what the page plays while the mix is not delivered.
        Route("/programme", programme),
        Route("/files/{name:path}", lambda request: _file(review.delivered(request.path_params["name"]))),
    ]
    return Guard(Starlette(routes=routes), review.token, hosts, review.closing)


class _Refused(Exception):
    """A request refused before it reaches the desk (``status``: its HTTP status)."""

    def __init__(self, status: int, why: str):
        super().__init__(why)
        self.status, self.why = status, why


async def _json_body(request: Request) -> dict:
    """The request's body: a JSON object of at most BODY_LIMIT bytes and MAX_DEPTH levels, sent as
    application/json; anything else is refused (a text/plain POST is what a foreign page can send unasked)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        raise _Refused(415, "send the action as application/json")
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > BODY_LIMIT):
        raise _Refused(413, f"the request's body is over {BODY_LIMIT} bytes")
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > BODY_LIMIT:
            raise _Refused(413, f"the request's body is over {BODY_LIMIT} bytes")
    if not data:
        return {}
    if _depth(data) > MAX_DEPTH:
        raise _Refused(400, "the request's body is nested too deeply")
    try:
        body = json.loads(data)
    except (ValueError, RecursionError):
        raise _Refused(400, "the request's body is not JSON") from None
    if not isinstance(body, dict):
        raise _Refused(400, "the request's body must be a JSON object")
    return body


def _depth(data: bytes) -> int:
    """How deeply a JSON text nests (brackets outside strings), counted before it is parsed."""
    depth = deepest = 0
    inside = escaped = False
    for byte in data:
        if inside:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                inside = False
        elif byte == 0x22:
            inside = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return deepest


ARGUMENTS = {
    "edit": {
        "text": (str,),
        "was": (str,),
        "max_speedup": (int, float, type(None)),
        "borrow": (bool,),
        "voice": (str, type(None)),
        "speaker": (str,),
        "was_speaker": (str,),
        "start": (int, float),
        "end": (int, float),
    },
    "choose": {"take": (int,)},
    "approve": {"approved": (bool,), "key": (str,)},
    "mark": {"note": (str,), "look_again": (bool,)},
    "translate": {},
    "voice": {"voice": (str,), "speaker": (str,)},
}


def _arguments(kind: str, body: dict) -> dict:
    """An action's arguments, each of the type it must be (a boolean is a boolean, a number a number); a name
    the action does not take, or a value of another type, is refused."""
    allowed = ARGUMENTS.get(kind, {})
    for name, value in body.items():
        if name not in allowed:
            raise OmnidubError(f"{kind} takes no {name!r}" if allowed else f"{kind} takes no arguments")
        if not isinstance(value, allowed[name]) or (isinstance(value, bool) and bool not in allowed[name]):
            raise OmnidubError(f"{name} cannot be {value!r}")
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:  # JSON's \ud800 escapes make text no file or terminal can hold
                raise OmnidubError(f"{name} is not text (it holds a lone surrogate, {value!r:.40})") from None
    if kind == "edit":
        if not set(body) - {"was", "was_speaker"}:
            raise OmnidubError("an edit needs text, max_speedup, borrow, voice, speaker, start or end")
        if "text" in body and "was" not in body:
            raise OmnidubError("an edit of the text names the text it replaces (was)")
        if "speaker" in body and "was_speaker" not in body:
            raise OmnidubError("a move to another speaker names the speaker it moves the line from (was_speaker)")
    if kind == "voice" and "voice" not in body:
        raise OmnidubError(
            'voice a line from its own speech ({"voice": "line"}), a voice\'s clip '
            '({"voice": "speaker", "speaker": NAME}) or the voice given for a speaker '
            '({"voice": "given", "speaker": NAME})'
        )
    if kind == "choose" and "take" not in body:
        raise OmnidubError("choose a take by its number")
    if kind == "mark":
        return _mark_arguments(body)
    if kind == "approve":
        body = {"approved": body.get("approved", True), **{k: v for k, v in body.items() if k != "approved"}}
        if body["approved"] and "key" not in body:
            raise OmnidubError("an approval names the audio it approves (key)")
    return dict(body)


def _mark_arguments(body: dict) -> dict:
    """A note (text; empty removes it) and the look-again flag (a boolean): either or both."""
    found = {k: body[k] for k in ("note", "look_again") if k in body}
    if not found:
        raise OmnidubError("a mark needs a note or look_again")
    if "note" in found and not isinstance(found["note"], str):
        raise OmnidubError("a note is text")
    if "look_again" in found and not isinstance(found["look_again"], bool):
        raise OmnidubError("look_again is true or false")
    return found


def _slot(query) -> tuple[float, float] | None:
    """The slot a request asks a line's fit for (``start`` and ``end`` in seconds, both or neither), or None."""
    if "start" not in query and "end" not in query:
        return None
    try:
        return float(query.get("start", "")), float(query.get("end", ""))
    except ValueError:
        raise OmnidubError("give the slot as start=SECONDS&end=SECONDS") from None


def _span(query) -> Span:
    """The span of the programme a request asks for: ``start`` and ``end`` in seconds (at most PROGRAMME_SECONDS
    apart), and ``dub``, ``original`` and ``bed`` each 1 (in) or 0 (out)."""
    import math

    for name in query:
        if name not in ("start", "end", "dub", "original", "bed", "v", "token"):
            raise _Refused(400, f"the programme takes start, end, dub, original and bed, not {name!r}")
    try:
        start, end = float(query.get("start", "")), float(query.get("end", ""))
    except ValueError:
        raise _Refused(400, "give the programme's span as start=SECONDS&end=SECONDS") from None
    if not (math.isfinite(start) and math.isfinite(end)) or start < 0 or end <= start:
        raise _Refused(400, f"the programme's span must run forward from 0 or later (not {start:g} to {end:g})")
    if round(end - start, 3) > PROGRAMME_SECONDS:  # to the millisecond the page writes: 178.86 - 58.86 > 120
        raise _Refused(400, f"the programme is heard {PROGRAMME_SECONDS:g} s at a time (asked for {end - start:g} s)")
    flags = {}
    for name, default in (("dub", "1"), ("original", "0"), ("bed", "1")):
        value = query.get(name, default)
        if value not in ("0", "1"):
            raise _Refused(400, f"{name} is 1 (heard) or 0 (left out), not {value!r}")
        flags[name] = value == "1"
    return Span(start, end, **flags)


def _wav(request: Request, data) -> Response:
    """WAV bytes the desk made (a line's own original, a line in context, the programme), with byte ranges (a
    player seeks), or 404; 503 at once while the source or the bed is being decoded (the page plays it again when
    the desk says they are ready), and while stopping."""
    if data is STOPPING:
        return Response("the review is stopping\n", status_code=503, media_type="text/plain")
    if isinstance(data, NotReady):
        return Response(
            f"{data}; played once it is ready\n",
            status_code=503,
            media_type="text/plain",
            headers={"Retry-After": str(RETRY_SECONDS)},
        )
    if data is None:
        return Response("not found\n", status_code=404, media_type="text/plain")
    return _ranged(request, data, "audio/wav")


def _ranged(request: Request, data: bytes, media_type: str) -> Response:
    """``data``, or the one byte range the request asks for (206); a range past its end is 416. A header this
    does not read (several ranges) gets the whole (200), as HTTP allows."""
    import re

    size = len(data)
    asked = re.fullmatch(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*", request.headers.get("range", ""))
    if asked is None or asked[1] == asked[2] == "":
        return Response(data, media_type=media_type, headers={"Accept-Ranges": "bytes"})
    if asked[1] == "":  # the last N bytes
        first, last = max(0, size - int(asked[2])), size - 1
    else:
        first, last = int(asked[1]), min(size - 1, int(asked[2])) if asked[2] else size - 1
    if first >= size or last < first:
        return Response(status_code=416, headers={"Content-Range": f"bytes */{size}", "Accept-Ranges": "bytes"})
    return Response(
        data[first : last + 1],
        status_code=206,
        media_type=media_type,
        headers={"Content-Range": f"bytes {first}-{last}/{size}", "Accept-Ranges": "bytes"},
    )


def _file(path) -> Response:
    """A file of the folder or the video, with byte ranges (players seek), or 404."""
    if path is None or not path.is_file():
        return Response("not found\n", status_code=404, media_type="text/plain")
    return FileResponse(path)


STOPPING = object()  # what a read made aside answers when the server stops before it is done


async def _aside(review: Review, read, *args):
    """``read(*args)`` on a thread of its own (a daemon: a decode in flight never holds the process when it
    stops), awaited until it is done or the server stops (then STOPPING)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future = loop.create_future()

    def settle(outcome, failed: bool) -> None:
        if not done.done():
            (done.set_exception if failed else done.set_result)(outcome)

    def work() -> None:
        try:
            result = read(*args)
        except NotReady as exc:  # answered at once: the request does not wait for the decoding
            loop.call_soon_threadsafe(settle, exc, False)
        except Exception as exc:  # noqa: BLE001 - handed to the request, which answers it
            loop.call_soon_threadsafe(settle, exc, True)
        else:
            loop.call_soon_threadsafe(settle, result, False)

    threading.Thread(target=work, name="omnidub review read", daemon=True).start()
    while not done.done():
        if review.closing.is_set():
            return STOPPING
        try:
            await asyncio.wait_for(asyncio.shield(done), timeout=0.25)
        except asyncio.TimeoutError:
            continue
        except asyncio.CancelledError:
            return STOPPING
    return done.result()
