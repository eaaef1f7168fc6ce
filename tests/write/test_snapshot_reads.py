"""Snapshot reads: a reader serves exactly the version it opened, across overwrites and appends by others.

Every face (``StreamingDataset``, ``ds[i]``, ``StreamingDataLoader`` with fork / forkserver / spawn and persistent
workers, ``astream`` on asyncio and trio, ``CombinedStreamingDataset``, ``ParallelStreamingDataset``, a token
dataset) opens a dataset, reads part of an epoch, then three overwrites
and two appends are committed by another writer; the reader finishes its epoch, and a second epoch (new worker
processes, which open the dataset again) still serves exactly the version it opened. Local and S3. Then the
version log: time travel by number and by time, the latest version, and clear errors.
"""

from __future__ import annotations

import datetime
import pickle
import time
import warnings
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np
import pytest
import torch.utils.data
from write_targets import TARGETS, Target, make_target

import litstream
from litstream import (
    CombinedStreamingDataset,
    ConfigurationError,
    DatasetNotFoundError,
    ParallelStreamingDataset,
    StreamingDataLoader,
    StreamingDataset,
    VersionNotFoundError,
)

if TYPE_CHECKING:
    from pathlib import Path

FIRST = list(range(30))


def _write(target: Target, inputs: list[int], mode: str | None) -> None:
    litstream.optimize(
        int, inputs, target.location, chunk_size=4, num_workers=1, mode=mode, storage_options=target.options,
        verbose=False,
    )  # fmt: skip


def _five_commits(target: Target) -> list[int]:
    """Three overwrites and two appends; returns the samples of the last version."""
    _write(target, list(range(1000, 1011)), "overwrite")
    _write(target, list(range(2000, 2003)), "append")
    _write(target, list(range(3000, 3017)), "overwrite")
    _write(target, list(range(4000, 4005)), "append")
    _write(target, list(range(5000, 5009)), "overwrite")
    return list(range(5000, 5009))


def _flat(batches: list[Any]) -> list[int]:
    return [int(x) for b in batches for x in (b.tolist() if hasattr(b, "tolist") else [b])]


@pytest.mark.parametrize("backend", TARGETS)
def test_a_dataset_finishes_its_epoch_and_keeps_its_version(backend: str, request: Any, tmp_path: Path) -> None:
    target = make_target(backend, request, tmp_path)
    _write(target, FIRST, None)
    ds = StreamingDataset(target.location, storage_options=target.options, max_pre_download=1)
    it = iter(ds)
    head = [next(it) for _ in range(5)]
    latest = _five_commits(target)
    assert head + list(it) == FIRST  # the epoch finishes on the version it opened
    assert list(ds) == FIRST
    assert len(ds) == len(FIRST)
    assert [ds[i] for i in (0, 17, 29)] == [0, 17, 29]
    assert list(StreamingDataset(target.location, storage_options=target.options)) == latest  # a new reader


LOADERS = [  # (loader, multiprocessing context, workers, persistent workers, backend)
    ("StreamingDataLoader", "fork", 0, False, "local"),
    ("StreamingDataLoader", "fork", 1, False, "local"),
    ("StreamingDataLoader", "fork", 2, False, "local"),
    ("StreamingDataLoader", "forkserver", 2, False, "local"),
    ("StreamingDataLoader", "spawn", 3, False, "local"),
    ("StreamingDataLoader", "fork", 2, True, "local"),
    ("StreamingDataLoader", "fork", 2, False, "s3"),
    ("StreamingDataLoader", "spawn", 2, True, "s3"),
    ("DataLoader", "fork", 0, False, "local"),
    ("DataLoader", "fork", 4, False, "local"),
    ("DataLoader", "spawn", 2, True, "local"),
    ("DataLoader", "forkserver", 2, False, "s3"),
]


