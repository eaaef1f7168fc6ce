"""Run the whole benchmark suite, litstream vs LitData and the other peers, and write JSON, table and chart.

    .venv/bin/python bench/run_all.py --full          # everything, 1x and 10x (about 20-25 minutes on 2 cores)
    .venv/bin/python bench/run_all.py                 # everything at 1x (50,000 samples)
    .venv/bin/python bench/run_all.py --scale 10      # 1x, then optimize, local and remote reads at 10x
    .venv/bin/python bench/run_all.py --quick         # 5,000 samples, 1 repeat: a smoke run
    .venv/bin/python bench/run_all.py --skip remote   # leave out a family (optimize is always run)

Steps: (1) the pytest-benchmark micro-benchmarks (``bench/test_bench_micro.py``); (2) each library's
``optimize`` of the same 50,000 samples (its own output is what it reads afterwards); (3) local reads,
the async service, the tokens loader; (4) SeaweedFS on 127.0.0.1 with both datasets uploaded, read
cold (a new, empty cache per run), directly and through ``bench/latency_proxy.py`` (+~20 ms per
request). Every case runs in a fresh interpreter (``bench/e2e_case.py``) and prints one JSON line;
best of ``--repeats`` by time is kept. Each record carries both versions, the ratio
litstream/LitData and the checksum of what each library read (they must be equal).

The peers MosaicML streaming (MDS) and WebDataset write and read the same samples in their own
formats (``bench/_peers.py``: optimize, local_dataset, loader w=0 and w=2); a peer whose reader does not
import here is reported as not run. Each configuration also reports litstream as a fraction of its
ceiling measured in the same run (``bench/_ceiling.py``; remotely obstore's GETs alone). With
``--scale N`` (``--full`` = ``--scale 10``) optimize, the local dataset read and the direct remote cold
read of litstream and LitData run again on N times the samples, one repeat, for throughput and peak RSS
(and litstream's remote read without its disk cache, ``remote_stream``: ``cache_chunks=False``). Every
record carries the CPU seconds (user + system) of every process the library started over the timed
region, and per 1,000 samples (``cpu_per_1k_s``).

Outputs (``--out``, default ``bench/results``): ``e2e.json`` (all runs and the summary),
``micro.json`` (pytest-benchmark), ``summary.md`` (the table for docs/performance.md) and
``throughput.png`` (also copied to ``docs/performance.png``).
"""

from __future__ import annotations

import argparse
import compileall
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
from _report import PEERS, chart, cpu_table, markdown, scale_table, summarize  # noqa: E402

PY = sys.executable
LIBS = ("litstream", "litdata")
PEER_REPEATS = [1]  # runs per configuration of the other peers (set by --peer-repeats)
FAMILIES = ("micro", "local", "async", "tokens", "arrow", "remote")
TOKENS_BLOCK = 2048


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _process_cpu_s(pid: int) -> float:
    """User + system CPU seconds a live process (all its threads) has used so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _process_read_bytes(pid: int) -> int:
    """Bytes a live process has caused to be read from storage so far (Linux ``/proc/PID/io``: what the page
    cache did not hold)."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("read_bytes:"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/{pid}/io has no read_bytes")


def run_case(spec: dict[str, Any], timeout: float = 600, watch: dict[str, int] | None = None) -> dict[str, Any]:
    """Run one case in a fresh interpreter; ``watch``: processes (name -> pid, e.g. the S3 server) whose
    CPU seconds and disk reads during the case are added to the record as ``cpu_s_<name>`` and
    ``disk_read_bytes_<name>``."""
    before = {name: _process_cpu_s(pid) for name, pid in (watch or {}).items()}
    read_before = {name: _process_read_bytes(pid) for name, pid in (watch or {}).items()}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "NNODES", "DATA_OPTIMIZER_GLOBAL_RANK"):
        env.pop(name, None)
    # Modules imported inside a timed region (litstream binds its names lazily) load from cached bytecode,
    # as in any install; without the cache every fresh interpreter would compile them in the timer.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
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
    for name, pid in (watch or {}).items():
        record[f"cpu_s_{name}"] = round(_process_cpu_s(pid) - before[name], 3)
        record[f"disk_read_bytes_{name}"] = _process_read_bytes(pid) - read_before[name]
    return record


