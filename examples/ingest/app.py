"""An ingestion service: samples arrive over HTTP and are appended to a dataset on S3 with AsyncUploader.

The service is a Starlette ASGI app (:func:`create_app`) whose lifespan holds the ``AsyncUploader`` and
its flusher; it is served by uvicorn on asyncio, or by Hypercorn on trio (``--backend trio``). What runs,
all in one event loop:

* ``POST /samples`` (one JSON sample per request, answered ``202`` once the sample is accepted, ``400``
  for a bad one) hands every sample to ``AsyncUploader.add``, which waits while the upload budget is
  spent (backpressure reaches the client as a slower answer); ``GET /stats``;
* a flusher, started by the lifespan, that commits ``index.json`` every ``--flush-every`` seconds
  (``AsyncUploader.flush``); leaving the lifespan (server shutdown) commits the rest;
* a reader that keeps opening a ``StreamingDataset`` on the dataset (in a worker thread) and
  reports how many samples it sees: only committed ones, never a partial chunk;
* ``--clients`` HTTP clients (httpx) that post ``--samples`` samples between them, then stop.

Storage: a SeaweedFS S3 server the script starts on 127.0.0.1 (with the same helper the test suite
uses, ``tests/servers.py``), or a local directory with ``--local DIR``. At the end the script reads the
whole dataset back, checks it holds exactly the samples that were acknowledged, prints a summary
(the last line is JSON) and exits with status 0, or 1 if the check failed.

Run (from the repository root)::

    bash scripts/setup.sh && .venv/bin/python examples/ingest/app.py
    .venv/bin/python examples/ingest/app.py --local examples/ingest/data --samples 2000 --backend trio
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import httpx
import numpy as np
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from litstream import AsyncUploader, DatasetNotFoundError, StreamingDataset

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from starlette.requests import Request

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # examples/: _serving.py, shared with examples/serve

from _serving import listening_socket, run_server

REPO = Path(__file__).resolve().parents[2]


def payload(i: int) -> dict[str, Any]:
    """What client ``i`` posts: JSON."""
    return {"id": i, "text": f"sample {i}", "vector": [i * 0.5, i + 1.0, -float(i)]}


def to_sample(data: dict[str, Any]) -> dict[str, Any]:
    """The stored sample: an int, a string and a float32 vector."""
    return {"id": int(data["id"]), "text": str(data["text"]), "vector": np.asarray(data["vector"], dtype=np.float32)}


# -- the ASGI app -----------------------------------------------------------------------------------------


def create_app(
    location: str,
    options: dict[str, Any] | None,
    *,
    chunk_bytes: str = "4kb",
    max_bytes_in_flight: str = "1MB",
    flush_every: float = 0.1,
) -> Starlette:
    """The ingestion service writing to ``location``.

    ``app.state`` holds ``uploader`` (while the app runs), ``accepted`` (the ids answered ``202``),
    ``commits`` (the sample counts each flush committed) and, after shutdown, ``statistics``.
    """

    # --8<-- [start:lifespan]
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with (
            AsyncUploader(
                location,
                chunk_bytes=chunk_bytes,
                storage_options=options,
                mode="overwrite",
                max_bytes_in_flight=max_bytes_in_flight,
            ) as uploader,
            anyio.create_task_group() as tg,
        ):
            app.state.uploader = uploader
            tg.start_soon(flusher, uploader, flush_every, app.state.commits)
            yield
            tg.cancel_scope.cancel()
        # Leaving the `async with` committed the rest.
        app.state.statistics = uploader.statistics()

    # --8<-- [end:lifespan]

    async def post_sample(request: Request) -> JSONResponse:
        try:
            sample = to_sample(await request.json())
        except (ValueError, KeyError, TypeError) as exc:
            return JSONResponse({"error": f"bad sample: {exc}"}, status_code=400)
        await request.app.state.uploader.add(sample)  # waits when the upload budget is spent: backpressure
        request.app.state.accepted.add(sample["id"])
        return JSONResponse({"accepted": sample["id"]}, status_code=202)

    async def stats(request: Request) -> JSONResponse:
        statistics = request.app.state.uploader.statistics()
        return JSONResponse({"samples_added": statistics.samples_added, "committed": statistics.dataset_samples})

    app = Starlette(
        routes=[Route("/samples", post_sample, methods=["POST"]), Route("/stats", stats)], lifespan=lifespan
    )
    app.state.accepted = set()
    app.state.commits = []
    return app


# -- the background tasks --------------------------------------------------------------------------------


async def flusher(uploader: AsyncUploader, every: float, commits: list[int]) -> None:
    while True:
        await anyio.sleep(every)
        committed = await uploader.flush()
        if not commits or commits[-1] != committed:
            commits.append(committed)
            print(f"commit: index.json describes {committed} samples", flush=True)


def count_samples(location: str, options: dict[str, Any] | None) -> int:
    """How many samples a reader opened now sees (0 before the first commit)."""
    try:
        return sum(1 for _ in StreamingDataset(location, storage_options=options))
    except DatasetNotFoundError:
        return 0


async def reader(location: str, options: dict[str, Any] | None, every: float, seen: list[int]) -> None:
    while True:
        count = await anyio.to_thread.run_sync(count_samples, location, options)
        if not seen or seen[-1] != count:
            print(f"reader: a StreamingDataset opened now sees {count} samples", flush=True)
        seen.append(count)
        await anyio.sleep(every)


async def client(port: int, ids: range) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
        for i in ids:
            reply = await http.post("/samples", json=payload(i))
            reply.raise_for_status()


# -- main -------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def storage(args: argparse.Namespace) -> Iterator[tuple[str, dict[str, Any] | None]]:
    """Where the dataset goes: ``--local DIR``, or a fresh SeaweedFS on 127.0.0.1 (stopped on exit)."""
    if args.local is not None:
        yield str(args.local), None
        return
    sys.path.insert(0, str(REPO / "tests"))
    from servers import seaweedfs  # the helper the tests use; needs scripts/install_servers.sh

    with tempfile.TemporaryDirectory(prefix="litstream-ingest-") as workdir, seaweedfs(Path(workdir)) as server:
        print(f"SeaweedFS S3 on {server.endpoint}", flush=True)
        yield f"s3://{server.bucket}/ingest", server.options()


async def serve(args: argparse.Namespace, location: str, options: dict[str, Any] | None) -> dict[str, Any]:
    seen: list[int] = []
    started = time.perf_counter()
    app = create_app(
        location,
        options,
        chunk_bytes=args.chunk_bytes,
        max_bytes_in_flight=args.max_bytes_in_flight,
        flush_every=args.flush_every,
    )
    sock = listening_socket()
    port = sock.getsockname()[1]
    stop = anyio.Event()
    print(f"ingest endpoint: http://127.0.0.1:{port}/samples -> {location}", flush=True)
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_server, app, sock, stop)
        async with anyio.create_task_group() as side:
            side.start_soon(reader, location, options, args.flush_every / 2, seen)
            async with anyio.create_task_group() as clients:
                step = -(-args.samples // args.clients)
                for c in range(args.clients):
                    clients.start_soon(client, port, range(c * step, min((c + 1) * step, args.samples)))
            side.cancel_scope.cancel()
        stop.set()  # every sample is acknowledged: shut down; the lifespan commits the rest
    accepted = set(app.state.accepted)
    commits: list[int] = app.state.commits
    stats = app.state.statistics
    seconds = time.perf_counter() - started
    samples = await anyio.to_thread.run_sync(lambda: list(StreamingDataset(location, storage_options=options)))
    ids = [s["id"] for s in samples]
    exact = sorted(ids) == sorted(accepted) == list(range(args.samples)) and all(
        s["text"] == f"sample {s['id']}" and s["vector"].tolist() == payload(s["id"])["vector"] for s in samples
    )
    commits.append(stats.dataset_samples)
    only_committed = all(count in (0, *commits) for count in seen)
    return {
        "backend": args.backend,
        "dataset": location,
        "sent": args.samples,
        "acknowledged": len(accepted),
        "committed": stats.dataset_samples,
        "commits": stats.commits,
        "chunks": stats.chunks_committed,
        "reader_counts": sorted(set(seen)),
        "reader_saw_only_commits": only_committed,
        "read_back": len(ids),
        "exact_sample_set": exact,
        "peak_held_bytes": stats.peak_held_bytes,
        "seconds": round(seconds, 3),
        "ok": exact and only_committed,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--local", type=Path, default=None, help="write to this directory instead of S3")
    parser.add_argument("--samples", type=int, default=1000, help="samples the clients send (default 1000)")
    parser.add_argument("--clients", type=int, default=4, help="concurrent HTTP clients (default 4)")
    parser.add_argument("--flush-every", type=float, default=0.1, help="seconds between commits (default 0.1)")
    parser.add_argument("--chunk-bytes", default="4kb", help="chunk size (default 4kb: many small chunks)")
    parser.add_argument("--max-bytes-in-flight", default="1MB", help="upload budget (default 1MB)")
    parser.add_argument(
        "--backend", choices=["asyncio", "trio"], default="asyncio", help="asyncio: uvicorn (default); trio: Hypercorn"
    )
    args = parser.parse_args(argv)
    with storage(args) as (location, options):
        summary = anyio.run(partial(serve, args, location, options), backend=args.backend)
    print(
        f"sent {summary['sent']} samples, {summary['commits']} commits, {summary['chunks']} chunks; "
        f"read back {summary['read_back']}: {'exactly the samples sent' if summary['exact_sample_set'] else 'MISMATCH'}"
    )
    print("summary: " + json.dumps(summary, sort_keys=True))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
