"""The pre-training example (``examples/pretrain/train.py``) in a tiny configuration: the loss falls,
and a run resumed from its mid-epoch checkpoint trains on exactly the batches the uninterrupted run
trained on after that point (same batch hashes, same losses), across an epoch boundary."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

__all__: list[str] = []

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "pretrain" / "train.py"
STEPS, SAVE_AT, BATCH = 60, 20, 4
TINY = [
    "--max-files", "6",
    "--seq-len", "64",
    "--batch-size", str(BATCH),
    "--dim", "32",
    "--layers", "1",
    "--heads", "2",
    "--lr", "1e-2",
    "--steps", str(STEPS),
    "--save-at", str(SAVE_AT),
    "--log-every", "10",
]  # fmt: skip
WINDOWS_LINE = re.compile(r"^([\d,]+) windows of 65 tokens per epoch", re.MULTILINE)


def _run(data_dir: Path, trace: Path, *extra: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--data-dir", str(data_dir), "--trace", str(trace), *TINY, *extra],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc.stdout


def _trace(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_loss_falls_and_resume_continues_from_the_saved_position(tmp_path: Path) -> None:
    data_dir = tmp_path / "pretrain"
    first = _run(data_dir, tmp_path / "full.jsonl")
    full = _trace(tmp_path / "full.jsonl")
    assert [r["step"] for r in full] == list(range(1, STEPS + 1))
    losses = [float(r["loss"]) for r in full]  # type: ignore[arg-type]
    assert sum(losses[-10:]) / 10 < sum(losses[:5]) / 5 - 1.0, first
    assert f"saved checkpoint at step {SAVE_AT}" in first

    checkpoint = torch.load(data_dir / "checkpoint.pt", weights_only=False)
    assert checkpoint["step"] == SAVE_AT
    loader_state = checkpoint["loader"]
    assert loader_state["num_samples_yielded"] == SAVE_AT * BATCH
    assert loader_state["dataset"]["item_loader"] == {"block_size": 65}
    windows = int(WINDOWS_LINE.findall(first)[0].replace(",", ""))
    assert SAVE_AT * BATCH < windows < STEPS * BATCH  # saved mid-epoch; the run goes on into epoch 2

    second = _run(data_dir, tmp_path / "resumed.jsonl", "--resume")
    assert f"resumed from step {SAVE_AT}" in second
    assert "reusing" in second
    resumed = _trace(tmp_path / "resumed.jsonl")
    expected = full[SAVE_AT:]
    assert [r["step"] for r in resumed] == list(range(SAVE_AT + 1, STEPS + 1))
    assert [r["batch"] for r in resumed] == [r["batch"] for r in expected]
    for got, want in zip(resumed, expected, strict=True):
        assert float(got["loss"]) == pytest.approx(float(want["loss"]), rel=1e-4)  # type: ignore[arg-type]
