from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from litstream import optimize
from litstream._cli import main

if TYPE_CHECKING:
    import pytest


def test_inspect_prints_the_index_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    optimize(fn=lambda i: {"i": i}, inputs=range(12), output_dir=tmp_path, chunk_size=5, num_workers=1, verbose=False)
    assert main(["inspect", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "items:        12" in out
    assert "chunks:       3" in out
    assert "data_format:  ['int']" in out


def test_inspect_of_a_missing_dataset_fails_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(tmp_path)]) == 1
    assert "holds no index.json" in capsys.readouterr().err


def test_console_script_is_installed() -> None:
    exe = Path(sys.executable).with_name("litstream")
    out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, check=True)
    assert "inspect" in out.stdout


def test_cache_path_and_clear(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "cache-root"
    monkeypatch.setenv("LITSTREAM_CACHE_DIR", str(root))
    assert main(["cache", "path"]) == 0
    assert capsys.readouterr().out.strip() == str(root)
    (root / "abc" / "1").mkdir(parents=True)
    (root / "abc" / "1" / "chunk-0-0.bin").write_bytes(b"x")
    assert main(["cache", "clear"]) == 0
    assert not root.exists()
    assert capsys.readouterr().out.strip() == f"removed {root}"
