"""A listing cut short (a truncated ListObjectsV2 body, a reset connection) is retried like a GET.

A real server cannot cut a listing short on demand, so the fault is injected through the seam every
listing goes through: the store. ``hostile.FaultStore`` wraps a real SeaweedFS store and fails its first
``n`` listings as the store layer reports such a failure; everything else reaches the server. One fault
during ``optimize`` or raw indexing is ridden out; a fault that persists ends, once the store's own retry
settings (``storage_options``) are spent, in ``RetriesExhaustedError`` naming the location and the attempts.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from hostile import FaultStore
from litstream import RetriesExhaustedError, StorageError, StreamingDataset, optimize
from litstream.index._raw_indexer import FileIndexer, build_or_load_index
from litstream.storage._listing import list_retrying
from litstream.storage._resolver import store_for

if TYPE_CHECKING:
    from pathlib import Path

    from servers import S3Server

pytestmark = pytest.mark.usefixtures("obstore_in_process")

RETRIES = {"max_retries": 3, "backoff_initial": 0.01, "backoff_max": 0.05}


def _s3(s3_server: S3Server, **options: Any) -> tuple[str, Any]:
    url = f"s3://{s3_server.bucket}/listing-{uuid.uuid4().hex[:12]}"
    return url, store_for(url, {**s3_server.options(), **options})


def _sample(i: int) -> dict[str, int]:
    return {"i": i}


@pytest.mark.parametrize("kind", ["truncated", "reset"])
def test_one_cut_listing_during_optimize_is_ridden_out(s3_server: S3Server, kind: str) -> None:
    url, store = _s3(s3_server, **RETRIES)
    faulty = FaultStore(store, faults=1, kind=kind)
    optimize(_sample, list(range(6)), output_dir=faulty, chunk_size=2, num_workers=1)
    assert faulty.faults == 0
    assert faulty.listings >= 2
    got = [s["i"] for s in StreamingDataset(url, storage_options=s3_server.options())]
    assert sorted(got) == list(range(6))


@pytest.mark.parametrize("kind", ["truncated", "reset"])
def test_a_persistent_cut_listing_during_optimize_exhausts_the_retries(s3_server: S3Server, kind: str) -> None:
    url, store = _s3(s3_server, **RETRIES)
    faulty = FaultStore(store, faults=10**6, kind=kind)
    with pytest.raises(RetriesExhaustedError, match=r"list failed for .* after 4 attempts") as info:
        optimize(_sample, list(range(6)), output_dir=faulty, chunk_size=2, num_workers=1)
    assert url in str(info.value)
    assert faulty.listings == 4  # max_retries=3 from storage_options: the same settings as a GET's


def _raw_folder(s3_server: S3Server, **options: Any) -> tuple[str, Any]:
    url, store = _s3(s3_server, **options)

    async def upload() -> None:
        for name in ("a.txt", "b/c.txt", "d.txt"):
            await store.put(name, name.encode())

    anyio.run(upload)
    return url, store


@pytest.mark.parametrize("kind", ["truncated", "reset"])
def test_one_cut_listing_during_raw_indexing_is_ridden_out(s3_server: S3Server, tmp_path: Path, kind: str) -> None:
    url, store = _raw_folder(s3_server, **RETRIES)
    faulty = FaultStore(store, faults=1, kind=kind)
    files = build_or_load_index(
        FileIndexer(), faulty, url, tmp_path, recompute=True, storage_options=None, remote=True, upload=False
    )
    assert [f.path for f in files] == [f"{url}/a.txt", f"{url}/b/c.txt", f"{url}/d.txt"]
    assert faulty.listings == 2


def test_a_persistent_cut_listing_during_raw_indexing_exhausts_the_retries(s3_server: S3Server, tmp_path: Path) -> None:
    url, store = _raw_folder(s3_server, **RETRIES)
    faulty = FaultStore(store, faults=10**6)
    with pytest.raises(RetriesExhaustedError, match="after 4 attempts"):
        build_or_load_index(
            FileIndexer(), faulty, url, tmp_path, recompute=True, storage_options=None, remote=True, upload=False
        )
    assert faulty.listings == 4


@pytest.mark.anyio
async def test_with_retries_off_a_cut_listing_fails_at_once(s3_server: S3Server) -> None:
    _, store = _s3(s3_server, max_retries=0)
    faulty = FaultStore(store, faults=1)
    with pytest.raises(StorageError, match="ListObjectsV2 response body ended") as info:
        await list_retrying(faulty)
    assert not isinstance(info.value, RetriesExhaustedError)
    assert faulty.listings == 1
    assert await list_retrying(faulty) == []  # the next listing reaches the server
