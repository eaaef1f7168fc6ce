"""What the service examples (``ingest/app.py``, ``serve/app.py``) share: a listening socket on 127.0.0.1 and
the server that runs an ASGI app on it, uvicorn under asyncio and Hypercorn under trio.

The examples put this folder on ``sys.path`` and import it as ``_serving``.
"""

from __future__ import annotations

import socket
from typing import Any

import anyio
import sniffio

__all__ = ["listening_socket", "run_server"]


def listening_socket(port: int = 0) -> socket.socket:
    """A TCP socket on 127.0.0.1, listening (the servers take it as it is); ``port`` 0: a free one."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    return sock


async def run_server(app: Any, sock: socket.socket, stop: anyio.Event) -> None:
    """Serve the ASGI ``app`` (lifespan included) on ``sock`` until ``stop`` is set: uvicorn under asyncio,
    Hypercorn under trio."""
    if sniffio.current_async_library() == "asyncio":
        import uvicorn

        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))

        async def stopper() -> None:
            await stop.wait()
            server.should_exit = True

        async with anyio.create_task_group() as tg:
            tg.start_soon(stopper)
            await server.serve(sockets=[sock])
        return
    from hypercorn.config import Config
    from hypercorn.trio import serve

    config = Config()
    config.bind = [f"fd://{sock.detach()}"]  # Hypercorn wraps the descriptor in a socket of its own and closes it
    config.loglevel = "WARNING"
    config.accesslog = None
    await serve(app, config, shutdown_trigger=stop.wait)
