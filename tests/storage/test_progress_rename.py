"""A reader maps a chunk that is still downloading under its temporary name. If the download finishes (the
temporary file is renamed into place) or fails (it is removed) between the reader learning the name and
opening it, the reader follows the news: it maps the renamed file, or raises the download's error.

The race is made certain, not left to timing: the first ``map_file`` call renames the file away itself
before opening the old name, and the download's ``complete``/``failed`` report comes from another thread.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import anyio
import pytest
from test_transfer import ScriptedStore, leftovers

from litstream import StorageError
from litstream.storage import _progress
from litstream.storage._progress import DownloadAbandoned, Progress
from litstream.storage._transfer import Downloader

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


class _CancelOnLastPiece(Progress):
    """Cancels ``scope`` as the last piece is reported: the download is cancelled after every byte is written
    but (where the backend delivers the cancellation before the rename, as asyncio does) its temporary
    file is removed instead of renamed into place."""

    def __init__(self, size: int, scope: anyio.CancelScope) -> None:
        super().__init__(size)
        self.scope = scope

    def landed(self, start: int, length: int) -> None:
        super().landed(start, length)
        if self.prefix == self.size:
            self.scope.cancel()


async def test_a_download_cancelled_after_its_last_piece_never_leaves_a_reader_waiting(tmp_path: Path) -> None:
    store = ScriptedStore({"chunk-0-0.bin": PAYLOAD})
    downloader = Downloader(store, tmp_path, piece_size=len(PAYLOAD) // 4)
    scope = anyio.CancelScope()
    progress = _CancelOnLastPiece(len(PAYLOAD), scope)
    with scope:
        await downloader.fetch("chunk-0-0.bin", size=len(PAYLOAD), progress=progress)
    # The reader maps the file only now. It used to wait forever for news of a rename that never comes
    # (its worker thread blocked, and the interpreter with it at exit); the guard only turns that into a failure.
    with anyio.fail_after(30):
        if scope.cancelled_caught:  # cancelled before the rename: nothing is left to read
            assert leftovers(tmp_path) == []
            with pytest.raises(DownloadAbandoned, match="cancelled"):
                await progress.map_when(128)
        else:  # the backend finished the download first
            assert bytes(await progress.map_when(128)) == PAYLOAD
