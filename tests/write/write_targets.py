"""Where the write tests put datasets: a local directory or a fresh prefix on the session's SeaweedFS.

Imported by tests in ``tests/write`` under this unique name. A test parametrized with ``"s3"`` runs
after the others (see ``tests/storage/conftest.py``): it uses obstore in the pytest process.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from litstream import StreamingDataset
from litstream._core._bridge import run_sync
from litstream.storage._resolver import store_for

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    import pytest

    from litstream import LocalFileStore, Store
    from litstream.storage._base import PutData
    from servers import S3Server

__all__ = ["TARGETS", "GatedStore", "Target", "make_target", "until"]

TARGETS = ["local", "s3"]


@dataclass
class Target:
    """A dataset location: what users pass (``location`` and ``options``) and a store to inspect it."""

    name: str
    location: str
    options: dict[str, Any] | None
    store: Store

    def files(self) -> list[str]:
        """Every object name under the location, sorted."""
        return [meta.path for meta in run_sync(self.store.list)]

    def read(self, name: str) -> bytes:
        return run_sync(self.store.get, name)

    def dataset(self) -> StreamingDataset:
        return StreamingDataset(self.location, storage_options=self.options)


def make_target(name: str, request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    """The target called ``name`` (``"local"`` or ``"s3"``), empty."""
    if name == "local":
        location = str(tmp_path / "dataset")
        return Target(name, location, None, store_for(location))
    s3: S3Server = request.getfixturevalue("s3_server")
    location = f"s3://{s3.bucket}/t{uuid.uuid4().hex[:12]}"
    return Target(name, location, s3.options(), store_for(location, s3.options()))


async def until(condition: Callable[[], bool]) -> None:
    """Wait (20 s at most) until ``condition()`` holds: a state the code under test reaches on its own and
    exposes through ``statistics()`` only, without an event to wait on. The outcome never depends on timing."""
    with anyio.fail_after(20):
        while not condition():  # noqa: ASYNC110 (no event exists for these states)
            await anyio.sleep(0.005)


class GatedStore:
    """A Store that holds every ``put`` of a chunk until ``gate`` is set (a slow server, on demand)."""

    def __init__(self, inner: LocalFileStore) -> None:
        self._inner = inner
        self.gate = anyio.Event()
        self.waiting = 0

    @property
    def url(self) -> str:
        return self._inner.url

    async def get(self, path: str) -> bytes:
        return await self._inner.get(path)

    async def get_range(self, path: str, start: int, length: int) -> bytes:
        return await self._inner.get_range(path, start, length)

    async def get_ranges(self, path: str, starts: Sequence[int], lengths: Sequence[int]) -> list[bytes]:
        return await self._inner.get_ranges(path, starts, lengths)

    async def put(self, path: str, data: PutData) -> None:
        if path.startswith("chunk-"):
            self.waiting += 1
            try:
                await self.gate.wait()
            finally:
                self.waiting -= 1
        await self._inner.put(path, data)

    async def head(self, path: str) -> Any:
        return await self._inner.head(path)

    async def list(self, prefix: str = "") -> Any:
        return await self._inner.list(prefix)

    async def delete(self, path: str) -> None:
        await self._inner.delete(path)
