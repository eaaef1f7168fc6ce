"""A read service: a dataset streamed to HTTP clients as newline-delimited JSON, straight from ``astream``.

The app is a Starlette ASGI application (:func:`create_app`), served by uvicorn on asyncio or by
Hypercorn on trio (``--backend``). One endpoint:

``POST /stream`` with a JSON body ``{"shuffle": false, "seed": 42, "batch_size": 1, "state": null,
"state_every": 10, "limit": null}`` (every field optional) answers ``200`` with ``application/x-ndjson``:

* ``{"sample": {...}}`` per sample (``batch_size == 1``) or ``{"batch": [{...}, ...]}`` per batch; arrays
  become lists, ``bytes`` base64 strings;
* ``{"state": {...}}`` after every ``state_every`` samples: the stream's checkpoint. A client that keeps
  the last one and posts it back as ``"state"`` gets exactly the samples it has not received yet;
* ``{"end": true, "served": N, "state": {...}}`` when the epoch (or ``limit``) is done.

Backpressure comes from the client: each line is sent only once the previous one was taken by the
server's transport, so a client that stops reading stops the stream (the server's read-ahead is bounded
by ``astream``'s prefetch plus the socket buffers). A client that disconnects cancels its stream:
``async with astream(...)`` leaves no task, thread or cache hold behind (``tests/examples/test_serve_example.py``
checks it against S3). ``GET /health`` answers ``{"streams": <open streams>}``.

Run (from the repository root)::

    .venv/bin/python examples/serve/app.py DATASET [--backend asyncio|trio] [--port N]
    .venv/bin/python examples/serve/app.py --demo [--backend trio]   # a small dataset served and read back

``--demo`` starts the service on 127.0.0.1 beside an httpx client that reads part of the epoch
(``"limit": 30``), resumes from the state it received and checks that it got every sample exactly once.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import sys
import tempfile
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import httpx
import numpy as np
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

import litstream

if TYPE_CHECKING:
    from collections.abc import Mapping

    from starlette.requests import Request

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # examples/: _serving.py, shared with examples/ingest

from _serving import listening_socket, run_server


def to_json(value: Any) -> Any:
    """A decoded sample as JSON values: arrays and tensors to lists, bytes to base64, NumPy scalars to numbers."""
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if hasattr(value, "tolist"):  # a torch tensor, without importing torch here
        return value.tolist()
    return value


@dataclass
class Streams:
    """The open streams of one app: a count, and a way to wait until none is open."""

    open: int = 0
    served: int = 0
    _idle: anyio.Event | None = field(default=None, repr=False)

    def opened(self) -> None:
        if self.open == 0:
            self._idle = anyio.Event()
        self.open += 1

    def closed(self) -> None:
        self.open -= 1
        if self.open == 0 and self._idle is not None:
            self._idle.set()

    async def wait_idle(self) -> None:
        """Return once no stream is open (at once if none is)."""
        if self.open and self._idle is not None:
            await self._idle.wait()


@dataclass(frozen=True)
class StreamRequest:
    """The fields of a ``POST /stream`` body, validated."""

    shuffle: bool = False
    seed: int = 42
    batch_size: int = 1
    state: Mapping[str, Any] | None = None
    state_every: int = 10
    limit: int | None = None

    @classmethod
    def parse(cls, body: Any) -> StreamRequest:
        if not isinstance(body, dict):
            raise ValueError("the body must be a JSON object")
        unknown = set(body) - {"shuffle", "seed", "batch_size", "state", "state_every", "limit"}
        if unknown:
            raise ValueError(f"unknown fields {sorted(unknown)}")
        request = cls(**body)
        if not isinstance(request.shuffle, bool):
            raise ValueError(f"shuffle must be true or false, got {request.shuffle!r}")
        for name in ("seed", "batch_size", "state_every"):
            value = getattr(request, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "seed" else 1):
                raise ValueError(f"{name} must be an int >= {0 if name == 'seed' else 1}, got {value!r}")
        if request.limit is not None and (
            isinstance(request.limit, bool) or not isinstance(request.limit, int) or request.limit < 0
        ):
            raise ValueError(f"limit must be null or an int >= 0, got {request.limit!r}")
        if request.state is not None and not isinstance(request.state, dict):
            raise ValueError("state must be null or the object a previous stream sent")
        return request


def _line(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode() + b"\n"


# --8<-- [start:response]
class SampleStreamResponse:
    """The ASGI response of one stream: samples from ``astream`` written to the client as they come.

    A plain ASGI callable rather than a generator handed to ``StreamingResponse``: ``async with astream(...)``
    holds a task group, and a generator must not suspend inside one (it could be closed from another
    task). Here one task group holds both the stream and a watcher of ``http.disconnect``, so a client
    that leaves cancels the stream and everything it started is joined before the response returns.
    """

    def __init__(
        self,
        dataset: str,
        options: Mapping[str, Any] | None,
        streams: Streams,
        request: StreamRequest,
        cache_dir: str | None = None,
    ) -> None:
        self.dataset = dataset
        self.options = options
        self.cache_dir = cache_dir
        self.streams = streams
        self.request = request

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/x-ndjson")]}
        )
        self.streams.opened()
        try:
            async with anyio.create_task_group() as tg:

                async def watch_disconnect() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    tg.cancel_scope.cancel()

                tg.start_soon(watch_disconnect)
                try:
                    await self._samples(send)
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                except OSError:  # the server reports a client that is gone this way too
                    pass
                tg.cancel_scope.cancel()
        finally:
            self.streams.closed()

    async def _samples(self, send: Any) -> None:
        request = self.request

        async def write(value: Mapping[str, Any]) -> None:
            # Returns once the server's transport took the line: a client that stops reading stops us here.
            await send({"type": "http.response.body", "body": _line(value), "more_body": True})

        served = 0
        async with litstream.astream(
            self.dataset,
            shuffle=request.shuffle,
            seed=request.seed,
            storage_options=self.options,
            cache_dir=self.cache_dir,
            state=request.state,
        ) as samples:
            batch: list[Any] = []
            async for sample in samples:
                served += 1
                self.streams.served += 1
                if request.batch_size == 1:
                    await write({"sample": to_json(sample)})
                else:
                    batch.append(to_json(sample))
                    if len(batch) == request.batch_size:
                        await write({"batch": batch})
                        batch = []
                if served % request.state_every == 0 and not batch:
                    await write({"state": samples.state_dict()})
                if request.limit is not None and served >= request.limit:
                    break
            if batch:
                await write({"batch": batch})
            await write({"end": True, "served": served, "state": samples.state_dict()})


# --8<-- [end:response]


def create_app(
    dataset: str, *, storage_options: Mapping[str, Any] | None = None, cache_dir: str | None = None
) -> Starlette:
    """The service over one dataset (a local path or any URL ``StreamingDataset`` takes); a remote one is
    cached in ``cache_dir`` when given (shared by every stream), else read into memory.

    ``app.state.streams`` is the :class:`Streams` count of open streams.
    """
    streams = Streams()
    options = dict(storage_options) if storage_options else None

    async def stream(request: Request) -> Any:
        try:
            parsed = StreamRequest.parse(await request.json() if await request.body() else {})
        except (ValueError, TypeError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return SampleStreamResponse(dataset, options, streams, parsed, cache_dir)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"streams": streams.open, "served": streams.served})

    app = Starlette(routes=[Route("/stream", stream, methods=["POST"]), Route("/health", health)])
    app.state.streams = streams
    return app


# -- running it -------------------------------------------------------------------------------------------


async def read_stream(client: httpx.AsyncClient, body: Mapping[str, Any]) -> dict[str, Any]:
    """Post ``body`` and read the whole response: the sample ids, the last state and the end line."""
    ids: list[int] = []
    state: Any = None
    end = None
    async with client.stream("POST", "/stream", json=body) as reply:
        reply.raise_for_status()
        async for line in reply.aiter_lines():
            message = json.loads(line)
            if "sample" in message:
                ids.append(message["sample"]["id"])
            elif "batch" in message:
                ids.extend(s["id"] for s in message["batch"])
            elif "end" in message:
                end = message
                state = message["state"]
            else:
                state = message["state"]
    return {"ids": ids, "state": state, "end": end}


async def demo(workdir: Path) -> dict[str, Any]:
    """Write a dataset, serve it, read 30 samples, resume from the state received, and check the epoch."""
    data = workdir / "data"
    await anyio.to_thread.run_sync(
        partial(
            litstream.optimize,
            fn=sample,
            inputs=list(range(100)),
            output_dir=str(data),
            chunk_size=16,
            num_workers=1,
            mode="overwrite",
        )
    )
    app = create_app(str(data))
    stop = anyio.Event()
    sock = listening_socket()
    port = sock.getsockname()[1]
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_server, app, sock, stop)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            first = await read_stream(client, {"shuffle": True, "seed": 7, "limit": 30})
            rest = await read_stream(client, {"shuffle": True, "seed": 7, "state": first["state"]})
            whole = await read_stream(client, {"shuffle": True, "seed": 7})
        stop.set()
    received = first["ids"] + rest["ids"]
    return {
        "first_part": 30,
        "resumed": len(rest["ids"]),
        "every_sample_once": sorted(received) == list(range(100)),
        "same_order_as_one_stream": received == whole["ids"],
        "ok": sorted(received) == list(range(100)) and received == whole["ids"],
    }


def sample(i: int) -> dict[str, Any]:
    """The demo dataset's samples."""
    return {"id": i, "text": f"sample {i}", "vector": np.arange(3, dtype=np.float32) + i}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", nargs="?", help="the dataset to serve (a path or URL)")
    parser.add_argument(
        "--backend", choices=["asyncio", "trio"], default="asyncio", help="asyncio: uvicorn; trio: Hypercorn"
    )
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--demo", action="store_true", help="serve a small dataset to a client and check it")
    args = parser.parse_args(argv)
    if args.demo:
        with tempfile.TemporaryDirectory(prefix="litstream-serve-") as workdir:
            summary = anyio.run(demo, Path(workdir), backend=args.backend)
        print("summary: " + json.dumps(summary, sort_keys=True))
        return 0 if summary["ok"] else 1
    if args.dataset is None:
        parser.error("give a DATASET to serve, or --demo")
    app = create_app(args.dataset)
    sock = listening_socket(args.port)
    print(f"serving {args.dataset} on http://127.0.0.1:{args.port}/stream", flush=True)

    async def forever() -> None:
        await run_server(app, sock, anyio.Event())

    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(forever, backend=args.backend)
    return 0


if __name__ == "__main__":
    sys.exit(main())
