"""Session fixtures of the benchmark suite: the datasets both libraries read, built once per run.

Run with ``.venv/bin/python -m pytest bench --benchmark-only`` (``bench/`` is outside ``testpaths``, so
the test suite never collects it).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest
from _cases import NUM_SAMPLES, Datasets, silence_known_warnings

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture(scope="session")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Datasets]:
    """``NUM_SAMPLES`` samples written by litstream and by LitData, plain and zstd (4 datasets)."""
    silence_known_warnings()
    built = Datasets(tmp_path_factory.mktemp("bench-data"), NUM_SAMPLES).build()
    os.environ.pop("DATA_OPTIMIZER_GLOBAL_RANK", None)
    yield built
    built.drop_copies()


@pytest.fixture(autouse=True)
def _single_process_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Read as one process, whatever the shell exported (LitData's optimize leaves a rank variable set)."""
    for name in ("WORLD_SIZE", "RANK", "GLOBAL_RANK", "LOCAL_RANK", "NNODES", "MAX_CACHE_SIZE"):
        monkeypatch.delenv(name, raising=False)
    os.environ.pop("DATA_OPTIMIZER_GLOBAL_RANK", None)
    yield
    os.environ.pop("DATA_OPTIMIZER_GLOBAL_RANK", None)
