"""Sequence inputs reach worker processes in bounded batches, and no per-input list is made for them.

What is checked: a ``range`` or ``list`` input is planned without a copy or a list of positions; a
worker's job, pickled for its process, carries no inputs; the thread that feeds a worker has looked up at
most ``(BATCHES_AHEAD + 1) x FEED_BATCH`` inputs while the worker takes none; the worker reads every
input once, in order, with its position and ``is_last``; and the dataset written through the feed is
byte-identical to the one written by jobs that carry their inputs (executor tasks).
"""

from __future__ import annotations

import json
import multiprocessing
import pickle
import queue
import threading
from concurrent.futures import ProcessPoolExecutor
from typing import TYPE_CHECKING, Any

import cloudpickle
import pytest

from clean_process import run_clean
from dataset_files import without_version_log
from litstream import WorkerError, optimize
from litstream.write._args import plan_inputs
from litstream.write.run._feed import END
from litstream.write.run._inputs import Batched, Picked
from litstream.write.run._sequence_feed import BATCHES_AHEAD, FEED_BATCH, BatchFeeder, FedBatches, FedInputs
from litstream.write.run._worker import OptimizeJob

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path


def _plan(inputs: Any, **kwargs: Any) -> Any:
    args: dict[str, Any] = {
        "num_workers": 4,
        "weights": None,
        "reorder_files": True,
        "input_dir": None,
        "fast_dev_run": False,
        "batch_size": None,
        "executor": None,
        **kwargs,
    }
    return plan_inputs(inputs, None, **args)[0]


def test_a_range_or_list_input_is_planned_without_a_copy_or_a_list_of_positions() -> None:
    big = range(10**8)  # listing it would take gigabytes
    plan = _plan(big)
    assert plan.items is big
    assert plan.assignment.positions == [range(0, 25 * 10**6), range(25 * 10**6, 50 * 10**6),
                                         range(50 * 10**6, 75 * 10**6), range(75 * 10**6, 10**8)]  # fmt: skip
    names = [f"file-{i}.jpg" for i in range(1000)]
    assert _plan(names).items is names
    assert _plan(names, fast_dev_run=3).assignment.positions == [range(0, 3), range(250, 253), range(500, 503),
                                                                 range(750, 753)]  # fmt: skip
    weighted = _plan(names, weights=[1.0] * 1000).assignment.positions
    assert [p.typecode for p in weighted] == ["q"] * 4  # int64 arrays, not lists of int objects
    assert sorted(i for p in weighted for i in p) == list(range(1000))


def test_a_job_sent_to_a_worker_process_carries_no_inputs() -> None:
    sizes = []
    for n in (10, 10**7):
        job = OptimizeJob(0, Picked(range(n), range(n)), range(n), b"fn", None, {})  # type: ignore[arg-type]
        assert job.num_inputs == n
        sizes.append(len(cloudpickle.dumps(job.without_inputs())))
    assert sizes[0] == sizes[1]


def test_a_picked_view_pickles_as_what_it_shows() -> None:
    assert pickle.loads(pickle.dumps(Picked(range(100), range(10, 20)))) == range(10, 20)
    names = [f"n{i}" for i in range(10)]
    assert pickle.loads(pickle.dumps(Picked(names, [7, 2, 9]))) == ["n7", "n2", "n9"]
    view = Picked(Batched(range(10), 4), range(1, 3))
    assert list(view) == [[4, 5, 6, 7], [8, 9]]
    assert pickle.loads(pickle.dumps(view)) == [[4, 5, 6, 7], [8, 9]]


class _Counted(list[str]):
    """A list that counts the inputs looked up in it (the feeder's reads)."""

    def __init__(self, items: list[str]) -> None:
        super().__init__(items)
        self.looked_up = 0

    def __getitem__(self, index: Any) -> Any:
        self.looked_up += 1
        return super().__getitem__(index)


