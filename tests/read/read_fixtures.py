"""Fixtures shared by the read tests (re-exported by ``read/conftest.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

import litstream
from dataset_files import write_ints

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture(scope="module")
def ints_100(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ints 0..99 in chunks of 7 (15 chunks: 14 of 7 items, the last of 2), written once per test module."""
    return write_ints(tmp_path_factory.mktemp("ints100"), 100, 7)


@pytest.fixture
def no_global_pickle_setting(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No process-wide ``allow_pickle`` (neither ``LITSTREAM_ALLOW_PICKLE`` nor ``set_allow_pickle``) before or
    after the test; modules on pickle trust use it for every test (``pytest.mark.usefixtures``)."""
    monkeypatch.delenv("LITSTREAM_ALLOW_PICKLE", raising=False)
    litstream.set_allow_pickle(None)
    yield
    litstream.set_allow_pickle(None)
