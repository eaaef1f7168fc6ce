"""A ``StreamingDataLoader.state_dict()`` saved by LitData resumes a litstream loader where LitData resumes.

LitData's loader iterates ``k`` batches and saves its state; a litstream loader loads that state and
must yield exactly what LitData's own resumed loader yields (and, before the end of the epoch, exactly
the rest of LitData's uninterrupted epoch).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

import litstream
from litstream import ConfigurationError, StreamingDataLoader, StreamingDataset
from litstream.read.plan._litdata_state import is_litdata_state
from peer import finish_peer_epoch, litdata_marks, peer_workers, require_peer

litdata = require_peer("litdata")

pytestmark = litdata_marks(r"ignore:unclosed file <_io\.FileIO name=:ResourceWarning")

N, CHUNK, BATCH = 47, 4, 3  # 16 batches per epoch with 0 or 2 workers, the last one short


def _sample(i: int) -> dict[str, int]:
    return {"x": i}


@pytest.fixture(scope="module")
def ints_47(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("litdata-state") / "litdata"
    litstream.optimize(fn=_sample, inputs=list(range(N)), output_dir=str(out), chunk_size=CHUNK, num_workers=1)
    return str(out)


def _values(loader: Any) -> list[int]:
    return [int(v) for batch in loader for v in batch["x"]]


def _litdata_state(data: str, *, shuffle: bool, workers: int, k: int) -> tuple[dict[str, Any], list[int]]:
    """LitData's loader state after ``k`` batches, and the samples of those batches."""
    loader = litdata.StreamingDataLoader(
        litdata.StreamingDataset(data, shuffle=shuffle), batch_size=BATCH, **peer_workers(workers)
    )
    it = iter(loader)
    seen = [int(v) for _ in range(k) for v in next(it)["x"]]
    state: dict[str, Any] = loader.state_dict()
    finish_peer_epoch(it)
    return state, seen


@pytest.mark.parametrize("k", [1, 15, 16])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("workers", [0, 2])
def test_litdata_state_resumes_like_litdata(ints_47: str, workers: int, shuffle: bool, k: int) -> None:
    full = _values(
        litdata.StreamingDataLoader(
            litdata.StreamingDataset(ints_47, shuffle=shuffle), batch_size=BATCH, **peer_workers(workers)
        )
    )
    state, seen = _litdata_state(ints_47, shuffle=shuffle, workers=workers, k=k)
    assert is_litdata_state(state["dataset"])
    assert seen == full[: len(seen)]

    theirs_loader = litdata.StreamingDataLoader(
        litdata.StreamingDataset(ints_47, shuffle=shuffle), batch_size=BATCH, **peer_workers(workers)
    )
    theirs_loader.load_state_dict(copy.deepcopy(state))
    theirs = _values(theirs_loader)

    ours_loader = StreamingDataLoader(StreamingDataset(ints_47, shuffle=shuffle), batch_size=BATCH, num_workers=workers)
    ours_loader.load_state_dict(copy.deepcopy(state))
    ours = _values(ours_loader)

    assert ours == theirs
    if k < 16:
        assert seen + ours == full  # exactly the rest of the epoch, in LitData's order
    else:  # saved after the last batch: both go on with the next epoch
        assert sorted(ours) == list(range(N))
    # The epoch after the resumed one is a normal epoch.
    assert sorted(_values(ours_loader)) == list(range(N))


def test_dataset_alone_loads_a_litdata_dataset_state(ints_47: str) -> None:
    state, seen = _litdata_state(ints_47, shuffle=True, workers=0, k=4)
    ds = StreamingDataset(ints_47, shuffle=True)
    ds.load_state_dict(state["dataset"])
    full = [s["x"] for s in StreamingDataset(ints_47, shuffle=True)]
    assert [s["x"] for s in ds] == full[len(seen) :]