def best(records: list[dict[str, Any]]) -> dict[str, Any]:
    good = [r for r in records if "seconds" in r]
    if not good:
        return records[-1]
    top = min(good, key=lambda r: r["seconds"])
    return {**top, "runs_s": [round(r["seconds"], 4) for r in good]}


def paired(specs: dict[str, dict[str, Any]], repeats: int, prepare: Any = None,
           watch: dict[str, int] | None = None) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Run one configuration for each library ``repeats`` times, interleaved (A B, B A, A B, ...) so a
    change in machine load hits both libraries alike; best run by time per library."""
    records: dict[str, list[dict[str, Any]]] = {lib: [] for lib in specs}
    order = list(specs)
    for round_ in range(repeats):
        for lib in order if round_ % 2 == 0 else order[::-1]:
            if records[lib] and ("error" in records[lib][-1] or "skipped" in records[lib][-1]):
                continue
            if lib not in LIBS and round_ >= PEER_REPEATS[0]:  # the other peers are references, not targets
                continue
            if prepare is not None:
                prepare(lib)
            records[lib].append(run_case(specs[lib], watch=watch))
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
            yield server, f"http://127.0.0.1:{port}", proxy.pid
        finally:
            proxy.terminate()
            proxy.wait(10)


# -- one pass of the suite at one size --------------------------------------------------------------


def _optimize(work: Path, libs: tuple[str, ...], samples: int, repeats: int,
              results: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Path]:  # fmt: skip
    """Each library writes the samples with its own writer; returns where each one's data is."""
    data = {lib: work / f"{lib}-data" for lib in libs}
    outs = {lib: work / f"{lib}-optimize" for lib in libs}

    def clean(lib: str) -> None:
        shutil.rmtree(outs[lib], ignore_errors=True)

    specs = {lib: {"case": "optimize", "config": "optimize", "library": lib, "output_dir": str(outs[lib]),
                   "samples": samples} for lib in libs}  # fmt: skip
    for lib, record in paired(specs, repeats, clean).items():
        results[lib]["optimize"] = record
        if lib in LIBS and not (outs[lib] / "index.json").exists():
            raise SystemExit(f"{lib} optimize failed: {record}")
        if "seconds" in record:
            outs[lib].rename(data[lib])
    return {lib: path for lib, path in data.items() if path.exists()}


def _ceiling(spec: dict[str, Any], repeats: int) -> dict[str, Any]:
    return paired({"litstream": {"library": "litstream", "case": "ceiling", **spec}}, repeats)["litstream"]


