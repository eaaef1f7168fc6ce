from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from litstream import optimize
from litstream._cli._main import human_bytes, human_time, main

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
    assert capsys.readouterr().out.strip() == (
        f"Chunk cache directory (default for remote datasets): {root} (set by LITSTREAM_CACHE_DIR)"
    )
    assert main(["cache", "path", "--plain"]) == 0
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
    assert main(["cache", "path", "--plain"]) == 0
    assert capsys.readouterr().out.strip() == str(litdata)  # litstream reads LitData's cache when it is set
    assert main(["cache", "path"]) == 0
    assert capsys.readouterr().out.strip().endswith(f": {litdata} (LitData's, set by LITDATA_CACHE_DIR)")
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


def test_version_flag_prints_the_package_version() -> None:
    exe = Path(sys.executable).with_name("litstream")
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, check=True)
    import litstream

    assert out.stdout.strip() == f"litstream {litstream.__version__}"


def test_inspect_prints_sizes_and_dates_for_humans(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    optimize(fn=lambda i: {"i": i}, inputs=range(12), output_dir=tmp_path, chunk_size=5, num_workers=1, verbose=False)
    index = json.loads((tmp_path / "index.json").read_text())
    total = sum(c["chunk_bytes"] for c in index["chunks"])
    index["updated_at"] = "1700000000.25"
    (tmp_path / "index.json").write_text(json.dumps(index))
    assert main(["inspect", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "chunks:       3 (2 to 5 items each)" in out
    assert f"size:         {human_bytes(total)} uncompressed ({total} bytes)" in out
    assert "updated:      2023-11-14 22:13:20 UTC" in out
    assert "compression:  none" in out


def test_inspect_json_gives_raw_numbers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    optimize(fn=lambda i: {"i": i}, inputs=range(12), output_dir=tmp_path, chunk_size=5, num_workers=1, verbose=False)
    index = json.loads((tmp_path / "index.json").read_text())
    assert main(["inspect", "--json", str(tmp_path)]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["items"] == 12
    assert got["chunks"] == 3
    assert got["bytes"] == sum(c["chunk_bytes"] for c in index["chunks"])
    assert got["items_per_chunk"] == {"min": 2, "max": 5}
    assert got["config"]["data_format"] == ["int"]
    assert got["updated_at"] == index["updated_at"]


def test_human_units() -> None:
    assert human_bytes(0) == "0 B"
    assert human_bytes(999) == "999 B"
    assert human_bytes(1500) == "1.5 kB"
    assert human_bytes(64_000_000) == "64.0 MB"
    assert human_bytes(3 * 10**15) == "3000.0 TB"
    assert human_time(None).startswith("unfinished")
    assert human_time("not-a-number") == "not-a-number"
    assert human_time("0") == "1970-01-01 00:00:00 UTC"


def _three_datasets(root: Path) -> list[Path]:
    dirs = []
    for n in (3, 7, 11):
        out = root / f"ds-{n:02d}"
        optimize(fn=lambda i: {"i": i}, inputs=range(n), output_dir=out, chunk_size=5, num_workers=1, verbose=False)
        dirs.append(out)
    return dirs


def test_inspect_takes_several_datasets_and_a_glob_the_shell_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dirs = _three_datasets(tmp_path)
    assert main(["inspect", str(dirs[0]), str(dirs[2])]) == 0
    out = capsys.readouterr().out
    assert [line.split()[-1] for line in out.splitlines() if line.startswith("items:")] == ["3", "11"]
    assert main(["inspect", "--json", str(tmp_path / "ds-*")]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [(s["dataset"], s["items"]) for s in got] == [(str(d), n) for d, n in zip(dirs, (3, 7, 11), strict=True)]


def test_inspect_reports_a_bad_dataset_and_still_prints_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dirs = _three_datasets(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["inspect", "--json", str(dirs[1]), str(empty)]) == 1
    captured = capsys.readouterr()
    assert [s["items"] for s in json.loads(captured.out)] == [7]
    assert "holds no index.json" in captured.err
    assert str(empty) in captured.err


def test_inspect_into_a_closed_pipe_exits_quietly(tmp_path: Path) -> None:
    # `litstream inspect DIR | head -1`: the reader may leave before the output is written
    optimize(fn=lambda i: {"i": i}, inputs=range(3), output_dir=tmp_path, chunk_size=5, num_workers=1, verbose=False)
    exe = Path(sys.executable).with_name("litstream")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody reads: the first write fails with EPIPE
    try:
        done = subprocess.run(
            [str(exe), "inspect", str(tmp_path)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (1, "")
