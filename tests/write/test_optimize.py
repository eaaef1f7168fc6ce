from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np
import pytest
from obstore.store import MemoryStore

from dataset_files import without_version_log
from litstream import (
    ChunkWriter,
    ConfigurationError,
    FormatError,
    ObstoreStore,
    OutputNotEmptyError,
    StreamingDataset,
    WorkerError,
    optimize,
)
from litstream.write._optimize import split_inputs

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


def _index(d: Path) -> dict[str, Any]:
    index: dict[str, Any] = json.loads((d / "index.json").read_text())
    return index


def write_ints(d: Path, n: int, **kwargs: Any) -> None:
    kwargs.setdefault("chunk_size", 5)
    kwargs.setdefault("num_workers", 1)
    optimize(fn=lambda i: i, inputs=list(range(n)), output_dir=d, verbose=False, **kwargs)


def test_split_inputs_gives_the_remainder_to_the_last_workers() -> None:
    assert [list(r) for r in split_inputs(5, 2)] == [[0, 1], [2, 3, 4]]
    assert [list(r) for r in split_inputs(2, 4)] == [[], [], [0], [1]]
    assert [len(r) for r in split_inputs(10, 3)] == [3, 3, 4]


def test_optimize_single_worker_round_trip(tmp_path: Path) -> None:
    write_ints(tmp_path, 23, chunk_size=5)
    index = _index(tmp_path)
    assert [c["filename"] for c in index["chunks"]] == [f"chunk-0-{k}.bin" for k in range(5)]
    assert [c["chunk_size"] for c in index["chunks"]] == [5, 5, 5, 5, 3]
    assert index["config"]["data_format"] == ["int"]
    assert float(index["updated_at"]) > 0
    assert list(StreamingDataset(tmp_path)) == list(range(23))
    assert sorted(without_version_log(os.listdir(tmp_path))) == sorted(
        ["index.json", *(f"chunk-0-{k}.bin" for k in range(5))]
    )


def gen_first_two(i: int) -> Iterator[dict[str, Any]]:
    if i < 2:
        yield {"x": i, "y": float(i)}


@pytest.mark.parametrize("inputs", [list(range(8)), [0, 1]])
def test_b18_workers_that_produce_nothing(tmp_path: Path, inputs: list[int]) -> None:
    optimize(fn=gen_first_two, inputs=inputs, output_dir=tmp_path, num_workers=4, chunk_size=4, verbose=False)
    ds = StreamingDataset(tmp_path)
    assert len(ds) == 2
    assert [ds[0], ds[1]] == [{"x": 0, "y": 0.0}, {"x": 1, "y": 1.0}]
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".index.json")]


def test_generator_fn_yields_several_samples_and_none_is_skipped(tmp_path: Path) -> None:
    def fn(i: int) -> Iterator[int]:
        yield from range(i * 10, i * 10 + i)

    optimize(fn=fn, inputs=[0, 1, 2, 3], output_dir=tmp_path / "g", chunk_size=2, num_workers=1, verbose=False)
    assert list(StreamingDataset(tmp_path / "g")) == [10, 20, 21, 30, 31, 32]
    optimize(
        fn=lambda i: None if i % 2 else i,
        inputs=range(6),
        output_dir=tmp_path / "n",
        chunk_size=2,
        num_workers=1,
        verbose=False,
    )
    assert list(StreamingDataset(tmp_path / "n")) == [0, 2, 4]


def test_multi_worker_chunks_merge_in_natural_order(tmp_path: Path) -> None:
    optimize(fn=lambda i: i, inputs=range(24), output_dir=tmp_path, chunk_size=1, num_workers=12, verbose=False)
    names = [c["filename"] for c in _index(tmp_path)["chunks"]]
    assert names[:2] == ["chunk-0-0.bin", "chunk-0-1.bin"]
    assert names[4:6] == ["chunk-2-0.bin", "chunk-2-1.bin"]
    assert names[-2:] == ["chunk-11-0.bin", "chunk-11-1.bin"]
    assert list(StreamingDataset(tmp_path)) == list(range(24))