@pytest.mark.forks
@pytest.mark.parametrize(
    ("kind", "context", "workers", "persistent", "backend"), LOADERS, ids=["-".join(map(str, c)) for c in LOADERS]
)
def test_loader_workers_serve_the_version_the_loader_opened(
    kind: str, context: str, workers: int, persistent: bool, backend: str, request: Any, tmp_path: Path
) -> None:
    target = make_target(backend, request, tmp_path)
    _write(target, FIRST, None)
    ds = StreamingDataset(target.location, storage_options=target.options, shuffle=True, seed=7)
    options: dict[str, Any] = {"batch_size": 3, "num_workers": workers}
    if workers:
        options.update(multiprocessing_context=context, persistent_workers=persistent)
    loader = (StreamingDataLoader if kind == "StreamingDataLoader" else torch.utils.data.DataLoader)(ds, **options)
    it = iter(loader)
    first = [next(it) for _ in range(2)]
    latest = _five_commits(target)
    epoch1 = _flat(first + list(it))
    assert sorted(epoch1) == FIRST
    epoch2 = _flat(list(loader))  # new worker processes open the dataset again: the pinned version
    assert sorted(epoch2) == FIRST
    if kind == "StreamingDataLoader":  # it advances the epoch (torch's DataLoader leaves it: the same order)
        assert epoch2 != epoch1
    fresh = StreamingDataset(target.location, storage_options=target.options)
    assert sorted(_flat(list(StreamingDataLoader(fresh, batch_size=3, num_workers=min(workers, 2))))) == latest


@pytest.mark.parametrize("backend", TARGETS)
async def test_astream_finishes_on_the_version_it_opened(
    backend: str, anyio_backend: str, request: Any, tmp_path: Path
) -> None:
    target = make_target(backend, request, tmp_path)
    await anyio.to_thread.run_sync(_write, target, FIRST, None)
    got: list[int] = []
    async with litstream.astream(target.location, storage_options=target.options, max_pre_download=1) as samples:
        async for sample in samples:
            got.append(sample)
            if len(got) == 3:
                await anyio.to_thread.run_sync(_five_commits, target)
    assert got == FIRST
    first = [s async for s in litstream.astream(target.location, storage_options=target.options, version=1)]
    assert first == FIRST


def test_combined_members_keep_their_versions(tmp_path: Path) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    litstream.optimize(int, FIRST, a, chunk_size=4, num_workers=1, verbose=False)
    litstream.optimize(int, list(range(500, 510)), b, chunk_size=4, num_workers=1, verbose=False)
    combined = CombinedStreamingDataset([StreamingDataset(a), StreamingDataset(b)], iterate_over_all=True)
    it = iter(combined)
    head = [next(it) for _ in range(4)]
    _five_commits(Target("local", a, None, litstream.LocalFileStore(a)))
    litstream.optimize(int, [9], b, chunk_size=4, num_workers=1, mode="overwrite", verbose=False)
    assert sorted(head + list(it)) == sorted(FIRST + list(range(500, 510)))


def test_parallel_members_keep_their_versions(tmp_path: Path) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    litstream.optimize(int, FIRST, a, chunk_size=4, num_workers=1, verbose=False)
    litstream.optimize(int, list(range(500, 530)), b, chunk_size=4, num_workers=1, verbose=False)
    parallel = ParallelStreamingDataset([StreamingDataset(a), StreamingDataset(b)])
    it = iter(parallel)
    head = [next(it) for _ in range(4)]
    _five_commits(Target("local", a, None, litstream.LocalFileStore(a)))
    litstream.optimize(int, [9], b, chunk_size=4, num_workers=1, mode="overwrite", verbose=False)
    assert [tuple(pair) for pair in head + list(it)] == list(zip(FIRST, range(500, 530), strict=True))


def _tokens(i: int) -> Any:
    return np.arange(i * 100, i * 100 + 8, dtype=np.int64)


