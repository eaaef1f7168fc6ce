"""Raw (never optimized) files: ``StreamingRawDataset``, litstream vs LitData, directly and behind latency.

    .venv/bin/python bench/raw_bench.py                  # 20,000 files of ~10 KB, 1 repeat
    .venv/bin/python bench/raw_bench.py --files 2000     # a smoke run

``--files`` objects of 8-12 KB are served twice: by SeaweedFS on 127.0.0.1 (``direct``) and by
``bench/s3_delay_server.py`` (``latency20ms``: every GET answered 20 ms late by the server itself; the
rig costs ~5x less CPU per request than ``bench/latency_proxy.py`` in front of SeaweedFS, see
``bench/latency_rig_cpu.py``; ``--rig proxy`` uses the proxy instead). Each library streams one epoch
through a plain ``torch.utils.data.DataLoader`` (``batch_size=64``, ``collate_fn=list``) with
``num_workers`` 0 and 2, in three orders: ``shuffled`` (LitData: ``shuffle=True``, each batch one round of
GETs; litstream: ``batch_sampler=ds.batch_sampler(64, shuffle=True)``, whose next batches each worker
fetches ahead), ``sequential`` (``shuffle=False``: both libraries look ahead) and ``iter``
(``for item in ds``, litstream only: LitData's dataset has no ``__iter__``, Python's sequence protocol
would fetch one file per round trip).
Listing is not timed: both libraries get the same file list (LitData's ``index.json.zstd``, pre-written into
each one's cache; LitData 0.2.76 lists S3 through s3fs, which is not installed here). Every case runs in a
fresh interpreter and prints one JSON line; each record carries the checksum of what was read (the two
libraries must agree), the CPU seconds of the process and its workers (``cpu_ms_per_1k``: per 1,000
files) and, for litstream without workers, the requests in flight sampled every 5 ms
(``in_flight``: mean, p50, max, the limit, and a coarse timeline). Results: ``bench/results/raw.json``
and a table on stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(REPO / "src"))
PY = sys.executable
TARGETS = {("latency20ms", 0): 2.0, ("latency20ms", 2): 1.5}


def case(spec: dict[str, Any]) -> dict[str, Any]:
    """One epoch in this (fresh) interpreter."""
    if spec.get("src"):  # another litstream source tree, ahead of this one's
        sys.path.insert(0, spec["src"])
    from torch.utils.data import DataLoader

    options = {
        "endpoint_url": spec["endpoint"],
        "aws_access_key_id": spec["key"],
        "aws_secret_access_key": spec["secret"],
    }
    os.environ.update(AWS_ACCESS_KEY_ID=spec["key"], AWS_SECRET_ACCESS_KEY=spec["secret"], AWS_REGION="us-east-1")
    import resource
    import threading

    if spec["library"] == "litstream":
        from litstream import StreamingRawDataset

        ds: Any = StreamingRawDataset(spec["url"], cache_dir=spec["cache"], storage_options=options)
    else:
        import litdata.streaming.downloader as litdata_downloader
        from litdata import StreamingRawDataset as LitDataRaw

        litdata_downloader._OBSTORE_CLIENT_OPTIONS = {"timeout": "200s", "allow_http": True}  # type: ignore[assignment]
        ds = LitDataRaw(spec["url"], cache_dir=spec["cache"], storage_options=options)
    workers = spec["workers"]
    order = spec["order"]
    source: Any
    if order == "iter":
        source = ([item] for item in ds)
    elif order == "shuffled" and spec["library"] == "litstream" and hasattr(ds, "batch_sampler"):
        source = DataLoader(ds, batch_sampler=ds.batch_sampler(64, shuffle=True), num_workers=workers,
                            collate_fn=list, persistent_workers=False)  # fmt: skip
    else:
        source = DataLoader(ds, batch_size=64, shuffle=order == "shuffled", num_workers=workers, collate_fn=list,
                            persistent_workers=False)  # fmt: skip
    samples: list[tuple[float, int]] = []
    stop = threading.Event()
    sampler = None
    if spec["library"] == "litstream" and workers == 0:

        def sample_in_flight() -> None:
            while not stop.wait(0.005):
                samples.append((time.perf_counter(), ds.statistics().in_flight))

        sampler = threading.Thread(target=sample_in_flight, daemon=True)

    def cpu() -> float:
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    cpu_before = cpu()
    start = time.perf_counter()
    if sampler is not None:
        sampler.start()
    count, nbytes, checksum = 0, 0, 0
    for batch in source:
        for item in batch:
            count += 1
            nbytes += len(item)
            checksum = (checksum + zlib.crc32(item)) & 0xFFFFFFFF  # order-free
    seconds = time.perf_counter() - start
    stop.set()
    record = {**spec, "items": count, "bytes": nbytes, "checksum": checksum, "seconds": seconds,
              "files_per_s": count / seconds, "cpu_ms_per_1k": (cpu() - cpu_before) * 1e6 / max(count, 1)}  # fmt: skip
    if sampler is not None:
        sampler.join()
        stats = ds.statistics()
        values = sorted(v for _, v in samples) or [0]
        tenth = max(1, len(samples) // 10)
        record["in_flight"] = {
            "mean": sum(values) / len(values), "p50": values[len(values) // 2], "max_sampled": values[-1],
            "max": getattr(stats, "max_in_flight", values[-1]), "limit": stats.concurrency, "requests": stats.requests,
            "ahead": getattr(stats, "ahead", None),
            "timeline": [[round(samples[k][0] - start, 3), samples[k][1]] for k in range(0, len(samples), tenth)],
        }  # fmt: skip
    return record


def run_case(spec: dict[str, Any]) -> dict[str, Any]:
    src = spec.get("src") or str(REPO / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [PY, __file__, "--case", json.dumps(spec)], capture_output=True, text=True, timeout=1800, env=env, check=False
    )
    if proc.returncode != 0:
        return {**spec, "error": proc.stderr[-2000:]}
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


@contextlib.contextmanager
def _latency_rig(args: argparse.Namespace, server: Any) -> Iterator[str]:
    """The endpoint with ~20 ms per request: ``bench/s3_delay_server.py`` or the proxy in front of ``server``."""
    from tests.servers import free_port

    port = free_port()
    if args.rig == "server":
        command = [str(BENCH / "s3_delay_server.py"), "--port", str(port), "--delay", "0.02"]
    else:
        target = server.endpoint.rsplit("/", 1)[-1]
        command = [str(BENCH / "latency_proxy.py"), "--port", str(port), "--target", target, "--delay", "0.01"]
    proc = subprocess.Popen([PY, *command], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        if not ready.startswith("ready"):
            raise RuntimeError(f"latency rig did not start: {ready!r}")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--only", nargs="*", default=None, help="network:workers pairs, e.g. latency20ms:0")
    parser.add_argument("--orders", nargs="*", default=["shuffled", "sequential", "iter"],
                        choices=["shuffled", "sequential", "iter"])  # fmt: skip
    parser.add_argument("--src", default=None, help="litstream's source tree to measure (default: this one's src)")
    parser.add_argument("--before", default=None, help="another litstream source tree, run beside (e.g. main's src)")
    parser.add_argument("--repeats", type=int, default=1, help="runs per case and variant, interleaved; best kept")
    rig_help = "latency: the delay server (default) or the Python proxy in front of SeaweedFS"
    parser.add_argument("--rig", choices=["server", "proxy"], default="server", help=rig_help)
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "raw.json")
    args = parser.parse_args()
    if args.case:
        print(json.dumps(case(json.loads(args.case))))
        return

    import anyio
    from tests.servers import seaweedfs

    from litstream.index._raw import FileMetadata, encode_index, index_cache_dir
    from litstream.storage._resolver import store_for

    with tempfile.TemporaryDirectory(prefix="raw-bench-") as tmp:
        root = Path(tmp)
        with seaweedfs(root / "s3", bucket="bench") as server, _latency_rig(args, server) as proxied:
            url = "s3://bench/raw"
            sizes = [8192 + (i * 7919) % 4096 for i in range(args.files)]
            keys = [f"{i % 100:02d}/img-{i:06d}.jpg" for i in range(args.files)]
            creds = {"aws_access_key_id": server.access_key, "aws_secret_access_key": server.secret_key}
            for endpoint in {server.endpoint, proxied}:
                store = store_for(url, {"endpoint_url": endpoint, **creds})

                async def upload(store: Any = store) -> None:
                    limiter = anyio.CapacityLimiter(64)

                    async def put(i: int) -> None:
                        async with limiter:
                            await store.put(keys[i], bytes([i % 251]) * sizes[i])

                    async with anyio.create_task_group() as tg:
                        for i in range(args.files):
                            tg.start_soon(put, i)

                began = time.perf_counter()
                anyio.run(upload)
                print(
                    f"uploaded {args.files} files to {endpoint} in {time.perf_counter() - began:.1f} s", file=sys.stderr
                )
            blob = encode_index([FileMetadata(f"{url}/{k}", s) for k, s in sorted(zip(keys, sizes, strict=True))], url)
            records = []
            load_before = os.getloadavg()
            networks = (("direct", server.endpoint), ("latency20ms", proxied))
            cases = [(o, n, e, w) for o in args.orders for n, e in networks for w in (0, 2)]
            variants = [("litstream", args.src), ("litdata", None)] + ([("before", args.before)] if args.before else [])
            runs = 0
            for repeat in range(args.repeats):
                for k, (order, network, endpoint, workers) in enumerate(cases):
                    if args.only is not None and f"{network}:{workers}" not in args.only:
                        continue
                    shift = (k + repeat) % len(variants)  # rotate who goes first: no drift bias
                    for variant, src in variants[shift:] + variants[:shift]:
                        if order == "iter" and (variant == "litdata" or workers):
                            continue  # LitData has no __iter__; workers do not apply to a plain iteration
                        runs += 1
                        cache = root / f"cache-{runs}"
                        target = index_cache_dir(cache, url) / "index.json.zstd"
                        target.parent.mkdir(parents=True)
                        target.write_bytes(blob)
                        library = "litdata" if variant == "litdata" else "litstream"
                        spec = {"library": library, "variant": variant, "network": network, "workers": workers,
                                "url": url, "endpoint": endpoint, "key": server.access_key,
                                "secret": server.secret_key, "cache": str(cache), "order": order, "rig": args.rig,
                                "src": src, "repeat": repeat}  # fmt: skip
                        record = run_case(spec)
                        print(
                            json.dumps({k: v for k, v in record.items() if k not in ("key", "secret")}), file=sys.stderr
                        )
                        records.append(record)
            load_after = os.getloadavg()
    report(args, records, {"before": load_before, "after": load_after, "cpus": os.cpu_count()})


def report(args: argparse.Namespace, records: list[dict[str, Any]], loads: dict[str, Any]) -> None:
    """Pair the records by case, write ``args.out`` and print a table."""
    rows = []
    for order, network, workers in [(o, n, w) for o in args.orders for n in ("direct", "latency20ms") for w in (0, 2)]:
        case = (order, network, workers)
        pair: dict[str, dict[str, Any]] = {}  # the best repeat of each variant
        for r in records:
            if (r["order"], r["network"], r["workers"]) == case and "files_per_s" in r:
                best = pair.get(r["variant"])
                if best is None or r["files_per_s"] > best["files_per_s"]:
                    pair[r["variant"]] = r
        if not pair:
            continue
        ours, theirs, before = pair.get("litstream", {}), pair.get("litdata", {}), pair.get("before", {})
        both = "files_per_s" in ours and "files_per_s" in theirs
        ratio = ours["files_per_s"] / theirs["files_per_s"] if both else None
        same = ours.get("checksum") == theirs.get("checksum") and ours.get("items") == theirs.get("items")
        if not theirs:  # litstream only (``iter``): its count must be every file
            same = ours.get("items") == args.files
        rows.append({"order": order, "network": network, "workers": workers,
                     "litstream_files_per_s": ours.get("files_per_s"), "litdata_files_per_s": theirs.get("files_per_s"),
                     "litstream_cpu_ms_per_1k": ours.get("cpu_ms_per_1k"),
                     "litdata_cpu_ms_per_1k": theirs.get("cpu_ms_per_1k"),
                     "in_flight": ours.get("in_flight"), "before_files_per_s": before.get("files_per_s"),
                     "before_cpu_ms_per_1k": before.get("cpu_ms_per_1k"), "before_in_flight": before.get("in_flight"),
                     "ratio": ratio, "same_data": same, "target": TARGETS.get((network, workers))})  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    clean = [{k: v for k, v in r.items() if k not in ("key", "secret")} for r in records]
    doc = {"files": args.files, "load_average": loads, "rows": rows, "records": clean}
    args.out.write_text(json.dumps(doc, indent=2))
    print(f"load average (1, 5, 15 min) before {loads['before']}, after {loads['after']}, on {loads['cpus']} CPUs")
    print("| order | network | workers | litstream files/s | LitData files/s | ratio | target | CPU ms / 1k files "
          "(litstream / LitData) | in flight mean / max (limit) | before: files/s, ratio, in flight mean / max "
          "| same data |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")

    def fmt(x: Any) -> str:
        return f"{x:.0f}" if isinstance(x, float) else str(x)

    for r in rows:
        ratio = f"{r['ratio']:.2f}x" if r["ratio"] else "n/a"
        cpus = f"{fmt(r['litstream_cpu_ms_per_1k'])} / {fmt(r['litdata_cpu_ms_per_1k'])}"
        flight = r["in_flight"]
        flying = f"{flight['mean']:.0f} / {flight['max']} ({flight['limit']})" if flight else "-"
        prior = "-"
        if r["before_files_per_s"]:
            old_ratio = r["before_files_per_s"] / r["litdata_files_per_s"] if r["litdata_files_per_s"] else None
            shown = f"{old_ratio:.2f}x" if old_ratio else "n/a"
            was = r["before_in_flight"]
            prior = f"{fmt(r['before_files_per_s'])}, {shown}" + (f", {was['mean']:.0f} / {was['max']}" if was else "")
        print(f"| {r['order']} | {r['network']} | {r['workers']} | {fmt(r['litstream_files_per_s'])}"
              f" | {fmt(r['litdata_files_per_s'])} | {ratio} | {r['target'] or '-'} | {cpus} | {flying}"
              f" | {prior} | {r['same_data']} |")  # fmt: skip


if __name__ == "__main__":
    main()
