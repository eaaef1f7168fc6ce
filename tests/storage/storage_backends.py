"""The storage backends under test, built on demand (imported by conftest and the tests, by this unique name).

Every store gets its own key prefix inside the session's bucket/container, so tests never see each
other's objects.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from obstore.store import LocalStore, MemoryStore

from litstream.storage._resolver import store_for
from litstream.storage._store import HedgedStore, LocalFileStore, ObstoreStore, Store

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    import pytest

    from servers import AzuriteServer, GCSServer, HubServer, S3Server

__all__ = ["READ_ONLY", "WRITABLE", "Backend", "make_backend", "unique"]


def unique() -> str:
    """A fresh key prefix / repository name."""
    return f"t{uuid.uuid4().hex[:12]}"


@dataclass
class Backend:
    """One store under test and how to put objects in it behind its back (for read-only backends)."""

    name: str
    store: Store
    seed: Callable[[str, bytes], None] | None  # None: seed through store.put
    writable: bool = True
    listable: bool = True


WRITABLE = ["local-file", "obstore-memory", "obstore-local", "hedged-memory", "s3", "azure"]
READ_ONLY = ["gcs", "http", "hf"]


def make_backend(name: str, request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """Build the store called ``name`` (starting its server on first use), under a fresh prefix."""
    prefix = unique()
    if name == "local-file":
        return Backend(name, LocalFileStore(tmp_path / "root"), None)
    if name == "obstore-memory":
        return Backend(name, ObstoreStore(MemoryStore(), url="memory://"), None)
    if name == "obstore-local":
        (tmp_path / "root").mkdir()
        return Backend(name, ObstoreStore(LocalStore(str(tmp_path / "root")), url=str(tmp_path / "root")), None)
    if name == "hedged-memory":
        return Backend(name, HedgedStore(ObstoreStore(MemoryStore(), url="memory://"), hedge_delay=0.5), None)
    if name == "s3":
        s3: S3Server = request.getfixturevalue("s3_server")
        return Backend(name, store_for(f"s3://{s3.bucket}/{prefix}", s3.options()), None)
    if name == "azure":
        az: AzuriteServer = request.getfixturevalue("azure_server")
        return Backend(name, store_for(f"azure://litstream-test/{prefix}", az.options()), None)
    if name == "gcs":
        gcs: GCSServer = request.getfixturevalue("gcs_server")
        store = store_for(f"gs://litstream-test/{prefix}", gcs.options())
        return Backend(name, store, lambda key, data: gcs.upload("litstream-test", f"{prefix}/{key}", data), False)
    hub: HubServer = request.getfixturevalue("hub_server")
    if name == "http":
        folder = hub.root / "static" / prefix

        def put_file(key: str, data: bytes) -> None:
            (folder / key).parent.mkdir(parents=True, exist_ok=True)
            (folder / key).write_bytes(data)

        return Backend(name, store_for(f"{hub.url}/static/{prefix}"), put_file, False, False)
    repo_dir = hub.dataset_dir(f"org/{prefix}")

    def put_hub_file(key: str, data: bytes) -> None:
        (repo_dir / "data" / key).parent.mkdir(parents=True, exist_ok=True)
        (repo_dir / "data" / key).write_bytes(data)

    store = store_for(f"hf://datasets/org/{prefix}/data", {"endpoint": hub.url, "token": False})
    return Backend(name, store, put_hub_file, False)
