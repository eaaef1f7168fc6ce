"""Time litstream against LitData on the same data and print one JSON object.

Usage::

    .venv/bin/python bench/compare.py [--samples N] [--repeats R] [--write]

Builds the datasets of ``bench/_cases.py`` (both libraries, plain and zstd) in a temporary directory,
times every case ``R`` times (default 3) with ``time.perf_counter`` and keeps the best, checks what each
timed call returned, and prints ``{"cases": {name: {"litstream_s", "litdata_s", "ratio"}}, ...}`` where
``ratio = litdata_s / litstream_s`` (> 1: litstream is faster). ``--write`` also writes the object to
``bench/results.json``. The temporary directory is removed at the end.

LitData reads a fresh copy of its dataset for each timed call (made outside the timing): its reader
decompresses chunks in place and deletes the compressed files. ``astream`` has no LitData counterpart;
its ``litdata_s`` is LitData's single-process ``StreamingDataset`` pass over the same data.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import _cases

if TYPE_CHECKING:
    from collections.abc import Callable

RESULTS = Path(__file__).resolve().parent / "results.json"


def best_of(repeats: int, work: Callable[..., Any], setup: Callable[[], tuple[Any, ...]]) -> tuple[float, Any]:
    """The shortest of ``repeats`` timed calls ``work(*setup())`` (``setup`` is not timed) and the last result."""
    best = float("inf")
    result = None
    for _ in range(repeats):
        args = setup()
        start = time.perf_counter()
        result = work(*args)
        best = min(best, time.perf_counter() - start)
        os.environ.pop("DATA_OPTIMIZER_GLOBAL_RANK", None)  # set by LitData's optimize in this process
    return best, result


def run(num_samples: int, repeats: int, root: Path) -> dict[str, Any]:
    load_before = os.getloadavg()
    data = _cases.Datasets(root, num_samples).build()
    os.environ.pop("DATA_OPTIMIZER_GLOBAL_RANK", None)
    times: dict[str, dict[str, float]] = {}

    def read_case(name: str, library: str, kind: str, work: Callable[..., Any], *extra: Any) -> Any:
        seconds, seen = best_of(repeats, work, lambda: (library, data.read_dir(library, kind), *extra))
        times.setdefault(name, {})[library] = seconds
        return seen

    for kind in _cases.KINDS:
        for shuffle, order in ((False, "sequential"), (True, "shuffled")):
            for library in _cases.LIBRARIES:
                seen = read_case(f"{kind}/iterate/{order}", library, kind, _cases.iterate, shuffle)
                _cases.check_pass(seen, num_samples)
        for shuffle, order in ((False, "sequential"), (True, "shuffled")):
            for library in _cases.LIBRARIES:
                seen = read_case(f"{kind}/dataloader/{order}", library, kind, _cases.load, shuffle)
                _cases.check_pass(seen, num_samples)
        indices = _cases.random_indices(num_samples, kind)
        for library in _cases.LIBRARIES:
            seen = read_case(f"{kind}/random_access/{len(indices)}", library, kind, _cases.random_access, indices)
            _cases.check_random(seen, indices)
        for backend in ("asyncio", "trio"):
            name = f"{kind}/astream_{backend}/sequential"
            directory = data.path("litstream", kind)
            seconds, seen = best_of(repeats, _cases.astream_pass, lambda d=directory, b=backend: (d, b))
            _cases.check_pass(seen, num_samples)
            times[name] = {"litstream": seconds, "litdata": times[f"{kind}/iterate/sequential"]["litdata"]}
        data.drop_copies()

    for library in _cases.LIBRARIES:
        outputs: list[Path] = []

        def new_output(library: str = library, outputs: list[Path] = outputs) -> tuple[Any, ...]:
            outputs.append(root / f"optimize-{library}-{len(outputs)}")
            return library, outputs[-1], num_samples

        seconds, out = best_of(repeats, _cases.optimize_once, new_output)
        _cases.check_optimized(out, num_samples)
        times.setdefault("plain/optimize/2_workers", {})[library] = seconds

    cases = {
        name: {
            "litstream_s": round(pair["litstream"], 4),
            "litdata_s": round(pair["litdata"], 4),
            "ratio": round(pair["litdata"] / pair["litstream"], 2),
        }
        for name, pair in times.items()
    }
    return {
        "samples": num_samples,
        "repeats": repeats,
        "statistic": "best of repeats, seconds (time.perf_counter)",
        "ratio": "litdata_s / litstream_s (> 1: litstream is faster)",
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "versions": _versions(),
            "load_average_1min": {"start": round(load_before[0], 2), "end": round(os.getloadavg()[0], 2)},
        },
        "cases": cases,
    }


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in ("litstream", "litdata", "torch", "numpy", "anyio", "trio", "zstandard")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=_cases.NUM_SAMPLES, help="samples per dataset (20000)")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per case; the best is kept (3)")
    parser.add_argument("--write", action="store_true", help=f"also write the JSON to {RESULTS}")
    args = parser.parse_args(argv)
    if args.samples < 1 or args.repeats < 1:
        parser.error("--samples and --repeats must be >= 1")
    _cases.silence_known_warnings()
    for name in ("WORLD_SIZE", "RANK", "GLOBAL_RANK", "LOCAL_RANK", "NNODES", "MAX_CACHE_SIZE"):
        os.environ.pop(name, None)
    with tempfile.TemporaryDirectory(prefix="litstream-bench-") as tmp, contextlib.redirect_stdout(sys.stderr):
        result = run(args.samples, args.repeats, Path(tmp))
    text = json.dumps(result, indent=2)
    print(text)
    if args.write:
        RESULTS.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
