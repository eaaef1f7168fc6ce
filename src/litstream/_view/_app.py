"""The Starlette application of ``litstream simulate serve`` and ``litstream view``, and the servers that run it.

Routes (each present when its part is):

* playground: ``GET /`` (the sliders), ``POST /api/simulate``, ``GET /static/playground.js``;
* dataset: ``GET /data`` (summary, chunks, a page of samples), ``GET /data/sample/{i}``, ``GET /data/key?key=``,
  ``GET /api/data/summary``. ``GET /`` redirects to ``/data`` when there is no playground.

Served on loopback by default; then only requests addressed to a loopback name are answered (a page of another
site cannot reach the app through DNS rebinding). ``backend="asyncio"`` runs uvicorn, ``"trio"`` Hypercorn.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from .._errors import ConfigurationError
from ._page import HEADERS
from ._script import PLAYGROUND_JS

if TYPE_CHECKING:
    from starlette.requests import Request

    from ._dataset import DatasetView
    from ._playground import Playground

__all__ = ["LOOPBACK_NAMES", "create_app", "is_loopback", "serve"]

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


def serve(app: Any, host: str, port: int, backend: str = "asyncio") -> None:
    """Serve ``app`` until interrupted: uvicorn on asyncio, Hypercorn on trio.

    Raises:
        ConfigurationError: an unknown backend, or its server is not installed (``pip install 'litstream[view]'``).
    """
    if backend == "asyncio":
        try:
            import uvicorn
        except ImportError:
            raise ConfigurationError("serving on asyncio needs uvicorn: pip install 'litstream[view]'") from None
        server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off"))
        server.run()
        return
    if backend == "trio":
        try:
            import trio
            from hypercorn.config import Config
            from hypercorn.trio import serve as hypercorn_serve
        except ImportError:
            raise ConfigurationError(
                "serving on trio needs hypercorn and trio: pip install 'litstream[view]'"
            ) from None
        config = Config()
        config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
        config.loglevel = "WARNING"
        trio.run(hypercorn_serve, app, config)
        return
    raise ConfigurationError(f"--backend {backend!r} is not usable; use 'asyncio' (uvicorn) or 'trio' (Hypercorn)")
