from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest
from obstore.store import LocalStore, MemoryStore

from litstream import LocalFileStore, ObjectNotFoundError, ObstoreStore, StorageError, Store
from litstream.storage._resolver import Dir, resolve_dir, store_for

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["local-file", "obstore-memory", "obstore-local"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "local-file":
        yield LocalFileStore(tmp_path / "root")
    elif request.param == "obstore-memory":
        yield ObstoreStore(MemoryStore(), url="memory://")
    else:
        (tmp_path / "root").mkdir()
        yield ObstoreStore(LocalStore(str(tmp_path / "root")), url=str(tmp_path / "root"))


async def test_store_contract(store: Store) -> None:
    await store.put("a/b.bin", b"hello world")
    await store.put("c.bin", b"xyz")
    assert await store.get("a/b.bin") == b"hello world"
    assert await store.get_range("a/b.bin", 6, 5) == b"world"
    assert await store.get_ranges("a/b.bin", [0, 6], [5, 5]) == [b"hello", b"world"]
    assert (await store.head("c.bin")).size == 3
    assert [(m.path, m.size) for m in await store.list()] == [("a/b.bin", 11), ("c.bin", 3)]
    assert [m.path for m in await store.list("a/")] == ["a/b.bin"]
    await store.put("c.bin", b"replaced")
    assert await store.get("c.bin") == b"replaced"
    await store.delete("c.bin")
    await store.delete("c.bin")  # deleting a missing object is not an error
    with pytest.raises(ObjectNotFoundError, match=r"c\.bin"):
        await store.get("c.bin")
    with pytest.raises(ObjectNotFoundError):
        await store.head("c.bin")
    assert [m.path for m in await store.list()] == ["a/b.bin"]


async def test_local_put_leaves_no_temp_file_on_failure(tmp_path: Path) -> None:
    store = LocalFileStore(tmp_path)

    (tmp_path / "dir.bin").mkdir()  # a directory where the file should go: os.replace fails
    with pytest.raises(StorageError, match="put failed"):
        await store.put("dir.bin", b"data")
    assert sorted(os.listdir(tmp_path)) == ["dir.bin"]


def test_obstore_store_refuses_use_after_fork() -> None:
    store = ObstoreStore(MemoryStore(), url="memory://")
    store._pid = -1  # what a forked child sees: a store created by another process
    import anyio

    with pytest.raises(StorageError, match="cannot be used across fork"):
        anyio.run(store.get, "x")


def test_resolver_accepts_local_forms(tmp_path: Path) -> None:
    assert resolve_dir(str(tmp_path)) == Dir(path=str(tmp_path))
    assert resolve_dir(f"file://{tmp_path}") == Dir(path=str(tmp_path))
    assert resolve_dir(f"local:{tmp_path}") == Dir(path=str(tmp_path))
    assert resolve_dir(tmp_path / "x") == Dir(path=str(tmp_path / "x"))
    memory = ObstoreStore(MemoryStore())
    assert store_for(memory) is memory
    assert isinstance(store_for(tmp_path), LocalFileStore)


@pytest.mark.parametrize("url", ["s3://bucket/ds", "gs://b/p", "hf://datasets/a/b", "https://x/y"])
def test_resolver_rejects_remote_urls_until_supported(url: str) -> None:
    from litstream import ConfigurationError

    with pytest.raises(ConfigurationError, match=rf"input_dir='{url}': object-store URLs are not supported"):
        resolve_dir(url)
