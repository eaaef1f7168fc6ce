# ruff: noqa
"""Writes the project's dataset (LitData's processing API, imported from its submodule)."""

import numpy as np
from litdata.processing.functions import optimize  # where LitData's docs import it from


def make_sample(index):
    rng = np.random.default_rng(index)
    return {"index": index, "name": f"item-{index:03d}", "features": rng.integers(0, 100, size=3)}


def prepare(output_dir, *, workers=1):
    optimize(
        fn=make_sample,
        inputs=list(range(45)),
        output_dir=output_dir,
        chunk_size=7,  # several chunks, so that shuffling has something to do
        num_workers=workers,
    )