def test_a_token_dataset_keeps_its_version(tmp_path: Path) -> None:
    location = str(tmp_path / "tokens")
    litstream.optimize(
        _tokens, list(range(6)), location, chunk_size=16, item_loader=litstream.TokensLoader(), num_workers=1,
        verbose=False,
    )  # fmt: skip
    ds = StreamingDataset(location, item_loader=litstream.TokensLoader(4))
    it = iter(ds)
    first = next(it).tolist()
    litstream.optimize(
        _tokens, list(range(50, 53)), location, chunk_size=16, item_loader=litstream.TokensLoader(),
        num_workers=1, mode="overwrite", verbose=False,
    )  # fmt: skip
    blocks = [first, *(b.tolist() for b in it)]
    assert [t for block in blocks for t in block] == [t for i in range(6) for t in _tokens(i).tolist()]
    latest = StreamingDataset(location, item_loader=litstream.TokensLoader(4))
    assert [t for b in latest for t in b.tolist()] == [t for i in range(50, 53) for t in _tokens(i).tolist()]


def test_time_travel_by_number_and_time(tmp_path: Path) -> None:
    location = str(tmp_path / "dataset")
    target = Target("local", location, None, litstream.LocalFileStore(location))
    _write(target, FIRST, None)
    between = datetime.datetime.now(datetime.timezone.utc)
    time.sleep(0.01)  # not a synchronisation: the next commit's clock reading must differ from `between`
    latest = _five_commits(target)
    versions = litstream.list_versions(location)
    assert [v.number for v in versions] == [1, 2, 3, 4, 5, 6]
    assert [v.samples for v in versions] == [30, 11, 14, 17, 22, 9]
    assert [v.latest for v in versions] == [False] * 5 + [True]
    assert all(v.operation == "optimize" and v.run_id and v.expires_at is not None for v in versions[:5])
    assert list(StreamingDataset(location, version=1)) == FIRST
    assert list(StreamingDataset(location, version=3)) == list(range(1000, 1011)) + list(range(2000, 2003))
    assert list(StreamingDataset(location, version=between)) == FIRST
    assert list(StreamingDataset(location, version=6)) == latest == list(StreamingDataset(location))
    with pytest.raises(VersionNotFoundError, match=r"version 7 is not in the version log \(kept versions"):
        len(StreamingDataset(location, version=7))
    before = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)
    with pytest.raises(VersionNotFoundError, match="the latest at 2000-01-01"):
        len(StreamingDataset(location, version=before))
    bad: Any
    for bad in (0, -1, True, "latest", 1.5, datetime.datetime(2026, 1, 1)):
        with pytest.raises(ConfigurationError, match="version="):
            StreamingDataset(location, version=bad)


def test_a_pinned_version_removed_by_retention_is_named(tmp_path: Path) -> None:
    location = str(tmp_path / "dataset")
    target = Target("local", location, None, litstream.LocalFileStore(location))
    _write(target, FIRST, None)
    ds = StreamingDataset(location)
    assert len(ds) == 30
    _write(target, [1, 2], "overwrite")
    report = litstream.collect_garbage(location, grace=0)
    assert report.expired == [1]
    assert report.kept == [2]
    fresh = pickle.loads(pickle.dumps(ds))  # what a spawned worker of the old reader gets, opened now
    with pytest.raises(VersionNotFoundError, match="the version this reader or checkpoint pinned"):
        len(fresh)


def test_partial_indexes_are_served_only_on_request(tmp_path: Path) -> None:
    location = tmp_path / "dataset"
    litstream.optimize(int, FIRST, str(location), chunk_size=4, num_workers=2, verbose=False)
    (location / "index.json").rename(location / "0.index.json")  # as a run killed before its commit leaves it
    with pytest.raises(DatasetNotFoundError, match=r"interrupted run left partial indexes \(0.index.json\)"):
        len(StreamingDataset(location))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        served = list(StreamingDataset(location, version="partial"))
    assert served == FIRST
    assert any("partial indexes of an uncommitted run" in str(w.message) for w in caught)


