"""subsample= and subset(): which items a dataset serves, as chunk regions (read._subset).

Expected values are derived here from the rules of spec read.md §2.6 (numpy's ``RandomState([seed])``
permutation of the chunk list, ``int(N * fraction)`` items, prefix without shuffle); that they are also
LitData's own results is checked against the real LitData in tests/compat/test_merge_compat.py.
"""

from __future__ import annotations

import math
import pickle
from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from litstream import ConfigurationError, StreamingDataLoader, StreamingDataset, astream
from litstream.read.plan._subset import Selection, subsample_selection, subset_selection
from resume_law import as_items, assert_resume_law, rank_env

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

N = 100
CHUNK = 7  # 15 chunks: 14 of 7 items, the last of 2


def _chunk_items(chunk: int) -> list[int]:
    return list(range(chunk * CHUNK, min((chunk + 1) * CHUNK, N)))


def _expected_subsample(fraction: float, *, shuffle: bool, seed: int = 42) -> list[int]:
    """The items of LitData's subsample, in selection order (spec §2.6), re-derived chunk by chunk."""
    chunks = list(range(math.ceil(N / CHUNK)))
    rng = np.random.RandomState([seed])
    out: list[int] = []
    while fraction >= 1.0:
        if shuffle:
            chunks = [chunks[i] for i in rng.permutation(len(chunks))]
        out += [i for c in chunks for i in _chunk_items(c)]
        fraction -= 1.0
    if fraction > 0:
        if shuffle:
            chunks = [chunks[i] for i in rng.permutation(len(chunks))]
        out += [i for c in chunks for i in _chunk_items(c)][: int(N * fraction)]
    return out


def _ints(values: Any) -> list[int]:
    return [int(v) for v in values]


# -------------------------------------------------------------------------------- pure: Selection


def test_full_selection_locates_items() -> None:
    sel = Selection.full([7, 7, 2])
    assert len(sel) == 16
    assert sel.regions == ((0, 7), (0, 7), (0, 2))
    assert [sel.locate(i) for i in (0, 6, 7, 15)] == [(0, 0), (0, 6), (1, 0), (2, 1)]


def test_subsample_without_shuffle_is_a_prefix_cut_inside_a_chunk() -> None:
    sel = subsample_selection(Selection.full([7] * 14 + [2]), 0.37, shuffle=False, seed=42)
    assert sel.chunks == (0, 1, 2, 3, 4, 5)
    assert sel.regions == ((0, 7),) * 5 + ((0, 2),)
    assert len(sel) == 37


def test_subsample_above_one_adds_whole_copies_then_a_prefix() -> None:
    sel = subsample_selection(Selection.full([3, 3]), 2.5, shuffle=False, seed=42)
    assert sel.chunks == (0, 1, 0, 1, 0)
    assert sel.regions == ((0, 3), (0, 3), (0, 3), (0, 3), (0, 3))
    sel = subsample_selection(Selection.full([3, 3]), 1.5, shuffle=False, seed=42)
    assert (sel.chunks, sel.regions) == ((0, 1, 0), ((0, 3), (0, 3), (0, 3)))


def test_subsample_with_shuffle_permutes_with_one_generator() -> None:
    sel = subsample_selection(Selection.full([4] * 6), 1.5, shuffle=True, seed=7)
    rng = np.random.RandomState([7])
    first = [int(c) for c in rng.permutation(6)]
    second = [first[i] for i in rng.permutation(6)]  # the second draw permutes the already permuted list
    assert sel.chunks == (*first, *second[:3])
    assert sel.regions == ((0, 4),) * 9


def test_subsample_close_to_one_is_the_whole_dataset() -> None:
    base = Selection.full([5, 5])
    assert subsample_selection(base, 1.0 + 1e-12, shuffle=True, seed=1) is base


def test_subset_selection_merges_runs_and_keeps_order() -> None:
    base = Selection.full([7] * 14 + [2])
    sel = subset_selection(base, [5, 1, 2, 3, 50, 51, 99, 99])
    assert sel.chunks == (0, 0, 7, 14, 14)
    assert sel.regions == ((5, 6), (1, 4), (1, 3), (1, 2), (1, 2))
    assert subset_selection(base, slice(10, 20)).regions == ((3, 7), (0, 6))


