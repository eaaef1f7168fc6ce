"""complete_dataset on local disk and SeaweedFS: rebuilding index.json from partial indexes and chunk
headers after an interrupted run, LitData reading the result, and every case it refuses."""

from __future__ import annotations

import gc
import json
import shutil
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from write_targets import TARGETS, Target, make_target

from dataset_files import without_version_log
from litstream import ChunkWriter, DatasetNotFoundError, FormatError, LocalFileStore, complete_dataset
from litstream._core._bridge import run_sync
from litstream.format._checksum import CHECKSUM_KEY
from peer import require_peer

if TYPE_CHECKING:
    from pathlib import Path

    from litstream import Store


def sample(i: int) -> dict[str, Any]:
    return {"i": i, "s": f"s{i}"}


RANKS = {0: range(0, 7), 1: range(7, 12), 2: range(12, 20)}  # chunk_size=3: 3+3+1, 3+2, 3+3+2 items


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    return make_target(request.param, request, tmp_path)


def interrupted_run(
    store: Store, *, compression: str | None = None, ranks: dict[int, range] = RANKS, level: str | None = None
) -> None:
    """What a killed optimize leaves: each rank's chunks and partial index, no index.json."""

    async def write() -> None:
        for rank, values in ranks.items():
            async with ChunkWriter(
                store, rank=rank, chunk_size=3, compression=compression, compression_level=level
            ) as writer:
                for v in values:
                    await writer.add(sample(v))

    run_sync(write)


def delete(target: Target, *names: str) -> None:
    for name in names:
        run_sync(target.store.delete, name)


def litdata_samples(target: Target, tmp_path: Path) -> list[Any]:
    """The samples LitData's StreamingDataset reads from a local copy of the dataset."""
    litdata = require_peer("litdata")
    copy = tmp_path / "dataset-litdata-copy"
    copy.mkdir()
    for name in target.files():
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        (copy / name).write_bytes(target.read(name))
    ds = litdata.StreamingDataset(str(copy))
    samples = list(ds)
    del ds
    gc.collect()  # LitData leaves chunk files open; close them inside this test
    shutil.rmtree(copy)
    return samples


def chunk_table(target: Target) -> list[tuple[str, int]]:
    return [(c["filename"], c["chunk_size"]) for c in json.loads(target.read("index.json"))["chunks"]]


EXPECTED_CHUNKS = [
    ("chunk-0-0.bin", 3), ("chunk-0-1.bin", 3), ("chunk-0-2.bin", 1),
    ("chunk-1-0.bin", 3), ("chunk-1-1.bin", 2),
    ("chunk-2-0.bin", 3), ("chunk-2-1.bin", 3), ("chunk-2-2.bin", 2),
]  # fmt: skip


@pytest.mark.litdata
@pytest.mark.filterwarnings(r"ignore:unclosed file <_io\.FileIO name='[^']*-litdata-copy/:ResourceWarning")
@pytest.mark.parametrize(
    ("compression", "level"), [(None, None), ("zstd", None), ("zstd", "batch"), ("zstd", "sample")]
)
def test_rebuilds_from_partials_and_orphan_chunks_and_litdata_reads_it(
    target: Target, tmp_path: Path, compression: str | None, level: str | None
) -> None:
    interrupted_run(target.store, compression=compression, level=level)
    delete(target, "2.index.json")  # rank 2 was killed before it wrote its partial index
    assert complete_dataset(target.location, storage_options=target.options) == target.store.url
    infix = ".zstd" if compression and level is None else ""  # "batch" / "sample" chunks keep the .bin name
    assert chunk_table(target) == [(name.replace(".bin", f"{infix}.bin"), n) for name, n in EXPECTED_CHUNKS]
    index = json.loads(target.read("index.json"))
    assert index["config"]["chunk_size"] == 3
    assert index["config"]["compression"] == compression
    assert float(index["updated_at"]) > 0
    assert not [n for n in without_version_log(target.files()) if n.endswith("index.json") and n != "index.json"]
    assert [s["i"] for s in target.dataset()] == list(range(20))
    # chunk_bytes is the uncompressed length, as a writer records it: the rebuilt entries match
    # the ones rank 0's partial index recorded for chunks of equal content.
    assert [s["i"] for s in litdata_samples(target, tmp_path)] == list(range(20))


def test_rebuilt_entries_equal_the_writer_s_own(target: Target, tmp_path: Path) -> None:
    interrupted_run(target.store, compression="zstd")
    written = [json.loads(target.read(f"{rank}.index.json"))["chunks"] for rank in RANKS]
    delete(target, "1.index.json", "2.index.json")  # only rank 0's config survives
    complete_dataset(target.location, storage_options=target.options)
    rebuilt = json.loads(target.read("index.json"))["chunks"]
    # chunks 1 and 2 lost their partial index and its checksums with it: recovered from their headers, unchecked
    kept = [c if c["filename"].startswith("chunk-0-") else _without_checksum(c) for chunks in written for c in chunks]
    assert rebuilt == kept


def _without_checksum(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != CHECKSUM_KEY}


