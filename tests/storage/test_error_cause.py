"""A StorageError from a real server keeps obstore's error as its ``__cause__`` through every read path.

The fault is real: a chunk (or a raw file) is deleted from SeaweedFS after the dataset was opened, so
the read that needs it gets S3's 404. Whatever path carried the read (the synchronous iterator, ``ds[i]``,
the loader, ``astream`` on asyncio and trio, the raw dataset), the error the user catches is litstream's
:class:`~litstream.ObjectNotFoundError` with obstore's own error (the request, the 404) chained under it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import pytest
from storage_backends import unique

from litstream import ObjectNotFoundError, StreamingDataLoader, StreamingDataset, StreamingRawDataset, astream, optimize
from litstream.storage._resolver import store_for

if TYPE_CHECKING:
    from pathlib import Path

    from servers import S3Server

N = 12


def _sample(i: int) -> dict[str, int]:
    return {"i": i}


def _delete(url: str, options: dict[str, Any], key: str) -> None:
    anyio.run(store_for(url, options).delete, key)


def _assert_cause(exc: BaseException, key: str) -> None:
    assert isinstance(exc, ObjectNotFoundError)
    assert key in str(exc)
    cause = exc.__cause__
    assert cause is not None, "obstore's error was dropped"
    assert isinstance(cause, FileNotFoundError)  # obstore raises its not-found errors as FileNotFoundError
    assert key in str(cause)
    assert "404" in str(cause)  # the server's answer, as obstore reports it


@pytest.fixture
def s3_dataset(s3_server: S3Server) -> tuple[str, dict[str, Any]]:
    url = f"s3://{s3_server.bucket}/{unique()}"
    options = s3_server.options()
    optimize(_sample, range(N), url, chunk_size=3, num_workers=1, verbose=False, storage_options=options)
    return url, options


async def _astream_all(ds: StreamingDataset) -> list[Any]:
    async with astream(ds) as samples:
        return [s async for s in samples]


@pytest.mark.parametrize("path", ["iterate", "getitem", "loader", "astream-asyncio", "astream-trio"])
def test_a_chunk_deleted_after_open_raises_with_obstore_cause(
    s3_dataset: tuple[str, dict[str, Any]], tmp_path: Path, path: str
) -> None:
    url, options = s3_dataset
    ds = StreamingDataset(url, storage_options=options, cache_dir=tmp_path / "cache")
    assert len(ds) == N  # the index is read: the dataset is open
    _delete(url, options, "chunk-0-2.bin")
    with pytest.raises(ObjectNotFoundError) as info:
        if path == "iterate":
            list(ds)
        elif path == "getitem":
            ds[7]  # chunk 2 holds items 6..8
        elif path == "loader":
            list(StreamingDataLoader(ds, batch_size=2, num_workers=0))
        else:
            anyio.run(_astream_all, ds, backend=path.split("-")[1])
    _assert_cause(info.value, "chunk-0-2.bin")


@pytest.mark.parametrize("path", ["iterate", "getitem"])
def test_a_raw_file_deleted_after_listing_raises_with_obstore_cause(
    s3_server: S3Server, tmp_path: Path, path: str
) -> None:
    url, options = f"s3://{s3_server.bucket}/{unique()}", s3_server.options()
    store = store_for(url, options)
    for k in range(4):
        anyio.run(store.put, f"f{k}.bin", bytes([k]) * 100)
    ds = StreamingRawDataset(url, cache_dir=tmp_path / "cache", storage_options=options)
    assert len(ds) == 4  # listed
    _delete(url, options, "f2.bin")
    with pytest.raises(ObjectNotFoundError) as info:
        if path == "iterate":
            list(ds)
        else:
            ds[2]
    _assert_cause(info.value, "f2.bin")
