"""CPU per request of each latency rig for small GETs: what the rig takes from the client on a shared machine.

    .venv/bin/python bench/latency_rig_cpu.py                 # 4,000 objects of 8-12 KB, 64 GETs in flight

Rigs: SeaweedFS directly (no latency), ``bench/latency_proxy.py`` (+20 ms) in front of SeaweedFS, and
``bench/s3_delay_server.py`` (+20 ms, answered late by the server itself). One client (litstream's obstore
store, 64 GETs in flight, in this process) GETs every object once per rig; CPU is user + system seconds from
``/proc/<pid>/stat`` (servers, proxy) and ``getrusage`` (client) over the timed region, per request in
microseconds. Prints a table and writes ``--out`` (default ``bench/results/latency_rig_cpu.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "src"))
PY = sys.executable


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def start(args: list[str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen([PY, *args], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("ready"):
        raise RuntimeError(f"{args[0]} did not start: {line!r}")
    return proc


def measure(name: str, endpoint: str, keys: list[str], watch: dict[str, int], creds: dict[str, str]) -> dict[str, Any]:
    import anyio

    from litstream.storage._resolver import store_for

    store = store_for("s3://bench/raw", {"endpoint_url": endpoint, **creds})

    async def fetch_all() -> int:
        limiter = anyio.CapacityLimiter(64)
        total = 0

        async def one(key: str) -> None:
            nonlocal total
            async with limiter:
                data = await store.get(key)
            total += len(data)

        async with anyio.create_task_group() as tg:
            for key in keys:
                tg.start_soon(one, key)
        return total

    anyio.run(fetch_all)  # warm: connections, threads
    before = {k: cpu_s(pid) for k, pid in watch.items()}
    mine = own_cpu_s()
    began = time.perf_counter()
    nbytes = anyio.run(fetch_all)
    seconds = time.perf_counter() - began
    record: dict[str, Any] = {"rig": name, "requests": len(keys), "bytes": nbytes, "seconds": round(seconds, 3),
                              "requests_per_s": round(len(keys) / seconds)}  # fmt: skip
    record["client_us_per_request"] = round((own_cpu_s() - mine) / len(keys) * 1e6, 1)
    for k, pid in watch.items():
        record[f"{k}_us_per_request"] = round((cpu_s(pid) - before[k]) / len(keys) * 1e6, 1)
    record["rig_us_per_request"] = round(sum(record[f"{k}_us_per_request"] for k in watch), 1)
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=4000)
    parser.add_argument("--delay", type=float, default=0.02)
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "latency_rig_cpu.json")
    args = parser.parse_args()
    import anyio
    from tests.servers import free_port, seaweedfs

    from litstream.storage._resolver import store_for

    sizes = [8192 + (i * 7919) % 4096 for i in range(args.objects)]
    keys = [f"{i % 100:02d}/img-{i:06d}.jpg" for i in range(args.objects)]
    records = []
    with tempfile.TemporaryDirectory(prefix="rig-cpu-") as tmp, seaweedfs(Path(tmp), bucket="bench") as server:
        creds = {"aws_access_key_id": server.access_key, "aws_secret_access_key": server.secret_key}
        port = free_port()
        delayed = start([str(BENCH / "s3_delay_server.py"), "--port", str(port), "--delay", str(args.delay)])
        proxy_port = free_port()
        target = server.endpoint.rsplit("/", 1)[-1]
        proxy = start([str(BENCH / "latency_proxy.py"), "--port", str(proxy_port), "--target", target,
                       "--delay", str(args.delay / 2)])  # fmt: skip
        try:
            for endpoint in (server.endpoint, f"http://127.0.0.1:{port}"):
                store = store_for("s3://bench/raw", {"endpoint_url": endpoint, **creds})

                async def upload(store: Any = store) -> None:
                    limiter = anyio.CapacityLimiter(32)

                    async def put(i: int) -> None:
                        async with limiter:
                            await store.put(keys[i], bytes([i % 251]) * sizes[i])

                    async with anyio.create_task_group() as tg:
                        for i in range(args.objects):
                            tg.start_soon(put, i)

                anyio.run(upload)
            rigs = [
                ("seaweedfs_direct", server.endpoint, {"seaweedfs": server.pid}),
                ("python_proxy_20ms+seaweedfs", f"http://127.0.0.1:{proxy_port}",
                 {"seaweedfs": server.pid, "proxy": proxy.pid}),
                ("delay_server_20ms", f"http://127.0.0.1:{port}", {"delay_server": delayed.pid}),
            ]  # fmt: skip
            for name, endpoint, watch in rigs:
                record = measure(name, endpoint, keys, watch, creds)
                print(json.dumps(record), file=sys.stderr)
                records.append(record)
        finally:
            for proc in (delayed, proxy):
                proc.terminate()
                proc.wait(10)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"load_average": os.getloadavg(), "records": records}, indent=2))
    print("| rig | requests/s | client CPU µs/request | rig CPU µs/request (server + proxy) |")
    print("| --- | ---: | ---: | ---: |")
    for r in records:
        print(f"| {r['rig']} | {r['requests_per_s']:,} | {r['client_us_per_request']} | {r['rig_us_per_request']} |")


if __name__ == "__main__":
    main()
