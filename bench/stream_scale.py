"""What bounds ``remote_stream`` at 10x? The cacheless remote read next to its ceiling, at 1x and 10x.

The run of record (docs/performance.md, round three) measured litstream's remote read without a cache
(``cache_chunks=False``) at 0.83 of its 1x rate at 10x the data, from the best of two runs at 1x and a
single run at 10x. This script runs both sizes alternately (1x, 10x, 10x, 1x, ...), each ``--repeats``
times, with nothing but the S3 server (SeaweedFS on 127.0.0.1) and one case running:

* ``remote_stream``: ``StreamingDataset(cache_chunks=False)`` over the dataset, the timed pass only;
* ``remote_raw_get``: the ceiling, every chunk fetched with obstore alone (8 ranged GETs of 8 MB in
  flight), no decoding.

For each run it records items/s, the reader's CPU seconds per 1,000 samples, and what the server spent
on it: CPU seconds and bytes it read from disk (``/proc/PID/io``: what the page cache did not hold). Writes
``--out`` (JSON) and prints a Markdown table (docs/performance.md quotes it).

    .venv/bin/python bench/stream_scale.py                     # 50,000 and 500,000 samples, 3 repeats
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import run_all  # noqa: E402
from _e2e_data import NUM_SAMPLES  # noqa: E402


def _run(spec: dict[str, Any], server_pid: int) -> dict[str, Any]:
    record = run_all.run_case(spec, watch={"server": server_pid})
    if "seconds" not in record:
        raise RuntimeError(f"{spec['config']} failed: {record.get('error')}")
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=NUM_SAMPLES)
    parser.add_argument("--scale", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "stream_scale.json")
    args = parser.parse_args()
    started = time.time()
    load_start = os.getloadavg()
    sizes = {"1x": args.samples, f"{args.scale}x": args.samples * args.scale}
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="litstream-stream-scale-") as tmp:
        work = Path(tmp)
        data = {}
        for name, samples in sizes.items():
            out = work / f"opt-{name}"
            spec = {"case": "optimize", "config": "optimize", "library": "litstream", "output_dir": str(out),
                    "samples": samples, "verify": False}  # fmt: skip
            record = run_all.run_case(spec)
            if not (out / "index.json").exists():
                raise SystemExit(f"optimize failed: {record}")
            data[name] = out
        with run_all.s3_with_datasets(work / "s3", data, 0.0) as (server, _proxied, _proxy_pid):
            for path in data.values():  # the server holds the objects: free the local copies' page cache
                for file in path.iterdir():
                    file.unlink()
            s3 = {"endpoint": server.endpoint, "key": server.access_key, "secret": server.secret_key}
            for round_ in range(args.repeats):
                for name in list(sizes) if round_ % 2 == 0 else list(sizes)[::-1]:
                    stream = {"library": "litstream", "case": "remote_dataset", "config": "remote_stream",
                              "cache_chunks": False, "data": f"s3://bench/{name}", "cache_dir": str(work / "cache"),
                              "s3": s3, "verify": False}  # fmt: skip
                    raw = {"library": "litstream", "case": "raw_download", "config": "remote_raw_get",
                           "data": f"s3://bench/{name}", "s3": s3}  # fmt: skip
                    for spec in (stream, raw):
                        record = _run(spec, server.pid)
                        record["size"] = name
                        runs.append(record)
                        print(json.dumps({k: record.get(k) for k in ("size", "config", "items", "seconds",
                              "cpu_s", "cpu_s_server", "disk_read_bytes_server")}), flush=True)  # fmt: skip
    size_bytes = {r["size"]: r["bytes"] for r in runs if r["config"] == "remote_raw_get"}  # both read all chunks
    rows = []
    for config in ("remote_stream", "remote_raw_get"):
        for name in sizes:
            mine = [r for r in runs if r["config"] == config and r["size"] == name]
            rates = [r["items"] / r["seconds"] for r in mine]
            rows.append({
                "config": config, "size": name, "items": mine[0]["items"],
                "rate_median": statistics.median(rates), "rate_best": max(rates), "rates": rates,
                "reader_cpu_per_1k_s": statistics.median(r["cpu_s"] / r["items"] * 1000 for r in mine),
                "server_cpu_per_gb_s": statistics.median(
                    r["cpu_s_server"] / size_bytes[name] * 1e9 for r in mine),
                "server_disk_read_mb": statistics.median(r["disk_read_bytes_server"] / 1e6 for r in mine),
            })  # fmt: skip
    meta = {"started": time.strftime("%Y-%m-%d %H:%M", time.gmtime(started)), "load_start": load_start,
            "load_end": os.getloadavg(), "duration_s": round(time.time() - started, 1), "args": {
                k: str(v) for k, v in vars(args).items()}}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "rows": rows, "runs": runs}, indent=1) + "\n")
    print("\n| read | size | items | items/s (median) | best | reader CPU ms / 1k | server CPU s / GB "
          "| server disk reads MB |\n|---|---|---:|---:|---:|---:|---:|---:|")  # fmt: skip
    for r in rows:
        print(f"| `{r['config']}` | {r['size']} | {r['items']:,} | {r['rate_median']:,.0f} | {r['rate_best']:,.0f} "
              f"| {r['reader_cpu_per_1k_s'] * 1000:.2f} | {r['server_cpu_per_gb_s']:.2f} "
              f"| {r['server_disk_read_mb']:,.0f} |")  # fmt: skip
    for config in ("remote_stream", "remote_raw_get"):
        one, big = (next(r for r in rows if r["config"] == config and r["size"] == n) for n in sizes)
        print(
            f"\n`{config}`: {list(sizes)[1]} keeps {big['rate_median'] / one['rate_median']:.2f} of its 1x rate "
            f"(medians; best runs: {big['rate_best'] / one['rate_best']:.2f})"
        )
    print(f"\nload average {load_start} at start, {os.getloadavg()} at end; {meta['duration_s']:.0f} s")


if __name__ == "__main__":
    main()
