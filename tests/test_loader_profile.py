"""``StreamingDataLoader``'s profiling arguments (LitData's): torch.profiler's Chrome trace and cProfile files."""

from __future__ import annotations

import json
import os
import pstats
from typing import TYPE_CHECKING, Any

import pytest

import litstream

if TYPE_CHECKING:
    from pathlib import Path


def _sample(i: int) -> dict[str, int]:
    return {"x": i}


@pytest.fixture
def dataset(tmp_path: Path) -> litstream.StreamingDataset:
    out = str(tmp_path / "ds")
    litstream.optimize(fn=_sample, inputs=list(range(32)), output_dir=out, chunk_size=4, num_workers=1)
    return litstream.StreamingDataset(out)


def _consume(loader: litstream.StreamingDataLoader) -> list[int]:
    return sorted(int(x) for batch in loader for x in batch["x"])


def _trace_events(path: Path) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["traceEvents"]
    return events


@pytest.mark.parametrize(("batches", "skip", "workers"), [(2, 1, 1), (True, 0, 2)])
def test_profile_batches_writes_a_chrome_trace_of_worker_0(
    dataset: litstream.StreamingDataset, tmp_path: Path, batches: bool | int, skip: int, workers: int
) -> None:
    out = tmp_path / "profiles"
    loader = litstream.StreamingDataLoader(dataset, batch_size=2, num_workers=workers, profile_batches=batches,
                                           profile_skip_batches=skip, profile_dir=str(out))  # fmt: skip
    assert _consume(loader) == list(range(32))
    trace = out / "result.json"
    events = _trace_events(trace)
    complete = [e for e in events if e.get("ph") == "X"]
    assert len(complete) > 0
    assert all(e["dur"] >= 0 for e in complete)
    pids = {e["pid"] for e in complete if isinstance(e["pid"], int)}  # torch also files some under "Spans"
    assert len(pids) == 1
    assert os.getpid() not in pids  # recorded in worker 0, not here
    assert [p.name for p in out.iterdir()] == ["result.json"]


def test_profile_cprofile_writes_stats_of_the_main_process_and_worker_0(
    dataset: litstream.StreamingDataset, tmp_path: Path
) -> None:
    out = tmp_path / "cprof"
    loader = litstream.StreamingDataLoader(dataset, batch_size=4, num_workers=1, profile_cprofile=True,
                                           profile_dir=out)  # fmt: skip
    assert _consume(loader) == list(range(32))
    names = sorted(p.name for p in out.iterdir())
    assert names == ["cprofile_main.prof", "cprofile_main.txt", "cprofile_worker0.prof", "cprofile_worker0.txt"]
    worker = pstats.Stats(str(out / "cprofile_worker0.prof"))
    assert any(function == "decode_many" or "collate" in function for _, _, function in worker.stats)  # type: ignore[attr-defined]
    assert "by self time" in (out / "cprofile_main.txt").read_text(encoding="utf-8")


def test_worker_init_fn_still_runs(dataset: litstream.StreamingDataset, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    loader = litstream.StreamingDataLoader(dataset, batch_size=4, num_workers=2, worker_init_fn=_Mark(marks))
    assert _consume(loader) == list(range(32))
    assert sorted(p.name for p in marks.iterdir()) == ["0", "1"]


class _Mark:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def __call__(self, worker_id: int) -> None:
        (self.folder / str(worker_id)).touch()


def test_bad_profiling_arguments_are_refused(dataset: litstream.StreamingDataset) -> None:
    with pytest.raises(litstream.ConfigurationError, match="num_workers >= 1"):
        litstream.StreamingDataLoader(dataset, profile_batches=3)
    with pytest.raises(litstream.ConfigurationError, match="pass only one of them"):
        litstream.StreamingDataLoader(dataset, num_workers=1, profile_batches=True, profile_cprofile=True)
    with pytest.raises(litstream.ConfigurationError, match="profile_skip_batches must be"):
        litstream.StreamingDataLoader(dataset, num_workers=1, profile_skip_batches=-1)
    with pytest.raises(litstream.ConfigurationError, match="profile_batches must be"):
        litstream.StreamingDataLoader(dataset, num_workers=1, profile_batches="3")  # type: ignore[arg-type]
    with pytest.raises(litstream.ConfigurationError, match="profile_cprofile must be"):
        litstream.StreamingDataLoader(dataset, profile_cprofile=1)  # type: ignore[arg-type]
