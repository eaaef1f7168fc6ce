"""The ingestion example (``examples/ingest/app.py``, a Starlette app holding an ``AsyncUploader`` in its
lifespan) runs end to end with httpx clients: on its own SeaweedFS, and on disk under uvicorn and Hypercorn."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from litstream import StreamingDataset

__all__: list[str] = []

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "ingest" / "app.py"
SAMPLES = 200


def run_example(*args: str) -> tuple[str, dict[str, Any]]:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--samples", str(SAMPLES), "--flush-every", "0.05", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("summary: "), proc.stdout
    summary: dict[str, Any] = json.loads(last[len("summary: ") :])
    return proc.stdout, summary


def check_summary(summary: dict[str, Any]) -> None:
    assert summary["ok"] is True
    assert summary["exact_sample_set"] is True
    assert summary["reader_saw_only_commits"] is True
    assert (summary["sent"], summary["acknowledged"], summary["committed"], summary["read_back"]) == (SAMPLES,) * 4
    assert summary["commits"] >= 1
    assert summary["chunks"] >= 2


@pytest.mark.slow
def test_ingest_example_on_its_own_seaweedfs() -> None:
    stdout, summary = run_example()
    assert "SeaweedFS S3 on http://127.0.0.1:" in stdout
    assert summary["dataset"] == "s3://litstream-test/ingest"
    check_summary(summary)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_ingest_example_on_disk_writes_exactly_the_samples_sent(tmp_path: Path, backend: str) -> None:
    """On disk, served by uvicorn (asyncio) and by Hypercorn (trio)."""
    data = tmp_path / "ingest"
    _, summary = run_example("--local", str(data), "--backend", backend)
    check_summary(summary)
    assert summary["backend"] == backend
    samples = sorted(StreamingDataset(data), key=lambda s: s["id"])
    assert [s["id"] for s in samples] == list(range(SAMPLES))
    assert all(s["text"] == f"sample {s['id']}" for s in samples)
    assert all(s["vector"].tolist() == [s["id"] * 0.5, s["id"] + 1.0, -float(s["id"])] for s in samples)
    index = json.loads((data / "index.json").read_text())
    assert sum(c["chunk_size"] for c in index["chunks"]) == SAMPLES
    assert len(index["chunks"]) == summary["chunks"]
