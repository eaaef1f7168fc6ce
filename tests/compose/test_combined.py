"""CombinedStreamingDataset: mixing, exact coverage, lengths, errors and the reported cases B12 / B15."""

from __future__ import annotations

import io
import pickle
from collections import Counter
from itertools import groupby, islice, pairwise
from typing import TYPE_CHECKING, Any

import pytest
import torch
from compose_sets import flat, take

from litstream import (
    CombinedStreamingDataset,
    ConfigurationError,
    ParallelStreamingDataset,
    StreamingDataLoader,
    StreamingDataset,
    train_test_split,
)
from resume_law import as_items

if TYPE_CHECKING:
    from pathlib import Path

B12_EXPECTED = list(range(50)) + list(range(1000, 1050))


def roundtrip(state: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint file: pickle, then torch.save / torch.load (weights_only, torch's default)."""
    buffer = io.BytesIO()
    torch.save(pickle.loads(pickle.dumps(state)), buffer)
    buffer.seek(0)
    loaded: dict[str, Any] = torch.load(buffer)
    return loaded


def b12_loader(d1: Path, d2: Path, num_workers: int = 2) -> StreamingDataLoader:
    cds = CombinedStreamingDataset([StreamingDataset(d1), StreamingDataset(d2)])
    return StreamingDataLoader(cds, batch_size=4, num_workers=num_workers)


# ------------------------------------------------------------------------------------------------ B12


def test_b12_loading_a_state_taken_before_any_iteration(ints_50: Path, thousands_50: Path) -> None:
    loader = b12_loader(ints_50, thousands_50)
    loader.load_state_dict(loader.state_dict())
    e = flat(loader)
    assert sorted(e) == B12_EXPECTED
    assert loader.current_epoch == 1


@pytest.mark.parametrize("fresh", [False, True], ids=["same-loader", "new-loader"])
def test_b12_partial_epoch_then_resume(ints_50: Path, thousands_50: Path, fresh: bool) -> None:
    loader = b12_loader(ints_50, thousands_50)
    first = take(loader, 6)
    assert len(first) == 24
    state = roundtrip(loader.state_dict())
    resumed = b12_loader(ints_50, thousands_50) if fresh else loader
    resumed.load_state_dict(state)
    rest = flat(resumed)
    assert not set(first) & set(rest)
    assert sorted(first + rest) == B12_EXPECTED
    assert sorted(flat(resumed)) == B12_EXPECTED  # the next epoch is a full one


# ------------------------------------------------------------------------------------------------ B15


def test_b15_default_weights_follow_dataset_sizes(mix_sets: tuple[Path, Path, Path]) -> None:
    a, b, _ = mix_sets  # 4,000 and 12,000 items
    cds = CombinedStreamingDataset([StreamingDataset(a), StreamingDataset(b)], iterate_over_all=False, seed=42)
    assert cds.weights == (0.25, 0.75)
    first = list(islice(iter(cds), 800))
    share_b = sum(1 for x in first if x >= 100_000) / 800
    assert abs(share_b - 0.75) <= 0.05


def test_b15_explicit_weights_are_normalised_and_zero_is_never_sampled(
    ints_50: Path, thousands_50: Path, odd_37: Path
) -> None:
    def make(weights: list[float], n: int = 3) -> CombinedStreamingDataset:
        members = [StreamingDataset(p) for p in (ints_50, thousands_50, odd_37)[:n]]
        return CombinedStreamingDataset(members, weights=weights, iterate_over_all=False)

    assert make([2, 0.5], 2).weights == (0.8, 0.2)
    assert make([1, 1, 1]).weights == (1 / 3, 1 / 3, 1 / 3)
    only_first = make([0.3, 0, 0])
    assert only_first.weights == (1.0, 0.0, 0.0)
    assert list(only_first) == list(range(50))


def test_b15_weights_with_iterate_over_all_raise(ints_50: Path, thousands_50: Path) -> None:
    with pytest.raises(ValueError, match=r"weights=\[0\.5, 0\.5\] cannot be used with iterate_over_all=True"):
        CombinedStreamingDataset([StreamingDataset(ints_50), StreamingDataset(thousands_50)], weights=[0.5, 0.5])


# ----------------------------------------------------------------------------------- proportions, coverage


def _member(x: int) -> int:
    return x // 100_000


@pytest.mark.parametrize("num_workers", [0, 2])
def test_explicit_weights_hold_over_10000_samples(mix_sets: tuple[Path, Path, Path], num_workers: int) -> None:
    weights = [0.2, 0.5, 0.3]
    cds = CombinedStreamingDataset([StreamingDataset(p) for p in mix_sets], weights=weights, iterate_over_all=False)
    loader = StreamingDataLoader(cds, batch_size=50, num_workers=num_workers)
    first = take(loader, 200)
    assert len(first) == 10_000
    assert len(set(first)) == 10_000  # no sample twice
    counts = Counter(_member(x) for x in first)
    for member, w in enumerate(weights):
        assert abs(counts[member] / 10_000 - w) <= 0.02, counts


def test_default_weights_hold_over_10000_samples(mix_sets: tuple[Path, Path, Path]) -> None:
    a, b, _ = mix_sets
    cds = CombinedStreamingDataset([StreamingDataset(a), StreamingDataset(b)], iterate_over_all=False)
    first = list(islice(iter(cds), 10_000))
    assert abs(sum(1 for x in first if x >= 100_000) / 10_000 - 0.75) <= 0.02


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("shuffle", [False, True])
def test_iterate_over_all_serves_every_sample_once(
    ints_50: Path, thousands_50: Path, odd_37: Path, num_workers: int, shuffle: bool
) -> None:
    members = [StreamingDataset(p, shuffle=shuffle) for p in (ints_50, thousands_50, odd_37)]
    loader = StreamingDataLoader(CombinedStreamingDataset(members, seed=7), batch_size=3, num_workers=num_workers)
    expected = B12_EXPECTED + list(range(2000, 2037))
    first, second = flat(loader), flat(loader)
    assert sorted(first) == expected
    assert sorted(second) == expected
    assert len(loader) == sum(-(-n // 3) for n in loader.dataset.worker_lengths(num_workers, 3))  # type: ignore[attr-defined]
    if shuffle:
        assert first != second  # members reshuffle per epoch


def test_the_mix_is_not_a_concatenation(ints_50: Path, thousands_50: Path) -> None:
    out = list(CombinedStreamingDataset([StreamingDataset(ints_50), StreamingDataset(thousands_50)]))
    assert sorted(out) == B12_EXPECTED
    switches = sum(1 for a, b in pairwise(out) if (a >= 1000) != (b >= 1000))
    assert switches > 20


def test_len_sums_the_members_with_iterate_over_all(ints_50: Path, odd_37: Path) -> None:
    cds = CombinedStreamingDataset([StreamingDataset(ints_50), StreamingDataset(odd_37)])
    assert len(cds) == 87
    assert cds.get_len(2, 4) == 87
    weighted = CombinedStreamingDataset(
        [StreamingDataset(ints_50), StreamingDataset(odd_37)], weights=[0.9, 0.1], iterate_over_all=False
    )
    served = list(weighted)
    assert len(weighted) == len(served) == len(set(served))
    assert sum(1 for x in served if x < 50) == 50  # the first dataset ran out, which ended the epoch
    assert len(served) < 87


def test_per_stream_batches_come_from_one_dataset(ints_50: Path, thousands_50: Path) -> None:
    cds = CombinedStreamingDataset(
        [StreamingDataset(ints_50), StreamingDataset(thousands_50)],
        batching_method="per_stream",
        iterate_over_all=False,
        weights=[0.5, 0.5],
    )
    batches = [as_items(b) for b in StreamingDataLoader(cds, batch_size=4)]
    sources = [{x >= 1000 for x in batch} for batch in batches]
    assert all(len(s) == 1 for s in sources)
    assert all(a != b for a, b in pairwise(sources))
    assert [len(b) for b in batches[:-1]] == [4] * (len(batches) - 1)
    assert [k for k, _ in groupby(x >= 1000 for b in batches for x in b)] == [s.pop() for s in sources]


# --------------------------------------------------------------------------------------------- errors


def test_members_must_be_streaming_datasets(ints_50: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"datasets\[1\] is a list; every dataset must be a StreamingDataset"):
        CombinedStreamingDataset([StreamingDataset(ints_50), [1, 2]])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="datasets must be a non-empty list of StreamingDataset, got"):
        CombinedStreamingDataset([])
    with pytest.raises(ConfigurationError, match=r"batching_method must be .* got 'mixed'"):
        CombinedStreamingDataset([StreamingDataset(ints_50)], batching_method="mixed")  # type: ignore[arg-type]


def test_a_checkpoint_of_other_settings_is_refused_unless_forced(ints_50: Path, thousands_50: Path) -> None:
    loader = b12_loader(ints_50, thousands_50, num_workers=0)
    first = take(loader, 3)
    state = loader.state_dict()

    other_seed = StreamingDataLoader(
        CombinedStreamingDataset([StreamingDataset(ints_50), StreamingDataset(thousands_50)], seed=1), batch_size=4
    )
    with pytest.raises(ConfigurationError, match="checkpoint has seed=42 but this CombinedStreamingDataset has seed=1"):
        other_seed.load_state_dict(state)

    shuffled = StreamingDataLoader(
        CombinedStreamingDataset([StreamingDataset(ints_50, shuffle=True), StreamingDataset(thousands_50)]),
        batch_size=4,
    )
    with pytest.raises(
        ConfigurationError, match="dataset 0: checkpoint has shuffle=False but this dataset has shuffle=True"
    ):
        shuffled.load_state_dict(state)

    fewer = StreamingDataLoader(CombinedStreamingDataset([StreamingDataset(ints_50)]), batch_size=4)
    with pytest.raises(ConfigurationError, match="checkpoint has 2 datasets but this CombinedStreamingDataset has 1"):
        fewer.load_state_dict(state)

    forced = StreamingDataLoader(
        CombinedStreamingDataset(
            [StreamingDataset(ints_50), StreamingDataset(thousands_50)], seed=1, force_override_state_dict=True
        ),
        batch_size=4,
    )
    with pytest.warns(
        UserWarning, match="force_override_state_dict: checkpoint has seed=42 .* using the current value"
    ):
        forced.load_state_dict(state)
    rest = flat(forced)
    assert len(first) + len(rest) == 100  # the counts still hold; the mix follows the new seed


def test_the_state_is_litdata_shaped_and_plain(ints_50: Path, thousands_50: Path) -> None:
    loader = b12_loader(ints_50, thousands_50, num_workers=0)
    first = take(loader, 2)
    state = loader.state_dict()
    assert set(state) == {"dataset", "current_epoch", "num_samples_yielded", "latest_worker_idx", "composite"}
    assert set(state["dataset"]) == {"0", "1"}  # LitData's layout; litstream's own entry beside it
    per_member = [state["dataset"][k]["num_samples_yielded"] for k in ("0", "1")]
    assert per_member == [sum(1 for x in first if x < 1000), sum(1 for x in first if x >= 1000)]
    assert state["num_samples_yielded"] == {0: per_member}  # LitData's: per worker, per dataset
    assert state["composite"]["num_samples_yielded"] == 8
    assert roundtrip(state) == state


def test_members_serving_a_selection_are_refused(ints_50: Path, thousands_50: Path) -> None:
    part, _ = train_test_split(StreamingDataset(ints_50), splits=[0.5, 0.5])
    for wrapper in (CombinedStreamingDataset, ParallelStreamingDataset):
        with pytest.raises(ConfigurationError, match=r"datasets\[1\] serves a selection .*mixes whole datasets only"):
            wrapper([StreamingDataset(thousands_50), part])
        with pytest.raises(ConfigurationError, match=r"datasets\[0\] serves a selection"):
            wrapper([StreamingDataset(ints_50, subsample=0.5), StreamingDataset(thousands_50)])
