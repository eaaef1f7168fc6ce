"""What the pytest-benchmark pairs in ``bench/test_bench_read.py`` run (20k float32 samples, plain and zstd).

Each case is one function per library that does the timed work and returns what it saw, plus a cheap
check of that result. The sample function lives here, at module level, so LitData's worker processes
can import it.

Dataset: ``num_samples`` samples ``{"x": float32 (32, 32), "y": int}`` written by each library with
``chunk_bytes="8MB"`` (about 2,000 samples per chunk), once uncompressed ("plain") and once with
``compression="zstd"``. ``x[0, 0] == y`` in every sample, so a decoded sample can be checked cheaply.
"""

from __future__ import annotations

import random
import shutil
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np

import litstream

if TYPE_CHECKING:
    from pathlib import Path

NUM_SAMPLES = 20_000
CHUNK_BYTES = "8MB"
BATCH_SIZE = 256
LOADER_WORKERS = 2
OPTIMIZE_WORKERS = 2
RANDOM_READS = {"plain": 2_000, "zstd": 200}
KINDS = {"plain": None, "zstd": "zstd"}
LIBRARIES = ("litstream", "litdata")

# LitData warns on every chunk it closes ("An item was larger than the target chunk size") and torch warns
# when it wraps LitData's read-only NumPy arrays; neither is about the benchmark.
WARNING_FILTERS = (
    ("ignore", r"An item was larger than the target chunk size"),
    ("ignore", r"The given NumPy array is not writable"),
)


def silence_known_warnings() -> None:
    for action, message in WARNING_FILTERS:
        warnings.filterwarnings(action, message=message)


# -- data -----------------------------------------------------------------------------------------------


def make_sample(i: int) -> dict[str, Any]:
    """Sample ``i``: an image-like float32 (32, 32) array (256 grey levels) with ``x[0, 0] == i``."""
    rng = np.random.default_rng(i)
    x = rng.integers(0, 256, size=(32, 32), dtype=np.uint8).astype(np.float32) / np.float32(255.0)
    x[0, 0] = i
    return {"x": x, "y": i}


def litstream_optimize(output_dir: Path, num_samples: int, compression: str | None = None) -> None:
    litstream.optimize(
        make_sample,
        list(range(num_samples)),
        output_dir,
        chunk_bytes=CHUNK_BYTES,
        compression=compression,
        num_workers=OPTIMIZE_WORKERS,
        verbose=False,
    )


def litdata_optimize(output_dir: Path, num_samples: int, compression: str | None = None) -> None:
    import litdata

    # start_method="fork": LitData's default (spawn) fails on this machine with
    # "IndexError: list index out of range" in data_processor._loop; litstream forks by default too.
    litdata.optimize(
        fn=make_sample,
        inputs=list(range(num_samples)),
        output_dir=str(output_dir),
        chunk_bytes=CHUNK_BYTES,
        compression=compression,
        num_workers=OPTIMIZE_WORKERS,
        start_method="fork",
        verbose=False,
    )


OPTIMIZERS = {"litstream": litstream_optimize, "litdata": litdata_optimize}


@dataclass
class Datasets:
    """The pristine datasets of one run: ``path(library, kind)``; ``kind`` is ``"plain"`` or ``"zstd"``."""

    root: Path
    num_samples: int
    _copies: int = field(default=0)

    def path(self, library: str, kind: str) -> Path:
        return self.root / f"{library}-{kind}"

    def build(self) -> Datasets:
        for kind, compression in KINDS.items():
            for library in LIBRARIES:
                OPTIMIZERS[library](self.path(library, kind), self.num_samples, compression)
        return self

    def fresh_copy(self, library: str, kind: str) -> Path:
        """A private copy of a dataset (and removal of the previous one).

        LitData's reader writes into a local dataset directory: it decompresses each ``.zstd.bin`` chunk
        next to it and deletes the compressed file, so every LitData read gets its own copy (made outside
        the timed region).
        """
        self.drop_copies()
        self._copies += 1
        target = self.root / f"copy{self._copies}-{library}-{kind}"
        shutil.copytree(self.path(library, kind), target)
        return target

    def drop_copies(self) -> None:
        for old in self.root.glob("copy*"):
            shutil.rmtree(old, ignore_errors=True)

    def read_dir(self, library: str, kind: str) -> Path:
        """Where a timed read of ``library`` should read: LitData a fresh copy, litstream the original."""
        return self.fresh_copy(library, kind) if library == "litdata" else self.path(library, kind)


