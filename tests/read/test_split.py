"""train_test_split: disjoint parts by chunk regions (case B17), each a full StreamingDataset."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataset_files import write_ints
from litstream import ConfigurationError, StreamingDataLoader, StreamingDataset, astream, train_test_split
from litstream.read.plan._subset import Selection, check_splits, split_selection
from resume_law import as_items, assert_resume_law

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


@pytest.fixture(scope="module")
def ints_50(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_ints(tmp_path_factory.mktemp("ints50"), 50, 7)


def _loader_items(ds: StreamingDataset, workers: int, batch: int = 5) -> list[int]:
    return [int(i) for b in StreamingDataLoader(ds, batch_size=batch, num_workers=workers) for i in as_items(b)]


def _expected_parts(n: int, chunk: int, splits: list[float], seed: int = 42, shuffle: bool = True) -> list[list[int]]:
    """The items of each part (spec §2.6 / format-and-write §8), re-derived: permute the chunks with
    RandomState([seed]), then carve int(n * f) items off the concatenated chunk order."""
    chunks = list(range(math.ceil(n / chunk)))
    if shuffle:
        chunks = [chunks[i] for i in np.random.RandomState([seed]).permutation(len(chunks))]
    order = [i for c in chunks for i in range(c * chunk, min((c + 1) * chunk, n))]
    out, start = [], 0
    for f in splits:
        out.append(order[start : start + int(n * f)])
        start += int(n * f)
    return out


# -------------------------------------------------------------------------------- B17


@pytest.mark.parametrize("splits", [[0.1, 0.2, 0.7], [0.1, 0.7, 0.2], [0.7, 0.2, 0.1]])
def test_b17_any_order_of_fractions(ints_100: Path, splits: list[float]) -> None:
    parts = train_test_split(StreamingDataset(ints_100), splits=splits)
    assert [len(p) for p in parts] == [int(100 * f) for f in splits]
    sliced = [p[:] for p in parts]
    assert sliced == _expected_parts(100, 7, splits)
    for p, items in zip(parts, sliced, strict=True):
        assert _loader_items(p, workers=0) == items  # no shuffle: served in the part's own order
    flat = [i for items in sliced for i in items]
    assert len(flat) == len(set(flat)) == 100  # disjoint
    assert sorted(flat) == list(range(100))  # union


def test_b17_exact_lengths_and_items(ints_100: Path) -> None:
    x, y, z = train_test_split(StreamingDataset(ints_100), splits=[0.1, 0.2, 0.7])
    assert (len(x), len(y), len(z)) == (10, 20, 70)
    # chunk order RandomState([42]).permutation(15) = [8, 6, 14, 2, 4, ...]; chunk c holds 7c..7c+6
    assert x[:] == [56, 57, 58, 59, 60, 61, 62, 42, 43, 44]
    assert y[:] == [45, 46, 47, 48, 98, 99, 14, 15, 16, 17, 18, 19, 20, 28, 29, 30, 31, 32, 33, 34]
    assert z[:5] == [70, 71, 72, 73, 74]


@pytest.mark.slow
def test_b17_every_part_through_loader_workers(ints_100: Path) -> None:
    parts = train_test_split(StreamingDataset(ints_100, shuffle=True), splits=[0.1, 0.2, 0.7])
    for p in parts:
        served = _loader_items(p, workers=2)
        assert sorted(served) == sorted(p[:])
        assert len(served) == len(p)


def test_b17_zero_splits(ints_100: Path) -> None:
    x, y, z = train_test_split(StreamingDataset(ints_100), splits=[0.0, 0.0, 1.0])
    assert (len(x), len(y), len(z)) == (0, 0, 100)
    assert x[:] == []
    assert y[:] == []
    assert _loader_items(x, workers=0) == []
    assert [s for s in y] == []
    assert sorted(z[:]) == list(range(100))
    with pytest.raises(IndexError, match="index 0 is out of range for a dataset of 0 items"):
        x[0]


def test_b17_small_dataset(ints_50: Path) -> None:
    parts = train_test_split(StreamingDataset(ints_50), splits=[0.01, 0.01, 0.98])
    assert [len(p) for p in parts] == [0, 0, 49]
    assert parts[2][:] == _expected_parts(50, 7, [0.01, 0.01, 0.98])[2]
    assert len(set(parts[2][:])) == 49


@pytest.mark.parametrize(
    ("splits", "message"),
    [
        ([0.5, 0.6], "splits=[0.5, 0.6] sum to 1.1, more than 1"),
        ([0.1, -0.1], "splits[1]=-0.1 must be a fraction in [0, 1]"),
        ([1.5], "splits[0]=1.5 must be a fraction in [0, 1]"),
        ([0.5, "0.5"], "splits[1]='0.5' must be a fraction in [0, 1]"),
        ([], "splits must hold at least one fraction, got []"),
        (0.5, "splits must be a list of fractions such as [0.8, 0.1, 0.1], got 0.5"),
    ],
)
def test_bad_splits_raise_value_error(ints_100: Path, splits: Any, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        train_test_split(StreamingDataset(ints_100), splits=splits)
    assert isinstance(info.value, ConfigurationError)
    assert str(info.value).startswith(message)


def test_bad_seed_and_input(ints_100: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"seed must be an int in \[0, 2\*\*32\), got -1"):
        train_test_split(StreamingDataset(ints_100), [0.5], seed=-1)
    with pytest.raises(ConfigurationError, match="streaming_dataset must be a StreamingDataset, got str"):
        train_test_split(str(ints_100), [0.5])  # type: ignore[arg-type]


# -------------------------------------------------------------------------------- options


def test_without_shuffle_parts_are_consecutive(ints_100: Path) -> None:
    a, b = train_test_split(StreamingDataset(ints_100), [0.25, 0.5], shuffle=False)
    assert a[:] == list(range(25))
    assert b[:] == list(range(25, 75))


def test_seed_changes_the_partition_deterministically(ints_100: Path) -> None:
    first = [p[:] for p in train_test_split(StreamingDataset(ints_100), [0.3, 0.7], seed=3)]
    again = [p[:] for p in train_test_split(StreamingDataset(ints_100), [0.3, 0.7], seed=3)]
    other = [p[:] for p in train_test_split(StreamingDataset(ints_100), [0.3, 0.7], seed=4)]
    assert first == again == _expected_parts(100, 7, [0.3, 0.7], seed=3)
    assert sorted(first[0]) != sorted(other[0])


def test_parts_keep_the_datasets_arguments(ints_100: Path) -> None:
    ds = StreamingDataset(ints_100, shuffle=True, seed=5)
    a, _ = train_test_split(ds, [0.4, 0.6])
    assert (a.shuffle, a.seed) == (True, 5)
    served = [int(i) for i in a]
    assert sorted(served) == sorted(a[:])
    assert served != a[:]  # shuffled iteration
    assert len(ds) == 100  # the original is untouched


def test_split_of_a_subsampled_dataset(ints_100: Path) -> None:
    ds = StreamingDataset(ints_100, subsample=0.5)  # no shuffle: items 0..49
    a, b = train_test_split(ds, [0.5, 0.5], shuffle=False)
    assert a[:] == list(range(25))
    assert b[:] == list(range(25, 50))


def test_split_of_a_split(ints_100: Path) -> None:
    train, _ = train_test_split(StreamingDataset(ints_100), [0.8, 0.2])
    inner_a, inner_b = train_test_split(train, [0.5, 0.5], shuffle=False)
    assert inner_a[:] + inner_b[:] == train[:]


# -------------------------------------------------------------------------------- resume


def _make(ints_100: Path, index: int, *, workers: int, batch: int, shuffle: bool) -> Callable[[], StreamingDataLoader]:
    def make() -> StreamingDataLoader:
        part = train_test_split(StreamingDataset(ints_100, shuffle=shuffle), [0.3, 0.7])[index]
        return StreamingDataLoader(part, batch_size=batch, num_workers=workers)

    return make


@pytest.mark.parametrize("index", [0, 1])
def test_each_part_obeys_the_resume_law(ints_100: Path, index: int) -> None:
    make = _make(ints_100, index, workers=0, batch=4, shuffle=True)
    for stop in (1, 3):
        outcome = assert_resume_law(make, stop_after=stop)
        assert sorted(outcome.consumed[0] + outcome.rest[0]) == sorted(_expected_parts(100, 7, [0.3, 0.7])[index])


@pytest.mark.slow
def test_part_resume_law_with_workers_and_elastic(ints_100: Path) -> None:
    make = _make(ints_100, 1, workers=2, batch=4, shuffle=True)
    assert_resume_law(make, stop_after=4)
    assert_resume_law(make, make_resumed_loader=_make(ints_100, 1, workers=1, batch=5, shuffle=True), stop_after=4)
    assert_resume_law(make, stop_after=2, world_size=2, resumed_world_size=1)


def test_checkpoint_of_one_part_is_rejected_by_another(ints_100: Path) -> None:
    a, b = train_test_split(StreamingDataset(ints_100), [0.3, 0.7])
    state = a.state_dict(4, 0, 2)
    with pytest.raises(ConfigurationError) as info:
        b.load_state_dict(state)
    assert str(info.value).startswith("checkpoint has subsampled_files=['chunk-0-8.bin', 'chunk-0-6.bin'")
    a2, _ = train_test_split(StreamingDataset(ints_100), [0.3, 0.7])
    a2.load_state_dict(state)
    assert [int(i) for i in a2] == a[:][4:]


# -------------------------------------------------------------------------------- astream


@pytest.mark.anyio
@pytest.mark.parametrize("shuffle", [False, True])
async def test_astream_of_each_part(ints_100: Path, anyio_backend: str, shuffle: bool) -> None:
    parts = train_test_split(StreamingDataset(ints_100, shuffle=shuffle), [0.1, 0.2, 0.7])
    seen: list[int] = []
    for p in parts:
        got = [s async for s in astream(p, shuffle=shuffle)]
        assert got == [int(i) for i in p]  # what the dataset serves, in its order
        seen += got
    assert sorted(seen) == list(range(100))


# -------------------------------------------------------------------------------- property


def _items(sel: Selection) -> list[tuple[int, int]]:
    return [(c, i) for c, (start, end) in zip(sel.chunks, sel.regions, strict=True) for i in range(start, end)]


@settings(max_examples=100, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 9), min_size=1, max_size=12),
    weights=st.lists(st.integers(0, 10), min_size=1, max_size=5),
    extra=st.integers(0, 10),
    seed=st.integers(0, 2**32 - 1),
    shuffle=st.booleans(),
)
def test_split_selection_parts_are_disjoint_and_sized(
    sizes: list[int], weights: list[int], extra: int, seed: int, shuffle: bool
) -> None:
    base = Selection.full(sizes)
    splits = check_splits([w / (sum(weights) + extra or 1) for w in weights])
    parts = split_selection(base, splits, seed=seed, shuffle=shuffle)
    assert [len(p) for p in parts] == [int(len(base) * f) for f in splits]
    served = [item for p in parts for item in _items(p)]
    assert len(served) == len(set(served))
    assert set(served) <= set(_items(base))
    for p in parts:
        assert all(0 <= start <= end for start, end in p.regions)  # empty chunks stay, as in LitData
        assert [p.locate(k) for k in range(len(p))] == _items(p)
