"""Run ONE end-to-end benchmark case for ONE library in this (fresh) process; print one JSON line.

Used by ``bench/run_all.py``, which starts a new interpreter per case so that peak RSS and time to
first batch are measured honestly (no warm imports, caches or threads from another case). Only the
measured library is imported.

    python bench/e2e_case.py '{"case": "local_dataset", "library": "litstream", "data": "/tmp/x"}'

Cases (``case`` key): ``optimize``, ``local_dataset``, ``local_loader`` (``workers``), ``remote_dataset``
(``url``, ``s3``: endpoint/key/secret, ``cache_dir``), ``async`` (``backend``: asyncio/trio/thread),
``tokens`` (``block_size``), ``rows`` (dict rows, e.g. LitData's Arrow chunks). The timed region starts
before the dataset object is built and ends
after the last sample; time to first batch is measured from the same start. The checksum of what was
read (:class:`_e2e_data.Checksum`) is computed in a second, untimed pass over the same dataset with
the same API, except ``optimize`` (checksum of a read-back of what was written, untimed).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _e2e_data import BATCH_SIZE, CHUNK_BYTES, OPTIMIZE_WORKERS, Checksum, make_sample
from _peers import DISTRIBUTIONS, PEERS

for _message in (r"An item was larger than the target chunk size", r"The given NumPy array is not writable"):
    warnings.filterwarnings("ignore", message=_message)


def _version(library: str) -> str:
    from importlib.metadata import version

    return version(DISTRIBUTIONS.get(library, library))


def _peak_rss_mb() -> tuple[float, float]:
    """Peak RSS in MiB of this process and of its largest finished child (Linux reports KiB)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return own, children


# -- dataset / loader construction ------------------------------------------------------------------


def _dataset(library: str, source: str, spec: dict[str, Any]) -> Any:
    if library in PEERS:
        import _peers

        return _peers.dataset(library, source)
    if library == "litstream":
        import litstream

        kwargs: dict[str, Any] = {}
        if "s3" in spec:
            s3 = spec["s3"]
            kwargs = {
                "storage_options": {
                    "endpoint_url": s3["endpoint"],
                    "aws_access_key_id": s3["key"],
                    "aws_secret_access_key": s3["secret"],
                },
                "cache_dir": spec["cache_dir"],
            }
            if "cache_chunks" in spec:  # False: remote chunks read into memory, never written to the cache
                kwargs["cache_chunks"] = spec["cache_chunks"]
        if "block_size" in spec:
            kwargs["item_loader"] = litstream.TokensLoader(block_size=spec["block_size"])  # type: ignore[attr-defined]
        return litstream.StreamingDataset(source, **kwargs)
    import litdata

    kwargs = {}
    if "s3" in spec:
        # LitData fetches S3 chunks with obstore, whose client refuses plain http unless allowed; the
        # S3 server here is http://127.0.0.1. LitData has no option for it, so set its client options.
        import litdata.streaming.downloader as litdata_downloader

        litdata_downloader._OBSTORE_CLIENT_OPTIONS = {"timeout": "200s", "allow_http": True}  # type: ignore[assignment]
        s3 = spec["s3"]
        kwargs = {
            "storage_options": {
                "endpoint_url": s3["endpoint"],
                "aws_access_key_id": s3["key"],
                "aws_secret_access_key": s3["secret"],
            },
            "cache_dir": spec["cache_dir"],
        }
    if "block_size" in spec:
        from litdata.streaming.item_loader import TokensLoader

        kwargs["item_loader"] = TokensLoader(block_size=spec["block_size"])
    return litdata.StreamingDataset(source, **kwargs)


def _loader(library: str, dataset: Any, workers: int, batch_size: int = BATCH_SIZE) -> Any:
    if library in PEERS:
        import _peers

        return _peers.loader(library, dataset, workers, batch_size)
    if library == "litstream":
        import litstream

        return litstream.StreamingDataLoader(dataset, batch_size=batch_size, num_workers=workers)
    import litdata

    return litdata.StreamingDataLoader(dataset, batch_size=batch_size, num_workers=workers)


# -- cases ------------------------------------------------------------------------------------------


