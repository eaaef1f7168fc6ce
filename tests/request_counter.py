"""A loopback TCP proxy that records every HTTP request sent through it (method, path, ``Range``).

Bytes pass through unchanged (so an S3 client's signature, which covers the ``Host`` header, still
verifies); the client→server direction is parsed only to log requests. A request is logged before it is
forwarded, so once a client call has returned, every request it made is in :attr:`RequestCounter.requests`
(no waiting needed). Bodies are skipped by ``Content-Length``; a chunked request body is refused (the
tests send only GET/HEAD through it).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from types import TracebackType

__all__ = ["Request", "RequestCounter"]


@dataclass(frozen=True)
class Request:
    """One HTTP request seen by the proxy."""

    method: str
    path: str
    range: str | None


class RequestCounter:
    """Forward ``127.0.0.1:<port>`` to ``target`` (an ``http://host:port`` URL) and log the requests."""

    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        if parts.hostname is None or parts.port is None:
            raise ValueError(f"target={target!r}: use http://host:port")
        self._target = (parts.hostname, parts.port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self.requests: list[Request] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        self._closed = False

    def __enter__(self) -> RequestCounter:
        self._spawn(self._accept)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
        for thread in self._threads:
            thread.join(timeout=10)

    def take(self) -> list[Request]:
        """The requests logged since the last ``take`` (and forget them)."""
        with self._lock:
            out, self.requests = self.requests, []
        return out

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self._target)
            with self._lock:
                self._sockets += [client, server]
            self._spawn(self._upstream, client, server)
            self._spawn(self._downstream, server, client)

    def _downstream(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(1 << 16):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def _upstream(self, source: socket.socket, sink: socket.socket) -> None:
        buffer = b""
        body_left = 0
        with contextlib.suppress(OSError):
            while data := source.recv(1 << 16):
                buffer += data
                out = b""
                while buffer:
                    if body_left:
                        take = min(body_left, len(buffer))
                        out, buffer, body_left = out + buffer[:take], buffer[take:], body_left - take
                        continue
                    end = buffer.find(b"\r\n\r\n")
                    if end < 0:
                        break
                    head, buffer = buffer[: end + 4], buffer[end + 4 :]
                    body_left = self._log(head)
                    out += head
                sink.sendall(out)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def _log(self, head: bytes) -> int:
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        if "chunked" in headers.get("transfer-encoding", ""):
            self.errors.append(f"chunked body on {method} {path}")
        with self._lock:
            self.requests.append(Request(method, path, headers.get("range")))
        return int(headers.get("content-length", "0"))