def test_subset_of_a_subset_counts_in_the_subsets_own_index_space() -> None:
    inner = subset_selection(Selection.full([7] * 14 + [2]), range(20, 40))
    sel = subset_selection(inner, [0, 1, 19])
    assert [sel.locate(i) for i in range(len(sel))] == [(2, 6), (3, 0), (5, 4)]  # items 20, 21, 39


# -------------------------------------------------------------------------------- StreamingDataset(subsample=)


@pytest.mark.parametrize("fraction", [0.5, 0.37, 0.01])
def test_subsample_without_shuffle_serves_a_prefix(ints_100: Path, fraction: float) -> None:
    ds = StreamingDataset(ints_100, subsample=fraction)
    expected = list(range(int(N * fraction)))
    assert len(ds) == len(expected)
    assert _ints(ds) == expected
    assert ds[:] == expected
    assert ds[-1] == expected[-1]


@pytest.mark.parametrize(("fraction", "length"), [(0.5, 50), (1.5, 150), (2.3, 229)])
def test_subsample_with_shuffle_serves_the_permuted_chunks(ints_100: Path, fraction: float, length: int) -> None:
    """2.3 serves 229 items, not 230: 2.3 - 1 - 1 is 0.2999... in floating point, as in LitData."""
    ds = StreamingDataset(ints_100, subsample=fraction, shuffle=True)
    expected = _expected_subsample(fraction, shuffle=True)
    assert len(ds) == len(expected) == length
    assert ds[:] == expected  # random access: the selection order
    assert Counter(_ints(ds)) == Counter(expected)  # iteration: the same items, FullShuffle's order
    assert _ints(ds) != expected


def test_upsample_serves_every_item_once_per_whole_copy(ints_100: Path) -> None:
    served = Counter(_ints(StreamingDataset(ints_100, subsample=2.0)))
    assert served == Counter({i: 2 for i in range(N)})


def test_subsample_is_deterministic_by_seed(ints_100: Path) -> None:
    a = StreamingDataset(ints_100, subsample=0.3, shuffle=True, seed=1)[:]
    b = StreamingDataset(ints_100, subsample=0.3, shuffle=True, seed=1)[:]
    c = StreamingDataset(ints_100, subsample=0.3, shuffle=True, seed=2)[:]
    assert a == b == _expected_subsample(0.3, shuffle=True, seed=1)
    assert sorted(c) != sorted(a)


