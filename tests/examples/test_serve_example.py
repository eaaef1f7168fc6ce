"""The read-service example (``examples/serve/app.py``): ``astream`` behind a real ASGI server.

The app runs in this test's event loop under uvicorn (asyncio) or Hypercorn (trio) on a loopback
socket, over a dataset on the local S3 server; httpx is the client. Checked: every sample once, resume
from the state the client kept, backpressure from a client that stops reading, and that a client that
disconnects leaves no task, no thread running litstream code and no cache hold behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.abc
import httpx
import numpy as np
import pytest

import litstream
from running import litstream_frames

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Callable

    from servers import S3Server

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "serve" / "app.py"
_PACKAGE_DIR = os.path.dirname(os.path.abspath(litstream.__file__))
SAMPLES = 120
SOCKET_BUFFER = 32 * 1024  # bytes; set on both ends of the backpressure test's connection


def _load_example() -> Any:
    spec = importlib.util.spec_from_file_location("serve_example_app", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


app_module = _load_example()


def _sample(i: int) -> dict[str, Any]:
    # 20 kB per sample (27 kB as a JSON line): 3.2 MB in all, many times the socket buffers the test sets.
    return {"id": i, "blob": bytes([i % 256]) * 20_000, "vector": np.full(4, i, dtype=np.int32)}


@pytest.fixture(scope="module")
def s3_dataset(s3_server: S3Server) -> tuple[str, dict[str, str]]:
    url = f"s3://{s3_server.bucket}/serve-{uuid.uuid4().hex[:8]}"
    litstream.optimize(
        fn=_sample,
        inputs=list(range(SAMPLES)),
        output_dir=url,
        chunk_size=10,
        num_workers=1,
        mode="overwrite",
        storage_options=s3_server.options(),
    )
    return url, s3_server.options()


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("LITSTREAM_CACHE_DIR", str(folder))
    return folder


class Served:
    """An app served on a loopback port, with an httpx client on it."""

    def __init__(self, app: Any, client: httpx.AsyncClient) -> None:
        self.app = app
        self.client = client


async def _serve(app: Any, body: Callable[[Served], Any], send_buffer: int | None = None) -> None:
    stop = anyio.Event()
    sock = app_module.listening_socket()
    if send_buffer is not None:  # accepted connections inherit it (and lose the kernel's autotuning)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
    port = sock.getsockname()[1]
    async with anyio.create_task_group() as tg:
        tg.start_soon(app_module.run_server, app, sock, stop)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            await body(Served(app, client))
        stop.set()


async def _lines(reply: httpx.Response) -> AsyncGenerator[dict[str, Any], None]:
    lines_of = cast("AsyncGenerator[str, None]", reply.aiter_lines())  # a generator, typed as an iterator by httpx
    async with contextlib.aclosing(lines_of) as lines:
        async for line in lines:
            yield json.loads(line)


@pytest.mark.anyio
async def test_every_sample_once_then_a_resume_from_the_clients_state(
    s3_dataset: tuple[str, dict[str, str]], cache_dir: Path
) -> None:
    url, options = s3_dataset
    app = app_module.create_app(url, storage_options=options)

    async def body(served: Served) -> None:
        whole = await app_module.read_stream(served.client, {"shuffle": True, "seed": 3})
        assert sorted(whole["ids"]) == list(range(SAMPLES))
        assert whole["end"]["served"] == SAMPLES
        first = await app_module.read_stream(served.client, {"shuffle": True, "seed": 3, "limit": 35})
        assert first["ids"] == whole["ids"][:35]
        rest = await app_module.read_stream(served.client, {"shuffle": True, "seed": 3, "state": first["state"]})
        assert first["ids"] + rest["ids"] == whole["ids"]  # exactly the samples not received, in order
        batches = []
        async with (
            served.client.stream("POST", "/stream", json={"batch_size": 16}) as reply,
            contextlib.aclosing(_lines(reply)) as messages,
        ):
            async for message in messages:
                if "batch" in message:
                    batches.append([s["id"] for s in message["batch"]])
                    assert message["batch"][0]["blob"] != ""
        assert [len(b) for b in batches] == [16] * 7 + [8]
        assert [i for b in batches for i in b] == list(range(SAMPLES))

    await _serve(app, body)


@pytest.mark.anyio
async def test_bad_requests_get_a_400_naming_the_field(tmp_path: Path) -> None:
    app = app_module.create_app(str(tmp_path))

    async def body(served: Served) -> None:
        reply = await served.client.post("/stream", json={"batch_size": 0})
        assert reply.status_code == 400
        assert "batch_size must be an int >= 1, got 0" in reply.json()["error"]
        reply = await served.client.post("/stream", json={"colour": "red"})
        assert reply.status_code == 400
        assert "unknown fields ['colour']" in reply.json()["error"]

    await _serve(app, body)


def _tasks_in_our_code() -> list[str]:
    """Running tasks whose coroutine stack is inside litstream or the example's stream response (the
    server's own tasks keep running; a stream's tasks must not)."""
    ours = []
    for task in anyio.get_running_tasks():
        coro: Any = task.coro
        while coro is not None:
            frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
            name = os.path.abspath(frame.f_code.co_filename) if frame is not None else ""
            in_response = (
                frame is not None and name == str(EXAMPLE) and "SampleStreamResponse" in frame.f_code.co_qualname
            )
            if name.startswith(_PACKAGE_DIR) or in_response:
                ours.append(f"{task.name}: {name}")
                break
            coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return ours


def _cached_chunks(cache_dir: Path) -> list[Path]:
    """Chunk files the cache holds (complete ones: a download in progress has a hidden temporary name)."""
    return [p for p in cache_dir.rglob("chunk-*.bin") if ".locks" not in p.parts]


def _held_chunks(cache_dir: Path) -> list[str]:
    """Chunk lock files someone still holds (an exclusive non-blocking flock is refused)."""
    held = []
    for lock in cache_dir.rglob("*.lock"):
        fd = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held.append(lock.name)
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
    return held


class SendWatch:
    """ASGI middleware of the test: counts the body messages the app has handed to the server and
    whether one is being waited on (the server's transport is full: backpressure)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.state = app.state
        self.sent = 0
        self.waiting = False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def watched(message: Any) -> None:
            if message["type"] == "http.response.body":
                self.waiting = True
                await send(message)
                self.waiting = False
                self.sent += 1
            else:
                await send(message)

        await self.app(scope, receive, watched)


@pytest.mark.anyio
async def test_a_client_that_stops_reading_stops_the_stream_and_a_disconnect_leaves_nothing(
    s3_dataset: tuple[str, dict[str, str]], cache_dir: Path
) -> None:
    url, options = s3_dataset
    app = app_module.create_app(url, storage_options=options, cache_dir=str(cache_dir))
    watch = SendWatch(app)

    async def body(served: Served) -> None:
        assert _tasks_in_our_code() == []
        threads_before = {t.ident for t in threading.enumerate()}
        # A raw HTTP/1.1 client, so that the test controls exactly when it reads and when it hangs up.
        port = int(str(served.client.base_url).rsplit(":", 1)[1].rstrip("/"))
        payload = json.dumps({"state_every": 1000}).encode()
        raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER)
        raw.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            raw.connect(("127.0.0.1", port))
        await anyio.wait_writable(raw)
        async with await anyio.abc.SocketStream.from_socket(raw) as conn:
            await conn.send(
                b"POST /stream HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(payload)}\r\n\r\n".encode()
                + payload
            )
            received = b""
            while b'{"sample":' not in received:
                received += await conn.receive()
            assert received.startswith(b"HTTP/1.1 200")
            # The client reads nothing more: the server must end up waiting on a full transport.
            with anyio.fail_after(60):
                while not watch.waiting:
                    await anyio.wait_all_tasks_blocked()
                    await anyio.lowlevel.checkpoint()
            # Samples produced but not taken: bounded by the socket buffers, far from the whole dataset.
            assert app.state.streams.served < SAMPLES
            assert app.state.streams.open == 1
            # The stream reads through the chunk cache. (Not its lock files: a chunk's lock file goes with its last
            # hold, and the stream may have handed every chunk over by now.)
            assert _cached_chunks(cache_dir)
        # The client hung up: the stream is cancelled and cleaned up.
        with anyio.fail_after(30):
            await app.state.streams.wait_idle()
        await anyio.wait_all_tasks_blocked()
        assert app.state.streams.open == 0
        assert _held_chunks(cache_dir) == []
        # A ranged GET already running in a worker thread cannot be interrupted: it is abandoned and ends on
        # its own. Wait for that (a deadline, not a guess): no thread may stay in litstream's code.
        with anyio.fail_after(30):
            while litstream_frames(threads_before):  # noqa: ASYNC110 - a worker thread ending sets no event
                await anyio.sleep(0.02)
        assert _tasks_in_our_code() == []

    await _serve(watch, body, send_buffer=SOCKET_BUFFER)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_demo_script_checks_itself(backend: str) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--demo", "--backend", backend],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1].removeprefix("summary: "))
    assert summary == {
        "every_sample_once": True,
        "first_part": 30,
        "ok": True,
        "resumed": 70,
        "same_order_as_one_stream": True,
    }
