"""CPU seconds of the remote cold read, reader and server, next to obstore's GETs alone (a dev tool).

``run_all.py`` measures the server's CPU over a whole case process (start-up and the untimed checksum pass
included). This measures it over the timed region only, so the cost of serving litstream's requests can be
compared with serving the raw GETs. One SeaweedFS on 127.0.0.1 serves every run; each run is a fresh
interpreter with an empty chunk cache. ``--src`` runs the same cases against other source trees (e.g. the
main branch's) in the same session, interleaved, so before/after compare under the same load.

    python bench/remote_cpu.py --repeats 5 --src before=/work/main/src --src after=src
    python bench/remote_cpu.py --profile /tmp/prof.json   # py-spy record of one litstream run (speedscope)
    python bench/remote_cpu.py --wrap "strace -f -c -o /tmp/calls"   # one litstream run under a tool
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(REPO))


def _process_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child(spec: dict[str, Any]) -> None:
    """Run one ``e2e_case`` case, recording the server's CPU seconds at the timed region's two ends."""
    import e2e_case

    server = spec.pop("server_pid")
    import litstream  # as e2e_case.main: imports (torch with StreamingDataset) are not part of any timing

    for name in ("StreamingDataset", "StreamingDataLoader", "TokensLoader", "astream"):
        getattr(litstream, name, None)
    marks: list[float] = []
    own = e2e_case._cpu_seconds

    switches: list[int] = []
    faults: list[int] = []
    system: list[float] = []

    def cpu_seconds() -> float:
        marks.append(_process_cpu_s(server))
        usage = resource.getrusage(resource.RUSAGE_SELF)
        switches.append(usage.ru_nvcsw + usage.ru_nivcsw)
        faults.append(usage.ru_minflt)
        system.append(os.times().system)
        return own()

    e2e_case._cpu_seconds = cpu_seconds  # type: ignore[attr-defined]
    record = e2e_case.CASES[spec["case"]](spec)
    record["server_cpu_s"] = round(marks[1] - marks[0], 3)
    record["switches"] = switches[1] - switches[0]  # context switches of the reader's threads
    record["faults"] = faults[1] - faults[0]  # minor page faults
    record["system_s"] = round(system[1] - system[0], 3)  # the kernel's part of cpu_s
    print(json.dumps(record, default=str))


def _run(spec: dict[str, Any], src: str, profile: Path | None = None, wrap: str = "") -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(Path(src).resolve())}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    command = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    command = [*wrap.split(), *command]
    if profile is not None:
        spy = Path(sys.executable).parent / "py-spy"
        command = [str(spy), "record", "-r", "200", "-f", "speedscope", "-o", str(profile), "--", *command]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, check=False, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(proc.stderr[-3000:])
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _dataset(work: Path, samples: int) -> Path:
    data = work / f"data-{samples}"
    if not (data / "index.json").exists():
        spec = {"case": "optimize", "library": "litstream", "output_dir": str(data), "samples": samples}
        subprocess.run([sys.executable, str(BENCH / "e2e_case.py"), json.dumps(spec)], check=True,
                       env={**os.environ, "PYTHONPATH": str(REPO / "src")})  # fmt: skip
    return data


COLUMNS = [
    ("seconds", "wall s"),
    ("cpu_s", "reader CPU s"),
    ("system_s", " of it kernel"),
    ("server_cpu_s", "server CPU s"),
    ("ttfb_s", "first item s"),
    ("switches", "ctx switches"),
    ("faults", "page faults"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--samples", type=int, default=50_000)
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "litstream-remote-cpu"))
    parser.add_argument("--src", action="append", default=[], help="NAME=PATH of a source tree (default: ./src)")
    parser.add_argument("--warm", action="store_true", help="also read each tree from a full cache (no download)")
    parser.add_argument("--cacheless", action="store_true", help="also read each tree with cache_chunks=False")
    parser.add_argument("--profile", help="write a py-spy profile of one litstream run to this file")
    parser.add_argument("--wrap", default="", help="run one litstream run under this command (e.g. strace)")
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    import boto3
    from tests.servers import seaweedfs

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    data = _dataset(work, args.samples)
    srcs = dict(s.split("=", 1) for s in args.src) or {"src": str(REPO / "src")}
    shutil.rmtree(work / "server", ignore_errors=True)
    with seaweedfs(work / "server", bucket="bench") as server:
        client = boto3.client("s3", endpoint_url=server.endpoint, aws_access_key_id=server.access_key,
                              aws_secret_access_key=server.secret_key, region_name="us-east-1")  # fmt: skip
        for file in sorted(data.iterdir()):
            client.upload_file(str(file), "bench", f"ds/{file.name}")
        time.sleep(3)
        s3 = {"endpoint": server.endpoint, "key": server.access_key, "secret": server.secret_key}
        cache = work / "cache"
        base = {"data": "s3://bench/ds", "s3": s3, "server_pid": server.pid, "library": "litstream"}
        if args.profile or args.wrap:
            shutil.rmtree(cache, ignore_errors=True)
            spec = {**base, "case": "remote_dataset", "cache_dir": str(cache)}
            print(_run(spec, next(iter(srcs.values())), Path(args.profile) if args.profile else None, args.wrap))
            return
        idle0, t0 = _process_cpu_s(server.pid), time.perf_counter()
        time.sleep(2)
        idle = (_process_cpu_s(server.pid) - idle0) / (time.perf_counter() - t0)
        print(f"server idle: {idle:.3f} CPU-s per s")
        rows: dict[str, list[dict[str, Any]]] = {}
        for _ in range(args.repeats):
            for name, src in srcs.items():
                shutil.rmtree(cache, ignore_errors=True)
                record = _run({**base, "case": "remote_dataset", "cache_dir": str(cache)}, src)
                rows.setdefault(name, []).append(record)
                if args.warm:
                    record = _run({**base, "case": "remote_dataset", "cache_dir": str(cache)}, src)
                    rows.setdefault(f"{name} warm", []).append(record)
                if args.cacheless:  # into memory as the chunks arrive, nothing written to the cache
                    shutil.rmtree(cache, ignore_errors=True)
                    spec = {**base, "case": "remote_dataset", "cache_dir": str(cache), "cache_chunks": False}
                    rows.setdefault(f"{name} cacheless", []).append(_run(spec, src))
            rows.setdefault("raw GETs", []).append(_run({**base, "case": "raw_download"}, str(REPO / "src")))
        shutil.rmtree(cache, ignore_errors=True)
    print("best of each column; every run's value after it")
    for name, records in rows.items():
        print(f"{name}: checksums {sorted({str(r['checksum']) for r in records})}")
        for key, label in COLUMNS:
            values = sorted(r[key] or 0.0 for r in records)
            print(f"  {label:<13} {values[0]:7.3f}   {' '.join(f'{v:.3f}' for v in values)}")
        print(f"  {'items/s':<13} {records[0]['items'] / min(r['seconds'] for r in records):7.0f}")


if __name__ == "__main__":
    main()
