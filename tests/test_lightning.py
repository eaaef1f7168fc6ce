"""PyTorch Lightning, for real: a run killed mid-epoch resumes from Lightning's own checkpoint exactly.

Each case runs ``tests/lightning_run.py`` three times, each in a new process: uninterrupted; stopped
after step 9 (Lightning saves the checkpoint, then the process dies); resumed from that checkpoint by a
new ``Trainer`` (or Fabric). The interrupted run plus the resumed one must have trained on exactly the
batches of the uninterrupted run, in the same order: the rest of the interrupted epoch, then a whole
clean next epoch. (LitData 0.2.76, and litstream before this test, served only 168 of 240 samples in
the epoch after a resume: Lightning stops after ``len()`` batches without exhausting the iterator.)
Cases: Trainer with 0 and 2 workers, a single dataset and a ``CombinedStreamingDataset`` mixture;
Fabric's ``save``/``load`` of the loader; a 2-process DDP run (gloo) in which each rank resumes its share.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import litstream as ls
from peer import require_peer

require_peer("pytorch_lightning")

pytestmark = pytest.mark.slow

RUNNER = Path(__file__).parent / "lightning_run.py"
STOP_AT = 9


def _id(i: int) -> dict[str, int]:
    return {"id": i, "x": i % 7}


def _other(i: int) -> dict[str, int]:
    return {"id": 1000 + i, "x": i % 5}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lightning-data")
    ls.optimize(fn=_id, inputs=list(range(240)), output_dir=str(root / "a"), chunk_size=20, num_workers=1)
    ls.optimize(fn=_other, inputs=list(range(100)), output_dir=str(root / "b"), chunk_size=20, num_workers=1)
    return root


def _run(args: list[str], log: Path, expect: int) -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "PYTHONWARNINGS": "ignore"}
    done = subprocess.run(
        [sys.executable, str(RUNNER), *args],
        capture_output=True,
        text=True,
        cwd=log.parent,
        env=env,
        timeout=400,
        check=False,
    )
    assert done.returncode == expect, done.stderr[-4000:]
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _interrupted_and_resumed(
    tmp_path: Path, data: Path, mode: str, options: list[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    ckpt = str(tmp_path / "state.ckpt")
    whole = _run([mode, str(data), str(tmp_path / "whole.log"), ckpt, *options], tmp_path / "whole.log", 0)
    first = _run(
        [mode, str(data), str(tmp_path / "first.log"), ckpt, *options, "--stop-at", str(STOP_AT)],
        tmp_path / "first.log",
        3,
    )
    rest = _run([mode, str(data), str(tmp_path / "rest.log"), ckpt, *options, "--resume"], tmp_path / "rest.log", 0)
    return whole, first, rest


def _ids(steps: list[dict[str, Any]], rank: int = 0, epoch: int | None = None) -> list[int]:
    return [i for s in steps if s["rank"] == rank and (epoch is None or s["epoch"] == epoch) for i in s["ids"]]


@pytest.mark.parametrize("combined", [False, True], ids=["single", "combined"])
@pytest.mark.parametrize("workers", [0, 2])
def test_trainer_resumes_from_its_own_checkpoint_exactly(
    tmp_path: Path, data: Path, workers: int, combined: bool
) -> None:
    options = ["--workers", str(workers), *(["--combined"] if combined else [])]
    whole, first, rest = _interrupted_and_resumed(tmp_path, data, "trainer", options)
    per_epoch = 340 if combined else 240
    for epoch in (0, 1):
        served = _ids(whole, epoch=epoch)
        assert sorted(served) == sorted(set(served))
        assert len(served) == per_epoch
    assert len(first) == STOP_AT
    # The rest of the interrupted epoch, then a whole clean next epoch: the uninterrupted run's batches.
    assert _ids(first) + _ids(rest, epoch=0) == _ids(whole, epoch=0)
    assert _ids(rest, epoch=1) == _ids(whole, epoch=1)


@pytest.mark.parametrize("workers", [0, 2])
def test_fabric_save_and_load_of_the_loader(tmp_path: Path, data: Path, workers: int) -> None:
    whole, first, rest = _interrupted_and_resumed(tmp_path, data, "fabric", ["--workers", str(workers)])
    assert len(first) == STOP_AT
    assert _ids(first) + _ids(rest, epoch=0) == _ids(whole, epoch=0)
    assert _ids(rest, epoch=1) == _ids(whole, epoch=1)
    assert len(_ids(whole, epoch=1)) == 240


def test_ddp_two_processes_each_rank_resumes_its_share(tmp_path: Path, data: Path) -> None:
    whole, first, rest = _interrupted_and_resumed(tmp_path, data, "trainer", ["--workers", "1", "--ddp"])
    for rank in (0, 1):
        assert _ids(first, rank=rank), f"rank {rank} logged nothing"
        assert _ids(first, rank=rank) + _ids(rest, rank=rank, epoch=0) == _ids(whole, rank=rank, epoch=0)
        assert _ids(rest, rank=rank, epoch=1) == _ids(whole, rank=rank, epoch=1)
    for epoch in (0, 1):  # the two ranks share each epoch without overlap
        both = _ids(whole, rank=0, epoch=epoch) + _ids(whole, rank=1, epoch=epoch)
        assert sorted(both) == list(range(240))
