"""Where the write tests put datasets: a local directory or a fresh prefix on the session's SeaweedFS.

Imported by tests in ``tests/write`` under this unique name. A test parametrized with ``"s3"`` runs
after the others (see ``tests/storage/conftest.py``): it uses obstore in the pytest process.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from litstream import StreamingDataset
from litstream._sync import run_sync
from litstream.storage._resolver import store_for

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

    from litstream import Store
    from servers import S3Server

__all__ = ["TARGETS", "Target", "make_target"]

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
