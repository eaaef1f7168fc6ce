"""The Arrow family: reading LitData 0.2.76's default output for dict samples of scalars (Arrow chunks).

    .venv/bin/python bench/arrow_bench.py [--rows 200000] [--repeats 3] [--out bench/results]

Data (``bench/_e2e_arrow.py``): ``--rows`` text-classification rows written four ways, each by one
``optimize`` call: LitData's default (Arrow chunks, what LitData 0.2.76 picks for these samples),
litstream's default (Arrow chunks too since issue 30, where LitData picks them), litstream's
``chunk_format="pytree"`` and ``chunk_format="arrow"``. Rows:

* ``arrow_litdata_default``: both libraries iterate LitData's Arrow output (the same files).
* ``arrow_litstream_default``, ``arrow_litstream_pytree``, ``arrow_litstream_arrow``: litstream iterates
  its own output of the same rows, against LitData on its Arrow output; ``dataset_bytes`` gives each
  layout's size.

Every case runs in a fresh interpreter (``bench/e2e_case.py``, case ``rows``), interleaved, best of
``--repeats``; checksums of what was read must be equal. ``bench/run_all.py`` runs this family too.
Writes ``arrow.json`` and ``arrow.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from run_all import LIBS, PY, log, paired  # noqa: E402

LAYOUTS = ("litdata", "litstream", "litstream-pytree", "litstream-arrow")


def make_data(work: Path, rows: int) -> dict[str, Path]:
    """The four datasets of the family (module docstring), written in fresh interpreters."""
    out = {}
    for layout in LAYOUTS:
        target = work / f"rows-{layout}"
        script = f"import sys; sys.path.insert(0, {str(BENCH)!r}); from _e2e_arrow import write; " \
                 f"write({layout!r}, {str(target)!r}, {rows})"  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(BENCH.parent / "src")}
        subprocess.run([PY, "-c", script], check=True, capture_output=True, text=True, env=env)
        out[layout] = target
    return out


def run_family(work: Path, rows: int, repeats: int) -> dict[str, dict[str, dict[str, Any]]]:
    """``{library: {config: record}}`` for the family's configurations."""
    log(f"arrow: {rows:,} dict rows; LitData's default layout (Arrow chunks) vs litstream's")
    data = make_data(work, rows)
    results: dict[str, dict[str, dict[str, Any]]] = {lib: {} for lib in LIBS}
    sources = {
        "arrow_litdata_default": {"litstream": data["litdata"], "litdata": data["litdata"]},
        "arrow_litstream_default": {"litstream": data["litstream"], "litdata": data["litdata"]},
        "arrow_litstream_pytree": {"litstream": data["litstream-pytree"], "litdata": data["litdata"]},
        "arrow_litstream_arrow": {"litstream": data["litstream-arrow"], "litdata": data["litdata"]},
    }
    for config, where in sources.items():
        specs = {lib: {"library": lib, "case": "rows", "config": config, "data": str(where[lib])} for lib in LIBS}
        for lib, record in paired(specs, repeats).items():
            results[lib][config] = record
    return results


def table(results: dict[str, dict[str, dict[str, Any]]]) -> str:
    lines = [
        "| configuration | litstream reads | items/s | LitData reads | items/s | ratio | bytes/item "
        "(litstream's data / LitData's) | checksums equal |",
        "|---|---|---:|---|---:|---:|---:|:---:|",
    ]
    read = {"arrow_litdata_default": "LitData's Arrow", "arrow_litstream_default": "its default layout",
            "arrow_litstream_pytree": "its pytree layout", "arrow_litstream_arrow": "its Arrow chunks"}  # fmt: skip
    for config, what in read.items():
        a, b = results["litstream"].get(config, {}), results["litdata"].get(config, {})
        if "throughput" not in a or "throughput" not in b:
            lines.append(f"| {config} | not run: {(a.get('error') or b.get('error') or '')[-120:]} |||||||")
            continue
        per = f"{a['dataset_bytes'] / a['items']:.0f} / {b['dataset_bytes'] / b['items']:.0f}"
        lines.append(
            f"| {config} | {what} | {a['throughput']:,.0f} | LitData's Arrow | {b['throughput']:,.0f} | "
            f"{a['throughput'] / b['throughput']:.2f}x | {per} | {'✓' if a['checksum'] == b['checksum'] else '✗'} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="litstream vs LitData on LitData's Arrow chunks")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=BENCH / "results")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="litstream-arrow-bench-"))
    load_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    try:
        results = run_family(work, args.rows, args.repeats)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = table(results)
    meta = {"started": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "rows": args.rows, "repeats": args.repeats,
            "load_start": load_start, "load_end": " ".join(f"{x:.2f}" for x in os.getloadavg())}  # fmt: skip
    (args.out / "arrow.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    (args.out / "arrow.md").write_text(f"{text}\n\nLoad average {meta['load_start']} → {meta['load_end']}.\n")
    print(text)
    ours, theirs = results["litstream"], results["litdata"]
    if any(ours[c].get("checksum") != theirs[c].get("checksum") for c in theirs):
        log("CHECKSUM MISMATCH")
        raise SystemExit(1)


if __name__ == "__main__":
    main()