@pytest.mark.parametrize("chunking", [{"chunk_size": 5}, {"chunk_bytes": "1KB"}, {"chunk_bytes": 300}])
def test_b21_chunk_bytes_equals_file_size(tmp_path: Path, chunking: dict[str, Any]) -> None:
    optimize(
        fn=lambda i: {"i": i, "v": np.full(7, i)},
        inputs=range(100),
        output_dir=tmp_path,
        num_workers=1,
        verbose=False,
        **chunking,
    )
    for chunk in _index(tmp_path)["chunks"]:
        assert chunk["chunk_bytes"] == (tmp_path / chunk["filename"]).stat().st_size
    if "chunk_bytes" in chunking:
        assert _index(tmp_path)["config"]["chunk_bytes"] == (1000 if chunking["chunk_bytes"] == "1KB" else 300)


def test_compressed_chunks_record_uncompressed_size(tmp_path: Path) -> None:
    optimize(
        fn=lambda i: np.zeros((10, 10)) + i,
        inputs=range(20),
        output_dir=tmp_path,
        chunk_size=8,
        compression="zstd",
        num_workers=1,
        verbose=False,
    )
    index = _index(tmp_path)
    assert index["config"]["compression"] == "zstd"
    assert [c["filename"] for c in index["chunks"]] == [
        "chunk-0-0.zstd.bin",
        "chunk-0-1.zstd.bin",
        "chunk-0-2.zstd.bin",
    ]
    for chunk in index["chunks"]:
        assert chunk["chunk_bytes"] > (tmp_path / chunk["filename"]).stat().st_size
    ds = StreamingDataset(tmp_path)
    assert [float(a[0, 0]) for a in ds] == [float(i) for i in range(20)]
    assert float(ds[13][5, 5]) == 13.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "give one of chunk_size"),
        ({"chunk_size": 2, "chunk_bytes": "1MB"}, "give only one of chunk_size=2 and chunk_bytes='1MB'"),
        ({"chunk_bytes": "64MiB"}, "chunk_bytes='64MiB' is not a size"),
        ({"chunk_size": 0}, "chunk_size must be a positive int"),
        ({"chunk_size": 2, "compression": "gzip"}, "compression='gzip' is not supported"),
        ({"chunk_size": 2, "mode": "replace"}, "mode must be None, 'append' or 'overwrite', got 'replace'"),
        ({"chunk_size": 2, "num_workers": -1}, "num_workers must be a non-negative int"),
    ],
)
def test_bad_arguments_fail_before_anything_is_written(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    out = tmp_path / "out"
    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(").replace("?", r"\?")):
        optimize(fn=lambda i: i, inputs=range(4), output_dir=out, verbose=False, **kwargs)
    assert not out.exists()


@pytest.mark.parametrize("inputs", [[], "abc", 5])
def test_inputs_must_be_a_non_empty_sequence(tmp_path: Path, inputs: Any) -> None:
    with pytest.raises(ConfigurationError, match="inputs must be a non-empty sequence"):
        optimize(fn=lambda i: i, inputs=inputs, output_dir=tmp_path / "o", chunk_size=1, verbose=False)
    assert not (tmp_path / "o").exists()


def test_non_empty_output_needs_a_mode(tmp_path: Path) -> None:
    write_ints(tmp_path, 10)
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(OutputNotEmptyError, match=r"is not empty .*mode='overwrite'"):
        write_ints(tmp_path, 3)
    assert sorted(os.listdir(tmp_path)) == before
    write_ints(tmp_path, 3, mode="overwrite")
    assert list(StreamingDataset(tmp_path)) == [0, 1, 2]


def test_append_continues_chunk_numbering(tmp_path: Path) -> None:
    write_ints(tmp_path, 7, chunk_size=5)
    optimize(
        fn=lambda i: 100 + i,
        inputs=range(3),
        output_dir=tmp_path,
        chunk_size=5,
        num_workers=1,
        mode="append",
        verbose=False,
    )
    assert [c["filename"] for c in _index(tmp_path)["chunks"]] == ["chunk-0-0.bin", "chunk-0-1.bin", "chunk-0-2.bin"]
    assert list(StreamingDataset(tmp_path)) == [0, 1, 2, 3, 4, 5, 6, 100, 101, 102]


def test_unsupported_sample_names_the_input_and_leaves_nothing(tmp_path: Path) -> None:
    import torch

    with pytest.raises(
        WorkerError,
        match=r"input 0 \(index 0, worker 0\): FormatError: cannot serialize a tensor of dtype torch.bfloat16",
    ):
        optimize(
            fn=lambda i: {"t": torch.zeros(2, dtype=torch.bfloat16)},
            inputs=range(3),
            output_dir=tmp_path,
            chunk_size=1,
            num_workers=1,
            verbose=False,
        )
    assert os.listdir(tmp_path) == []


def test_changing_structure_is_an_error_not_silent_corruption(tmp_path: Path) -> None:
    # the pytree layout (the default's Arrow rows store a missing field as None, as LitData does:
    # tests/compat/test_arrow_compat.py's "sparse" samples)
    with pytest.raises(
        WorkerError,
        match=r"input 1 \(index 1, worker 0\): FormatError: sample structure \{'b': _\} differs from the first "
        r"sample's \{'a': _\} \(_ is a leaf\)",
    ):
        optimize(
            fn=lambda i: {"a": i} if i == 0 else {"b": i},
            inputs=range(2),
            output_dir=tmp_path,
            chunk_size=1,
            num_workers=1,
            verbose=False,
            chunk_format="pytree",
        )
    assert os.listdir(tmp_path) == []


def boom(i: int) -> int:
    if i == 5:
        raise KeyError("no label")
    return i


def test_failing_worker_process_stops_the_job_and_cleans_up(tmp_path: Path) -> None:
    with pytest.raises(WorkerError, match=r"fn failed on input 5 \(index 5, worker 1\): KeyError"):
        optimize(fn=boom, inputs=range(8), output_dir=tmp_path, chunk_size=1, num_workers=2, verbose=False)
    assert not (tmp_path / "index.json").exists()
    assert [n for n in os.listdir(tmp_path) if not n.startswith(".")] == []


def test_progress_bar_reaches_the_input_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    optimize(fn=lambda i: i, inputs=range(12), output_dir=tmp_path, chunk_size=4, num_workers=2, verbose=True)
    assert "12/12" in capsys.readouterr().err


@pytest.mark.anyio
async def test_chunk_writer_on_an_obstore_memory_store(anyio_backend: str, obstore_in_process: None) -> None:
    store = ObstoreStore(MemoryStore(), url="memory://")
    async with ChunkWriter(store, rank=3, chunk_size=2) as writer:
        for i in range(5):
            await writer.add({"i": i, "name": f"s{i}"})
    assert writer.partial_index is not None
    assert [c.filename for c in writer.partial_index.chunks] == ["chunk-3-0.bin", "chunk-3-1.bin", "chunk-3-2.bin"]
    assert sorted(m.path for m in await store.list()) == [
        "3.index.json",
        "chunk-3-0.bin",
        "chunk-3-1.bin",
        "chunk-3-2.bin",
    ]
    # A dataset without index.json but with partials is no committed dataset; version="partial" reads it by
    # merging them in memory, with a warning.
    from litstream import DatasetNotFoundError, astream

    with pytest.raises(DatasetNotFoundError, match=r"partial indexes \(3\.index\.json\) but never committed"):
        [s async for s in astream(store)]
    with pytest.warns(UserWarning, match=r"serving the partial indexes of an uncommitted run \(1 files\)"):
        assert [s["name"] async for s in astream(store, version="partial")] == ["s0", "s1", "s2", "s3", "s4"]


@pytest.mark.anyio
async def test_chunk_writer_rejects_a_mismatched_sample(anyio_backend: str, obstore_in_process: None) -> None:
    store = ObstoreStore(MemoryStore())
    with pytest.raises(
        FormatError,
        match=r"leaf 0 of the sample \(sample\) is a str, which the 'int' format fixed by the first sample cannot",
    ):
        async with ChunkWriter(store, chunk_size=2) as writer:
            await writer.add(1)
            await writer.add("x")
    assert await store.list() == []


def test_empty_run_without_any_sample_gives_an_index_with_no_chunks(tmp_path: Path) -> None:
    optimize(fn=lambda i: None, inputs=range(3), output_dir=tmp_path, chunk_size=1, num_workers=1, verbose=False)
    assert _index(tmp_path)["chunks"] == []
    from litstream import DatasetNotFoundError

    with pytest.raises(DatasetNotFoundError, match="has no chunks"):
        len(StreamingDataset(tmp_path))
    assert anyio is not None
