"""A small S3-layout object server on 127.0.0.1 that answers every request ``--delay`` seconds late.

A latency rig that costs little CPU per request: ``bench/latency_proxy.py`` in front of SeaweedFS spends more CPU
per small GET than either client (the proxy copies every byte through Python tasks, SeaweedFS's S3 gateway
goes through its filer and volume server), and on a 2-core machine that CPU is taken from the client being
measured. Here one aiohttp process (its HTTP parser is compiled) keeps the objects in memory and waits
``delay`` on its event loop before answering, so the latency costs a timer, not a thread or a copy
(``bench/latency_rig_cpu.py`` measures CPU per request for each rig).

Speaks the part of S3 the raw benchmark uses: ``PUT /<bucket>/<key>`` (stores the body), ``GET`` (whole object,
or one ``Range: bytes=a-b``; ``ETag``, ``Last-Modified``, ``Content-Length``), ``HEAD``, and S3's XML
``NoSuchKey`` error. Authorization headers are accepted and not checked; there is no listing.

    python bench/s3_delay_server.py --port 9200 --delay 0.02

Prints ``ready <port>`` once listening; runs until killed.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import re
from email.utils import formatdate

from aiohttp import web

_RANGE = re.compile(r"bytes=(\d+)-(\d*)")
_NOT_FOUND = (
    '<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code>'
    "<Message>The specified key does not exist.</Message></Error>"
)


def make_app(delay: float) -> web.Application:
    objects: dict[str, tuple[bytes, dict[str, str]]] = {}
    modified = formatdate(usegmt=True)

    async def put(request: web.Request) -> web.Response:
        body = await request.read()
        etag = f'"{hashlib.md5(body).hexdigest()}"'
        objects[request.match_info["path"]] = (body, {"ETag": etag, "Last-Modified": modified})
        return web.Response(status=200, headers={"ETag": etag})

    async def get(request: web.Request) -> web.Response:
        if delay > 0:
            await asyncio.sleep(delay)
        found = objects.get(request.match_info["path"])
        if found is None:
            return web.Response(status=404, text=_NOT_FOUND, content_type="application/xml")
        body, headers = found
        wanted = request.headers.get("Range")
        if wanted is not None and (m := _RANGE.fullmatch(wanted.strip())):
            start = int(m.group(1))
            end = min(int(m.group(2)) if m.group(2) else len(body) - 1, len(body) - 1)
            if start >= len(body):
                return web.Response(status=416, headers={"Content-Range": f"bytes */{len(body)}"})
            part = {**headers, "Content-Range": f"bytes {start}-{end}/{len(body)}"}
            if request.method == "HEAD":
                return web.Response(status=206, headers={**part, "Content-Length": str(end + 1 - start)})
            return web.Response(status=206, body=body[start : end + 1], headers=part)
        if request.method == "HEAD":
            return web.Response(status=200, headers={**headers, "Content-Length": str(len(body))})
        return web.Response(status=200, body=body, headers=headers)

    app = web.Application(client_max_size=1 << 30)
    app.router.add_route("PUT", "/{path:.+}", put)
    app.router.add_route("GET", "/{path:.+}", get)  # also answers HEAD
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay", type=float, default=0.02, help="seconds before each GET is answered (0.02)")
    args = parser.parse_args()

    async def serve() -> None:
        runner = web.AppRunner(make_app(args.delay), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", args.port, backlog=1024).start()
        print(f"ready {args.port}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
