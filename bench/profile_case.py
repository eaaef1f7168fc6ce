"""Profile one litstream read configuration with cProfile (the evidence behind docs/performance.md).

    .venv/bin/python bench/profile_case.py DATASET_DIR [dataset|loader0|tokens] [--top 15]

``DATASET_DIR`` is a dataset written by ``optimize`` (``bench/run_all.py --workdir DIR`` keeps none:
write one with ``bench/e2e_case.py``'s optimize case); for ``tokens``, one written by
``bench/_e2e_tokens.py``'s ``write`` (read with ``TokensLoader(block_size=2048)``, as the tokens case does).
Prints the wall time of a plain pass, then the
functions with the most own time in a profiled pass.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from typing import Any

import litstream


def one_pass(path: str, mode: str) -> int:
    count = 0
    if mode in ("dataset", "tokens"):
        loader_of_items = litstream.TokensLoader(block_size=2048) if mode == "tokens" else None
        for _ in litstream.StreamingDataset(path, item_loader=loader_of_items):
            count += 1
        return count
    loader: Any = litstream.StreamingDataLoader(litstream.StreamingDataset(path), batch_size=256, num_workers=0)
    for batch in loader:
        count += len(batch["label"])
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("mode", nargs="?", default="dataset", choices=["dataset", "loader0", "tokens"])
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    start = time.perf_counter()
    count = one_pass(args.dataset, args.mode)
    print(f"plain pass: {count} items in {time.perf_counter() - start:.3f} s")
    profile = cProfile.Profile()
    profile.runcall(one_pass, args.dataset, args.mode)
    pstats.Stats(profile).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
