"""``optimize(inputs=StreamingDataLoader(...))`` / ``map(inputs=...)``: each batch of the loader is one input of fn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import litstream
from litstream import ConfigurationError, StreamingDataLoader, StreamingDataset, WorkerError
from peer import peer_workers, require_peer

N = 23


def _sample(i: int) -> dict[str, int]:
    return {"x": i}


def _batch_sum(batch: dict[str, Any]) -> dict[str, Any]:
    return {"xs": np.asarray(batch["x"]), "total": int(batch["x"].sum())}


@pytest.fixture(scope="module")
def ints(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("loader-inputs") / "ds"
    litstream.optimize(
        fn=_sample, inputs=list(range(N)), output_dir=str(out), chunk_size=4, num_workers=1, verbose=False
    )
    return str(out)


def _written(out: Path) -> list[tuple[int, ...]]:
    rows = [(tuple(int(v) for v in s["xs"]), int(s["total"])) for s in StreamingDataset(str(out))]
    assert all(sum(xs) == total for xs, total in rows)
    return sorted(xs for xs, _ in rows)


@pytest.mark.parametrize("optimize_workers", [1, 2])
@pytest.mark.parametrize("loader_workers", [0, 2])
def test_every_batch_of_the_loader_is_one_input(
    ints: str, tmp_path: Path, optimize_workers: int, loader_workers: int
) -> None:
    expected = sorted(
        tuple(int(v) for v in b["x"])
        for b in StreamingDataLoader(StreamingDataset(ints), batch_size=5, num_workers=loader_workers)
    )
    loader = StreamingDataLoader(StreamingDataset(ints), batch_size=5, num_workers=loader_workers)
    summary = litstream.optimize(
        fn=_batch_sum, inputs=loader, output_dir=str(tmp_path / "out"), chunk_size=2, num_workers=optimize_workers
    )
    assert summary.inputs == len(expected) == summary.samples
    assert _written(tmp_path / "out") == expected
    assert sorted(v for xs in expected for v in xs) == list(range(N))


@pytest.mark.litdata
def test_same_samples_as_litdata(ints: str, tmp_path: Path) -> None:
    """One optimize worker: LitData iterates the loader once too, so the samples are the same batches."""
    litdata = require_peer("litdata")
    theirs_out = tmp_path / "theirs"
    litdata.optimize(
        fn=_batch_sum,
        inputs=litdata.StreamingDataLoader(litdata.StreamingDataset(ints), batch_size=5, **peer_workers(2)),
        output_dir=str(theirs_out),
        chunk_size=2,
        num_workers=1,
        verbose=False,
    )
    ours_out = tmp_path / "ours"
    litstream.optimize(
        fn=_batch_sum,
        inputs=StreamingDataLoader(StreamingDataset(ints), batch_size=5, num_workers=2),
        output_dir=str(ours_out),
        chunk_size=2,
        num_workers=1,
    )
    assert _written(ours_out) == _written(theirs_out)


def _write_batch(batch: dict[str, Any], output_dir: str) -> None:
    values = [int(v) for v in batch["x"]]
    Path(output_dir, f"batch-{values[0]:03d}.txt").write_text(" ".join(map(str, values)))


def test_map_over_a_loader(ints: str, tmp_path: Path) -> None:
    out = tmp_path / "files"
    loader = StreamingDataLoader(StreamingDataset(ints), batch_size=5)
    litstream.map(fn=_write_batch, inputs=loader, output_dir=str(out), num_workers=2)
    texts = [p.read_text() for p in sorted(out.iterdir())]
    assert texts == ["0 1 2 3 4", "5 6 7 8 9", "10 11 12 13 14", "15 16 17 18 19", "20 21 22"]


@pytest.mark.parametrize(("name", "value"), [("batch_size", 2), ("weights", [1.0] * 5)])
def test_batch_size_and_weights_are_refused_with_a_loader(ints: str, tmp_path: Path, name: str, value: Any) -> None:
    loader = StreamingDataLoader(StreamingDataset(ints), batch_size=5)
    with pytest.raises(ConfigurationError, match=f"{name}.*StreamingDataLoader"):
        litstream.optimize(fn=_batch_sum, inputs=loader, output_dir=str(tmp_path / "o"), chunk_size=2, **{name: value})
    assert not (tmp_path / "o" / "index.json").exists()


class _Broken(StreamingDataset):
    def transform(self, sample: dict[str, int]) -> dict[str, int]:
        if sample["x"] == 17:
            raise ValueError("sample 17 is broken")
        return sample


@pytest.mark.parametrize("optimize_workers", [1, 2])
def test_a_loader_that_fails_fails_the_run(ints: str, tmp_path: Path, optimize_workers: int) -> None:
    loader = StreamingDataLoader(_Broken(ints), batch_size=5)
    with pytest.raises(WorkerError, match="sample 17 is broken") as caught:
        litstream.optimize(
            fn=_batch_sum, inputs=loader, output_dir=str(tmp_path / "o"), chunk_size=2, num_workers=optimize_workers
        )
    assert not (tmp_path / "o" / "index.json").exists()  # no partial dataset
    causes = []
    exc: BaseException | None = caught.value
    while exc is not None:
        causes.append(type(exc).__name__)
        exc = exc.__cause__
    assert "ValueError" in causes


@pytest.mark.parametrize("optimize_workers", [5, 6, 8])
def test_input_order_is_kept_with_several_workers(tmp_path: Path, optimize_workers: int) -> None:
    """LitData keeps the loader's order (its tests expect [0..N) with 5, 6 and 8 workers); so does litstream."""
    data = tmp_path / "ds"
    litstream.optimize(fn=_sample, inputs=list(range(100)), output_dir=str(data), chunk_size=10, num_workers=1)
    for loader_workers in (0, 2):
        loader = StreamingDataLoader(StreamingDataset(str(data)), batch_size=1, num_workers=loader_workers)
        order = [int(b["x"][0]) for b in loader]  # the loader's own order (0..99 with 0 loader workers)
        out = tmp_path / f"out-{loader_workers}"
        litstream.optimize(fn=_first, inputs=loader, output_dir=str(out), chunk_size=4, num_workers=optimize_workers)
        assert [int(s["x"]) for s in StreamingDataset(str(out))] == order
        assert sorted(order) == list(range(100))
    assert order != list(range(100))  # two loader workers interleave: the test tells the orders apart


def _first(batch: dict[str, Any]) -> dict[str, int]:
    return {"x": int(batch["x"][0])}