def _dataset_state(data: str) -> dict[str, Any]:
    state: dict[str, Any] = _litdata_state(data, shuffle=False, workers=0, k=2)[0]["dataset"]
    return state


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"resume_mode": "elastic"}, "resume_mode='elastic'"),
        ({"sample_in_epoch": 99}, "sample_in_epoch=99"),
        ({"initial_num_nodes": 2}, "initial_num_nodes=2"),
        ({"num_samples_yielded": -3}, "num_samples_yielded=-3"),
        ({"num_samples_yielded": "6"}, "num_samples_yielded='6'"),
        ({"num_samples_yielded": 3 * 17, "sample_in_epoch": 3 * 17}, "17 batches of 3"),
        ({"batch_size": 0}, "batch_size=0"),
        ({"num_workers": True}, "num_workers=True"),
        ({"seed": 1.5}, "seed=1.5"),
        ({"shuffle": "yes"}, "shuffle='yes'"),
        ({"drop_last": None}, "drop_last=None"),
        ({"item_loader": [1]}, "item_loader=[1]"),
        ({"input_dir_path": 7}, "input_dir_path=7"),
        ({"state_version": 3}, "state_version=3"),
        ({"seed": 7}, "seed=7"),
        ({"input_dir_path": "/elsewhere"}, "input_dir_path='/elsewhere'"),
    ],
)
def test_bad_litdata_states_are_refused(ints_47: str, change: dict[str, Any], message: str) -> None:
    state = {**_dataset_state(ints_47), **change}
    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(").replace("[", r"\[")):
        StreamingDataset(ints_47).load_state_dict(state)


@pytest.fixture(scope="module")
def ints_600(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Two chunks of 300 items: more than LitData's default item_shuffle_window (256)."""
    out = tmp_path_factory.mktemp("litdata-state-big") / "litdata"
    litstream.optimize(fn=_sample, inputs=list(range(600)), output_dir=str(out), chunk_size=300, num_workers=1)
    return str(out)


@pytest.mark.parametrize("k", [1, 60, 150])
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("window", [None, 0, 100])
def test_item_shuffle_window_smaller_than_a_chunk_resumes_like_litdata(
    ints_600: str, workers: int, window: int | None, k: int
) -> None:
    """LitData 0.2.76 shuffles a chunk of more than ``item_shuffle_window`` items in blocks; litstream
    serves that order and resumes LitData's checkpoint with exactly LitData's remaining samples."""

    def theirs_loader() -> Any:
        ds = litdata.StreamingDataset(ints_600, shuffle=True, item_shuffle_window=window)
        return litdata.StreamingDataLoader(ds, batch_size=BATCH, **peer_workers(workers))

    def ours_loader() -> StreamingDataLoader:
        ds = StreamingDataset(ints_600, shuffle=True, item_shuffle_window=window)
        return StreamingDataLoader(ds, batch_size=BATCH, num_workers=workers)

    full = _values(theirs_loader())
    assert _values(ours_loader()) == full
    loader = theirs_loader()
    it = iter(loader)
    seen = [int(v) for _ in range(k) for v in next(it)["x"]]
    state: dict[str, Any] = loader.state_dict()
    finish_peer_epoch(it)
    assert state["dataset"]["item_shuffle_window"] == (256 if window is None else window)
    theirs = theirs_loader()
    theirs.load_state_dict(copy.deepcopy(state))
    expected = _values(theirs)
    ours = ours_loader()
    ours.load_state_dict(copy.deepcopy(state))
    assert _values(ours) == expected
    assert sorted(seen + expected) == list(range(600))


def test_litdata_state_with_another_item_shuffle_window_is_refused(ints_600: str) -> None:
    """A window that orders these 300-item chunks differently cannot resume exactly: refused, as LitData does."""
    state = _litdata_state(ints_600, shuffle=True, workers=0, k=1)[0]
    assert state["dataset"]["item_shuffle_window"] == 256
    loader = StreamingDataLoader(StreamingDataset(ints_600, shuffle=True, item_shuffle_window=0), batch_size=BATCH)
    with pytest.raises(ConfigurationError, match=r"item_shuffle_window=256 but this dataset has item_shuffle_window=0"):
        loader.load_state_dict(state)
    # A state of LitData < 0.2.76 has no window (a full permutation): item_shuffle_window=0 resumes it.
    old = copy.deepcopy(state)
    del old["dataset"]["item_shuffle_window"]
    with pytest.raises(ConfigurationError, match=r"item_shuffle_window=0 but this dataset has item_shuffle_window=256"):
        StreamingDataLoader(StreamingDataset(ints_600, shuffle=True), batch_size=BATCH).load_state_dict(old)
    StreamingDataLoader(
        StreamingDataset(ints_600, shuffle=True, item_shuffle_window=0), batch_size=BATCH
    ).load_state_dict(old)
    # Unshuffled, the window does not matter.
    plain = _litdata_state(ints_600, shuffle=False, workers=0, k=1)[0]
    resumed = StreamingDataLoader(StreamingDataset(ints_600, item_shuffle_window=0), batch_size=BATCH)
    resumed.load_state_dict(plain)
    assert _values(resumed) == list(range(BATCH, 600))


def _b_sample(i: int) -> dict[str, int]:
    return {"x": 1000 + i}


@pytest.fixture(scope="module")
def second_17(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("litdata-state-b") / "litdata"
    litstream.optimize(fn=_b_sample, inputs=list(range(17)), output_dir=str(out), chunk_size=4, num_workers=1)
    return str(out)


@pytest.mark.parametrize("k", [2, 5])
@pytest.mark.parametrize("workers", [0, 2])
def test_litdata_combined_state_resumes_the_rest_of_the_epoch(
    ints_47: str, second_17: str, workers: int, k: int
) -> None:
    """LitData records exact per-worker counts for Combined: litstream serves exactly the rest of LitData's epoch.

    LitData's own resume of this state equals it with 0 workers. With 2 workers LitData 0.2.76's own
    resume does not serve the rest of its epoch (it serves another set of samples), so there
    litstream is compared with LitData's uninterrupted epoch only.
    """

    def theirs() -> Any:
        members = [litdata.StreamingDataset(p, shuffle=True) for p in (ints_47, second_17)]
        return litdata.StreamingDataLoader(
            litdata.CombinedStreamingDataset(members), batch_size=BATCH, **peer_workers(workers)
        )

    full = _values(theirs())
    loader = theirs()
    it = iter(loader)
    seen = [int(v) for _ in range(k) for v in next(it)["x"]]
    state = loader.state_dict()
    finish_peer_epoch(it)
    peer = theirs()
    peer.load_state_dict(copy.deepcopy(state))
    peer_rest = _values(peer)

    ours = StreamingDataLoader(
        litstream.CombinedStreamingDataset([StreamingDataset(p, shuffle=True) for p in (ints_47, second_17)]),
        batch_size=BATCH,
        num_workers=workers,
    )
    ours.load_state_dict(copy.deepcopy(state))
    rest = _values(ours)
    assert seen + rest == full
    if workers == 0:
        assert rest == peer_rest
    assert sorted(_values(ours)) == sorted(full)  # the next epoch is whole


@pytest.mark.parametrize("workers", [0, 2])
def test_litdata_parallel_state_resumes_the_rest_of_the_epoch(ints_47: str, second_17: str, workers: int) -> None:
    def theirs() -> Any:
        members = [litdata.StreamingDataset(p, shuffle=True) for p in (ints_47, second_17)]
        return litdata.StreamingDataLoader(
            litdata.ParallelStreamingDataset(members), batch_size=BATCH, **peer_workers(workers)
        )

    def pairs(loader: Any) -> list[tuple[int, int]]:
        return [(int(a), int(b)) for first, second in loader for a, b in zip(first["x"], second["x"], strict=True)]

    full = pairs(theirs())
    loader = theirs()
    it = iter(loader)
    seen = pairs([next(it) for _ in range(2)])
    state = loader.state_dict()
    finish_peer_epoch(it)
    ours = StreamingDataLoader(
        litstream.ParallelStreamingDataset([StreamingDataset(p, shuffle=True) for p in (ints_47, second_17)]),
        batch_size=BATCH,
        num_workers=workers,
    )
    ours.load_state_dict(copy.deepcopy(state))
    rest = pairs(ours)
    assert seen + rest == full
    if workers == 0:
        peer = theirs()
        peer.load_state_dict(copy.deepcopy(state))
        assert rest == pairs(peer)


def test_litdata_cycling_parallel_state_is_refused_clearly(ints_47: str, second_17: str) -> None:
    members = [litdata.StreamingDataset(p) for p in (ints_47, second_17)]
    loader = litdata.StreamingDataLoader(litdata.ParallelStreamingDataset(members, length=30), batch_size=BATCH)
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    finish_peer_epoch(it)
    ours = StreamingDataLoader(
        litstream.ParallelStreamingDataset([StreamingDataset(p) for p in (ints_47, second_17)], length=30),
        batch_size=BATCH,
    )
    with pytest.raises(ConfigurationError, match=r"ParallelStreamingDataset\(length=30\) checkpoint saved by LitData"):
        ours.load_state_dict(state)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"num_samples_yielded": {5: [1, 1]}}, "worker 5"),
        ({"num_samples_yielded": {0: [1]}}, "expected 2 counts"),
        ({"num_samples_yielded": {0: [1, -1]}}, "count=-1"),
        ({"dataset": {"0": {}}}, r"holds datasets \['0'\]"),
    ],
)
def test_bad_litdata_combined_states_are_refused(
    ints_47: str, second_17: str, change: dict[str, Any], message: str
) -> None:
    members = [litdata.StreamingDataset(p) for p in (ints_47, second_17)]
    loader = litdata.StreamingDataLoader(litdata.CombinedStreamingDataset(members), batch_size=BATCH)
    it = iter(loader)
    next(it)
    state = {**loader.state_dict(), **change}
    finish_peer_epoch(it)
    ours = StreamingDataLoader(
        litstream.CombinedStreamingDataset([StreamingDataset(p) for p in (ints_47, second_17)]), batch_size=BATCH
    )
    with pytest.raises(ConfigurationError, match=message):
        ours.load_state_dict(state)


@pytest.mark.parametrize(("saved_workers", "workers"), [(2, 0), (0, 2)])
def test_litdata_state_on_another_worker_count_serves_the_rest_once(
    ints_47: str, saved_workers: int, workers: int
) -> None:
    """Elastic resume of a LitData state: every sample LitData had not served is served exactly once."""
    state, seen = _litdata_state(ints_47, shuffle=True, workers=saved_workers, k=5)
    loader = StreamingDataLoader(StreamingDataset(ints_47, shuffle=True), batch_size=BATCH, num_workers=workers)
    loader.load_state_dict(state)
    rest = _values(loader)
    assert sorted(seen + rest) == list(range(N))
