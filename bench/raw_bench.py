"""Raw (never optimized) files: ``StreamingRawDataset``, litstream vs LitData, on SeaweedFS.

    .venv/bin/python bench/raw_bench.py                  # 20,000 files of ~10 KB, 1 repeat
    .venv/bin/python bench/raw_bench.py --files 2000     # a smoke run

SeaweedFS on 127.0.0.1 holds ``--files`` objects of 8-12 KB; each library streams one epoch of them
through a plain ``torch.utils.data.DataLoader`` (``batch_size=64``, ``collate_fn=list``) with ``num_workers``
0 and 2, directly and through ``bench/latency_proxy.py`` (+~20 ms per request), in two orders:
``shuffled`` (``shuffle=True``: a worker cannot know its next batch, so each batch is one round of GETs)
and ``sequential`` (``shuffle=False``: both libraries look ahead).
Listing is not timed: both libraries get the same file list (LitData's ``index.json.zstd``, pre-written into
each one's cache; LitData 0.2.76 lists S3 through s3fs, which is not installed here). Every case runs in a
fresh interpreter and prints one JSON line; each record carries the checksum of what was read (the two
libraries must agree). Results: ``bench/results/raw.json`` and a table on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(REPO / "src"))
PY = sys.executable
TARGETS = {("latency20ms", 0): 2.0, ("latency20ms", 2): 1.5}


def case(spec: dict[str, Any]) -> dict[str, Any]:
    """One epoch in this (fresh) interpreter."""
    from torch.utils.data import DataLoader

    options = {
        "endpoint_url": spec["endpoint"],
        "aws_access_key_id": spec["key"],
        "aws_secret_access_key": spec["secret"],
    }
    os.environ.update(AWS_ACCESS_KEY_ID=spec["key"], AWS_SECRET_ACCESS_KEY=spec["secret"], AWS_REGION="us-east-1")
    if spec["library"] == "litstream":
        from litstream import StreamingRawDataset

        ds: Any = StreamingRawDataset(spec["url"], cache_dir=spec["cache"], storage_options=options)
    else:
        import litdata.streaming.downloader as litdata_downloader
        from litdata import StreamingRawDataset as LitDataRaw

        litdata_downloader._OBSTORE_CLIENT_OPTIONS = {"timeout": "200s", "allow_http": True}  # type: ignore[assignment]
        ds = LitDataRaw(spec["url"], cache_dir=spec["cache"], storage_options=options)
    workers = spec["workers"]
    loader = DataLoader(
        ds,
        batch_size=64,
        shuffle=spec.get("shuffle", True),
        num_workers=workers,
        collate_fn=list,
        multiprocessing_context=None,  # fork: neither library used obstore in this process yet
        persistent_workers=False,
    )
    start = time.perf_counter()
    count, nbytes, checksum = 0, 0, 0
    for batch in loader:
        for item in batch:
            count += 1
            nbytes += len(item)
            checksum = (checksum + zlib.crc32(item)) & 0xFFFFFFFF  # order-free
    seconds = time.perf_counter() - start
    return {**spec, "items": count, "bytes": nbytes, "checksum": checksum, "seconds": seconds,
            "files_per_s": count / seconds}  # fmt: skip


def run_case(spec: dict[str, Any]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [PY, __file__, "--case", json.dumps(spec)], capture_output=True, text=True, timeout=1800, env=env, check=False
    )
    if proc.returncode != 0:
        return {**spec, "error": proc.stderr[-2000:]}
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--only", nargs="*", default=None, help="network:workers pairs, e.g. latency20ms:0")
    parser.add_argument("--orders", nargs="*", default=["shuffled", "sequential"], choices=["shuffled", "sequential"])
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "raw.json")
    args = parser.parse_args()
    if args.case:
        print(json.dumps(case(json.loads(args.case))))
        return

    import anyio
    from run_all import s3_with_datasets  # SeaweedFS + latency proxy, as the other remote benchmarks

    from litstream.index._raw import FileMetadata, encode_index, index_cache_dir
    from litstream.storage._resolver import store_for

    with tempfile.TemporaryDirectory(prefix="raw-bench-") as tmp:
        root = Path(tmp)
        empty = root / "empty"
        empty.mkdir()
        with s3_with_datasets(root / "s3", {}, delay=0.02) as (server, proxied):
            url = "s3://bench/raw"
            options = {"endpoint_url": server.endpoint, "aws_access_key_id": server.access_key,
                       "aws_secret_access_key": server.secret_key}  # fmt: skip
            store = store_for(url, options)
            sizes = [8192 + (i * 7919) % 4096 for i in range(args.files)]
            keys = [f"{i % 100:02d}/img-{i:06d}.jpg" for i in range(args.files)]

            async def upload() -> None:
                limiter = anyio.CapacityLimiter(64)

                async def put(i: int) -> None:
                    async with limiter:
                        await store.put(keys[i], bytes([i % 251]) * sizes[i])

                async with anyio.create_task_group() as tg:
                    for i in range(args.files):
                        tg.start_soon(put, i)

            began = time.perf_counter()
            anyio.run(upload)
            print(f"uploaded {args.files} files in {time.perf_counter() - began:.1f} s", file=sys.stderr)
            blob = encode_index([FileMetadata(f"{url}/{k}", s) for k, s in sorted(zip(keys, sizes, strict=True))], url)
            records = []
            load_before = os.getloadavg()
            networks = (("direct", server.endpoint), ("latency20ms", proxied))
            cases = [(o, n, e, w) for o in args.orders for n, e in networks for w in (0, 2)]
            for k, (order, network, endpoint, workers) in enumerate(cases):
                if args.only is not None and f"{network}:{workers}" not in args.only:
                    continue
                libraries = ("litstream", "litdata") if k % 2 == 0 else ("litdata", "litstream")  # ABBA: no drift bias
                for library in libraries:
                    cache = root / f"cache-{library}-{order}-{network}-{workers}"
                    target = index_cache_dir(cache, url) / "index.json.zstd"
                    target.parent.mkdir(parents=True)
                    target.write_bytes(blob)
                    spec = {"library": library, "network": network, "workers": workers, "url": url,
                            "endpoint": endpoint, "key": server.access_key, "secret": server.secret_key,
                            "cache": str(cache), "shuffle": order == "shuffled", "order": order}  # fmt: skip
                    record = run_case(spec)
                    print(json.dumps({k: v for k, v in record.items() if k not in ("key", "secret")}), file=sys.stderr)
                    records.append(record)
            load_after = os.getloadavg()
    report(args, records, {"before": load_before, "after": load_after, "cpus": os.cpu_count()})


def report(args: argparse.Namespace, records: list[dict[str, Any]], loads: dict[str, Any]) -> None:
    """Pair the records by case, write ``args.out`` and print a table."""
    rows = []
    for order, network, workers in [(o, n, w) for o in args.orders for n in ("direct", "latency20ms") for w in (0, 2)]:
        case = (order, network, workers)
        pair = {r["library"]: r for r in records if (r["order"], r["network"], r["workers"]) == case}
        if not pair:
            continue
        ours, theirs = pair.get("litstream", {}), pair.get("litdata", {})
        both = "files_per_s" in ours and "files_per_s" in theirs
        ratio = ours["files_per_s"] / theirs["files_per_s"] if both else None
        same = ours.get("checksum") == theirs.get("checksum") and ours.get("items") == theirs.get("items")
        rows.append({"order": order, "network": network, "workers": workers,
                     "litstream_files_per_s": ours.get("files_per_s"), "litdata_files_per_s": theirs.get("files_per_s"),
                     "ratio": ratio, "same_data": same, "target": TARGETS.get((network, workers))})  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    clean = [{k: v for k, v in r.items() if k not in ("key", "secret")} for r in records]
    doc = {"files": args.files, "load_average": loads, "rows": rows, "records": clean}
    args.out.write_text(json.dumps(doc, indent=2))
    print(f"load average (1, 5, 15 min) before {loads['before']}, after {loads['after']}, on {loads['cpus']} CPUs")
    print("| order | network | workers | litstream files/s | LitData files/s | ratio | target | same data |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")

    def fmt(x: Any) -> str:
        return f"{x:.0f}" if isinstance(x, float) else str(x)

    for r in rows:
        ratio = f"{r['ratio']:.2f}x" if r["ratio"] else "n/a"
        print(f"| {r['order']} | {r['network']} | {r['workers']} | {fmt(r['litstream_files_per_s'])}"
              f" | {fmt(r['litdata_files_per_s'])} | {ratio} | {r['target'] or '-'} | {r['same_data']} |")  # fmt: skip


if __name__ == "__main__":
    main()
