"""Start-up times: ``import litstream``, the ``litstream`` command, and LitData's import for comparison.

Run: ``.venv/bin/python bench/import_time.py [--repeats N] [--out FILE]``. Every row is the best of
``N`` fresh interpreters (wall time, seconds), on a small dataset it writes to a temporary directory.
Targets (issue 17): ``import litstream`` under 0.5 s, every ``litstream`` command under 1 s, on an
idle machine. Prints a Markdown table, and writes JSON with ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGETS = {"import": 0.5, "cli": 1.0}


def _best(cmd: list[str], repeats: int, env: dict[str, str], cwd: str) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=cwd)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    py = sys.executable
    cli = str(Path(py).with_name("litstream"))
    env = dict(os.environ)
    rows: list[tuple[str, str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        make = (
            "import litstream as ls; "
            "ls.optimize(lambda i: {'i': i}, list(range(100)), 'data', chunk_size=10, num_workers=1, verbose=False)"
        )
        subprocess.run([py, "-c", make], check=True, cwd=tmp, env=env)
        cases = [
            ("python -c pass (interpreter start)", "baseline", [py, "-c", "pass"]),
            ("import litstream", "import", [py, "-c", "import litstream"]),
            ("import litstream; litstream.StreamingDataset (loads torch)", "baseline",
             [py, "-c", "import litstream; litstream.StreamingDataset"]),
            ("litstream --help", "cli", [cli, "--help"]),
            ("litstream --version", "cli", [cli, "--version"]),
            ("litstream cache path", "cli", [cli, "cache", "path"]),
            ("litstream inspect data", "cli", [cli, "inspect", "data"]),
        ]  # fmt: skip
        try:
            import litdata  # noqa: F401

            cases.append(("import litdata", "baseline", [py, "-c", "import litdata"]))
        except ImportError:
            pass
        for label, kind, cmd in cases:
            rows.append((label, kind, _best(cmd, args.repeats, env, tmp)))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"best of {args.repeats}, {platform.node()}, {os.cpu_count()} cores, load average {load:.2f}\n")
    print("| command | seconds | target |\n| --- | ---: | ---: |")
    for label, kind, seconds in rows:
        target = TARGETS.get(kind)
        print(f"| `{label}` | {seconds:.3f} | {'' if target is None else f'< {target}'} |")
    if args.out is not None:
        table = [{"command": c, "kind": k, "seconds": s, "target": TARGETS.get(k)} for c, k, s in rows]
        record = {"repeats": args.repeats, "load_average": load, "cpus": os.cpu_count(), "rows": table}
        args.out.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
