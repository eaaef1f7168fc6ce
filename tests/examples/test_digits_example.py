"""The digits example (``examples/digits/train.py``) runs end to end and learns."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

__all__: list[str] = []

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "digits" / "train.py"
EPOCHS = 6
DIGITS_TOTAL = 1797  # sklearn.datasets.load_digits()
TEST_SIZE = 360  # ceil(0.2 * 1797), as train_test_split(test_size=0.2) rounds
LOSS_LINE = re.compile(r"^epoch (\d+)/(\d+): train loss (\d+\.\d+)", re.MULTILINE)
ACCURACY_LINE = re.compile(r"^held-out accuracy: (\d\.\d+)$", re.MULTILINE)


def _index_sizes(dataset_dir: Path) -> int:
    index = json.loads((dataset_dir / "index.json").read_text())
    return sum(chunk["chunk_size"] for chunk in index["chunks"])


@pytest.mark.slow
def test_digits_example_trains_and_reaches_90_percent(tmp_path: Path) -> None:
    data_dir = tmp_path / "digits"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--data-dir", str(data_dir), "--epochs", str(EPOCHS)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"

    losses = [(int(e), int(n), float(loss)) for e, n, loss in LOSS_LINE.findall(proc.stdout)]
    assert [(e, n) for e, n, _ in losses] == [(e, EPOCHS) for e in range(1, EPOCHS + 1)], proc.stdout
    assert losses[-1][2] < losses[0][2], proc.stdout

    accuracies = ACCURACY_LINE.findall(proc.stdout)
    assert len(accuracies) == 1, proc.stdout
    assert float(accuracies[0]) >= 0.90, proc.stdout

    train_size, test_size = _index_sizes(data_dir / "train"), _index_sizes(data_dir / "test")
    assert (train_size, test_size) == (DIGITS_TOTAL - TEST_SIZE, TEST_SIZE)
    assert train_size + test_size == DIGITS_TOTAL
