"""Lengths, drop_last and rank/worker sharding (reported failures B01-B04, B06, B07; spec read.md §3.1, §3.6, §4).

Ranks are simulated with ``WORLD_SIZE``/``GLOBAL_RANK`` (read when iteration or ``len`` happens),
one loader per rank in sequence; one test runs two real ``torch.distributed`` (gloo) processes.

DataLoader workers are simulated in-process where a grid would be too slow: the dataset is pickled
(as torch hands a copy to each worker) and torch's own worker info (what ``get_worker_info()`` returns in a
worker) is set to worker ``w`` of ``K``; each worker's items are then batched as torch does for an ``IterableDataset``
(``B`` at a time, a short batch at the end of each worker). ``test_simulated_workers_match_real_ones``
checks that this simulation reproduces real workers item for item.

Real worker loaders use the ``fork`` start method explicitly (torch's default, and cheap: once another test
in the session has used obstore, the loader would otherwise pick ``forkserver``), but they never fork the
pytest process itself, which has threads (xdist's, in-process servers') whose locks a child could inherit:
a loader with workers is iterated in a clean helper process (spawned once per module, single-threaded),
with this process's rank variables, and its batches come back here (``_iterate_cleanly``).

Expected values (spec §3.1/§3.6), with ``N`` items, batch size ``B``, ``W`` ranks:
``per_rank = (N // B) // W`` whole batches on every rank; with ``drop_last=False`` the last rank also
gets every leftover item ``left = N - W * B * per_rank`` (one worker), i.e. ``ceil(left / B)`` more
batches. ``drop_last=None`` means ``True`` when ``W > 1``.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import pickle
import socket
import subprocess
import sys
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import torch
import torch.utils.data._utils.worker as torch_worker
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.utils.data import get_worker_info

from litstream import StreamingDataLoader, StreamingDataset, optimize

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

HERE = Path(__file__).resolve().parent


# -- helpers -----------------------------------------------------------------------------------------


def write_ints(d: Path, n: int, chunk_size: int) -> Path:
    optimize(fn=_identity, inputs=list(range(n)), output_dir=d, chunk_size=chunk_size, num_workers=1, verbose=False)
    return d


def _identity(i: int) -> int:
    return i


def tag_worker(x: int) -> tuple[int, int]:
    """Transform (runs in the DataLoader worker): the item and the id of the worker that served it."""
    info = get_worker_info()
    return x, (0 if info is None else info.id)


@pytest.fixture(scope="module")
def ints(tmp_path_factory: pytest.TempPathFactory) -> Callable[[int, int], Path]:
    """``ints(n, chunk_size)``: a directory holding the integers ``0..n-1`` (built once per module)."""
    cache: dict[tuple[int, int], Path] = {}

    def make(n: int, chunk_size: int) -> Path:
        key = (n, chunk_size)
        if key not in cache:
            cache[key] = write_ints(tmp_path_factory.mktemp(f"ints{n}_{chunk_size}"), n, chunk_size)
        return cache[key]

    return make


def make_loader(ds: StreamingDataset, batch_size: int = 1, num_workers: int = 0, **kwargs: Any) -> StreamingDataLoader:
    if num_workers > 0:
        kwargs.setdefault("multiprocessing_context", "fork")
    return StreamingDataLoader(ds, batch_size=batch_size, num_workers=num_workers, **kwargs)


def as_ints(value: Any) -> list[int]:
    if isinstance(value, torch.Tensor):
        return [int(v) for v in value.reshape(-1).tolist()]
    return [int(v) for v in value]


_HELPER: list[ProcessPoolExecutor] = []
_RANK_VARIABLES = ("WORLD_SIZE", "GLOBAL_RANK", "RANK", "LOCAL_RANK", "NNODES", "NODE_RANK")


@pytest.fixture(scope="module", autouse=True)
def _clean_helper() -> Iterator[None]:
    """The helper process of :func:`_iterate_cleanly`, shut down with the module."""
    yield
    while _HELPER:
        _HELPER.pop().shutdown()


def _plain(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _iterate(loader: StreamingDataLoader, env: dict[str, str]) -> tuple[list[Any], StreamingDataLoader]:
    """In the helper: one epoch of ``loader`` with the caller's rank variables; the batches and the loader after."""
    for name in _RANK_VARIABLES:
        os.environ.pop(name, None)
    os.environ.update(env)
    return [_plain(batch) for batch in loader], loader


