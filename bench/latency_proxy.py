"""A TCP proxy on 127.0.0.1 that adds a fixed one-way delay to every byte, in both directions.

The kernel here has no ``netem``, so network latency is simulated in user space: each piece of data
read from one side is written to the other side ``delay`` seconds after it arrived (pieces keep their
order and are pipelined, so throughput is not capped — only latency is added). With ``--delay 0.01``
every request/response exchange gains about 20 ms (one round trip).

    python bench/latency_proxy.py --port 9100 --target 127.0.0.1:8333 --delay 0.01

Prints ``ready <port>`` on stdout once listening; runs until killed. Written with anyio (asyncio).
"""

from __future__ import annotations

import argparse
import collections
import time

import anyio
import anyio.abc

_READ = 1 << 20


async def _pipe(source: anyio.abc.ByteStream, sink: anyio.abc.ByteStream, delay: float) -> None:
    queue: collections.deque[tuple[float, bytes]] = collections.deque()
    ready = anyio.Event()
    closed = False

    async def reader() -> None:
        nonlocal ready, closed
        try:
            while True:
                data = await source.receive(_READ)
                queue.append((time.monotonic() + delay, data))
                ready.set()
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            closed = True
            ready.set()

    async def writer() -> None:
        nonlocal ready
        try:
            while True:
                while not queue:
                    if closed:
                        if isinstance(sink, anyio.abc.SocketStream):
                            await sink.send_eof()
                        return
                    ready = anyio.Event()
                    await ready.wait()
                due, data = queue.popleft()
                wait = due - time.monotonic()
                if wait > 0:
                    await anyio.sleep(wait)
                now = time.monotonic()
                if queue and queue[0][0] <= now:  # send everything already due in one call
                    parts = [data]
                    while queue and queue[0][0] <= now:
                        parts.append(queue.popleft()[1])
                    data = b"".join(parts)
                await sink.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)


async def _serve(port: int, target_host: str, target_port: int, delay: float) -> None:
    async def handle(client: anyio.abc.SocketStream) -> None:
        async with client:
            try:
                upstream = await anyio.connect_tcp(target_host, target_port)
            except OSError:
                return
            async with upstream, anyio.create_task_group() as tg:
                tg.start_soon(_pipe, client, upstream, delay)
                tg.start_soon(_pipe, upstream, client, delay)

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port)
    print(f"ready {port}", flush=True)
    await listener.serve(handle)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--target", required=True, help="host:port")
    parser.add_argument("--delay", type=float, default=0.01, help="one-way delay in seconds (default 0.01)")
    args = parser.parse_args()
    host, _, target_port = args.target.rpartition(":")
    anyio.run(_serve, args.port, host, int(target_port), args.delay)


if __name__ == "__main__":
    main()
