"""Two source trees of litstream, one interleaved run: is a change neutral for ``optimize`` and local reads?

    python bench/compare_trees.py BEFORE_SRC AFTER_SRC [--samples N] [--rounds R]

``BEFORE_SRC`` and ``AFTER_SRC`` are ``src`` folders (for example of a ``git worktree`` at the older
commit, and of this checkout). The data is written once, with the ``AFTER`` tree (the format is the same
by construction: the checksums of both trees' reads must match). Then, ``--rounds`` times, each case runs
once per tree, alternating, each in a fresh interpreter (``bench/e2e_case.py``). For each case and tree it
prints the best items/s and the lowest CPU seconds per 1,000 samples (user + system of the timed region in
every process, loader workers included, as ``e2e_case.py`` records it with ``getrusage``; else of the whole
case process and its children); CPU per sample is the
figure to compare on a shared machine. Exit status 1 if a checksum differs.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CASES: list[dict[str, Any]] = [
    {"case": "optimize"},  # a fresh output each run (the versions work commits a version log beside it)
    {"case": "local_dataset"},
    {"case": "local_loader", "workers": 0},
    {"case": "local_loader", "workers": 2},
]


def _run(src: Path, spec: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """One case in a fresh interpreter with ``src`` first on the path: its record and CPU seconds."""
    env = dict(os.environ, PYTHONPATH=str(src))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [sys.executable, str(HERE / "e2e_case.py"), json.dumps(spec)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=1800,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(out.stdout.strip().splitlines()[-1]), cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--samples", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="litstream-compare-") as work:
        data = str(Path(work) / "data")
        _run(args.after, {"case": "optimize", "library": "litstream", "output_dir": data, "samples": args.samples})
        best: dict[tuple[int, str], dict[str, float]] = {}
        checksums: dict[int, set[str]] = {}
        for _ in range(args.rounds):
            for index, case in enumerate(CASES):
                for name, src in (("before", args.before), ("after", args.after)):
                    spec = {**case, "library": "litstream", "data": data, "samples": args.samples}
                    if case["case"] == "optimize":
                        spec["output_dir"] = tempfile.mkdtemp(prefix="out-", dir=work)
                    record, process_cpu = _run(src, spec)
                    # the timed region's, every process (getrusage), when recorded; else the case process's
                    cpu = float(record.get("cpu_all_s") or record.get("cpu_s") or process_cpu)
                    checksums.setdefault(index, set()).add(str(record.get("checksum")))
                    entry = best.setdefault((index, name), {"items_per_s": 0.0, "cpu_per_1000": float("inf")})
                    entry["items_per_s"] = max(entry["items_per_s"], record["items"] / record["seconds"])
                    entry["cpu_per_1000"] = min(entry["cpu_per_1000"], 1000 * cpu / args.samples)
        print("| case | before items/s | after items/s | before CPU s / 1k | after CPU s / 1k |")
        print("|---|---|---|---|---|")
        for index, case in enumerate(CASES):
            label = case["case"] + (f" w={case['workers']}" if "workers" in case else "")
            b, a = best[(index, "before")], best[(index, "after")]
            print(
                f"| {label} | {b['items_per_s']:,.0f} | {a['items_per_s']:,.0f} "
                f"| {b['cpu_per_1000']:.4f} | {a['cpu_per_1000']:.4f} |"
            )
        differing = [CASES[i]["case"] for i, sums in checksums.items() if len(sums) != 1]
        if differing:
            print(f"checksums differ: {differing}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