def random_indices(num_samples: int, kind: str) -> list[int]:
    return random.Random(0).sample(range(num_samples), min(RANDOM_READS[kind], num_samples))


# -- timed work -----------------------------------------------------------------------------------------


@dataclass
class Seen:
    """What a pass saw: sample count, sum of ``y``, and samples whose ``x[0, 0] != y``."""

    count: int = 0
    y_sum: int = 0
    bad: int = 0
    ys: set[int] = field(default_factory=set)


def make_dataset(library: str, input_dir: Path, *, shuffle: bool) -> Any:
    if library == "litstream":
        return litstream.StreamingDataset(input_dir, shuffle=shuffle)
    import litdata

    return litdata.StreamingDataset(str(input_dir), shuffle=shuffle)


def iterate(library: str, input_dir: Path, shuffle: bool) -> Seen:
    """One full pass of ``StreamingDataset`` in this process (num_workers=0, plain ``for``)."""
    seen = Seen()
    sample: Any = None
    for sample in make_dataset(library, input_dir, shuffle=shuffle):
        seen.count += 1
        seen.y_sum += sample["y"]
    if sample is not None and float(sample["x"][0, 0]) != sample["y"]:
        seen.bad += 1
    return seen


def load(library: str, input_dir: Path, shuffle: bool) -> Seen:
    """One full pass of the library's ``StreamingDataLoader(batch_size=256, num_workers=2)``."""
    dataset = make_dataset(library, input_dir, shuffle=shuffle)
    if library == "litstream":
        loader: Any = litstream.StreamingDataLoader(dataset, batch_size=BATCH_SIZE, num_workers=LOADER_WORKERS)
    else:
        import litdata

        loader = litdata.StreamingDataLoader(dataset, batch_size=BATCH_SIZE, num_workers=LOADER_WORKERS)
    seen = Seen()
    for batch in loader:
        y = batch["y"]
        seen.count += len(y)
        seen.y_sum += int(y.sum())
        seen.bad += int((batch["x"][:, 0, 0] != y).sum())
    return seen


def random_access(library: str, input_dir: Path, indices: list[int]) -> Seen:
    """``ds[i]`` for each of ``indices`` on a new ``StreamingDataset``."""
    dataset = make_dataset(library, input_dir, shuffle=False)
    seen = Seen()
    for i in indices:
        sample = dataset[i]
        seen.count += 1
        seen.ys.add(sample["y"])
        seen.bad += float(sample["x"][0, 0]) != sample["y"]
    return seen


def astream_pass(input_dir: Path, backend: str) -> Seen:
    """One full pass of ``litstream.astream`` (shuffle=False) on ``backend`` ("asyncio" or "trio")."""

    async def run() -> Seen:
        seen = Seen()
        sample: Any = None
        async for sample in litstream.astream(input_dir):
            seen.count += 1
            seen.y_sum += sample["y"]
        if sample is not None and float(sample["x"][0, 0]) != sample["y"]:
            seen.bad += 1
        return seen

    return anyio.run(run, backend=backend)


def optimize_once(library: str, output_dir: Path, num_samples: int) -> Path:
    """Write ``num_samples`` samples (uncompressed) into a new ``output_dir``; returns it."""
    OPTIMIZERS[library](output_dir, num_samples, None)
    return output_dir


# -- checks ---------------------------------------------------------------------------------------------


def check_pass(seen: Seen, num_samples: int) -> None:
    """A full pass saw every sample exactly once (count and sum of ``y``) and decoded them right."""
    assert seen.count == num_samples, f"saw {seen.count} samples, expected {num_samples}"
    assert seen.y_sum == num_samples * (num_samples - 1) // 2, "the pass did not see each sample once"
    assert seen.bad == 0, f"{seen.bad} samples have x[0, 0] != y"


def check_random(seen: Seen, indices: list[int]) -> None:
    assert seen.count == len(indices)
    assert len(seen.ys) == len(indices), "distinct indices returned repeated samples"
    assert seen.bad == 0, f"{seen.bad} samples have x[0, 0] != y"


def check_optimized(output_dir: Path, num_samples: int) -> None:
    """The written index lists ``num_samples`` items (read from ``index.json``, not timed)."""
    import json

    index = json.loads((output_dir / "index.json").read_text())
    total = sum(chunk["chunk_size"] for chunk in index["chunks"])
    assert total == num_samples, f"index.json lists {total} items, expected {num_samples}"