@pytest.mark.slow
@pytest.mark.parametrize("workers", [0, 2])
def test_subsample_through_the_loader(ints_100: Path, workers: int) -> None:
    ds = StreamingDataset(ints_100, subsample=0.5, shuffle=True)
    loader = StreamingDataLoader(ds, batch_size=4, num_workers=workers)
    served = [i for batch in loader for i in as_items(batch)]
    assert sorted(served) == sorted(_expected_subsample(0.5, shuffle=True))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0.0, "subsample must be a finite float > 0, got 0.0"),
        (-0.5, "subsample must be a finite float > 0, got -0.5"),
        (float("nan"), "subsample must be a finite float > 0, got nan"),
        ("0.5", "subsample must be a float > 0 (the fraction of the dataset to serve), got '0.5'"),
        (True, "subsample must be a float > 0 (the fraction of the dataset to serve), got True"),
    ],
)
def test_bad_subsample_is_rejected_at_construction(ints_100: Path, value: Any, message: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        StreamingDataset(ints_100, subsample=value)
    assert str(info.value).startswith(message)
    assert isinstance(info.value, ValueError)


def test_int_subsample_is_accepted(ints_100: Path) -> None:
    assert len(StreamingDataset(ints_100, subsample=2)) == 2 * N


# -------------------------------------------------------------------------------- subset()


def test_subset_serves_exactly_the_indices_in_order(ints_100: Path) -> None:
    ds = StreamingDataset(ints_100)
    sub = ds.subset([5, 1, 2, 3, 50, 51, 99])
    assert len(sub) == 7
    assert sub[:] == [5, 1, 2, 3, 50, 51, 99]
    assert _ints(sub) == [5, 1, 2, 3, 50, 51, 99]
    assert sub[4] == 50
    assert sub[-1] == 99
    with pytest.raises(IndexError, match="index 7 is out of range for a dataset of 7 items"):
        sub[7]
    assert len(ds) == N  # the original is unchanged


def test_subset_with_a_slice_and_shuffle(ints_100: Path) -> None:
    sub = StreamingDataset(ints_100, shuffle=True).subset(slice(10, 60))
    assert sub[:] == list(range(10, 60))
    served = _ints(sub)
    assert sorted(served) == list(range(10, 60))
    assert served != list(range(10, 60))


def test_subset_of_a_subsampled_dataset(ints_100: Path) -> None:
    ds = StreamingDataset(ints_100, subsample=0.5, shuffle=True)
    expected = _expected_subsample(0.5, shuffle=True)
    sub = ds.subset(range(10, 20))
    assert sub[:] == expected[10:20]
    assert sorted(_ints(sub)) == sorted(expected[10:20])


@pytest.mark.parametrize(
    ("indices", "message"),
    [
        ([0, 100], "indices[1]=100 is outside the dataset's [0, 100)"),
        ([-1], "indices[0]=-1 is outside the dataset's [0, 100)"),
        ([1.5], "indices[0] must be an int, got 1.5"),
        ("12", "indices must be a sequence of ints or a slice, got '12'"),
    ],
)
def test_bad_subset_indices(ints_100: Path, indices: Any, message: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        StreamingDataset(ints_100).subset(indices)
    assert str(info.value).startswith(message)


def test_subset_pickles_with_its_selection(ints_100: Path) -> None:
    sub = StreamingDataset(ints_100).subset([3, 4, 90])
    again = pickle.loads(pickle.dumps(sub))
    assert again[:] == [3, 4, 90]


# -------------------------------------------------------------------------------- resume and checkpoints


def _loader(make_ds: Callable[[], StreamingDataset], *, workers: int, batch: int) -> Callable[[], StreamingDataLoader]:
    def make() -> StreamingDataLoader:
        return StreamingDataLoader(make_ds(), batch_size=batch, num_workers=workers)

    return make


@pytest.mark.parametrize("shuffle", [False, True])
def test_resume_law_on_a_subsample(ints_100: Path, shuffle: bool) -> None:
    make = _loader(lambda: StreamingDataset(ints_100, subsample=0.6, shuffle=shuffle), workers=0, batch=4)
    for stop in (1, 7):
        outcome = assert_resume_law(make, stop_after=stop)
        served = outcome.consumed[0] + outcome.rest[0]
        assert sorted(served) == sorted(_expected_subsample(0.6, shuffle=shuffle))


def test_resume_law_on_a_subset(ints_100: Path) -> None:
    make = _loader(lambda: StreamingDataset(ints_100, shuffle=True).subset(range(5, 80, 2)), workers=0, batch=3)
    outcome = assert_resume_law(make, stop_after=5)
    assert sorted(outcome.consumed[0] + outcome.rest[0]) == list(range(5, 80, 2))


@pytest.mark.slow
def test_resume_law_on_a_subsample_with_workers_and_elastic(ints_100: Path) -> None:
    make = _loader(lambda: StreamingDataset(ints_100, subsample=0.7, shuffle=True), workers=2, batch=4)
    resumed = _loader(lambda: StreamingDataset(ints_100, subsample=0.7, shuffle=True), workers=1, batch=3)
    assert_resume_law(make, stop_after=5)
    outcome = assert_resume_law(make, make_resumed_loader=resumed, stop_after=5)
    assert sorted(outcome.consumed[0] + outcome.rest[0]) == sorted(_expected_subsample(0.7, shuffle=True))


def test_upsampled_dataset_resumes_with_the_rest_of_its_copies(ints_100: Path) -> None:
    """The law helper needs distinct items; with subsample=1.5 items repeat, so count them instead."""
    loader = StreamingDataLoader(StreamingDataset(ints_100, subsample=1.5, shuffle=True), batch_size=5)
    it = iter(loader)
    first = [i for _ in range(7) for i in as_items(next(it))]
    state = loader.state_dict()
    it.close()
    again = StreamingDataLoader(StreamingDataset(ints_100, subsample=1.5, shuffle=True), batch_size=5)
    again.load_state_dict(pickle.loads(pickle.dumps(state)))
    rest = [i for batch in again for i in as_items(batch)]
    assert len(first) == 35
    assert Counter(first + rest) == Counter(_expected_subsample(1.5, shuffle=True))


def test_checkpoint_records_litdatas_selection_keys(ints_100: Path) -> None:
    full = StreamingDataset(ints_100).state_dict(0, 0, 1)  # the whole dataset, as LitData writes it
    assert full["subsampled_files"] == [f"chunk-0-{i}.bin" for i in range(len(full["subsampled_files"]))]
    assert all(start == 0 for start, _ in full["region_of_interest"])
    state = StreamingDataset(ints_100).subset([0, 1, 2, 50]).state_dict(0, 0, 1)
    assert state["subsampled_files"] == ["chunk-0-0.bin", "chunk-0-7.bin"]
    assert state["region_of_interest"] == [[0, 3], [1, 2]]


def test_checkpoint_of_another_selection_is_rejected(ints_100: Path) -> None:
    state = StreamingDataset(ints_100, subsample=0.5).state_dict(8, 0, 4)
    with pytest.raises(ConfigurationError) as info:
        StreamingDataset(ints_100).load_state_dict(state)
    assert str(info.value).startswith("checkpoint has subsampled_files=['chunk-0-0.bin', 'chunk-0-1.bin'")
    assert "but this dataset has subsampled_files=" in str(info.value)
    full_state = StreamingDataset(ints_100).state_dict(8, 0, 4)
    with pytest.raises(ConfigurationError, match="checkpoint has subsampled_files="):
        StreamingDataset(ints_100, subsample=0.5).load_state_dict(full_state)
    again = StreamingDataset(ints_100, subsample=0.5)
    again.load_state_dict(state)  # the same selection resumes
    assert _ints(again) == list(range(8, 50))


def test_litdata_style_full_selection_keys_are_accepted(ints_100: Path) -> None:
    """A checkpoint written by LitData always lists every chunk; on a whole dataset that matches."""
    state = StreamingDataset(ints_100).state_dict(10, 0, 5)
    state["subsampled_files"] = [f"chunk-0-{k}.bin" for k in range(15)]
    state["region_of_interest"] = [(0, 7)] * 14 + [(0, 2)]
    ds = StreamingDataset(ints_100)
    ds.load_state_dict(state)
    assert _ints(ds) == list(range(10, N))


# -------------------------------------------------------------------------------- astream


@pytest.mark.anyio
@pytest.mark.parametrize("shuffle", [False, True])
async def test_astream_subsample_matches_the_dataset(ints_100: Path, anyio_backend: str, shuffle: bool) -> None:
    got = [s async for s in astream(ints_100, subsample=0.4, shuffle=shuffle)]
    assert got == _ints(StreamingDataset(ints_100, subsample=0.4, shuffle=shuffle))
    assert sorted(got) == sorted(_expected_subsample(0.4, shuffle=shuffle))


@pytest.mark.anyio
async def test_astream_of_a_subset_dataset(ints_100: Path, anyio_backend: str) -> None:
    sub = StreamingDataset(ints_100).subset([9, 3, 4, 70])
    async with astream(sub) as samples:
        got = [s async for s in samples]
    assert got == [9, 3, 4, 70]


@pytest.mark.anyio
async def test_astream_of_a_subset_shards_like_the_dataset(ints_100: Path, anyio_backend: str) -> None:
    sub = StreamingDataset(ints_100, shuffle=True, drop_last=False).subset(range(3, 90, 3))
    with rank_env(1, 2):
        expected = _ints(sub)
    got = [s async for s in astream(sub, shuffle=True, world_size=2, rank=1)]
    assert got == expected
    assert len(got) == 15  # 29 items over 2 ranks: 14 + every leftover on the last rank


@pytest.mark.anyio
async def test_astream_subsample_applies_to_the_datasets_selection(ints_100: Path, anyio_backend: str) -> None:
    sub = StreamingDataset(ints_100).subset(range(20, 40))
    assert [s async for s in astream(sub, subsample=0.5)] == list(range(20, 30))


@pytest.mark.anyio
async def test_astream_bad_subsample(ints_100: Path, anyio_backend: str) -> None:
    with pytest.raises(ConfigurationError, match=r"subsample must be a finite float > 0, got -1"):
        astream(ints_100, subsample=-1)
