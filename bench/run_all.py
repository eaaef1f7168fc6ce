"""Run the whole benchmark suite, litstream vs LitData, and write the JSON results and the chart.

    .venv/bin/python bench/run_all.py                 # everything (about 8-12 minutes on 2 cores)
    .venv/bin/python bench/run_all.py --quick         # 5,000 samples, 1 repeat: a smoke run
    .venv/bin/python bench/run_all.py --skip remote   # leave out a family (optimize is always run)

Steps: (1) the pytest-benchmark micro-benchmarks (``bench/test_bench_micro.py``); (2) each library's
``optimize`` of the same 50,000 samples (its own output is what it reads afterwards); (3) local reads,
the async service, the tokens loader; (4) SeaweedFS on 127.0.0.1 with both datasets uploaded, read
cold (a new, empty cache per run), directly and through ``bench/latency_proxy.py`` (+~20 ms per
request). Every case runs in a fresh interpreter (``bench/e2e_case.py``) and prints one JSON line;
best of ``--repeats`` by time is kept. Each record carries both versions, the ratio
litstream/LitData and the checksum of what each library read (they must be equal).

Outputs (``--out``, default ``bench/results``): ``e2e.json`` (all runs and the summary),
``micro.json`` (pytest-benchmark), ``summary.md`` (the table for docs/performance.md) and
``throughput.png`` (also copied to ``docs/performance.png``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(REPO))

from _e2e_data import NUM_SAMPLES, expected_checksum  # noqa: E402

PY = sys.executable
LIBS = ("litstream", "litdata")
FAMILIES = ("micro", "local", "async", "tokens", "arrow", "remote")
TOKENS_BLOCK = 2048


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run_case(spec: dict[str, Any], timeout: float = 600) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "NNODES", "DATA_OPTIMIZER_GLOBAL_RANK"):
        env.pop(name, None)
    proc = subprocess.run(
        [PY, str(BENCH / "e2e_case.py"), json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {**spec, "error": (proc.stderr or proc.stdout)[-3000:], "returncode": proc.returncode}
    record: dict[str, Any] = json.loads(lines[-1])
    return record


def best(records: list[dict[str, Any]]) -> dict[str, Any]:
    good = [r for r in records if "seconds" in r]
    if not good:
        return records[-1]
    top = min(good, key=lambda r: r["seconds"])
    return {**top, "runs_s": [round(r["seconds"], 4) for r in good]}


def paired(specs: dict[str, dict[str, Any]], repeats: int, prepare: Any = None) -> dict[str, dict[str, Any]]:
    """Run one configuration for each library ``repeats`` times, interleaved (A B, B A, A B, ...) so a
    change in machine load hits both libraries alike; best run by time per library."""
    records: dict[str, list[dict[str, Any]]] = {lib: [] for lib in specs}
    order = list(specs)
    for round_ in range(repeats):
        for lib in order if round_ % 2 == 0 else order[::-1]:
            if records[lib] and ("error" in records[lib][-1] or "skipped" in records[lib][-1]):
                continue
            if prepare is not None:
                prepare(lib)
            records[lib].append(run_case(specs[lib]))
    out = {}
    for lib, runs in records.items():
        top = best(runs)
        status = top.get("error", "")[-300:] or top.get("skipped") or f"{top.get('seconds', 0):.3f} s"
        log(f"  {specs[lib]['config']:<28} {lib:<9} {status}  (runs: {top.get('runs_s', '-')})")
        out[lib] = top
    return out


# -- setup ------------------------------------------------------------------------------------------


def make_tokens(root: Path, samples: int) -> Path:
    """A token dataset written by LitData's optimize with its TokensLoader (read by both libraries)."""
    out = root / "tokens"
    script = f"""
import sys; sys.path.insert(0, {str(BENCH)!r})
from _e2e_tokens import write
write({str(out)!r}, {samples})
"""
    subprocess.run([PY, "-c", script], check=True, capture_output=True, text=True)
    return out


