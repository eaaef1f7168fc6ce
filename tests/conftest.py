from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Every async test runs on asyncio and on trio."""
    return str(request.param)


@pytest.fixture(autouse=True)
def _clean_distributed_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tests start as a single process, whatever the shell exported."""
    for name in ("WORLD_SIZE", "RANK", "GLOBAL_RANK", "LOCAL_RANK", "NNODES", "MAX_CACHE_SIZE"):
        monkeypatch.delenv(name, raising=False)
    yield
    os.environ.pop("DATA_OPTIMIZER_GLOBAL_RANK", None)