def test_a_valid_index_json_is_left_alone(target: Target) -> None:
    interrupted_run(target.store, ranks={0: range(4)})
    complete_dataset(target.location, storage_options=target.options)
    before = target.read("index.json")
    interrupted_run(target.store, ranks={5: range(4, 6)})  # a stray partial index and chunk
    complete_dataset(target.location, storage_options=target.options)
    assert target.read("index.json") == before
    assert "5.index.json" in target.files()


def test_node_partials_are_merged_in_natural_order(target: Target) -> None:
    interrupted_run(target.store, ranks={2: range(0, 3), 10: range(3, 5)})
    for rank, node in ((2, 0), (10, 1)):
        run_sync(target.store.put, f"{node}-index.json", target.read(f"{rank}.index.json"))
        delete(target, f"{rank}.index.json")
    complete_dataset(target.location, storage_options=target.options)
    assert chunk_table(target) == [("chunk-2-0.bin", 3), ("chunk-10-0.bin", 2)]
    assert without_version_log(target.files()) == ["chunk-10-0.bin", "chunk-2-0.bin", "index.json"]


def test_a_truncated_index_json_is_rebuilt(target: Target) -> None:
    interrupted_run(target.store)
    run_sync(target.store.put, "index.json", b'{"chunks": [{"chunk_bytes": 4')
    complete_dataset(target.location, storage_options=target.options)
    assert chunk_table(target) == EXPECTED_CHUNKS


def test_the_config_can_come_from_an_optimize_checkpoint(target: Target) -> None:
    interrupted_run(target.store, ranks={0: range(5)})
    config = json.loads(target.read("0.index.json"))["config"]
    checkpoint = {"chunks": [], "config": config, "inputs_done": 0, "samples_written": 0, "next_chunk_index": 0}
    run_sync(target.store.put, ".checkpoints/checkpoint-0.json", json.dumps(checkpoint).encode())
    delete(target, "0.index.json")
    complete_dataset(target.location, storage_options=target.options)
    assert chunk_table(target) == [("chunk-0-0.bin", 3), ("chunk-0-1.bin", 2)]
    assert [s["i"] for s in target.dataset()] == list(range(5))


def test_chunks_without_any_record_of_the_format_cannot_be_rebuilt(target: Target) -> None:
    interrupted_run(target.store, ranks={0: range(5)})
    delete(target, "0.index.json")
    files = target.files()
    with pytest.raises(FormatError, match=r"2 chunk file\(s\) but no partial index .* records the sample format"):
        complete_dataset(target.location, storage_options=target.options)
    assert target.files() == files


def test_a_missing_listed_chunk_is_reported(target: Target) -> None:
    interrupted_run(target.store, ranks={0: range(5)})
    delete(target, "chunk-0-1.bin")
    with pytest.raises(FormatError, match=r"list chunk files that are missing \(chunk-0-1\.bin\)"):
        complete_dataset(target.location, storage_options=target.options)
    assert "index.json" not in target.files()


def test_a_truncated_chunk_is_reported(target: Target) -> None:
    interrupted_run(target.store)
    delete(target, "2.index.json")
    data = target.read("chunk-2-1.bin")
    run_sync(target.store.put, "chunk-2-1.bin", data[:-5])
    with pytest.raises(FormatError, match=rf"chunk file chunk-2-1\.bin .* \({len(data) - 5} bytes\) is truncated"):
        complete_dataset(target.location, storage_options=target.options)
    assert "index.json" not in target.files()


def test_a_chunk_compressed_otherwise_is_reported(target: Target) -> None:
    interrupted_run(target.store, ranks={0: range(3)})
    interrupted_run(target.store, ranks={1: range(3, 6)}, compression="zstd")
    delete(target, "1.index.json")
    with pytest.raises(FormatError, match=r"chunk-1-0\.zstd\.bin .* is compressed with zstd, but .* compression=None"):
        complete_dataset(target.location, storage_options=target.options)


def test_partials_with_different_configs_are_reported(target: Target) -> None:
    interrupted_run(target.store, ranks={0: range(3)})

    async def other() -> None:
        async with ChunkWriter(target.store, rank=1, chunk_size=3) as writer:
            await writer.add({"x": 1.5})

    run_sync(other)
    with pytest.raises(FormatError, match=r"the config in 1\.index\.json differs from the one in 0\.index\.json"):
        complete_dataset(target.location, storage_options=target.options)
    assert "index.json" not in target.files()


def test_no_dataset_there(target: Target) -> None:
    with pytest.raises(DatasetNotFoundError, match="holds no files: there is no dataset to complete"):
        complete_dataset(target.location, storage_options=target.options)
    run_sync(target.store.put, "notes.txt", b"x")
    with pytest.raises(DatasetNotFoundError, match=r"no index\.json, no partial index and no chunk file"):
        complete_dataset(target.location, storage_options=target.options)


@pytest.mark.anyio
async def test_complete_dataset_can_be_called_from_async_code(tmp_path: Path) -> None:
    target = Target("local", str(tmp_path / "ds"), None, LocalFileStore(tmp_path / "ds"))
    await anyio.to_thread.run_sync(lambda: interrupted_run(target.store, ranks={0: range(2)}))
    complete_dataset(target.location)  # a running event loop in this thread: runs on a helper thread
    assert chunk_table(target) == [("chunk-0-0.bin", 2)]
