"""transform=: a callable or a list applied in order, per sample, in the worker / off the event loop."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

import pytest

from litstream import ConfigurationError, StreamingDataLoader, StreamingDataset, astream, optimize
from resume_law import as_items

if TYPE_CHECKING:
    from pathlib import Path

N = 30


def _identity(i: int) -> int:
    return i


def _times_ten(x: int) -> int:
    return x * 10


def _plus_one(x: int) -> int:
    return x + 1


def _with_pid(x: int) -> tuple[int, int]:
    return x, os.getpid()


@pytest.fixture(scope="module")
def ints(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("ints30")
    optimize(fn=_identity, inputs=list(range(N)), output_dir=d, chunk_size=4, num_workers=1, verbose=False)
    return d


def test_a_list_of_transforms_applies_in_order(ints: Path) -> None:
    ds = StreamingDataset(ints, transform=[_times_ten, _plus_one])
    expected = [i * 10 + 1 for i in range(N)]
    assert [int(x) for x in ds] == expected
    assert ds[3] == 31
    assert ds[2:5] == [21, 31, 41]
    other_order = StreamingDataset(ints, transform=(_plus_one, _times_ten))
    assert other_order[3] == 40


def test_transforms_follow_subset_and_split(ints: Path) -> None:
    from litstream import train_test_split

    ds = StreamingDataset(ints, transform=_times_ten)
    assert ds.subset([4, 5])[:] == [40, 50]
    part, _ = train_test_split(ds, [0.5, 0.5], shuffle=False)
    assert part[:] == [i * 10 for i in range(15)]


@pytest.mark.slow
def test_transform_runs_in_the_dataloader_workers(ints: Path) -> None:
    loader = StreamingDataLoader(StreamingDataset(ints, transform=_with_pid), batch_size=3, num_workers=2)
    served = [(int(x), int(pid)) for xs, pids in loader for x, pid in zip(xs, pids, strict=True)]
    assert sorted(x for x, _ in served) == list(range(N))
    pids = {int(pid) for _, pid in served}
    assert len(pids) == 2
    assert os.getpid() not in pids


@pytest.mark.parametrize(
    ("transform", "message"),
    [
        (3, "transform must be a callable or a list of callables, got int 3"),
        ([_plus_one, "x"], "transform[1] must be callable, got str 'x'"),
        ("abc", "transform must be a callable or a list of callables, got str 'abc'"),
    ],
)
def test_non_callables_are_rejected(ints: Path, transform: Any, message: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        StreamingDataset(ints, transform=transform)
    assert str(info.value).startswith(message)
    assert isinstance(info.value, ValueError)
    with pytest.raises(ConfigurationError) as again:
        astream(ints, transform=transform)
    assert str(again.value).startswith(message)


@pytest.mark.anyio
@pytest.mark.parametrize("managed", [False, True])
async def test_astream_transform_list_runs_off_the_event_loop(ints: Path, anyio_backend: str, managed: bool) -> None:
    loop_thread = threading.get_ident()
    threads: set[int] = set()

    def record(x: int) -> int:
        threads.add(threading.get_ident())
        return x

    transform = [record, _times_ten, _plus_one]
    if managed:
        async with astream(ints, transform=transform) as samples:
            got = [s async for s in samples]
    else:
        got = [s async for s in astream(ints, transform=transform)]
    assert got == [i * 10 + 1 for i in range(N)]
    assert threads
    assert loop_thread not in threads


@pytest.mark.anyio
async def test_astream_of_a_dataset_applies_its_transforms_first(ints: Path, anyio_backend: str) -> None:
    ds = StreamingDataset(ints, transform=_times_ten)
    assert [s async for s in astream(ds)] == [i * 10 for i in range(N)]
    assert [s async for s in astream(ds, transform=_plus_one)] == [i * 10 + 1 for i in range(N)]
    assert [s async for s in astream(ds.subset([7, 8]), transform=[_plus_one, str])] == ["71", "81"]


def test_loader_batches_carry_transformed_samples(ints: Path) -> None:
    loader = StreamingDataLoader(StreamingDataset(ints, transform=[_times_ten, _plus_one]), batch_size=8)
    assert [x for batch in loader for x in as_items(batch)] == [i * 10 + 1 for i in range(N)]