def case_optimize(spec: dict[str, Any]) -> dict[str, Any]:
    library, out, n = spec["library"], spec["output_dir"], spec["samples"]
    inputs = list(range(n))
    start, every = time.perf_counter(), _all_cpu_seconds()
    if library in PEERS:
        import _peers

        _peers.write(library, out, n)
    elif library == "litstream":
        import litstream

        litstream.optimize(
            make_sample, inputs, out, chunk_bytes=CHUNK_BYTES, num_workers=OPTIMIZE_WORKERS, verbose=False
        )
    else:
        import litdata

        # start_method="fork": LitData's default (spawn) fails here (IndexError in data_processor._loop).
        litdata.optimize(
            fn=make_sample,
            inputs=inputs,
            output_dir=out,
            chunk_bytes=CHUNK_BYTES,
            num_workers=OPTIMIZE_WORKERS,
            start_method="fork",
            verbose=False,
        )
    seconds = time.perf_counter() - start
    _CPU_S["all"] = _all_cpu_seconds() - every
    rss = _peak_rss_mb()
    if library in PEERS:  # read back with the peer's own reader (untimed)
        check = Checksum()
        if spec.get("verify", True):
            for sample in _dataset(library, out, spec):
                check.add_sample(sample)
        return {"items": n, "seconds": seconds, "ttfb_s": None, "rss": rss, "checksum": check.hexdigest()}
    index = json.loads((Path(out) / "index.json").read_text())
    written = sum(chunk["chunk_size"] for chunk in index["chunks"])
    check = Checksum()
    # Read back with litstream for both (LitData's reader would delete nothing here, but one reader
    # keeps the check independent of the library under test); untimed.
    os.environ.pop("DATA_OPTIMIZER_GLOBAL_RANK", None)
    if spec.get("verify", True):
        import litstream

        for sample in litstream.StreamingDataset(out):
            check.add_sample(sample)
    return {"items": written, "seconds": seconds, "ttfb_s": None, "rss": rss, "checksum": check.hexdigest()}


_CPU_S: dict[str, float] = {}  # CPU seconds (user + system, every thread) of the last timed region