@contextlib.contextmanager
def s3_with_datasets(root: Path, datasets: dict[str, Path], delay: float) -> Any:
    """SeaweedFS on 127.0.0.1 holding both datasets, plus a latency proxy in front of it."""
    import boto3
    from boto3.s3.transfer import TransferConfig
    from tests.servers import free_port, seaweedfs

    with seaweedfs(root, bucket="bench") as server:
        client = boto3.client(
            "s3",
            endpoint_url=server.endpoint,
            aws_access_key_id=server.access_key,
            aws_secret_access_key=server.secret_key,
            region_name="us-east-1",
        )
        config = TransferConfig(multipart_threshold=2**30)
        files = [(library, file) for library, path in datasets.items() for file in sorted(path.iterdir())]
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda lf: client.upload_file(str(lf[1]), "bench", f"{lf[0]}/{lf[1].name}", Config=config),
                          files))  # fmt: skip
        port = free_port()
        target = server.endpoint.rsplit("/", 1)[-1]
        proxy = subprocess.Popen(
            [PY, str(BENCH / "latency_proxy.py"), "--port", str(port), "--target", target, "--delay", str(delay / 2)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert proxy.stdout is not None
            ready = proxy.stdout.readline()
            if not ready.startswith("ready"):
                raise RuntimeError(f"latency proxy did not start: {ready!r}")
            yield server, f"http://127.0.0.1:{port}"
        finally:
            proxy.terminate()
            proxy.wait(10)


# -- summary ----------------------------------------------------------------------------------------

PAIRS = [
    # (config, litstream record key, litdata record key)
    ("optimize", "optimize", "optimize"),
    ("local_dataset", "local_dataset", "local_dataset"),
    ("local_loader_w0", "local_loader_w0", "local_loader_w0"),
    ("local_loader_w2", "local_loader_w2", "local_loader_w2"),
    ("remote_cold", "remote_cold", "remote_cold"),
    ("remote_cold_latency20ms", "remote_cold_latency20ms", "remote_cold_latency20ms"),
    ("async_asyncio", "async_asyncio", "async_asyncio"),
    ("async_trio", "async_trio", "async_trio"),
    ("tokens_block2048", "tokens_block2048", "tokens_block2048"),
    ("arrow_litdata_default", "arrow_litdata_default", "arrow_litdata_default"),
    ("arrow_litstream_pytree", "arrow_litstream_pytree", "arrow_litstream_pytree"),
    ("arrow_litstream_arrow", "arrow_litstream_arrow", "arrow_litstream_arrow"),
]
TARGETS = {
    "optimize": 2.0,
    "local_dataset": 3.0,
    "local_loader_w0": 2.0,
    "local_loader_w2": 2.0,
    "remote_cold": 2.0,
    "remote_cold_latency20ms": 3.0,
    "arrow_litdata_default": 1.0,
}


WORKER_CONFIGS = ("optimize", "local_loader_w2")


def total_rss(record: dict[str, Any]) -> float:
    """Peak RSS in MiB: the process, plus its largest worker where the configuration has workers.

    Elsewhere a child can only be a short-lived helper (importing trio starts one), whose
    ``ru_maxrss`` counts the parent's pages it shared for an instant; it is left out there."""
    own = float(record["peak_rss_mb"])
    return own + float(record["peak_rss_children_mb"]) if record.get("config") in WORKER_CONFIGS else own


def summarize(results: dict[str, dict[str, dict[str, Any]]], expected: str | None) -> list[dict[str, Any]]:
    rows = []
    for config, ours, theirs in PAIRS:
        a = results.get("litstream", {}).get(ours)
        b = results.get("litdata", {}).get(theirs)
        if a is None or b is None:
            continue
        row: dict[str, Any] = {"config": config, "litstream": a, "litdata": b}
        if "seconds" in a and "seconds" in b:
            row["speedup"] = b["seconds"] / a["seconds"]  # = throughput ratio litstream / LitData
            if a.get("ttfb_s") is not None and b.get("ttfb_s"):
                row["ttfb_ratio"] = a["ttfb_s"] / b["ttfb_s"]
            rss_a, rss_b = total_rss(a), total_rss(b)
            row["rss_ratio"] = rss_a / rss_b if rss_b else None
            row["checksums_equal"] = a.get("checksum") == b.get("checksum")
            if expected is not None and not config.startswith(("tokens", "arrow")):
                row["checksum_expected"] = a.get("checksum") == expected == b.get("checksum")
        row["target"] = TARGETS.get(config)
        rows.append(row)
    return rows


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        "| configuration | litstream items/s | LitData items/s | ratio litstream/LitData (target) | "
        "time to first item/batch, ms (litstream / LitData) | peak RSS MiB, main+workers (litstream / LitData) "
        "| checksums equal |",
        "|---|---:|---:|---:|---:|---:|:---:|",
    ]
    for row in rows:
        a, b = row["litstream"], row["litdata"]
        if "speedup" not in row:
            why = a.get("skipped") or a.get("error", "")[-120:] or b.get("skipped") or b.get("error", "")[-120:]
            lines.append(f"| {row['config']} | — | — | not run: {why} | | | |")
            continue
        target = f" (≥ {row['target']:g}x)" if row.get("target") else ""
        met = "" if not row.get("target") else (" ✓" if row["speedup"] >= row["target"] else " ✗")
        ttfb = (
            f"{a['ttfb_s'] * 1e3:.1f} / {b['ttfb_s'] * 1e3:.1f}"
            if a.get("ttfb_s") is not None and b.get("ttfb_s") is not None
            else "—"
        )
        rss = f"{total_rss(a):.0f} / {total_rss(b):.0f}"
        lines.append(
            f"| {row['config']} | {a['throughput']:,.0f} | {b['throughput']:,.0f} | "
            f"**{row['speedup']:.2f}x**{target}{met} | {ttfb} | {rss} | {'yes' if row['checksums_equal'] else 'NO'} |"
        )
    lines.append("")
    lines.append(
        f"litstream {meta['versions']['litstream']}, LitData {meta['versions']['litdata']}; "
        f"{meta['samples']:,} samples; best of {meta['repeats']}; load average "
        f"{meta['load_start']} at start, {meta['load_end']} at end; {meta['started']} UTC."
    )
    return "\n".join(lines)


def chart(rows: list[dict[str, Any]], path: Path, meta: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = [r for r in rows if "speedup" in r]
    names = [r["config"] for r in done]
    ours = [r["litstream"]["throughput"] for r in done]
    theirs = [r["litdata"]["throughput"] for r in done]
    fig, ax = plt.subplots(figsize=(11, 5.5))
    ys = range(len(done))
    ax.barh([y - 0.2 for y in ys], ours, height=0.4, label=f"litstream {meta['versions']['litstream']}")
    ax.barh([y + 0.2 for y in ys], theirs, height=0.4, label=f"LitData {meta['versions']['litdata']}")
    for y, r in zip(ys, done, strict=True):
        ax.text(max(ours[y], theirs[y]) * 1.01, y, f"{r['speedup']:.2f}x", va="center", fontsize=9)
    ax.set_yticks(list(ys), names)
    ax.invert_yaxis()
    ax.set_xlim(0, max(ours + theirs) * 1.12)
    ax.set_xlabel("items per second (linear scale)")
    ax.set_title(f"Throughput, {meta['started']} UTC, 2 shared cores, load {meta['load_start'].split()[0]} "
                 "(label: litstream / LitData)")  # fmt: skip
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- main -------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description="litstream vs LitData: the whole benchmark suite")
    parser.add_argument("--samples", type=int, default=NUM_SAMPLES)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--remote-repeats", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.02, help="added round-trip latency, s (default 0.02)")
    parser.add_argument("--tokens", type=int, default=4000, help="token documents (~2-6k tokens each)")
    parser.add_argument("--arrow-rows", type=int, default=200_000, help="dict rows of the arrow family")
    parser.add_argument("--skip", action="append", default=[], choices=FAMILIES)
    parser.add_argument("--quick", action="store_true", help="5,000 samples, 1 repeat, 500 token documents")
    parser.add_argument("--out", type=Path, default=BENCH / "results")
    parser.add_argument("--workdir", type=Path, default=None, help="data directory (default: a temporary one)")
    args = parser.parse_args()
    if args.quick:
        args.samples, args.repeats, args.remote_repeats, args.tokens = 5_000, 1, 1, 500
        args.arrow_rows = 20_000
    started = time.time()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="litstream-bench-", dir=args.workdir))
    from importlib.metadata import version

    meta: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M", time.gmtime(started)),
        "load_start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "versions": {lib: version(lib) for lib in LIBS},
        "samples": args.samples,
        "repeats": args.repeats,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "command": " ".join([Path(PY).name, *sys.argv]),
    }
    log(f"workdir {work}; load average {meta['load_start']}")
    results: dict[str, dict[str, dict[str, Any]]] = {lib: {} for lib in LIBS}
    ceilings: dict[str, dict[str, Any]] = {}
    try:
        if "micro" not in args.skip:
            log("micro-benchmarks (pytest-benchmark)")
            subprocess.run(
                [PY, "-m", "pytest", str(BENCH / "test_bench_micro.py"), "-q", "-p", "no:cacheprovider",
                 "--benchmark-only", f"--benchmark-json={args.out / 'micro.json'}", "--benchmark-min-rounds=3",
                 "--benchmark-max-time=0.2", "-o", "addopts="],
                check=False, env={**os.environ, "PYTHONPATH": str(REPO / "src")}, cwd=REPO,
            )  # fmt: skip
        expected = expected_checksum(args.samples)
        data = {lib: work / f"{lib}-data" for lib in LIBS}
        log(f"optimize: {args.samples:,} samples, 2 workers, 64 MB chunks")
        outs = {lib: work / f"{lib}-optimize" for lib in LIBS}

        def clean(lib: str) -> None:
            shutil.rmtree(outs[lib], ignore_errors=True)

        specs = {lib: {"case": "optimize", "config": "optimize", "library": lib, "output_dir": str(outs[lib]),
                       "samples": args.samples} for lib in LIBS}  # fmt: skip
        for lib, record in paired(specs, args.repeats, clean).items():
            results[lib]["optimize"] = record
            if not (outs[lib] / "index.json").exists():
                raise SystemExit(f"{lib} optimize failed: {record}")
            outs[lib].rename(data[lib])
        snapshot = {lib: sorted((p.name, p.stat().st_size) for p in data[lib].iterdir()) for lib in LIBS}
        configs: list[tuple[str, dict[str, dict[str, Any]]]] = []
        if "local" not in args.skip:
            configs.append(("local_dataset", {lib: {"case": "local_dataset"} for lib in LIBS}))
            for workers in (0, 2):
                configs.append((f"local_loader_w{workers}",
                                {lib: {"case": "local_loader", "workers": workers} for lib in LIBS}))  # fmt: skip
        if "async" not in args.skip:
            for backend in ("asyncio", "trio"):
                configs.append((f"async_{backend}", {"litstream": {"case": "async", "backend": backend},
                                                     "litdata": {"case": "async", "backend": "thread"}}))  # fmt: skip
        log("local reads and async service")
        for config, variants in configs:
            specs = {lib: {"library": lib, "data": str(data[lib]), "config": config, **v}
                     for lib, v in variants.items()}  # fmt: skip
            for lib, record in paired(specs, args.repeats).items():
                results[lib][config] = record  # LitData's async runs: its dataset in a thread
        if "tokens" not in args.skip:
            log(f"tokens: {args.tokens} documents written by LitData's optimize (TokensLoader)")
            tokens = make_tokens(work, args.tokens)
            specs = {lib: {"library": lib, "data": str(tokens), "case": "tokens", "config": "tokens_block2048",
                           "block_size": TOKENS_BLOCK} for lib in LIBS}  # fmt: skip
            for lib, record in paired(specs, args.repeats).items():
                results[lib]["tokens_block2048"] = record
        if "arrow" not in args.skip:  # LitData's default output for dict rows: Arrow chunks (arrow_bench.py)
            from arrow_bench import run_family

            for lib, records in run_family(work, args.arrow_rows, args.repeats).items():
                results[lib].update(records)
        for lib in LIBS:  # LitData never wrote into its (uncompressed) dataset: check it
            now = sorted((p.name, p.stat().st_size) for p in data[lib].iterdir())
            if now != snapshot[lib]:
                log(f"WARNING: {lib}'s dataset directory changed while being read")
        if "remote" not in args.skip:
            log("remote: SeaweedFS on 127.0.0.1, cold cache per run")
            with s3_with_datasets(work, data, args.latency) as (server, proxied):
                time.sleep(3)  # let the server settle after the upload
                cache = work / "cache"

                def fresh(lib: str) -> None:
                    shutil.rmtree(cache, ignore_errors=True)
                    cache.mkdir()

                for config, endpoint in (("remote_cold", server.endpoint),
                                         ("remote_cold_latency20ms", proxied)):  # fmt: skip
                    s3 = {"endpoint": endpoint, "key": server.access_key, "secret": server.secret_key}
                    specs = {lib: {"library": lib, "case": "remote_dataset", "config": config,
                                   "data": f"s3://bench/{lib}", "cache_dir": str(cache), "s3": s3}
                             for lib in LIBS}  # fmt: skip
                    for lib, record in paired(specs, args.remote_repeats, fresh).items():
                        results[lib][config] = record
                shutil.rmtree(cache, ignore_errors=True)
                # the ceiling: the same bytes fetched with obstore alone (no cache file, no decoding)
                for config, endpoint in (("remote_raw_get", server.endpoint),
                                         ("remote_raw_get_latency20ms", proxied)):  # fmt: skip
                    s3 = {"endpoint": endpoint, "key": server.access_key, "secret": server.secret_key}
                    spec = {"library": "litstream", "case": "raw_download", "config": config,
                            "data": "s3://bench/litstream", "s3": s3}  # fmt: skip
                    ceilings[config] = paired({"litstream": spec}, args.remote_repeats)["litstream"]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    meta["load_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    meta["duration_s"] = round(time.time() - started, 1)
    meta["expected_checksum"] = expected
    rows = summarize(results, expected)
    (args.out / "e2e.json").write_text(
        json.dumps({"meta": meta, "summary": rows, "ceilings": ceilings}, indent=1) + "\n"
    )
    table = markdown(rows, meta)
    micro = args.out / "micro.json"
    if micro.exists() and "micro" not in args.skip:
        table += "\n\n| micro-benchmark (pytest-benchmark, min) | test | ms |\n|---|---|---:|"
        for bench in json.loads(micro.read_text())["benchmarks"]:
            table += f"\n| {bench['group']} | `{bench['name']}` | {bench['stats']['min'] * 1e3:.3f} |"
    for config, record in ceilings.items():
        if "seconds" in record:
            table += (f"\n\nCeiling `{config}`: obstore alone GETs the same {record['bytes'] / 1e6:,.0f} MB "
                      f"(8 x 8 MB ranges in flight, no cache file, no decoding) in {record['seconds']:.3f} s "
                      f"= {record['throughput']:,.0f} items/s.")  # fmt: skip
    (args.out / "summary.md").write_text(table + "\n")
    try:
        chart(rows, args.out / "throughput.png", meta)
        shutil.copyfile(args.out / "throughput.png", REPO / "docs" / "performance.png")
    except ImportError as exc:
        log(f"no chart: {exc} (pip install -r requirements/dev.txt)")
    print(table)
    log(f"done in {meta['duration_s']} s; results in {args.out}")
    bad = [r["config"] for r in rows if r.get("checksums_equal") is False]
    if bad:
        log(f"CHECKSUM MISMATCH in {bad}")
        raise SystemExit(1)


if __name__ == "__main__":
    main()
