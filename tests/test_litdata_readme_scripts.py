"""Training scripts from LitData 0.2.76's README run unchanged with ``import litstream as litdata``.

The scripts live in ``tests/data/litdata_readme/`` (README code; only sizes and paths changed, and a
print of what the loop saw). Each runs in a subprocess with its ``litdata`` imports rewritten to
``litstream`` by the ``litstream migrate`` codemod, and a ``litdata`` module that cannot be imported
next to it (so the litstream run cannot lean on LitData), and, where LitData can run it here, as written
with LitData: both runs must print the same thing. The quick-start script stores JPEG images, which
LitData decodes only with torchvision (not installed beside the pinned torch), so it runs with litstream
alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import litstream
from litstream._cli._migrate import migrate_source
from peer import require_peer

require_peer("litdata")

pytestmark = [pytest.mark.litdata, pytest.mark.slow]

SCRIPTS = Path(__file__).parent / "data" / "litdata_readme"


def _prepare(script: str, lib: str, folder: Path) -> Path:
    """``script`` copied into ``folder``, its imports switched to ``lib``."""
    folder.mkdir(parents=True, exist_ok=True)
    text = (SCRIPTS / script).read_text()
    if lib == "litstream":
        text = migrate_source(text, script).migrated
        assert "litdata" not in text.replace("litdata_readme", "")  # nothing of LitData left but the comments' path
        (folder / "litdata.py").write_text('raise ImportError("this run must not use LitData")\n')
    path = folder / script
    path.write_text(text)
    for helper in ("tokenizer.py",):
        (folder / helper).write_text((SCRIPTS / helper).read_text())
    return path


def _run(path: Path, *args: str, crash_at: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    env.pop("CRASH_AT", None)
    if crash_at is not None:
        env["CRASH_AT"] = str(crash_at)
    return subprocess.run(
        [sys.executable, str(path), *args], capture_output=True, text=True, cwd=path.parent, env=env, timeout=280
    )


def test_quick_start_script(tmp_path: Path) -> None:
    """README "Quick start": optimize random JPEG images with ``ld.Image``, then stream them shuffled."""
    script = _prepare("quickstart.py", "litstream", tmp_path)
    done = _run(script, str(tmp_path / "fast_data"))
    assert done.returncode == 0, done.stderr[-3000:]
    ours = json.loads(done.stdout.strip().splitlines()[-1])
    # drop_last=True keeps whole batches of 64 only: one batch of distinct samples (LitData's count too).
    assert len(ours["indices"]) == len(set(ours["indices"])) == 64
    assert set(ours["indices"]) < set(range(100))
    assert ours["shapes"] == [[3, 32, 32]]  # decoded images, channels first as LitData's
    assert set(ours["classes"]) <= set(range(10))


def _write_raw(root: Path) -> list[str]:
    """SlimPajama-like ``*.jsonl.zst`` files: rows of ``{"text", "meta": {"redpajama_set_name"}}``."""
    import zstandard

    texts = []
    for part in range(3):
        folder = root / "slimpajama-raw" / "SlimPajama-627B" / "train" / f"chunk{part}"
        folder.mkdir(parents=True)
        for number in range(2):
            rows = []
            for row in range(5):
                name = "RedPajamaGithub" if row == 2 else "RedPajamaBook"
                text = f"part {part} file {number} row {row}: " + "lorem ipsum " * (part + row)
                rows.append(json.dumps({"text": text, "meta": {"redpajama_set_name": name}}))
                if name != "RedPajamaGithub":
                    texts.append(text)
            data = zstandard.ZstdCompressor().compress(("\n".join(rows) + "\n").encode())
            (folder / f"example_train_{number}.jsonl.zst").write_bytes(data)
    return texts


def test_llm_pretraining_script(tmp_path: Path) -> None:
    """README "LLM Pre-training": tokenize zstd JSON lines with TokensLoader, stream shuffled token windows."""
    printed: dict[str, Any] = {}
    for lib in ("litdata", "litstream"):
        script = _prepare("pretrain.py", lib, tmp_path / lib)
        texts = _write_raw(script.parent)
        done = _run(script)
        assert done.returncode == 0, done.stderr[-3000:]
        printed[lib] = json.loads(done.stdout.strip().splitlines()[-1])
    batches = printed["litstream"]
    windows = [w for batch in batches for w in batch]
    tokens = sum(len(t.encode()) + 1 for t in texts)
    assert len(windows) > 10
    assert all(len(w) == 9 for w in windows)
    assert len(windows) <= tokens // 9
    assert {v for w in windows for v in w} <= set(range(257))
    assert batches == printed["litdata"]  # the same windows, in the same shuffled order


@pytest.fixture
def ints_60(tmp_path: Path) -> str:
    out = tmp_path / "my-data"
    litstream.optimize(
        fn=_sample, inputs=list(range(60)), output_dir=str(out), chunk_size=7, num_workers=1, verbose=False
    )
    return str(out)


def _sample(i: int) -> dict[str, int]:
    return {"x": i}


def _batches(done: subprocess.CompletedProcess[str]) -> list[list[int]]:
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("[")]


@pytest.mark.parametrize("crash_at", [11])
def test_pause_and_resume_script(tmp_path: Path, ints_60: str, crash_at: int) -> None:
    """README "Pause, resume data streaming": a run dies at batch ``crash_at``; the next one resumes it."""
    printed: dict[str, list[list[list[int]]]] = {}
    for lib in ("litdata", "litstream"):
        script = _prepare("resume.py", lib, tmp_path / lib)
        first = _run(script, ints_60, crash_at=crash_at)
        assert first.returncode == 3, first.stderr[-3000:]
        second = _run(script, ints_60)
        assert second.returncode == 0, second.stderr[-3000:]
        printed[lib] = [_batches(first), _batches(second)]
    (script.parent / "dataloader_state.pt").unlink()
    uninterrupted = _run(script, ints_60)
    assert uninterrupted.returncode == 0, uninterrupted.stderr[-3000:]
    full = _batches(uninterrupted)
    crashed, resumed = printed["litstream"]
    assert len(crashed) == crash_at
    saved = (crash_at - 1) // 3 * 3  # the last batch whose state was saved before the crash
    assert crashed == full[:crash_at]
    assert crashed[: saved + 1] + resumed == full  # the rest of the epoch, each sample once
    assert sorted(v for batch in full for v in batch) == list(range(60))
    assert printed["litstream"] == printed["litdata"]
