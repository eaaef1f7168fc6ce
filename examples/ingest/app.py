"""An ingestion service: samples arrive over HTTP and are appended to a dataset on S3 with AsyncUploader.

What runs, all in one asyncio event loop (through anyio):

* an HTTP endpoint on 127.0.0.1 (``POST /samples`` with one JSON sample per request, answered
  ``202`` once the sample is accepted; ``GET /stats``) that hands every sample to ``AsyncUploader.add``;
* a flusher that commits ``index.json`` every ``--flush-every`` seconds (``AsyncUploader.flush``);
* a reader that keeps opening a ``StreamingDataset`` on the dataset (in a worker thread) and
  reports how many samples it sees: only committed ones, never a partial chunk;
* ``--clients`` HTTP clients (httpx) that post ``--samples`` samples between them, then stop.

Storage: a SeaweedFS S3 server the script starts on 127.0.0.1 (with the same helper the test suite
uses, ``tests/servers.py``), or a local directory with ``--local DIR``. At the end the script reads the
whole dataset back, checks it holds exactly the samples that were acknowledged, prints a summary
(the last line is JSON) and exits with status 0, or 1 if the check failed.

Run (from the repository root)::

    bash scripts/setup.sh && .venv/bin/python examples/ingest/app.py
    .venv/bin/python examples/ingest/app.py --local examples/ingest/data --samples 2000
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
from anyio.abc import SocketAttribute

from litstream import AsyncUploader, DatasetNotFoundError, StreamingDataset

if TYPE_CHECKING:
    from collections.abc import Iterator

    from anyio.abc import SocketStream

REPO = Path(__file__).resolve().parents[2]


def payload(i: int) -> dict[str, Any]:
    """What client ``i`` posts: JSON."""
    return {"id": i, "text": f"sample {i}", "vector": [i * 0.5, i + 1.0, -float(i)]}


def to_sample(data: dict[str, Any]) -> dict[str, Any]:
    """The stored sample: an int, a string and a float32 vector."""
    return {"id": int(data["id"]), "text": str(data["text"]), "vector": np.asarray(data["vector"], dtype=np.float32)}


# -- a minimal HTTP/1.1 endpoint (Content-Length bodies, keep-alive) -------------------------------------


async def read_request(stream: SocketStream, buffer: bytearray) -> tuple[str, str, bytes] | None:
    """One request from ``stream`` as (method, path, body); ``None`` when the client closed the connection."""
    while b"\r\n\r\n" not in buffer:
        try:
            buffer += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return None
    head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _version = lines[0].split(" ", 2)
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        rest += await stream.receive()
    buffer[:] = rest[length:]
    return method, path, rest[:length]


def response(status: int, body: dict[str, Any]) -> bytes:
    data = json.dumps(body).encode()
    reason = {200: "OK", 202: "Accepted", 400: "Bad Request", 404: "Not Found"}[status]
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    return head.encode() + data


class Service:
    """The endpoint's handlers, over one AsyncUploader."""

    def __init__(self, uploader: AsyncUploader) -> None:
        self.uploader = uploader
        self.accepted: set[int] = set()

    async def handle(self, stream: SocketStream) -> None:
        buffer = bytearray()
        async with stream:
            while (request := await read_request(stream, buffer)) is not None:
                method, path, body = request
                await stream.send(await self.route(method, path, body))

    async def route(self, method: str, path: str, body: bytes) -> bytes:
        if method == "POST" and path == "/samples":
            try:
                sample = to_sample(json.loads(body))
            except (ValueError, KeyError, TypeError) as exc:
                return response(400, {"error": f"bad sample: {exc}"})
            await self.uploader.add(sample)  # waits when the upload budget is spent: backpressure
            self.accepted.add(sample["id"])
            return response(202, {"accepted": sample["id"]})
        if method == "GET" and path == "/stats":
            stats = self.uploader.statistics()
            return response(200, {"samples_added": stats.samples_added, "committed": stats.dataset_samples})
        return response(404, {"error": f"no route {method} {path}"})


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
    commits: list[int] = []
    seen: list[int] = []
    started = time.perf_counter()
    async with AsyncUploader(
        location,
        chunk_bytes=args.chunk_bytes,
        storage_options=options,
        mode="overwrite",
        max_bytes_in_flight=args.max_bytes_in_flight,
    ) as uploader:
        service = Service(uploader)
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        port = listener.extra(SocketAttribute.local_port)
        print(f"ingest endpoint: http://127.0.0.1:{port}/samples -> {location}", flush=True)
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, service.handle)
            tg.start_soon(flusher, uploader, args.flush_every, commits)
            tg.start_soon(reader, location, options, args.flush_every / 2, seen)
            async with anyio.create_task_group() as clients:
                step = -(-args.samples // args.clients)
                for c in range(args.clients):
                    clients.start_soon(client, port, range(c * step, min((c + 1) * step, args.samples)))
            tg.cancel_scope.cancel()  # every sample is acknowledged: stop serving
        accepted = set(service.accepted)
    # Leaving the block committed the rest. Read everything back.
    stats = uploader.statistics()
    seconds = time.perf_counter() - started
    samples = await anyio.to_thread.run_sync(lambda: list(StreamingDataset(location, storage_options=options)))
    ids = [s["id"] for s in samples]
    exact = sorted(ids) == sorted(accepted) == list(range(args.samples)) and all(
        s["text"] == f"sample {s['id']}" and s["vector"].tolist() == payload(s["id"])["vector"] for s in samples
    )
    commits.append(stats.dataset_samples)
    only_committed = all(count in (0, *commits) for count in seen)
    return {
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
    args = parser.parse_args(argv)
    with storage(args) as (location, options):
        summary = anyio.run(partial(serve, args, location, options), backend="asyncio")
    print(
        f"sent {summary['sent']} samples, {summary['commits']} commits, {summary['chunks']} chunks; "
        f"read back {summary['read_back']}: {'exactly the samples sent' if summary['exact_sample_set'] else 'MISMATCH'}"
    )
    print("summary: " + json.dumps(summary, sort_keys=True))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
