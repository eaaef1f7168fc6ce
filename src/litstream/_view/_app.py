"""The Starlette application of ``litstream simulate serve`` and ``litstream view``, and the servers that run it.

Routes (each present when its part is):

* playground: ``GET /`` (the sliders), ``POST /api/simulate``, ``GET /static/playground.js``;
* dataset: ``GET /data`` (summary, chunks, a page of samples), ``GET /data/sample/{i}``, ``GET /data/key?key=``,
  ``GET /api/data/summary``. ``GET /`` redirects to ``/data`` when there is no playground.

Served on loopback by default; then only requests addressed to a loopback name are answered (a page of another
site cannot reach the app through DNS rebinding). ``backend="asyncio"`` runs uvicorn, ``"trio"`` Hypercorn.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from .._core._errors import ConfigurationError
from ._page import HEADERS
from ._script import PLAYGROUND_JS

if TYPE_CHECKING:
    from starlette.requests import Request

    from ._dataset import DatasetView
    from ._playground import Playground

__all__ = ["LOOPBACK_NAMES", "create_app", "is_loopback", "listen", "serve"]

LOOPBACK_NAMES = ["127.0.0.1", "localhost", "::1", "[::1]"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


async def _script(request: Request) -> Response:
    return Response(PLAYGROUND_JS, media_type="text/javascript", headers=HEADERS)


def create_app(
    *, playground: Playground | None = None, view: DatasetView | None = None, allowed_hosts: list[str] | None = None
) -> Starlette:
    """The ASGI application with the playground, the dataset view, or both.

    Args:
        playground: The simulation behind ``/`` (``litstream simulate serve``); ``None``: no playground.
        view: The dataset behind ``/data`` (``litstream view``); ``None``: no dataset pages.
        allowed_hosts: ``Host`` header values answered (others get 400); ``None``: any.

    Raises:
        ConfigurationError: neither part given.
    """
    if playground is None and view is None:
        raise ConfigurationError("create_app: give a playground, a dataset view or both")
    routes: list[Route] = []
    if playground is not None:
        routes += [
            Route("/", playground.home),
            Route("/api/simulate", playground.run, methods=["POST"]),
            Route("/static/playground.js", _script),
        ]
    if view is not None:
        routes += [
            Route("/data", view.home),
            Route("/data/sample/{index:int}", view.one),
            Route("/data/key", view.key),
            Route("/api/data/summary", view.summary_json),
        ]
        if playground is None:
            routes.append(Route("/", lambda request: RedirectResponse("/data")))
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts)] if allowed_hosts else []
    return Starlette(routes=routes, middleware=middleware)


def listen(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` and listening (the server then takes it over).

    Raises:
        ConfigurationError: the address cannot be used (in use, not this machine's, not allowed), named.
    """
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    try:
        return socket.create_server((host.strip("[]"), port), family=family, backlog=128)
    except OSError as exc:
        raise ConfigurationError(f"cannot listen on {host}:{port} ({exc}); choose another --port or --host") from None


def serve(app: Any, host: str, port: int, backend: str = "asyncio") -> None:
    """Serve ``app`` on ``host:port`` until interrupted: uvicorn on asyncio, Hypercorn on trio.

    Raises:
        ConfigurationError: an unknown backend, its server is not installed (``pip install 'litstream[view]'``),
            or the address cannot be used.
    """
    if backend not in ("asyncio", "trio"):
        raise ConfigurationError(f"--backend {backend!r} is not usable; use 'asyncio' (uvicorn) or 'trio' (Hypercorn)")
    try:
        if backend == "asyncio":
            import uvicorn
        else:
            import trio
            from hypercorn.config import Config
            from hypercorn.trio import serve as hypercorn_serve
    except ImportError as exc:
        raise ConfigurationError(f"serving on {backend} needs {exc.name}: pip install 'litstream[view]'") from None
    with listen(host, port) as sock:
        if backend == "asyncio":
            server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
            server.run(sockets=[sock])
            return
        config = Config()
        config.bind = [f"fd://{os.dup(sock.fileno())}"]  # Hypercorn owns (and closes) its own descriptor
        config.loglevel = "WARNING"
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl+C: stop quietly, as uvicorn does
            trio.run(hypercorn_serve, app, config)
