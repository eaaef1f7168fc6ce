"""merge_datasets with object storage: the real S3 server (SeaweedFS), compressed inputs included (B20).

Lives under tests/storage/ so it runs after the tests that fork (it uses obstore in this process).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from storage_backends import unique

from dataset_files import without_version_log
from litstream import ConfigurationError, StreamingDataset, astream, merge_datasets, optimize, train_test_split
from litstream.storage._resolver import store_for

if TYPE_CHECKING:
    from pathlib import Path

    from servers import S3Server


def _first(i: int) -> dict[str, Any]:
    return {"i": i, "name": f"a{i}"}


def _second(i: int) -> dict[str, Any]:
    return {"i": 100 + i, "name": f"b{i}"}


async def _keys(url: str, options: dict[str, Any]) -> list[str]:
    return [m.path for m in await store_for(url, options).list()]


async def _get(url: str, options: dict[str, Any], name: str) -> bytes:
    return await store_for(url, options).get(name)


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_merge_s3_inputs_into_s3(s3_server: S3Server, tmp_path: Path, compression: str | None) -> None:
    options = s3_server.options()
    base = f"s3://{s3_server.bucket}/{unique()}"
    a, b, out = f"{base}/a", f"{base}/b", f"{base}/out"
    optimize(_first, range(9), a, chunk_size=4, compression=compression, num_workers=1, verbose=False,
             storage_options=options)  # fmt: skip
    optimize(_second, range(5), b, chunk_size=4, compression=compression, num_workers=1, verbose=False,
             storage_options=options)  # fmt: skip
    merge_datasets([a, b], out, storage_options=options)

    index = json.loads(anyio.run(_get, out, options, "index.json"))
    infix = ".zstd" if compression else ""
    names = [c["filename"] for c in index["chunks"]]
    assert names == [f"chunk-0-{k}{infix}.bin" for k in range(5)]
    assert sorted(without_version_log(anyio.run(_keys, out, options))) == sorted([*names, "index.json"])
    expected = [*range(9), *range(100, 105)]
    ds = StreamingDataset(out, storage_options=options, cache_dir=tmp_path / "cache")
    assert len(ds) == 14
    assert [s["i"] for s in ds] == expected
    assert [ds[k]["name"] for k in (0, 9, 13)] == ["a0", "b0", "b4"]

    async def collect() -> list[int]:
        part = train_test_split(StreamingDataset(out, storage_options=options), [0.5, 0.5], shuffle=False)[1]
        return [s["i"] async for s in astream(part)]

    assert anyio.run(collect) == expected[7:]
    assert anyio.run(collect, backend="trio") == expected[7:]


def test_merge_local_inputs_into_s3(s3_server: S3Server, tmp_path: Path) -> None:
    options = s3_server.options()
    out = f"s3://{s3_server.bucket}/{unique()}/merged"
    optimize(_first, range(6), tmp_path / "a", chunk_size=4, compression="zstd", num_workers=1, verbose=False)
    optimize(_second, range(6), tmp_path / "b", chunk_size=4, compression="zstd", num_workers=1, verbose=False)
    merge_datasets([tmp_path / "a", tmp_path / "b"], out, storage_options=options)
    ds = StreamingDataset(out, storage_options=options, cache_dir=tmp_path / "cache")
    assert [s["i"] for s in ds] == [*range(6), *range(100, 106)]


def test_mixed_compression_on_s3_writes_nothing(s3_server: S3Server) -> None:
    options = s3_server.options()
    base = f"s3://{s3_server.bucket}/{unique()}"
    optimize(_first, range(4), f"{base}/a", chunk_size=4, compression="zstd", num_workers=1, verbose=False,
             storage_options=options)  # fmt: skip
    optimize(_second, range(4), f"{base}/b", chunk_size=4, num_workers=1, verbose=False,
             storage_options=options)  # fmt: skip
    with pytest.raises(ConfigurationError, match="compressed and uncompressed datasets cannot be merged"):
        merge_datasets([f"{base}/a", f"{base}/b"], f"{base}/out", storage_options=options)
    assert anyio.run(_keys, f"{base}/out", options) == []