def run_suite(work: Path, args: argparse.Namespace, samples: int, repeats: int, remote_repeats: int,
              peers: tuple[str, ...], scaled: bool) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:  # fmt: skip
    """One pass at one size: ``(results {library: {config: record}}, ceilings {name: record})``.

    ``scaled``: only optimize, the local dataset read and the direct remote cold read (and their
    ceilings), for litstream and LitData."""
    results: dict[str, dict[str, dict[str, Any]]] = {lib: {} for lib in (*LIBS, *peers)}
    ceilings: dict[str, dict[str, Any]] = {}
    log(f"optimize: {samples:,} samples, 2 workers, 64 MB chunks (peers: {', '.join(peers) or 'none'})")
    writers = ("litstream",) if scaled else (*LIBS, *peers)
    data = _optimize(work, writers, samples, repeats, results)
    if scaled:  # LitData's optimize runs at 1x only (at 10x it takes ~25 min here): it reads litstream's chunks
        data["litdata"] = data["litstream"]
    out = work / "ceiling-write"
    ceilings["ceiling_write"] = _ceiling({"kind": "write", "config": "ceiling_write", "output_dir": str(out),
                                          "samples": samples}, repeats)  # fmt: skip
    shutil.rmtree(out, ignore_errors=True)
    os.sync()  # written data goes to disk now, not as writeback during the timed reads (GBs at 10x)
    snapshot = {lib: sorted((p.name, p.stat().st_size) for p in data[lib].iterdir()) for lib in LIBS}
    configs: list[tuple[str, dict[str, dict[str, Any]]]] = []
    readers = [lib for lib in (*LIBS, *peers) if lib in data]
    if "local" not in args.skip:
        configs.append(("local_dataset", {lib: {"case": "local_dataset"} for lib in readers}))
        for workers in () if scaled else (0, 2):  # peers: checksum checked on optimize and local_dataset only
            configs.append((f"local_loader_w{workers}", {lib: {"case": "local_loader", "workers": workers,
                            "verify": lib in LIBS} for lib in readers}))  # fmt: skip
        for kind in ("samples",) if scaled else ("samples", "columns"):
            ceilings[f"ceiling_{kind}"] = _ceiling({"kind": kind, "config": f"ceiling_{kind}",
                                                    "data": str(data["litstream"])}, repeats)  # fmt: skip
    if "async" not in args.skip and not scaled:
        for backend in ("asyncio", "trio"):
            configs.append((f"async_{backend}", {"litstream": {"case": "async", "backend": backend},
                                                 "litdata": {"case": "async", "backend": "thread"}}))  # fmt: skip
    log("local reads and async service")
    for config, variants in configs:
        specs = {lib: {"library": lib, "data": str(data[lib]), "config": config, **v} for lib, v in variants.items()}
        for lib, record in paired(specs, repeats).items():
            results[lib][config] = record  # LitData's async runs: its dataset in a thread
    if "tokens" not in args.skip and not scaled:
        log(f"tokens: {args.tokens} documents written by LitData's optimize (TokensLoader)")
        tokens = make_tokens(work, args.tokens)
        specs = {lib: {"library": lib, "data": str(tokens), "case": "tokens", "config": "tokens_block2048",
                       "block_size": TOKENS_BLOCK} for lib in LIBS}  # fmt: skip
        for lib, record in paired(specs, repeats).items():
            results[lib]["tokens_block2048"] = record
        ceilings["ceiling_tokens"] = _ceiling({"kind": "tokens", "config": "ceiling_tokens", "data": str(tokens),
                                               "block_size": TOKENS_BLOCK}, repeats)  # fmt: skip
    if "arrow" not in args.skip and not scaled:  # LitData's default output for dict rows: Arrow chunks
        from arrow_bench import run_family

        for lib, records in run_family(work, args.arrow_rows, repeats).items():
            results[lib].update(records)
    for lib in () if scaled else LIBS:  # LitData never wrote into its (uncompressed) dataset: check it
        if sorted((p.name, p.stat().st_size) for p in data[lib].iterdir()) != snapshot[lib]:
            log(f"WARNING: {lib}'s dataset directory changed while being read")
    for lib in peers:  # the remote reads are litstream's and LitData's only: free the disk
        shutil.rmtree(data[lib], ignore_errors=True)
    if "remote" not in args.skip:
        log("remote: SeaweedFS on 127.0.0.1, cold cache per run")
        uploads = {"litstream": data["litstream"]} if scaled else {lib: data[lib] for lib in LIBS}
        with s3_with_datasets(work, uploads, args.latency) as (server, proxied, proxy_pid):
            time.sleep(3)  # let the server settle after the upload
            cache = work / "cache"

            def fresh(lib: str) -> None:
                shutil.rmtree(cache, ignore_errors=True)
                cache.mkdir()

            endpoints = [("remote_cold", server.endpoint, {"server": server.pid})]
            if not scaled:
                endpoints.append(("remote_cold_latency20ms", proxied, {"server": server.pid, "proxy": proxy_pid}))
            for config, endpoint, watch in endpoints:
                s3 = {"endpoint": endpoint, "key": server.access_key, "secret": server.secret_key}
                specs = {lib: {"library": lib, "case": "remote_dataset", "config": config,
                               "data": f"s3://bench/{lib if lib in uploads else 'litstream'}",
                               "cache_dir": str(cache), "s3": s3}
                         for lib in LIBS}  # fmt: skip
                for lib, record in paired(specs, remote_repeats, fresh, watch).items():
                    results[lib][config] = record
                shutil.rmtree(cache, ignore_errors=True)
                # the ceiling: the same bytes fetched with obstore alone (no cache file, no decoding)
                raw = config.replace("remote_cold", "remote_raw_get")
                spec = {"library": "litstream", "case": "raw_download", "config": raw,
                        "data": "s3://bench/litstream", "s3": s3}  # fmt: skip
                ceilings[raw] = paired({"litstream": spec}, remote_repeats, watch=watch)["litstream"]
            # litstream without its disk cache (cache_chunks=False: chunks decoded from memory as they arrive,
            # nothing written); LitData has no such mode, so its row is its cached read (remote_cold) again
            s3 = {"endpoint": server.endpoint, "key": server.access_key, "secret": server.secret_key}
            spec = {"library": "litstream", "case": "remote_dataset", "config": "remote_stream", "cache_chunks": False,
                    "data": "s3://bench/litstream", "cache_dir": str(cache), "s3": s3}  # fmt: skip
            results["litstream"]["remote_stream"] = paired({"litstream": spec}, remote_repeats, fresh,
                                                           {"server": server.pid})["litstream"]  # fmt: skip
            if "remote_cold" in results["litdata"]:
                results["litdata"]["remote_stream"] = {**results["litdata"]["remote_cold"], "config": "remote_stream"}
    for path in set(data.values()):
        shutil.rmtree(path, ignore_errors=True)
    return results, ceilings


