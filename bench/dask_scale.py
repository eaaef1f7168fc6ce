"""``optimize`` over many small inputs on a real Dask ``LocalCluster`` (worker processes) beside the local
process pool, and a run where one Dask worker is killed mid-way.

    .venv/bin/python bench/dask_scale.py                               # 100,000 and 1,000,000 inputs
    .venv/bin/python bench/dask_scale.py --inputs 20000 --skip-kill    # a smoke run

Each case runs in a fresh interpreter and prints one JSON line; the table goes to stdout and every record to
``--out`` (default ``bench/results/dask_scale.json``). Per case:

* ``inputs_per_s``: inputs / wall seconds of the ``optimize`` call (cluster start-up not timed; the cluster's
  workers have imported litstream before the timer, by a warm-up task).
* ``client_rss_mib`` (baseline, peak, growth): the calling process's resident set sampled every 10 ms by a
  thread (``psutil``) from just before the call to its end; the baseline is taken with the input list and
  the cluster already made. A ``LocalCluster``'s scheduler lives in the calling process, so its memory for
  the tasks is counted too. ``peak - baseline`` is what the call adds: it must not grow with the inputs.
* ``exact``: the dataset is read back with ``StreamingDataset`` and must hold every input exactly once, in
  order (count, sum and a CRC of every ``i`` in reading order).
* ``killed``: one Dask worker is sent SIGKILL once it has written its first chunk; Dask runs its task again
  on a live worker and the result must still be exact.

Inputs: ``list(range(n))`` (``--input list``, default: what a user passes) or ``range(n)``; ``fn(i)`` returns
``{"i": i, "name": f"item-{i}"}``; ``chunk_size=20000``; ``num_workers`` = the cluster's worker processes (2).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PY = sys.executable


def sample(i: int) -> dict[str, Any]:
    return {"i": i, "name": f"item-{i}"}


class PeakRSS:
    """The peak resident set of this process, sampled every 10 ms by a thread, from ``start()``."""

    def __init__(self) -> None:
        import psutil

        self._proc = psutil.Process()
        self.baseline = self.peak = self._proc.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, self._proc.memory_info().rss)

    def __enter__(self) -> PeakRSS:
        self.baseline = self.peak = self._proc.memory_info().rss
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._proc.memory_info().rss)


def verify(out: Path, n: int) -> dict[str, Any]:
    from litstream import StreamingDataset

    count, total, crc = 0, 0, 0
    for s in StreamingDataset(str(out)):
        count += 1
        total += s["i"]
        crc = zlib.crc32(s["i"].to_bytes(8, "little"), crc)
        if s["name"] != f"item-{s['i']}":
            return {"exact": False}
    expected_crc = 0
    for i in range(n):
        expected_crc = zlib.crc32(i.to_bytes(8, "little"), expected_crc)
    return {"exact": count == n and total == n * (n - 1) // 2 and crc == expected_crc, "read_back": count}


def _kill_after_first_chunk(out: Path, pids: list[int], done: threading.Event, report: dict[str, Any]) -> None:
    """Once a chunk file of worker 1 exists, SIGKILL the Dask worker process running it (polls the folder)."""
    while not done.is_set():
        if any(out.glob("chunk-1-*.bin")):
            for pid in pids:  # the worker that holds task 1 is not known from outside: kill the one writing
                try:
                    with open(f"/proc/{pid}/io") as f:
                        written = int(next(line for line in f if line.startswith("wchar")).split()[1])
                except OSError:
                    continue
                report.setdefault("wchar", {})[pid] = written
            victim = max(report.get("wchar", {}).items(), key=lambda kv: kv[1])[0]
            os.kill(victim, signal.SIGKILL)
            report["killed_pid"] = victim
            report["killed_at_s"] = time.perf_counter()
            return
        done.wait(0.005)


def case(spec: dict[str, Any]) -> dict[str, Any]:
    """One ``optimize`` in this (fresh) interpreter."""
    from litstream import optimize

    n, workers = spec["inputs"], spec["workers"]
    inputs: Any = list(range(n)) if spec["input"] == "list" else range(n)
    out = Path(spec["out"])
    record: dict[str, Any] = dict(spec)
    executor = None
    cluster = client = None
    if spec["runner"] == "dask":
        import distributed

        cluster = distributed.LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
        )
        client = distributed.Client(cluster)
        client.run(lambda: __import__("litstream.write.run._runner"))  # workers import litstream before the timer
        executor = client.get_executor()
    killer = None
    done = threading.Event()
    if spec.get("kill"):
        assert client is not None
        pids = list(client.run(os.getpid).values())
        killer = threading.Thread(target=_kill_after_first_chunk, args=(out, pids, done, record), daemon=True)
    with PeakRSS() as rss:
        if killer is not None:
            killer.start()
        start = time.perf_counter()
        try:
            optimize(sample, inputs, str(out), chunk_size=20_000, num_workers=workers, executor=executor, verbose=False)
            record["error"] = None
        except Exception as exc:  # reported, not raised: "raises and commits nothing" is an accepted outcome
            record["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        seconds = time.perf_counter() - start
        done.set()
    if "killed_at_s" in record:
        record["killed_at_s"] = round(record["killed_at_s"] - start, 3)
    record.update(seconds=seconds, inputs_per_s=n / seconds)
    record["client_rss_mib"] = {
        "baseline": rss.baseline / 2**20, "peak": rss.peak / 2**20, "growth": (rss.peak - rss.baseline) / 2**20,
    }  # fmt: skip
    if client is not None:
        client.close()
    if cluster is not None:
        cluster.close()
    if record["error"] is None:
        record.update(verify(out, n))
    else:
        record["committed"] = (out / "index.json").exists()
    return record


def run_case(spec: dict[str, Any]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [PY, __file__, "--case", json.dumps(spec)], capture_output=True, text=True, timeout=3600, env=env, check=False
    )
    if proc.returncode != 0:
        return {**spec, "error": proc.stderr[-2000:]}
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, nargs="*", default=[100_000, 1_000_000])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--input", choices=["list", "range"], default="list")
    parser.add_argument("--skip-kill", action="store_true")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "dask_scale.json")
    args = parser.parse_args()
    if args.case:
        print(json.dumps(case(json.loads(args.case))))
        return
    records = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="dask-scale-") as tmp:
        plan = [(n, runner, False) for n in args.inputs for runner in ("pool", "dask")]
        if not args.skip_kill:
            plan.append((max(args.inputs), "dask", True))
        for k, (n, runner, kill) in enumerate(plan):
            spec = {"inputs": n, "workers": args.workers, "runner": runner, "kill": kill, "input": args.input,
                    "out": str(Path(tmp) / f"out-{k}")}  # fmt: skip
            record = run_case(spec)
            print(json.dumps(record), file=sys.stderr)
            records.append(record)
    loads = {"before": load_before, "after": os.getloadavg(), "cpus": os.cpu_count()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"load_average": loads, "records": records}, indent=2))
    print(f"load average (1, 5, 15 min) before {loads['before']}, after {loads['after']}, on {loads['cpus']} CPUs")
    print("| runner | inputs | killed | inputs/s | client RSS MiB: baseline / peak / growth | exact | error |")
    print("| --- | ---: | --- | ---: | --- | --- | --- |")
    for r in records:
        mem = r.get("client_rss_mib", {})
        rss = f"{mem['baseline']:.0f} / {mem['peak']:.0f} / +{mem['growth']:.1f}" if mem else "-"
        rate = f"{r['inputs_per_s']:,.0f}" if "inputs_per_s" in r else "-"
        error = (r.get("error") or "")[:80]
        print(f"| {r['runner']} | {r['inputs']:,} | {'yes' if r['kill'] else 'no'} | {rate} | {rss} "
              f"| {r.get('exact', '-')} | {error} |")  # fmt: skip


if __name__ == "__main__":
    main()