def test_a_checkpoint_resumes_on_the_version_it_was_saved_on(tmp_path: Path) -> None:
    location = str(tmp_path / "dataset")
    target = Target("local", location, None, litstream.LocalFileStore(location))
    _write(target, FIRST, None)
    loader = StreamingDataLoader(StreamingDataset(location, shuffle=True), batch_size=4)
    it = iter(loader)
    seen = _flat([next(it) for _ in range(3)])
    state = loader.state_dict()
    it.close()
    latest = _five_commits(target)
    first_version = StreamingDataset(location, version=1)
    len(first_version)
    assert first_version._reader.spec.version is not None
    assert state["dataset"]["dataset_version"] == first_version._reader.spec.version.digest
    resumed = StreamingDataLoader(StreamingDataset(location, shuffle=True), batch_size=4)
    resumed.load_state_dict(state)
    rest = _flat(list(resumed))
    assert sorted(seen + rest) == FIRST  # the rest of the epoch, on the version it was saved on, each sample once
    assert sorted(_flat(list(resumed))) == FIRST  # and the dataset stays on that version
    assert sorted(_flat(list(StreamingDataLoader(StreamingDataset(location), batch_size=4)))) == sorted(latest)

    litstream.collect_garbage(location, grace=0)  # the saved-on version is retired
    retired = StreamingDataLoader(StreamingDataset(location, shuffle=True), batch_size=4)
    with pytest.raises(VersionNotFoundError, match="the version this reader or checkpoint pinned"):
        retired.load_state_dict(state)
    bad = {**state, "dataset": {**state["dataset"], "dataset_version": "v1"}}
    with pytest.raises(ConfigurationError, match="checkpoint has dataset_version='v1'"):
        StreamingDataLoader(StreamingDataset(location, shuffle=True), batch_size=4).load_state_dict(bad)


def test_keyed_lookup_on_an_older_version_is_refused_not_wrong(tmp_path: Path) -> None:
    location = str(tmp_path / "keyed")
    litstream.optimize(int, FIRST, location, chunk_size=4, num_workers=1, key_fn=lambda s: s, verbose=False)
    old = StreamingDataset(location)
    assert old.get_by_key(7) == 7
    fresh = StreamingDataset(location)
    assert len(fresh) == len(FIRST)  # opened (pinned) before the overwrite, no shard loaded yet
    litstream.optimize(
        lambda i: i + 1000, list(range(40)), location, chunk_size=4, num_workers=1, key_fn=lambda s: s - 1000,
        mode="overwrite", verbose=False,
    )  # fmt: skip
    assert old.get_by_key(7) == 7  # its shard was loaded with its version: still right
    with pytest.raises(litstream.KeyNotFoundError, match="serves an older version of the dataset"):
        fresh.get_by_key(7)  # would be sample 1007's position in the new version
    assert list(fresh)[:3] == [0, 1, 2]  # positions still serve its own version
    assert StreamingDataset(location).get_by_key(7) == 1007


def test_a_combined_checkpoint_resumes_each_member_on_its_version(tmp_path: Path) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    litstream.optimize(int, FIRST, a, chunk_size=4, num_workers=1, verbose=False)
    litstream.optimize(int, list(range(500, 510)), b, chunk_size=4, num_workers=1, verbose=False)

    def combined() -> CombinedStreamingDataset:
        return CombinedStreamingDataset([StreamingDataset(a), StreamingDataset(b)], iterate_over_all=True, seed=3)

    loader = StreamingDataLoader(combined(), batch_size=4)
    it = iter(loader)
    seen = _flat([next(it) for _ in range(3)])
    state = loader.state_dict()
    it.close()
    _five_commits(Target("local", a, None, litstream.LocalFileStore(a)))
    litstream.optimize(int, [9], b, chunk_size=4, num_workers=1, mode="overwrite", verbose=False)
    resumed = StreamingDataLoader(combined(), batch_size=4)
    resumed.load_state_dict(state)
    rest = _flat(list(resumed))
    assert sorted(seen + rest) == sorted(FIRST + list(range(500, 510)))  # each member's saved-on version, once