def _iterate_cleanly(loader: StreamingDataLoader) -> list[Any]:
    """One epoch of ``loader``: here without workers; with workers in the clean helper process (which forks
    them), after which this loader and its dataset take the helper's state (epoch counters, resume state)."""
    if loader.num_workers == 0:
        return list(loader)
    if not _HELPER:
        _HELPER.append(ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")))
    env = {name: os.environ[name] for name in _RANK_VARIABLES if name in os.environ}
    batches, after = _HELPER[0].submit(_iterate, loader, env).result(timeout=600)
    loader.__dict__.update({k: v for k, v in after.__dict__.items() if k != "dataset"})
    loader.dataset.__dict__.update(after.dataset.__dict__)
    return batches


def run_plain(loader: StreamingDataLoader) -> list[list[int]]:
    """One epoch: every batch as a list of ints."""
    return [as_ints(batch) for batch in _iterate_cleanly(loader)]


def run_tagged(loader: StreamingDataLoader) -> tuple[list[list[int]], dict[int, list[int]]]:
    """One epoch over a dataset built with ``transform=tag_worker``: the batches and each worker's items."""
    batches: list[list[int]] = []
    per_worker: dict[int, list[int]] = {}
    for values, workers in _iterate_cleanly(loader):
        items, ids = as_ints(values), as_ints(workers)
        assert len(set(ids)) == 1, f"a batch mixes workers {ids}"  # torch batches inside one worker
        batches.append(items)
        per_worker.setdefault(ids[0], []).extend(items)
    return batches, per_worker


def set_rank(mp: pytest.MonkeyPatch, world: int, rank: int) -> None:
    mp.setenv("WORLD_SIZE", str(world))
    mp.setenv("GLOBAL_RANK", str(rank))


def simulate_workers(loader: StreamingDataLoader, mp: pytest.MonkeyPatch, epoch: int = 1) -> list[list[int]]:
    """Items each worker of a fresh ``loader`` serves in its epoch ``epoch``, computed in this process.

    Mirrors ``StreamingDataLoader.__iter__`` + torch: every worker gets a pickled copy of the
    configured dataset (epoch set by the loader) and sees itself as worker ``w`` of ``K`` through
    ``detect_worker``. ``num_workers=0`` iterates the real loader ``epoch`` times instead.
    """
    ds: StreamingDataset = loader.dataset  # type: ignore[assignment]
    k = loader.num_workers
    if k == 0:
        for _ in range(epoch):
            items = [v for batch in run_plain(loader) for v in batch]
        return [items]
    ds.set_epoch(epoch)
    blob = pickle.dumps(ds)
    out = []
    for w in range(k):
        copy = pickle.loads(blob)
        mp.setattr(torch_worker, "_worker_info", torch_worker.WorkerInfo(id=w, num_workers=k, seed=w, dataset=copy))
        out.append([int(v) for v in copy])
    return out


def batch_count(per_worker: list[list[int]], batch_size: int) -> int:
    """Batches torch makes from an IterableDataset's worker streams (a short batch per worker end)."""
    return sum(math.ceil(len(items) / batch_size) for items in per_worker)


def effective_drop(drop_last: bool | None, world: int) -> bool:
    return world > 1 if drop_last is None else drop_last


def expected_items(n: int, b: int, world: int, rank: int, drop: bool) -> int:
    per = b * ((n // b) // world)
    if not drop and rank == world - 1:
        return per + (n - per * world)
    return per


def expected_batches(n: int, b: int, world: int, rank: int, drop: bool) -> int:
    per_rank = (n // b) // world
    if not drop and rank == world - 1:
        return per_rank + math.ceil((n - b * per_rank * world) / b)
    return per_rank


# -- B01: len(ds) stays right after len(loader) ----------------------------------------------------


@pytest.mark.parametrize("num_workers", [0, 1, 3])
def test_b01_len_stable_after_loader_len(ints: Callable[[int, int], Path], num_workers: int) -> None:
    ds = StreamingDataset(ints(1000, 100), shuffle=True)
    a = len(ds)
    loader = make_loader(ds, num_workers=num_workers)
    b = len(loader)
    c = len(ds)
    assert (a, b, c) == (1000, 1000, 1000)
    assert ds.get_len(num_workers, 1) == 1000
    assert ds.get_len(0, 1) == 1000
    batches = run_plain(loader)
    assert len(batches) == 1000
    assert all(len(batch) == 1 for batch in batches)
    assert sorted(v for batch in batches for v in batch) == list(range(1000))
    assert (len(ds), len(loader)) == (1000, 1000)


# -- B02: multi-worker item count and len(loader) == real batch count -----------------------------


@pytest.mark.parametrize("num_workers", [0, 1, 2, 3, 4])
def test_b02_reported_trigger(ints: Callable[[int, int], Path], num_workers: int) -> None:
    ds = StreamingDataset(ints(102, 10), transform=tag_worker)
    loader = make_loader(ds, batch_size=4, num_workers=num_workers, drop_last=False)
    announced = len(loader)
    batches, per_worker = run_tagged(loader)
    assert announced == len(batches) == 26  # 25 full batches on the workers + one batch of 2
    assert sorted(v for batch in batches for v in batch) == list(range(102))
    assert all(1 <= len(batch) <= 4 for batch in batches)
    assert sorted(len(batch) for batch in batches) == [2] + [4] * 25
    lengths = ds.worker_lengths(num_workers, 4)
    assert [len(per_worker.get(w, [])) for w in range(max(num_workers, 1))] == lengths
    assert sum(lengths) == len(ds) == 102


B02_GRID = [
    (n, chunk, k, b, drop)
    for n, chunk in [(17, 3), (50, 10)]
    for k in [0, 1, 2, 3]
    for b in [3, 8]
    for drop in [False, True]
]


@pytest.mark.parametrize(("n", "chunk", "num_workers", "batch_size", "drop_last"), B02_GRID)
def test_b02_grid(
    ints: Callable[[int, int], Path], n: int, chunk: int, num_workers: int, batch_size: int, drop_last: bool
) -> None:
    ds = StreamingDataset(ints(n, chunk), transform=tag_worker)
    loader = make_loader(ds, batch_size=batch_size, num_workers=num_workers, drop_last=drop_last)
    announced = len(loader)
    batches, per_worker = run_tagged(loader)
    items = [v for batch in batches for v in batch]

    full = n // batch_size
    expected_count = full if drop_last else math.ceil(n / batch_size)
    assert announced == len(batches) == expected_count
    assert len(items) == len(set(items))
    if drop_last:
        assert len(items) == len(ds) == full * batch_size
        assert all(len(batch) == batch_size for batch in batches)
        assert set(items) <= set(range(n))
    else:
        assert sorted(items) == list(range(n))
        assert len(ds) == n
        assert all(1 <= len(batch) <= batch_size for batch in batches)
        assert sum(len(batch) < batch_size for batch in batches) == (1 if n % batch_size else 0)
    lengths = ds.worker_lengths(num_workers, batch_size)
    assert [len(per_worker.get(w, [])) for w in range(max(num_workers, 1))] == lengths
    assert sorted(per_worker) == [w for w, size in enumerate(lengths) if size]


# -- B03: drop_last=True never gives a short batch -----------------------------------------------


def test_b03_drop_last_after_touching_len(ints: Callable[[int, int], Path]) -> None:
    ds = StreamingDataset(ints(103, 10), shuffle=False)
    assert len(ds) == 103
    loader = make_loader(ds, batch_size=8, num_workers=3, drop_last=True)
    n = len(loader)
    batches = run_plain(loader)
    assert n == len(batches) == 12
    assert [len(batch) for batch in batches] == [8] * 12
    items = [v for batch in batches for v in batch]
    assert len(set(items)) == 96
    assert set(items) <= set(range(103))
    assert len(ds) == 96
    assert ds.worker_lengths(3, 8) == [32, 32, 32]


@pytest.mark.parametrize("dataset_drop_last", [None, False])
def test_b03_small_no_workers(ints: Callable[[int, int], Path], dataset_drop_last: bool | None) -> None:
    ds = StreamingDataset(ints(7, 3), drop_last=dataset_drop_last)
    loader = make_loader(ds, batch_size=2, num_workers=0, drop_last=True)
    assert len(loader) == 3
    batches = run_plain(loader)
    assert batches == [[0, 1], [2, 3], [4, 5]]
    assert len(ds) == 6


# -- B07: fewer items than partitions -------------------------------------------------------------


def test_b07_two_items_four_workers(ints: Callable[[int, int], Path]) -> None:
    ds = StreamingDataset(ints(2, 1), shuffle=True)
    loader = make_loader(ds, batch_size=1, num_workers=4)
    assert len(ds) == 2
    assert len(loader) == 2
    assert ds.worker_lengths(4, 1) == [1, 1, 0, 0]
    batches = run_plain(loader)
    assert sorted(batches) == [[0], [1]]


def test_b07_three_items_eight_workers(ints: Callable[[int, int], Path]) -> None:
    ds = StreamingDataset(ints(3, 1), shuffle=True)
    loader = make_loader(ds, batch_size=2, num_workers=8, drop_last=False)
    assert len(ds) == 3
    assert len(loader) == 2
    assert ds.worker_lengths(8, 2) == [2, 1, 0, 0, 0, 0, 0, 0]
    batches = run_plain(loader)
    assert sorted(len(batch) for batch in batches) == [1, 2]
    assert sorted(v for batch in batches for v in batch) == [0, 1, 2]


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize(("n", "chunk", "world", "num_workers", "batch_size"), [(3, 1, 4, 3, 1), (5, 2, 3, 2, 2)])
def test_b07_fewer_items_than_rank_worker_slots(
    ints: Callable[[int, int], Path],
    monkeypatch: pytest.MonkeyPatch,
    n: int,
    chunk: int,
    world: int,
    num_workers: int,
    batch_size: int,
    drop_last: bool,
) -> None:
    seen: Counter[int] = Counter()
    for rank in range(world):
        with monkeypatch.context() as mp:
            set_rank(mp, world, rank)
            ds = StreamingDataset(ints(n, chunk), shuffle=True)
            loader = make_loader(ds, batch_size=batch_size, num_workers=num_workers, drop_last=drop_last)
            per_worker = simulate_workers(loader, mp)
            assert (
                len(loader)
                == batch_count(per_worker, batch_size)
                == expected_batches(n, batch_size, world, rank, drop_last)
            )
            assert len(ds) == sum(map(len, per_worker)) == expected_items(n, batch_size, world, rank, drop_last)
        seen.update(v for items in per_worker for v in items)
    assert set(seen) <= set(range(n))
    assert all(count == 1 for count in seen.values())
    total = batch_size * ((n // batch_size) // world) * world if drop_last else n
    assert sum(seen.values()) == total


# -- B06: split once across ranks and workers, never twice -----------------------------------------


def test_b06_reported_trigger(ints: Callable[[int, int], Path], monkeypatch: pytest.MonkeyPatch) -> None:
    got: list[list[int]] = []
    for rank in range(2):
        with monkeypatch.context() as mp:
            set_rank(mp, 2, rank)
            ds = StreamingDataset(ints(40, 5), transform=tag_worker)
            loader = make_loader(ds, batch_size=1, num_workers=2)
            assert len(loader) == 20
            batches, per_worker = run_tagged(loader)
        assert sorted(per_worker) == [0, 1]
        assert len(per_worker[0]) == len(per_worker[1]) == 10
        assert not set(per_worker[0]) & set(per_worker[1])
        got.append([v for batch in batches for v in batch])
    assert len(got[0]) == len(got[1]) == 20
    assert not set(got[0]) & set(got[1])
    assert sorted(got[0] + got[1]) == list(range(40))


@pytest.mark.parametrize(("world", "num_workers"), [(3, 2), (2, 3)])
def test_b06_every_item_once_over_ranks_and_workers(
    ints: Callable[[int, int], Path], monkeypatch: pytest.MonkeyPatch, world: int, num_workers: int
) -> None:
    seen: Counter[int] = Counter()
    for rank in range(world):
        with monkeypatch.context() as mp:
            set_rank(mp, world, rank)
            ds = StreamingDataset(ints(40, 5), shuffle=True, transform=tag_worker)
            loader = make_loader(ds, batch_size=3, num_workers=num_workers, drop_last=False)
            announced = len(loader)
            batches, per_worker = run_tagged(loader)
            lengths = ds.worker_lengths(num_workers, 3)
        assert announced == len(batches) == expected_batches(40, 3, world, rank, drop=False)
        assert [len(per_worker.get(w, [])) for w in range(num_workers)] == lengths
        seen.update(v for batch in batches for v in batch)
    assert sorted(seen.elements()) == list(range(40))


def test_second_epoch_reshuffles_and_keeps_lengths(
    ints: Callable[[int, int], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Same loaders iterated twice: the shuffled epoch-2 plan still covers every item once and len()
    # does not move (spec §4.2: the loader advances the dataset's epoch).
    epochs: list[list[int]] = [[], []]
    for rank in range(2):
        with monkeypatch.context() as mp:
            set_rank(mp, 2, rank)
            ds = StreamingDataset(ints(40, 5), shuffle=True)
            loader = make_loader(ds, batch_size=3, num_workers=2, drop_last=False)
            for epoch in range(2):
                batches = run_plain(loader)
                assert len(loader) == len(batches) == expected_batches(40, 3, 2, rank, drop=False)
                epochs[epoch] += [v for batch in batches for v in batch]
            assert loader.current_epoch == 2
    assert sorted(epochs[0]) == sorted(epochs[1]) == list(range(40))
    assert epochs[0] != epochs[1]


# -- B04: every rank gets the same number of batches ------------------------------------------------

B04_SIZES = [(3, 2), (23, 5), (64, 5)]


@pytest.mark.parametrize("num_workers", [0, 1, 2, 3])
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_b04_equal_batches_across_ranks(
    ints: Callable[[int, int], Path], monkeypatch: pytest.MonkeyPatch, world: int, num_workers: int
) -> None:
    for n, chunk in B04_SIZES:
        d = ints(n, chunk)
        for b in range(1, 6):
            for drop_last in (None, False):
                drop = effective_drop(drop_last, world)
                counts, announced, lengths = [], [], []
                seen: Counter[int] = Counter()
                for rank in range(world):
                    with monkeypatch.context() as mp:
                        set_rank(mp, world, rank)
                        ds = StreamingDataset(d, shuffle=(b % 2 == 0), drop_last=drop_last)
                        loader = StreamingDataLoader(ds, batch_size=b, num_workers=num_workers)
                        announced.append(len(loader))
                        lengths.append(len(ds))
                        per_worker = simulate_workers(loader, mp)
                    counts.append(batch_count(per_worker, b))
                    if drop:
                        assert all(len(items) % b == 0 for items in per_worker), (n, b, rank, per_worker)
                    seen.update(v for items in per_worker for v in items)
                case = (n, b, drop_last)
                assert announced == counts, case
                assert counts == [expected_batches(n, b, world, r, drop) for r in range(world)], case
                assert lengths == [expected_items(n, b, world, r, drop) for r in range(world)], case
                assert all(c == 1 for c in seen.values()), case
                if drop:
                    assert len(set(counts)) == 1, case  # the DDP-hang invariant
                    assert sum(seen.values()) == b * ((n // b) // world) * world, case
                else:
                    # LitData's rule, kept: every leftover item goes to one worker of the last rank, so
                    # that rank may run ceil(left / B) batches more than the others.
                    assert sorted(seen) == list(range(n)), case


@pytest.mark.parametrize("shuffle", [False, True])
def test_b04_reported_trigger_real_workers(
    ints: Callable[[int, int], Path], monkeypatch: pytest.MonkeyPatch, shuffle: bool
) -> None:
    # TokensLoader is not supported yet; a single 101-item chunk plays the variable-length token array.
    counts, announced, seen = [], [], []
    for rank in range(4):
        with monkeypatch.context() as mp:
            set_rank(mp, 4, rank)
            ds = StreamingDataset(ints(101, 101), shuffle=shuffle, drop_last=True)
            loader = make_loader(ds, batch_size=2, num_workers=1, drop_last=True)
            announced.append(len(loader))
            batches = run_plain(loader)
        counts.append(len(batches))
        assert all(len(batch) == 2 for batch in batches)
        seen.append({v for batch in batches for v in batch})
    assert counts == announced == [12, 12, 12, 12]
    assert sum(map(len, seen)) == len(set().union(*seen)) == 96


def test_b04_drop_last_false_last_rank_takes_leftovers(
    ints: Callable[[int, int], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 50 items, B=3, W=3: 16 full batches -> 5 per rank, 5 items left (one full batch and 2 items)
    # all on the last rank's worker (rem % K) = (5 % 2) = 1.
    counts, announced, worker_items = [], [], []
    seen: list[int] = []
    for rank in range(3):
        with monkeypatch.context() as mp:
            set_rank(mp, 3, rank)
            ds = StreamingDataset(ints(50, 7), transform=tag_worker)
            loader = make_loader(ds, batch_size=3, num_workers=2, drop_last=False)
            announced.append(len(loader))
            batches, per_worker = run_tagged(loader)
        counts.append(len(batches))
        worker_items.append([len(per_worker.get(w, [])) for w in range(2)])
        seen += [v for batch in batches for v in batch]
    assert counts == announced == [5, 5, 7]
    assert worker_items == [[9, 6], [9, 6], [9, 11]]
    assert sorted(seen) == list(range(50))


# -- the in-process worker simulation matches real workers ---------------------------------------


@pytest.mark.parametrize(
    ("n", "chunk", "world", "rank", "num_workers", "batch_size", "drop_last"),
    [(50, 7, 2, 1, 3, 4, False), (23, 5, 3, 2, 2, 2, True)],
)
def test_simulated_workers_match_real_ones(
    ints: Callable[[int, int], Path],
    monkeypatch: pytest.MonkeyPatch,
    n: int,
    chunk: int,
    world: int,
    rank: int,
    num_workers: int,
    batch_size: int,
    drop_last: bool,
) -> None:
    set_rank(monkeypatch, world, rank)
    real_ds = StreamingDataset(ints(n, chunk), shuffle=True, seed=7, transform=tag_worker)
    _, real = run_tagged(make_loader(real_ds, batch_size=batch_size, num_workers=num_workers, drop_last=drop_last))
    with monkeypatch.context() as mp:
        ds = StreamingDataset(ints(n, chunk), shuffle=True, seed=7)
        simulated = simulate_workers(make_loader(ds, batch_size, num_workers, drop_last=drop_last), mp)
    assert [real.get(w, []) for w in range(num_workers)] == simulated
    assert any(simulated)


# -- property: every item once per epoch over ranks x workers; len(loader) == real batches ---------


@settings(
    max_examples=30,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    n=st.integers(1, 60),
    chunk=st.integers(1, 16),
    world=st.integers(1, 4),
    num_workers=st.integers(0, 3),
    batch_size=st.integers(1, 6),
    drop_last=st.sampled_from([None, False, True]),
    shuffle=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
    epoch=st.integers(1, 3),
)
def test_property_each_item_once_and_len_matches(
    ints: Callable[[int, int], Path],
    n: int,
    chunk: int,
    world: int,
    num_workers: int,
    batch_size: int,
    drop_last: bool | None,
    shuffle: bool,
    seed: int,
    epoch: int,
) -> None:
    d = ints(n, chunk)
    drop = effective_drop(drop_last, world)
    seen: Counter[int] = Counter()
    for rank in range(world):
        with pytest.MonkeyPatch.context() as mp:
            set_rank(mp, world, rank)
            ds = StreamingDataset(d, shuffle=shuffle, seed=seed, drop_last=drop_last)
            loader = StreamingDataLoader(ds, batch_size=batch_size, num_workers=num_workers)
            announced = len(loader)
            per_worker = simulate_workers(loader, mp, epoch)
            lengths = ds.worker_lengths(num_workers, batch_size)
            rank_len = len(ds)
        assert [len(items) for items in per_worker] == lengths
        assert announced == batch_count(per_worker, batch_size) == expected_batches(n, batch_size, world, rank, drop)
        assert rank_len == sum(lengths) == expected_items(n, batch_size, world, rank, drop)
        if drop:
            assert all(len(items) % batch_size == 0 for items in per_worker)
        seen.update(v for items in per_worker for v in items)
    assert set(seen) <= set(range(n))
    assert all(count == 1 for count in seen.values())
    assert sum(seen.values()) == (batch_size * ((n // batch_size) // world) * world if drop else n)


# -- two real torch.distributed processes (gloo) --------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _expected_rank_items(d: Path, monkeypatch: pytest.MonkeyPatch, world: int, rank: int) -> list[int]:
    with monkeypatch.context() as mp:
        set_rank(mp, world, rank)
        ds = StreamingDataset(d, shuffle=True)
        return simulate_workers(StreamingDataLoader(ds, batch_size=4, num_workers=1), mp)[0]


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    "start_method",
    ["fork", "spawn", "forkserver"],
)
def test_ddp_two_processes_gloo(
    ints: Callable[[int, int], Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, start_method: str
) -> None:
    n, world = 50, 2
    d = ints(n, 7)
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "GLOBAL_RANK", "LOCAL_RANK")}
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), OMP_NUM_THREADS="1")
    procs = []
    for rank in range(world):
        out = tmp_path / f"rank{rank}.json"
        rank_env = {**env, "RANK": str(rank), "WORLD_SIZE": str(world)}
        cmd = [sys.executable, str(HERE / "_ddp_worker.py"), str(d), str(out), start_method]
        procs.append(subprocess.Popen(cmd, env=rank_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=180)[0].decode(errors="replace"))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0, 0], "\n".join(logs)

    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world)]
    assert [r["rank"] for r in results] == [0, 1]
    assert results[0]["gathered"] == results[1]["gathered"]
    gathered = results[0]["gathered"]
    assert [g["detected"] for g in gathered] == [[0, 2], [1, 2]]
    # drop_last defaults to True under DDP: (50 // 4) // 2 = 6 full batches per rank, 2 items dropped.
    assert [len(g["sizes"]) for g in gathered] == [g["announced"] for g in gathered] == [6, 6]
    assert all(g["sizes"] == [4] * 6 for g in gathered)
    items = [g["items"] for g in gathered]
    assert not set(items[0]) & set(items[1])
    union = set(items[0]) | set(items[1])
    assert len(union) == 48
    assert union <= set(range(n))
    # Each rank serves exactly the plan litstream computes for it from WORLD_SIZE/GLOBAL_RANK.
    assert items == [_expected_rank_items(d, monkeypatch, world, r) for r in range(world)]