# -- main -------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description="litstream vs LitData and peers: the whole benchmark suite")
    parser.add_argument("--samples", type=int, default=NUM_SAMPLES)
    parser.add_argument("--repeats", type=int, default=None, help="runs per configuration (default 3; --full: 2)")
    parser.add_argument("--remote-repeats", type=int, default=None, help="remote runs (default: --repeats)")
    parser.add_argument("--peer-repeats", type=int, default=1, help="runs of MDS / WebDataset (default 1)")
    parser.add_argument("--latency", type=float, default=0.02, help="added round-trip latency, s (default 0.02)")
    parser.add_argument("--tokens", type=int, default=4000, help="token documents (~2-6k tokens each)")
    parser.add_argument("--arrow-rows", type=int, default=200_000, help="dict rows of the arrow family")
    parser.add_argument("--skip", action="append", default=[], choices=FAMILIES)
    parser.add_argument("--peers", nargs="*", default=list(PEERS), choices=PEERS, help="other peers to run")
    parser.add_argument("--scale", type=int, default=1, help="also run optimize and local/remote reads at N x")
    parser.add_argument("--full", action="store_true", help="the whole suite: every family and --scale 10")
    parser.add_argument("--quick", action="store_true", help="5,000 samples, 1 repeat, 500 token documents")
    parser.add_argument("--out", type=Path, default=BENCH / "results")
    parser.add_argument("--workdir", type=Path, default=None, help="data directory (default: a temporary one)")
    args = parser.parse_args()
    if args.full:
        args.scale = max(args.scale, 10)
    if args.repeats is None:  # the whole suite at two repeats fits the 25-minute budget on 2 cores
        args.repeats = 2 if args.full else 3
    if args.remote_repeats is None:
        args.remote_repeats = args.repeats
    PEER_REPEATS[0] = args.peer_repeats
    if args.quick:
        args.samples, args.repeats, args.remote_repeats, args.tokens = 5_000, 1, 1, 500
        args.arrow_rows = 20_000
    started = time.time()
    compileall.compile_dir(REPO / "src", quiet=1)  # the bytecode cache of run_case's interpreters
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="litstream-bench-", dir=args.workdir))
    from importlib.metadata import version

    import _peers

    missing = {p: why for p in args.peers if (why := _peers.available(p)) is not None}
    peers = tuple(p for p in args.peers if p not in missing)
    meta: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M", time.gmtime(started)),
        "load_start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "versions": {lib: version(_peers.DISTRIBUTIONS.get(lib, lib)) for lib in (*LIBS, *peers)},
        "peers_missing": missing,
        "samples": args.samples,
        "scale": args.scale,
        "repeats": args.repeats,
        "disk_free_gb": round(shutil.disk_usage(work).free / 1e9, 1),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "command": " ".join([Path(PY).name, *sys.argv]),
    }
    log(f"workdir {work}; load average {meta['load_start']}; peers {peers}; not run: {missing}")
    scaled_rows: list[dict[str, Any]] = []
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
        results, ceilings = run_suite(work, args, args.samples, args.repeats, args.remote_repeats, peers, False)
        if args.scale > 1:
            big = args.samples * args.scale
            load = os.getloadavg()[0]
            log(f"scale {args.scale}x: {big:,} samples, one repeat (remote reads: two); load average {load:.2f}")
            meta["load_scale_start"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
            meta["expected_checksum_scaled"] = expected_checksum(big)
            # the remote reads twice (best kept), so 10x / 1x compares best with best, not with one run
            big_results, big_ceilings = run_suite(work, args, big, 1, min(2, args.remote_repeats), (), True)
            for config in ("optimize", "local_dataset", "remote_cold", "remote_stream"):
                for lib in ("litstream",) if config == "remote_stream" else LIBS:  # LitData: no cacheless mode
                    if config in big_results[lib] and config in results[lib]:
                        scaled_rows.append({"config": config, "library": lib, "scale": args.scale,
                                            "1x": results[lib][config], "Nx": big_results[lib][config]})  # fmt: skip
                        same = big_results[lib][config].get("checksum") == meta["expected_checksum_scaled"]
                        scaled_rows[-1]["checksum_expected"] = same
            if "remote_raw_get" in ceilings and "remote_raw_get" in big_ceilings:  # the remote reads' ceiling, also
                scaled_rows.append({"config": "remote_raw_get (ceiling)", "library": "litstream",
                                    "scale": args.scale, "1x": ceilings["remote_raw_get"],
                                    "Nx": big_ceilings["remote_raw_get"]})  # fmt: skip
            meta["ceilings_scaled"] = big_ceilings
    finally:
        shutil.rmtree(work, ignore_errors=True)
    meta["load_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    meta["duration_s"] = round(time.time() - started, 1)
    meta["expected_checksum"] = expected
    rows = summarize(results, ceilings, expected)
    (args.out / "e2e.json").write_text(
        json.dumps({"meta": meta, "summary": rows, "ceilings": ceilings, "scaled": scaled_rows}, indent=1) + "\n"
    )
    table = markdown(rows, meta)
    if scaled_rows:
        table += f"\n\nScale: {args.samples:,} and {args.samples * args.scale:,} samples (one repeat at the larger "
        agree = all(r["checksum_expected"] for r in scaled_rows if "checksum_expected" in r)  # not the ceiling's
        table += "size, best of two for the remote reads; its checksums "
        table += "all equal the expected one" if agree else "DIFFER"
        table += "; at the larger size LitData reads the chunks litstream's optimize wrote, the same format, "
        table += "since its own optimize is run at 1x only):\n\n" + scale_table(scaled_rows)
    micro = args.out / "micro.json"
    if micro.exists() and "micro" not in args.skip:
        table += "\n\n| micro-benchmark (pytest-benchmark, min) | test | ms |\n|---|---|---:|"
        for bench in json.loads(micro.read_text())["benchmarks"]:
            table += f"\n| {bench['group']} | `{bench['name']}` | {bench['stats']['min'] * 1e3:.3f} |"
    cpu = cpu_table(results, ceilings)
    if cpu:
        table += "\n\nCPU of the remote runs (the server's and the proxy's include the untimed checksum pass, " \
                 "which reads the local cache):\n\n" + cpu  # fmt: skip
    for config, record in ceilings.items():
        if "seconds" in record:
            table += f"\n\nCeiling `{config}`: {record['items']:,} items in {record['seconds']:.3f} s " \
                     f"= {record['throughput']:,.0f} items/s."  # fmt: skip
    table += f"\n\nWhole run: {meta['duration_s']:.0f} s; load average {meta['load_start']} at start, " \
             f"{meta['load_end']} at end (2 cores shared with other jobs)."  # fmt: skip
    (args.out / "summary.md").write_text(table + "\n")
    try:
        chart(rows, args.out / "throughput.png", meta)
        shutil.copyfile(args.out / "throughput.png", REPO / "docs" / "performance.png")
    except ImportError as exc:
        log(f"no chart: {exc} (pip install -r requirements/dev.txt)")
    print(table)
    log(f"done in {meta['duration_s']} s; results in {args.out}")
    bad = [r["config"] for r in rows if r.get("checksums_equal") is False or r.get("peer_checksums_expected") is False]
    bad += [f"{r['config']}@{args.scale}x" for r in scaled_rows if not r.get("checksum_expected", True)]
    if bad:
        log(f"CHECKSUM MISMATCH in {bad}")
        raise SystemExit(1)


if __name__ == "__main__":
    main()