def _cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def _all_cpu_seconds() -> float:
    """User + system CPU seconds of this process (every thread) and of its children that have ended and been
    waited for (loader workers, optimize workers: every process the library started and joined)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _timed_iteration(make: Any, per_batch: bool) -> tuple[int, float, float, Any]:
    start, cpu, every = time.perf_counter(), _cpu_seconds(), _all_cpu_seconds()
    iterable = make()
    first = None
    count = 0
    for item in iterable:
        if first is None:
            first = time.perf_counter() - start
        count += len(item["label"]) if per_batch else 1
    _CPU_S["timed"] = _cpu_seconds() - cpu
    _CPU_S["all"] = _all_cpu_seconds() - every
    return count, time.perf_counter() - start, first or 0.0, iterable


def case_local_dataset(spec: dict[str, Any]) -> dict[str, Any]:
    library = spec["library"]
    count, seconds, first, dataset = _timed_iteration(lambda: _dataset(library, spec["data"], spec), False)
    rss = _peak_rss_mb()
    check = Checksum()
    verify = spec.get("verify", True)  # False: no second pass (a profile that counts a server's work per run)
    for sample in dataset if verify else ():
        check.add_sample(sample)
    out = {"items": count, "seconds": seconds, "ttfb_s": first, "rss": rss,
           "checksum": check.hexdigest() if verify else None, "cpu_s": _CPU_S.get("timed")}  # fmt: skip
    if "cache_dir" in spec:  # what the read left in the chunk cache (0 without it: cache_chunks=False)
        out["cache_bytes"] = sum(p.stat().st_size for p in Path(spec["cache_dir"]).rglob("*") if p.is_file())
    return out


case_remote_dataset = case_local_dataset


def case_local_loader(spec: dict[str, Any]) -> dict[str, Any]:
    library, workers = spec["library"], spec["workers"]
    count, seconds, first, loader = _timed_iteration(
        lambda: _loader(library, _dataset(library, spec["data"], spec), workers), True
    )
    rss = _peak_rss_mb()
    check = Checksum()
    if not spec.get("verify", True):
        return {"items": count, "seconds": seconds, "ttfb_s": first, "rss": rss, "checksum": None}
    for batch in loader:
        check.add_batch(batch)
    rss = tuple(max(a, b) for a, b in zip(rss, _peak_rss_mb(), strict=True))
    return {"items": count, "seconds": seconds, "ttfb_s": first, "rss": rss, "checksum": check.hexdigest()}


def case_async(spec: dict[str, Any]) -> dict[str, Any]:
    """An async service consuming samples: litstream's ``astream`` on asyncio or trio, or LitData's
    ``StreamingDataset`` iterated in a thread that hands lists of ``BATCH_SIZE`` samples to the loop."""
    import anyio

    library, backend, data = spec["library"], spec["backend"], spec["data"]
    result: dict[str, Any] = {}

    async def consume_litstream(check: Checksum | None) -> tuple[int, float | None]:
        import litstream

        count, first = 0, None
        start = time.perf_counter()
        async for sample in litstream.astream(data):
            if first is None:
                first = time.perf_counter() - start
            count += 1
            if check is not None:
                check.add_sample(sample)
            if count % BATCH_SIZE == 0:
                await anyio.lowlevel.checkpoint()  # a service yields to other tasks now and then
        return count, first

    async def consume_litdata(check: Checksum | None) -> tuple[int, float | None]:
        import anyio.from_thread
        import anyio.to_thread
        import litdata

        send, receive = anyio.create_memory_object_stream[list[Any]](2)

        def produce() -> None:
            with send:
                batch: list[Any] = []
                for sample in litdata.StreamingDataset(data):
                    batch.append(sample)
                    if len(batch) == BATCH_SIZE:
                        anyio.from_thread.run(send.send, batch)
                        batch = []
                if batch:
                    anyio.from_thread.run(send.send, batch)

        count, first = 0, None
        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, produce)
            async with receive:
                async for batch in receive:
                    if first is None:
                        first = time.perf_counter() - start
                    count += len(batch)
                    if check is not None:
                        for sample in batch:
                            check.add_sample(sample)
                    await anyio.lowlevel.checkpoint()
        return count, first

    async def main() -> None:
        consume = consume_litstream if library == "litstream" else consume_litdata
        start, every = time.perf_counter(), _all_cpu_seconds()
        count, first = await consume(None)
        result["seconds"] = time.perf_counter() - start
        _CPU_S["all"] = _all_cpu_seconds() - every
        result["items"], result["ttfb_s"] = count, first
        result["rss"] = _peak_rss_mb()
        check = Checksum()
        await consume(check)
        result["checksum"] = check.hexdigest()

    anyio.run(main, backend="trio" if backend == "trio" else "asyncio")
    return result


def case_tokens(spec: dict[str, Any]) -> dict[str, Any]:
    library = spec["library"]
    if library == "litstream":
        import litstream

        if not hasattr(litstream, "TokensLoader"):
            return {"skipped": "litstream.TokensLoader is missing (it lands with the `tokens` branch)"}
    count, seconds, first, dataset = _timed_iteration(lambda: _dataset(library, spec["data"], spec), False)
    rss = _peak_rss_mb()
    check = Checksum()
    import numpy as np

    for block in dataset:
        array = np.asarray(block)
        check.count += 1
        check.labels += int(array.astype(np.int64).sum())
    return {"items": count, "seconds": seconds, "ttfb_s": first, "rss": rss, "checksum": check.hexdigest()}


def case_raw_download(spec: dict[str, Any]) -> dict[str, Any]:
    """The ceiling of a remote read: GET every chunk of the dataset into memory with obstore, 8 ranged
    GETs of 8 MB in flight (what litstream's Downloader does), no cache file, no decoding."""
    import concurrent.futures

    import obstore
    from obstore.store import S3Store

    s3 = spec["s3"]
    bucket, _, prefix = spec["data"].removeprefix("s3://").partition("/")
    config = {
        "endpoint": s3["endpoint"],
        "access_key_id": s3["key"],
        "secret_access_key": s3["secret"],
        "region": "us-east-1",
        "virtual_hosted_style_request": False,
    }
    store = S3Store(bucket, prefix=prefix, config=config, client_options={"allow_http": True})
    start, cpu, every = time.perf_counter(), _cpu_seconds(), _all_cpu_seconds()
    index = json.loads(bytes(obstore.get(store, "index.json").bytes()))
    pieces = []
    for chunk in index["chunks"]:
        size = chunk["chunk_bytes"]
        pieces += [(chunk["filename"], begin, min(8 * 2**20, size - begin)) for begin in range(0, size, 8 * 2**20)]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        total = sum(pool.map(lambda p: len(obstore.get_range(store, p[0], start=p[1], length=p[2])), pieces))
    seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
    _CPU_S["all"] = _all_cpu_seconds() - every
    items = sum(chunk["chunk_size"] for chunk in index["chunks"])
    return {"items": items, "seconds": seconds, "ttfb_s": None, "rss": _peak_rss_mb(), "bytes": total,
            "checksum": None, "cpu_s": cpu}  # fmt: skip


def case_rows(spec: dict[str, Any]) -> dict[str, Any]:
    """Iterate a dataset of dict rows (``bench/_e2e_arrow.py``); also report its bytes on disk."""
    from _e2e_arrow import RowChecksum

    library = spec["library"]
    start, every = time.perf_counter(), _all_cpu_seconds()
    dataset = _dataset(library, spec["data"], spec)
    first, count = None, 0
    for _ in dataset:
        if first is None:
            first = time.perf_counter() - start
        count += 1
    seconds = time.perf_counter() - start
    _CPU_S["all"] = _all_cpu_seconds() - every
    rss = _peak_rss_mb()
    check = RowChecksum()
    for sample in dataset:
        check.add(sample)
    size = sum(p.stat().st_size for p in Path(spec["data"]).glob("chunk-*"))
    return {"items": count, "seconds": seconds, "ttfb_s": first or 0.0, "rss": rss, "checksum": check.hexdigest(),
            "dataset_bytes": size}  # fmt: skip


def case_ceiling(spec: dict[str, Any]) -> dict[str, Any]:
    """A local ceiling (``bench/_ceiling.py``): ``kind`` is ``columns``, ``samples`` or ``tokens``."""
    import _ceiling

    every = _all_cpu_seconds()
    if spec["kind"] == "write":
        out = _ceiling.write_ceiling(spec["output_dir"], spec["samples"])
    elif spec["kind"] == "tokens":
        out = _ceiling.tokens_ceiling(spec["data"], spec["block_size"])
    else:
        out = _ceiling.items_ceiling(spec["data"], per_sample=spec["kind"] == "samples")
    _CPU_S["all"] = _all_cpu_seconds() - every
    return {**out, "ttfb_s": None, "rss": _peak_rss_mb(), "checksum": None}


CASES = {
    "ceiling": case_ceiling,
    "raw_download": case_raw_download,
    "optimize": case_optimize,
    "local_dataset": case_local_dataset,
    "local_loader": case_local_loader,
    "remote_dataset": case_remote_dataset,
    "async": case_async,
    "tokens": case_tokens,
    "rows": case_rows,
}


def main() -> None:
    spec = json.loads(sys.argv[1])
    if spec["library"] in PEERS:
        import _peers

        if spec["library"] == "mosaic":  # spawned loader workers register mosaic's packages too
            os.environ["LITSTREAM_BENCH_MOSAIC"] = "1"
        _peers.import_peer(spec["library"])  # imports are not part of any timing
    else:
        module = __import__(spec["library"])
        if spec["library"] == "litstream":  # `import litstream` binds names lazily; LitData imports torch
            for name in ("StreamingDataset", "StreamingDataLoader", "TokensLoader", "astream"):
                getattr(module, name, None)
    for name in ("WORLD_SIZE", "RANK", "GLOBAL_RANK", "LOCAL_RANK", "NNODES", "DATA_OPTIMIZER_GLOBAL_RANK"):
        os.environ.pop(name, None)
    library = spec["library"]
    _CPU_S.pop("all", None)
    out = CASES[spec["case"]](spec)
    own, children = out.pop("rss", (0.0, 0.0))
    record = {
        "case": spec["case"],
        "config": spec.get("config", spec["case"]),
        "library": library,
        "version": _version(library),
        **out,
        "peak_rss_mb": round(own, 1),
        "peak_rss_children_mb": round(children, 1),
    }
    if "seconds" in out and out.get("items"):
        record["throughput"] = out["items"] / out["seconds"]
    if "all" in _CPU_S and out.get("items"):  # the timed region's CPU, every process, per 1,000 items
        record["cpu_all_s"] = round(_CPU_S["all"], 3)
        record["cpu_per_1k_s"] = round(1000 * _CPU_S["all"] / out["items"], 5)
    print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
