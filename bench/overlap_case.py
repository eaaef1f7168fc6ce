"""Does a slow ``fn`` overlap a slow store? One ``optimize`` worker, a ``fn`` that takes ``--fn-ms`` per input
and a store whose every chunk upload takes ``--store-ms`` in ``--parts`` requests; one input per chunk.

``fn`` runs in a worker thread while the worker's event loop uploads the previous chunks, so the run
should take about the longer of the two totals, not their sum. Prints one JSON line (and writes it to
``--out`` if given)::

    .venv/bin/python bench/overlap_case.py                    # 40 inputs, 50 ms + 50 ms
    .venv/bin/python bench/overlap_case.py --out bench/results/overlap.json

``overlap`` is the share of the shorter total hidden behind the longer one: 1.0 is perfect overlap,
0.0 is none (fn and uploads one after the other).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from typing import TYPE_CHECKING, Any

import anyio

import litstream
from litstream import LocalFileStore, optimize

if TYPE_CHECKING:
    from litstream.storage._base import PutData


class SlowStore:
    """A local store whose chunk uploads each take ``delay`` seconds, in ``parts`` requests one after the
    other (a multipart upload to a distant object store: the event loop issues every part)."""

    def __init__(self, root: str, delay: float, parts: int) -> None:
        self._inner = LocalFileStore(root)
        self._delay = delay
        self._parts = parts

    @property
    def url(self) -> str:
        return self._inner.url

    async def put(self, path: str, data: PutData) -> None:
        if path.startswith("chunk-"):
            for _ in range(self._parts):
                await anyio.sleep(self._delay / self._parts)
        await self._inner.put(path, data)

    def __getattr__(self, name: str) -> Any:  # get, get_range, list, delete, head: as the local store
        return getattr(self._inner, name)


def slow_fn(delay: float) -> Any:
    def fn(i: int) -> dict[str, Any]:
        time.sleep(delay)  # the user's blocking work: decode, resize, tokenize, ...
        return {"i": i, "payload": bytes(1000)}

    return fn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--inputs", type=int, default=40)
    parser.add_argument("--fn-ms", type=float, default=50.0)
    parser.add_argument("--store-ms", type=float, default=50.0)
    parser.add_argument("--parts", type=int, default=5, help="requests per chunk upload")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    fn_s, store_s = args.fn_ms / 1000, args.store_ms / 1000
    with tempfile.TemporaryDirectory() as tmp:
        store = SlowStore(tmp, store_s, args.parts)
        start = time.perf_counter()
        summary = optimize(slow_fn(fn_s), range(args.inputs), store, chunk_size=1, num_workers=1, verbose=False)
        seconds = time.perf_counter() - start
    fn_total, store_total = args.inputs * fn_s, args.inputs * store_s
    longer, shorter = max(fn_total, store_total), min(fn_total, store_total)
    row = {
        "case": "optimize_slow_fn_slow_store",
        "litstream": litstream.__version__ if hasattr(litstream, "__version__") else "dev",
        "inputs": args.inputs,
        "chunks": summary.chunks,
        "fn_ms_per_input": args.fn_ms,
        "store_ms_per_chunk": args.store_ms,
        "requests_per_chunk": args.parts,
        "seconds": round(seconds, 3),
        "sum_s": round(fn_total + store_total, 3),
        "max_s": round(longer, 3),
        "overlap": round(min(max((fn_total + store_total - seconds) / shorter, 0.0), 1.0), 3) if shorter else None,
        "python": sys.version.split()[0],
        "machine": platform.machine(),
    }
    line = json.dumps(row)
    print(line)
    if args.out:
        with open(args.out, "w") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
