"""What a test that lists a dataset's files compares (every name but the version log's), and the small
integer datasets that many tests write (:func:`write_ints`).

Every commit writes a version log under ``.litstream/`` in the output (``.litstream/versions/{n}.json`` and
``{n}.index.json``, see ``litstream.format._version_log``). Tests that assert the exact files a writer left
(chunks, ``index.json``, sidecars) list the output through :func:`without_version_log`, which drops that
folder and everything under it and nothing else.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING

from litstream import optimize
from litstream.format._version_log import LOG_DIR

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

__all__ = ["LOG_DIR", "data_files", "in_version_log", "without_version_log", "write_ints"]


def in_version_log(name: str | os.PathLike[str]) -> bool:
    """Whether ``name`` (a file name, a path relative to the dataset, or a store key) is the version log's
    folder or under it."""
    return os.fspath(name).replace(os.sep, "/").split("/", 1)[0] == LOG_DIR


def without_version_log(names: Iterable[str | os.PathLike[str]]) -> list[str]:
    """``names`` (as strings, in their order) less :func:`in_version_log`'s."""
    return [os.fspath(n) for n in names if not in_version_log(n)]


def data_files(directory: Path) -> list[Path]:
    """The files at the top of a local dataset ``directory`` (``index.json``, chunks, sidecar files), sorted:
    what a test copies to serve the dataset elsewhere (a Hub folder, a bucket). The version log stays behind, as
    LitData's files are all a reader needs."""
    return sorted(p for p in directory.iterdir() if not in_version_log(p.name) and p.is_file())


def _offset(base: int, i: int) -> int:
    return base + i


def write_ints(d: Path, n: int, chunk_size: int, base: int = 0) -> Path:
    """Write the ints ``base + i`` for ``i`` in ``range(n)`` to ``d`` (one worker, ``chunk_size`` items per chunk)
    and return ``d``."""
    optimize(
        fn=functools.partial(_offset, base),
        inputs=list(range(n)),
        output_dir=d,
        chunk_size=chunk_size,
        num_workers=1,
        verbose=False,
    )
    return d
