"""A reader maps a chunk that is still downloading under its temporary name. If the download finishes (the
temporary file is renamed into place) or fails (it is removed) between the reader learning the name and
opening it, the reader follows the news: it maps the renamed file, or raises the download's error.

The race is made certain, not left to timing: the first ``map_file`` call renames the file away itself
before opening the old name, and the download's ``complete``/``failed`` report comes from another thread.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pytest

from litstream import StorageError
from litstream.storage import _progress
from litstream.storage._progress import Progress

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio

PAYLOAD = bytes(range(256)) * 64


def _race(monkeypatch: pytest.MonkeyPatch, progress: Progress, tmp: Path, report: object) -> list[Path]:
    """Make the first map attempt find ``tmp`` gone, with ``report()`` told from another thread."""
    real = _progress.map_file
    tried: list[Path] = []

    def racing_map(path: Path) -> object:
        tried.append(path)
        if len(tried) == 1:
            report()  # type: ignore[operator]
        return real(path)

    monkeypatch.setattr(_progress, "map_file", racing_map)
    return tried


async def test_a_rename_before_mapping_maps_the_final_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tmp, final = tmp_path / ".chunk-0-0.bin.tmp", tmp_path / "chunk-0-0.bin"
    tmp.write_bytes(PAYLOAD)
    progress = Progress(len(PAYLOAD))
    progress.opened(tmp)
    progress.landed(0, len(PAYLOAD))

    def finish() -> None:
        tmp.rename(final)
        threading.Thread(target=progress.complete, args=(final,)).start()

    tried = _race(monkeypatch, progress, tmp, finish)
    data = await progress.map_when(128)
    assert bytes(data) == PAYLOAD
    assert tried == [tmp, final]


async def test_a_failure_before_mapping_raises_the_downloads_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmp = tmp_path / ".chunk-0-0.bin.tmp"
    tmp.write_bytes(PAYLOAD)
    progress = Progress(len(PAYLOAD) * 2)
    progress.opened(tmp)
    progress.landed(0, len(PAYLOAD))

    def fail() -> None:
        tmp.unlink()
        threading.Thread(target=progress.failed, args=(OSError("connection reset by peer"),)).start()

    tried = _race(monkeypatch, progress, tmp, fail)
    with pytest.raises(StorageError, match="connection reset by peer"):
        await progress.map_when(128)
    assert tried == [tmp]


async def test_a_finished_file_that_vanished_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    final = tmp_path / "chunk-0-0.bin"
    progress = Progress(len(PAYLOAD))
    progress.complete(final)  # reported whole, but the file is gone (e.g. evicted) before the reader maps it
    with pytest.raises(StorageError, match="removed before it could be read"):
        await progress.map_when(128)
