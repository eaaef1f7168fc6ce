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
    assert capsys.readouterr().out.strip() == f"removed {root} (1 files, 1 bytes)"
    assert main(["cache", "clear"]) == 0
    assert capsys.readouterr().out.strip() == f"nothing to remove: {root} does not exist"


def _fill(root: Path, payload: bytes) -> None:
    (root / "abc" / "1").mkdir(parents=True)
    (root / "abc" / "1" / "chunk-0-0.bin").write_bytes(payload)
    (root / "abc" / "1" / "chunk-0-1.bin").write_bytes(payload)


def test_cache_clear_keeps_litdata_cache_unless_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    own, litdata = tmp_path / "own", tmp_path / "litdata"
    monkeypatch.delenv("LITSTREAM_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(own))
    monkeypatch.setenv("LITDATA_CACHE_DIR", str(litdata))
    _fill(own / "litstream" / "chunks", b"12345")
    _fill(litdata, b"abc")
    assert main(["cache", "path"]) == 0
    assert capsys.readouterr().out.strip() == str(litdata)  # litstream reads LitData's cache when it is set
    assert main(["cache", "clear"]) == 0
    out = capsys.readouterr().out
    assert not (own / "litstream" / "chunks").exists()
    assert sorted(p.name for p in litdata.rglob("*.bin")) == ["chunk-0-0.bin", "chunk-0-1.bin"]
    assert f"removed {own / 'litstream' / 'chunks'} (2 files, 10 bytes)" in out
    assert f"kept LitData's cache {litdata} (LITDATA_CACHE_DIR); pass --include-litdata" in out
    assert main(["cache", "clear", "--include-litdata"]) == 0
    out = capsys.readouterr().out
    assert not litdata.exists()
    assert f"removed {litdata} (2 files, 6 bytes)" in out


def test_cache_clear_of_an_explicit_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    own, mine = tmp_path / "own", tmp_path / "my-cache"
    monkeypatch.setenv("LITSTREAM_CACHE_DIR", str(own))
    _fill(own, b"x")
    _fill(mine, b"yy")
    assert main(["cache", "clear", "--dir", str(mine)]) == 0
    assert capsys.readouterr().out.strip() == f"removed {mine} (2 files, 4 bytes)"
    assert own.exists()  # only what was named
    monkeypatch.chdir(tmp_path)
    assert main(["cache", "clear", "--dir", str(tmp_path)]) == 1
    assert "refusing to delete" in capsys.readouterr().err
    assert own.exists()
