"""CPU cost of the default per-chunk checksum (xxh3): optimize and reads with ``checksum=None`` against the default.

Every measurement runs in a fresh interpreter (so the once-per-process check of each chunk file is paid, as a new
training job pays it) and reports its own CPU seconds, user + system, of itself and of its children (optimize's
worker processes), from ``getrusage``. CPU time, not wall time: the machine these numbers come from is shared, and
its load moves wall time far more than a few percent. Runs alternate (none, default, none, ...) so drift in the
machine's state hits both sides alike; the report gives the median of each side and the overhead in percent.
On a loaded machine that difference is noisy (a few percent either way), so the report also gives the CPU of the
checksum alone over the dataset's chunk files (``hash_cpu_s``, best of 5 in-process passes) as a share of the
case's CPU without it (``hash_pct_of_none``): the cost each run adds (once per process and file when reading).

Cases, for two sample shapes (``array``: 128 KiB of uint8 per sample, the worst case, where decoding does almost
nothing per byte; ``dict``: an int and a short string, where per-sample work dominates):

- ``optimize``: write the dataset (1 worker, 64 MB chunks);
- ``read_local``: iterate a local dataset in place (``StreamingDataset(path)``), copying each sample out as a
  collate function would (an iteration that never touches the samples' bytes would not even read the file);
  the first process hashes each chunk file and records it in the cache root, later ones trust the record
  (``cpu_s_xxh3[0]`` is that first process);
- ``read_cached``: iterate it through a cold chunk cache (``Dir(path=cache, url=path)``): copy, check, read.

    python bench/checksum_cost.py                 # 3 pairs per case, prints JSON
    python bench/checksum_cost.py --repeats 5 --shapes array
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))  # this tree's litstream, in the parent and (PYTHONPATH) in each child
SHAPES = {"array": 1500, "dict": 100_000}  # samples per dataset (about 190 MiB and 3 MiB of payload)


def _sample_array(i: int) -> dict[str, Any]:
    import numpy as np

    return {"x": np.full(128 * 1024, i % 251, dtype=np.uint8), "i": i}


def _sample_dict(i: int) -> dict[str, Any]:
    return {"i": i, "text": f"sample number {i} " * 4}


def _cpu_s() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def child(case: str, shape: str, checksum: str | None, data: Path, scratch: Path) -> float:
    """One measurement in this (fresh) interpreter: the CPU seconds of the case alone."""
    import litstream

    fn = _sample_array if shape == "array" else _sample_dict
    if case == "optimize":
        before = _cpu_s()
        litstream.optimize(fn=fn, inputs=range(SHAPES[shape]), output_dir=str(scratch / "out"), chunk_bytes="64MB",
                           num_workers=1, verbose=False, checksum=checksum)  # fmt: skip
        return _cpu_s() - before
    source = litstream.StreamingDataset(
        str(data) if case == "read_local" else litstream.Dir(path=str(scratch / "cache"), url=str(data))
    )
    before = _cpu_s()
    count = copied = 0
    for item in source:  # each sample copied out, as a collate function copies it into a batch
        count += 1
        copied += len(item["x"].copy()) if shape == "array" else len(item["text"])
    spent = _cpu_s() - before
    assert count == SHAPES[shape], count
    assert copied > 0, copied
    return spent


def hash_cpu_s(directory: Path, repeats: int = 5) -> float:
    """CPU seconds of the default checksum alone over every chunk file of ``directory`` (the best of ``repeats``
    passes over files in the page cache): the cost each case pays, measured without the case's noise."""
    from litstream.format._checksum import DEFAULT_CHECKSUM, chunk_digest

    files = [p.read_bytes() for p in sorted(directory.glob("chunk-*.bin"))]
    best = float("inf")
    for _ in range(repeats):
        before = _cpu_s()
        for data in files:
            chunk_digest([data], DEFAULT_CHECKSUM)
        best = min(best, _cpu_s() - before)
    return best


def _run(case: str, shape: str, checksum: str | None, data: Path) -> float:
    with tempfile.TemporaryDirectory(prefix="checksum-cost-") as scratch:
        out = subprocess.run(
            [sys.executable, __file__, "--child", case, shape, str(checksum), str(data), scratch],
            check=True,
            capture_output=True,
            text=True,
            env={
                "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
                "PATH": "/usr/bin:/bin",
                # one cache root for every run, as successive jobs on one machine share it: a local dataset's
                # chunk files are hashed by the first process only (read/cache/_verify.py records them there)
                "LITSTREAM_CACHE_DIR": str(data.parent / "cache-root"),
            },
        )
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="pairs (none, default) per case")
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--cases", nargs="+", default=["optimize", "read_local", "read_cached"])
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        case, shape, checksum, data, scratch = args.child
        print(child(case, shape, None if checksum == "None" else checksum, Path(data), Path(scratch)))
        return
    import litstream

    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="checksum-data-") as root:
        for shape in args.shapes:
            fn = _sample_array if shape == "array" else _sample_dict
            data = {}
            for checksum in (None, "xxh3"):
                data[checksum] = Path(root) / f"{shape}-{checksum}"
                litstream.optimize(fn=fn, inputs=range(SHAPES[shape]), output_dir=str(data[checksum]),
                                   chunk_bytes="64MB", num_workers=1, verbose=False, checksum=checksum)  # fmt: skip
            hashing = hash_cpu_s(data["xxh3"])
            for case in args.cases:
                cpu: dict[str | None, list[float]] = {None: [], "xxh3": []}
                for _ in range(args.repeats):
                    for checksum in (None, "xxh3"):
                        cpu[checksum].append(_run(case, shape, checksum, data[checksum]))
                none, default = statistics.median(cpu[None]), statistics.median(cpu["xxh3"])
                row = {
                    "case": case,
                    "shape": shape,
                    "samples": SHAPES[shape],
                    "cpu_s_none": cpu[None],
                    "cpu_s_xxh3": cpu["xxh3"],
                    "median_none": round(none, 3),
                    "median_xxh3": round(default, 3),
                    "overhead_pct": round(100 * (default - none) / none, 2),
                    "hash_cpu_s": round(hashing, 4),
                    "hash_pct_of_none": round(100 * hashing / none, 2),
                }
                results.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
            shutil.rmtree(data[None]), shutil.rmtree(data["xxh3"])
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
