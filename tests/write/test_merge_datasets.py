"""merge_datasets: several optimized datasets copied into one (case B20), local directories.

Object storage (SeaweedFS) is covered in tests/storage/test_merge_datasets_s3.py, LitData reading the
merged dataset in tests/compat/test_merge_compat.py.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from dataset_files import without_version_log
from litstream import (
    ConfigurationError,
    DatasetNotFoundError,
    ObjectNotFoundError,
    OutputNotEmptyError,
    StreamingDataLoader,
    StreamingDataset,
    merge_datasets,
    optimize,
)

if TYPE_CHECKING:
    from pathlib import Path


def _index(d: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((d / "index.json").read_text())
    return result


def _files(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def _write(d: Path, fn: Any, n: int, **kwargs: Any) -> Path:
    kwargs.setdefault("chunk_size", 4)
    kwargs.setdefault("num_workers", 1)
    optimize(fn=fn, inputs=list(range(n)), output_dir=d, verbose=False, **kwargs)
    return d


def test_b20_compressed_inputs(tmp_path: Path) -> None:
    d1 = _write(tmp_path / "d1", lambda i: i, 10, compression="zstd")
    d2 = _write(tmp_path / "d2", lambda i: 10 + i, 10, compression="zstd")
    d3 = tmp_path / "d3"
    merge_datasets(input_dirs=[d1, d2], output_dir=d3)
    ds = StreamingDataset(d3)
    assert len(ds) == 20
    assert ds[:] == list(range(20))
    assert [int(i) for i in ds] == list(range(20))
    index = _index(d3)
    names = [c["filename"] for c in index["chunks"]]
    assert names == [f"chunk-0-{k}.zstd.bin" for k in range(6)]
    assert all((d3 / name).exists() for name in names)
    assert without_version_log(_files(d3)) == sorted([*names, "index.json"])
    assert index["config"]["compression"] == "zstd"
    assert [c["chunk_size"] for c in index["chunks"]] == [4, 4, 2, 4, 4, 2]
    assert float(index["updated_at"]) > 0
    # The inputs are untouched.
    assert without_version_log(_files(d1)) == [
        "chunk-0-0.zstd.bin",
        "chunk-0-1.zstd.bin",
        "chunk-0-2.zstd.bin",
        "index.json",
    ]


def _sample(i: int) -> dict[str, Any]:
    return {"i": i, "name": f"s{i}", "x": np.full(3, i, dtype=np.float32)}


def test_three_inputs_with_several_writers_keep_their_order(tmp_path: Path) -> None:
    a = _write(tmp_path / "a", _sample, 9, num_workers=2)  # chunk-0-*, chunk-1-*
    b = _write(tmp_path / "b", lambda i: _sample(100 + i), 5, chunk_size=2)
    c = _write(tmp_path / "c", lambda i: _sample(200 + i), 3)
    out = tmp_path / "out"
    merge_datasets([a, str(b), c], out, max_workers=2)
    expected = [*range(9), *range(100, 105), *range(200, 203)]
    ds = StreamingDataset(out)
    samples = ds[:]
    assert [s["i"] for s in samples] == expected
    assert [s["name"] for s in samples] == [f"s{i}" for i in expected]
    assert all(np.array_equal(s["x"], np.full(3, s["i"], dtype=np.float32)) for s in samples)
    names = [c["filename"] for c in _index(out)["chunks"]]
    assert names == [f"chunk-0-{k}.bin" for k in range(len(names))]
    loader = StreamingDataLoader(StreamingDataset(out, shuffle=True), batch_size=4)
    assert sorted(int(i) for batch in loader for i in batch["i"]) == expected


def test_zstd_levels_may_differ(tmp_path: Path) -> None:
    d1 = _write(tmp_path / "d1", lambda i: i, 5, compression="zstd:10")
    d2 = _write(tmp_path / "d2", lambda i: 5 + i, 5, compression="zstd")
    merge_datasets([d1, d2], tmp_path / "out")
    assert StreamingDataset(tmp_path / "out")[:] == list(range(10))
    names = [c["filename"] for c in _index(tmp_path / "out")["chunks"]]
    assert names == ["chunk-0-0.zstd:10.bin", "chunk-0-1.zstd:10.bin", "chunk-0-2.zstd:10.bin", "chunk-0-3.zstd:10.bin"]


def test_compressed_and_uncompressed_are_rejected_before_copying(tmp_path: Path) -> None:
    d1 = _write(tmp_path / "d1", lambda i: i, 10, compression="zstd")
    d2 = _write(tmp_path / "d2", lambda i: 10 + i, 10)
    out = tmp_path / "out"
    with pytest.raises(ConfigurationError) as info:
        merge_datasets([d1, d2], out)
    assert str(info.value) == (
        f"input_dirs[1]={d2} has compression=None but input_dirs[0]={d1} has compression='zstd'; compressed "
        "and uncompressed datasets cannot be merged: re-optimize one of them with the other's compression"
    )
    assert isinstance(info.value, ValueError)
    assert _files(out) == []


@pytest.mark.parametrize(
    ("second", "key"),
    [
        (lambda i: f"s{i}", "data_format"),  # str leaves vs int leaves
        (lambda i: {"b": i}, "data_spec"),  # same leaf types, another structure
    ],
)
def test_incompatible_samples_are_rejected_before_anything_is_written(tmp_path: Path, second: Any, key: str) -> None:
    d1 = _write(tmp_path / "d1", lambda i: {"a": i} if key == "data_spec" else i, 4)
    d2 = _write(tmp_path / "d2", second, 4)
    out = tmp_path / "out"
    with pytest.raises(ConfigurationError, match=re.escape(f"input_dirs[1]={d2} has {key}=")) as info:
        merge_datasets([d1, d2], out)
    assert f"but input_dirs[0]={d1} has {key}=" in str(info.value)
    assert str(info.value).endswith("only datasets whose samples have the same structure and types can be merged")
    assert _files(out) == []


def test_output_must_be_empty_and_not_an_input(tmp_path: Path) -> None:
    d1 = _write(tmp_path / "d1", lambda i: i, 4)
    d2 = _write(tmp_path / "d2", lambda i: i, 4)
    with pytest.raises(ConfigurationError, match=re.escape(f"output_dir {d2} is also input_dirs[1]")):
        merge_datasets([d1, d2], d2)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("keep me")
    with pytest.raises(OutputNotEmptyError, match=re.escape(f"output_dir {busy} is not empty (holds notes.txt)")):
        merge_datasets([d1, d2], busy)
    assert _files(busy) == ["notes.txt"]


@pytest.mark.parametrize(
    ("inputs", "kwargs", "message"),
    [
        (1, {}, "input_dirs must name at least 2 datasets to merge, got 1"),
        (2, {"max_workers": 0}, "max_workers must be an int >= 1 (parallel chunk copies), got 0"),
        ("one", {}, "input_dirs must be a list of dataset locations, got"),
    ],
)
def test_bad_arguments(tmp_path: Path, inputs: Any, kwargs: dict[str, Any], message: str) -> None:
    d = _write(tmp_path / "d", lambda i: i, 4)
    arg = str(d) if inputs == "one" else [d] * inputs
    with pytest.raises(ConfigurationError) as info:
        merge_datasets(arg, tmp_path / "out", **kwargs)
    assert str(info.value).startswith(message)
    assert _files(tmp_path / "out") == []


def test_an_input_without_index_is_rejected(tmp_path: Path) -> None:
    d1 = _write(tmp_path / "d1", lambda i: i, 4)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DatasetNotFoundError, match=re.escape(f"input_dirs[1]={empty} holds no index.json")):
        merge_datasets([d1, empty], tmp_path / "out")
    assert _files(tmp_path / "out") == []


def test_a_failed_copy_leaves_no_dataset(tmp_path: Path) -> None:
    d1 = _write(tmp_path / "d1", lambda i: i, 12)
    d2 = _write(tmp_path / "d2", lambda i: i, 12)
    (d2 / "chunk-0-2.bin").unlink()  # listed in d2's index.json, gone from disk
    out = tmp_path / "out"
    with pytest.raises(ObjectNotFoundError, match=re.escape("chunk-0-2.bin")):
        merge_datasets([d1, d2], out, max_workers=1)
    assert _files(out) == []


@pytest.mark.parametrize("level", ["batch", "sample"])
def test_in_file_compressed_datasets_merge(tmp_path: Path, level: str) -> None:
    d1 = _write(tmp_path / "d1", lambda i: i, 5, compression="zstd", compression_level=level)
    d2 = _write(tmp_path / "d2", lambda i: 5 + i, 5, compression="zstd", compression_level=level)
    out = tmp_path / "out"
    merge_datasets([d1, d2], out)
    names = [c["filename"] for c in json.loads((out / "index.json").read_text())["chunks"]]
    assert all(name.endswith(".bin") and ".zstd" not in name for name in names)
    assert list(StreamingDataset(out, shuffle=False)) == list(range(10))
    d3 = _write(tmp_path / "d3", lambda i: i, 5, compression="zstd")
    with pytest.raises(ConfigurationError, match="compression_level="):
        merge_datasets([d1, d3], tmp_path / "bad")
