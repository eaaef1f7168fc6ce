"""Fixtures shared by the read tests."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from dataset_files import write_ints

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture(scope="module")
def ints_100(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ints 0..99 in chunks of 7 (15 chunks: 14 of 7 items, the last of 2), written once per test module."""
    return write_ints(tmp_path_factory.mktemp("ints100"), 100, 7)
