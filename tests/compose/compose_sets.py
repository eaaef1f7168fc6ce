"""Datasets for the Combined / Parallel tests: small integer datasets written once per session.

Every dataset holds plain ints, offset so that a sample names its dataset: ``ints`` is 0..49,
``thousands`` 1000..1049 (case B12), and the ``mix_*`` sets used for proportions hold
``base + i`` with bases 0, 100_000 and 200_000. Also how those tests read a loader's items
(:func:`flat`, :func:`take`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from dataset_files import write_ints
from resume_law import as_items

if TYPE_CHECKING:
    from pathlib import Path

    from litstream import StreamingDataLoader


def flat(batches: Any) -> list[int]:
    """The items of ``batches`` (batches of ints), in order."""
    return [int(x) for batch in batches for x in as_items(batch)]


def take(loader: StreamingDataLoader, count: int) -> list[int]:
    """The items of the first ``count`` batches of a new iteration of ``loader``, which is then closed."""
    out: list[Any] = []
    it = iter(loader)
    for batch in it:
        out.append(batch)
        if len(out) == count:
            break
    it.close()
    return flat(out)


@pytest.fixture(scope="session")
def ints_50(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_ints(tmp_path_factory.mktemp("ints50"), 50, 10)


@pytest.fixture(scope="session")
def thousands_50(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_ints(tmp_path_factory.mktemp("thousands50"), 50, 10, base=1000)


@pytest.fixture(scope="session")
def odd_37(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """37 items (2000..2036) in chunks of 6: sizes that divide nothing."""
    return write_ints(tmp_path_factory.mktemp("odd37"), 37, 6, base=2000)


@pytest.fixture(scope="session")
def ints_10(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Case B13's dataset: 0..9, one item per chunk."""
    return write_ints(tmp_path_factory.mktemp("ints10"), 10, 1)


@pytest.fixture(scope="session")
def mix_sets(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """4,000 / 12,000 / 6,000 items with bases 0 / 100_000 / 200_000, for the 10,000-sample proportions."""
    return (
        write_ints(tmp_path_factory.mktemp("mixA"), 4000, 500, base=0),
        write_ints(tmp_path_factory.mktemp("mixB"), 12000, 500, base=100_000),
        write_ints(tmp_path_factory.mktemp("mixC"), 6000, 500, base=200_000),
    )
