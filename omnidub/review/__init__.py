"""``omnidub review``: a local web app over a rendered folder, where an editor hears each line beside the original,
retakes, edits, approves and delivers, rendering through the same job, store and lock as ``omnidub render``.

Every verb is the editor's (``omnidub.editor``); ``desk`` queues the page's actions and runs them through it on
one worker, and publishes each line's view (``view``); ``previews`` makes what the page hears beside a line (its
original, the line in context); ``app`` is the ASGI app (routes, the token, Host and origin checks, live events);
``page/`` is the page. :func:`open_folder` opens a folder with a session (the library knows
nothing of the web app); :func:`serve` runs it on a loopback address until it is stopped.
"""

from __future__ import annotations

from omnidub.review.desk import Action, Review

__all__ = ["Action", "Review", "address", "open_folder", "serve"]

WILDCARDS = ("0.0.0.0", "::", "")
# What uvicorn says of responses still open when it stops (a player's paused download): expected once stopping.
CUT_AT_STOP = ("Cancel ", "ASGI callable returned without completing response")


def open_folder(
    out_dir,
    *,
    model: str | None = None,
    device: str | None = None,
    asr_model: str | None = None,
    speaker_model: str | None = None,
) -> Review:
    """A rendered folder opened for review exactly as its render recorded it (``Session.reopen``; ``asr_model``:
    the model QA hears takes with); :meth:`Review.open` then holds it."""
    from omnidub.api import Session

    session, project = Session.reopen(out_dir, model=model, device=device, asr_model=asr_model)
    return Review(session, project, speaker_model=speaker_model)


def address(host: str, port: int, token: str) -> str:
    """The URL that opens the page (it carries the run's token)."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/?token={token}"


def serve(review: Review, *, host: str = "127.0.0.1", port: int = 0, on_ready=lambda url, stop: None) -> bool:
    """Serve ``review`` on ``host``:``port`` (0: a free port) until the process is told to stop (Ctrl-C or
    SIGTERM) or ``stop`` is called: open event streams end at once, requests in flight get two seconds.
    ``on_ready(url, stop)`` hears the URL once the socket listens. Returns True when told twice (quit now)."""
    import logging
    import signal
    import socket

    import uvicorn

    from omnidub.errors import OmnidubError
    from omnidub.review.app import build_app

    if host in WILDCARDS:
        raise OmnidubError(
            f"--host {host or '(empty)'}: give the address the page will be opened at (a wildcard "
            "would answer to any name, which the Host check refuses)"
        )
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OmnidubError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    hosts = {f"{shown}:{port}".lower()}
    if host in ("127.0.0.1", "::1"):
        hosts.add(f"localhost:{port}")

    class Server(uvicorn.Server):
        # The signal is handled here, not raised again once the server is down (uvicorn's default), so that the
        # caller decides what stopping does: deliver after one Ctrl-C, quit at once after two.
        def handle_exit(self, sig, frame) -> None:
            review.closing.set()
            if self.should_exit and sig == signal.SIGINT:
                self.force_exit = True
            self.should_exit = True

    config = uvicorn.Config(
        build_app(review, hosts), log_level="warning", lifespan="off", access_log=False, timeout_graceful_shutdown=2
    )
    server = Server(config)

    def stop() -> None:
        review.closing.set()
        server.should_exit = True

    def expected(record) -> bool:
        # A player that paused its download of a long mix keeps its response open; once the server stops it is cut
        # after the grace period, which is what stopping means: said as nothing, not as an error.
        return not (review.closing.is_set() and record.getMessage().startswith(CUT_AT_STOP))

    log = logging.getLogger("uvicorn.error")
    log.addFilter(expected)
    sock.listen(128)  # a client that comes as soon as the address is printed waits in the backlog
    on_ready(address(host, port, review.token), stop)
    try:
        server.run(sockets=[sock])
    finally:
        log.removeFilter(expected)
    return server.force_exit
