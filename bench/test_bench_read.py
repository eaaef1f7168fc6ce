"""litstream vs LitData, side by side on the same data (pytest-benchmark; not part of the test suite).

Every benchmark group holds one litstream/LitData pair (plus litstream's ``astream`` next to the
single-process passes). Each timed call is checked afterwards: a full pass must see all samples once,
random access must return the requested distinct samples, optimize must index every sample.

LitData reads a fresh private copy of its dataset in every round (copied outside the timed region),
because its reader decompresses chunks in place and deletes the compressed files.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Any

import pytest
from _cases import (
    LIBRARIES,
    NUM_SAMPLES,
    OPTIMIZE_WORKERS,
    Datasets,
    astream_pass,
    check_optimized,
    check_pass,
    check_random,
    iterate,
    load,
    optimize_once,
    random_access,
    random_indices,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from pytest_benchmark.fixture import BenchmarkFixture

pytestmark = [
    # LitData's item loader drops open chunk files; torch warns when batching LitData's read-only arrays.
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore:The given NumPy array is not writable:UserWarning"),
    pytest.mark.filterwarnings("ignore:An item was larger than the target chunk size:UserWarning"),
]

ROUNDS = 3
KIND_PARAMS = ["plain", "zstd"]


def _pedantic(
    benchmark: BenchmarkFixture,
    datasets: Datasets,
    library: str,
    kind: str,
    fn: Callable[..., Any],
    *extra: Any,
    rounds: int = ROUNDS,
) -> Any:
    benchmark.extra_info.update(library=library, dataset=kind, samples=datasets.num_samples)

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (library, datasets.read_dir(library, kind), *extra), {}

    return benchmark.pedantic(fn, setup=setup, rounds=rounds, iterations=1)


@pytest.mark.parametrize("library", LIBRARIES)
@pytest.mark.parametrize("shuffle", [False, True], ids=["sequential", "shuffled"])
@pytest.mark.parametrize("kind", KIND_PARAMS)
def test_full_pass_in_process(
    benchmark: BenchmarkFixture, datasets: Datasets, kind: str, shuffle: bool, library: str
) -> None:
    """``for sample in StreamingDataset(d, shuffle=...)`` in this process (num_workers=0)."""
    benchmark.group = f"{kind}: full pass, 1 process, shuffle={shuffle}"
    seen = _pedantic(benchmark, datasets, library, kind, iterate, shuffle)
    check_pass(seen, datasets.num_samples)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("kind", KIND_PARAMS)
def test_astream_full_pass(benchmark: BenchmarkFixture, datasets: Datasets, kind: str, backend: str) -> None:
    """``async for sample in litstream.astream(d)`` (shuffle=False), next to the sync passes above."""
    benchmark.group = f"{kind}: full pass, 1 process, shuffle=False"
    benchmark.extra_info.update(library="litstream", dataset=kind, backend=backend)
    seen = benchmark.pedantic(
        astream_pass, args=(datasets.path("litstream", kind), backend), rounds=ROUNDS, iterations=1
    )
    check_pass(seen, datasets.num_samples)


@pytest.mark.parametrize("library", LIBRARIES)
@pytest.mark.parametrize("shuffle", [False, True], ids=["sequential", "shuffled"])
@pytest.mark.parametrize("kind", KIND_PARAMS)
def test_full_pass_dataloader(
    benchmark: BenchmarkFixture, datasets: Datasets, kind: str, shuffle: bool, library: str
) -> None:
    """``StreamingDataLoader(StreamingDataset(d, shuffle=...), batch_size=256, num_workers=2)``."""
    benchmark.group = f"{kind}: full pass, DataLoader(batch_size=256, num_workers=2), shuffle={shuffle}"
    seen = _pedantic(benchmark, datasets, library, kind, load, shuffle)
    check_pass(seen, datasets.num_samples)


@pytest.mark.parametrize("library", LIBRARIES)
@pytest.mark.parametrize("kind", KIND_PARAMS)
def test_random_access(benchmark: BenchmarkFixture, datasets: Datasets, kind: str, library: str) -> None:
    """``ds[i]`` for random distinct ``i`` (2,000 on plain, 200 on zstd) on a new dataset object."""
    indices = random_indices(datasets.num_samples, kind)
    benchmark.group = f"{kind}: random access ds[i], {len(indices)} reads"
    seen = _pedantic(benchmark, datasets, library, kind, random_access, indices, rounds=2)
    check_random(seen, indices)


@pytest.mark.parametrize("library", LIBRARIES)
def test_optimize(benchmark: BenchmarkFixture, datasets: Datasets, library: str) -> None:
    """``optimize`` of ``NUM_SAMPLES`` samples, chunk_bytes="8MB", uncompressed, num_workers=2."""
    benchmark.group = f"optimize: {NUM_SAMPLES} samples, num_workers={OPTIMIZE_WORKERS}"
    benchmark.extra_info.update(library=library, samples=datasets.num_samples)
    outputs = []

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        out = datasets.root / f"optimize-{library}-{len(outputs)}"
        outputs.append(out)
        return (library, out, datasets.num_samples), {}

    try:
        out = benchmark.pedantic(optimize_once, setup=setup, rounds=ROUNDS, iterations=1)
        check_optimized(out, datasets.num_samples)
    finally:
        for out in outputs:
            shutil.rmtree(out, ignore_errors=True)
