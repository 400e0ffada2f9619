"""``omnidub review``: a local web app over a rendered folder, where an editor hears each line beside the original,
retakes, edits, approves and delivers, rendering through the same job, store and lock as ``omnidub render``.

``desk`` holds the folder and runs the actions; ``app`` is the ASGI app (routes, the token and Host checks, live
events); ``page/`` is the page. :func:`serve` runs it on a loopback address until it is stopped.
"""

from __future__ import annotations

from omnidub.review.desk import Action, Review

__all__ = ["Action", "Review", "address", "serve"]

WILDCARDS = ("0.0.0.0", "::", "")


def address(host: str, port: int, token: str) -> str:
    """The URL that opens the page (it carries the run's token)."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/?token={token}"


def serve(review: Review, *, host: str = "127.0.0.1", port: int = 0, on_ready=lambda url, stop: None) -> None:
    """Serve ``review`` on ``host``:``port`` (0: a free port) until the process is told to stop (Ctrl-C or
    SIGTERM; uvicorn finishes the requests in flight) or ``stop`` is called. ``on_ready(url, stop)`` hears the URL
    once the socket listens."""
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
    server = uvicorn.Server(
        uvicorn.Config(build_app(review, hosts), log_level="warning", lifespan="off", access_log=False)
    )
    on_ready(address(host, port, review.token), lambda: setattr(server, "should_exit", True))
    server.run(sockets=[sock])