class _Watched(queue.Queue[Any]):
    """A bounded queue that says when a put found it full (the feeder then waits for the worker)."""

    def __init__(self, maxsize: int) -> None:
        super().__init__(maxsize)
        self.was_full = threading.Event()

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        if self.full():
            self.was_full.set()
        super().put(item, block, timeout)


def test_the_feeder_stays_a_bounded_number_of_batches_ahead_of_its_worker() -> None:
    n, start = 20 * FEED_BATCH + 17, 5
    names = _Counted([f"input-{i}" for i in range(n)])
    positions: Sequence[int] = range(1000, 1000 + n)
    target, stop = _Watched(BATCHES_AHEAD), threading.Event()
    feeder = BatchFeeder(names, positions, start, target, stop, queue.Queue())
    feeder.thread.start()
    try:
        assert target.was_full.wait(60), "the feeder never filled the queue"
        # The queue holds BATCHES_AHEAD batches, the feeder waits to put one more: nothing else was read.
        assert names.looked_up == (BATCHES_AHEAD + 1) * FEED_BATCH
        inputs = FedInputs(FedBatches(target, n - start), threading.Event())
        taken = []
        while (entry := inputs.take()) is not END:
            taken.append(entry)
            assert names.looked_up <= len(taken) + (BATCHES_AHEAD + 2) * FEED_BATCH
    finally:
        stop.set()
        feeder.thread.join(10)
    assert feeder.error is None
    assert names.looked_up == n - start  # each input was read once
    expected = [(f"input-{k}", f"index {1000 + k}", k == n - 1) for k in range(start, n)]
    assert taken == expected


def test_an_input_that_cannot_be_pickled_stops_the_run_naming_it(tmp_path: Path) -> None:
    items: list[Any] = [*range(5), threading.Lock(), *range(6, 10)]
    with pytest.raises(WorkerError, match=r"the input at index 5 \(<unlocked _thread.lock.*cannot be sent to a worker"):
        optimize(lambda x: {"i": 0}, items, tmp_path / "out", chunk_size=2, num_workers=2, verbose=False)
    out = tmp_path / "out"
    assert not out.exists() or [p.name for p in out.rglob("*")] == []  # nothing committed, nothing left


def _written(root: Path) -> dict[str, Any]:
    names = without_version_log(p.name for p in sorted(root.iterdir()))
    files = {name: (root / name).read_bytes() for name in names if name != "index.json"}
    index = json.loads((root / "index.json").read_text())
    return {"files": files, "chunks": index["chunks"], "config": index["config"]}


def _sample(i: int) -> dict[str, Any]:
    return {"i": i, "s": str(i) * (i % 7)}


def _fed_and_carried(tmp_path: Path, inputs: Any, kwargs: Any) -> None:
    """In a clean helper process (it forks the workers and the pool's)."""

    def fn(x: Any) -> dict[str, Any]:
        return _sample(len(x) if isinstance(x, list) else int(x))

    common = {"chunk_size": 37, "num_workers": 3, "verbose": False, **kwargs}
    optimize(fn, inputs, tmp_path / "fed", **common)
    with ProcessPoolExecutor(3, mp_context=multiprocessing.get_context("fork")) as pool:
        optimize(fn, inputs, tmp_path / "carried", executor=pool, **common)
    fed, carried = _written(tmp_path / "fed"), _written(tmp_path / "carried")
    assert len(fed["chunks"]) > 3
    assert fed == carried


@pytest.mark.parametrize(
    ("inputs", "kwargs"),
    [
        (range(2000), {}),
        ([f"{i}" for i in range(1500)], {}),
        (list(range(900)), {"weights": [1 + (i % 13) for i in range(900)]}),
        (range(700), {"batch_size": 3}),
    ],
    ids=["range", "list", "weights", "batch_size"],
)
def test_fed_workers_write_what_workers_given_their_inputs_write(tmp_path: Path, inputs: Any, kwargs: Any) -> None:
    run_clean(_fed_and_carried, tmp_path, inputs, kwargs)
