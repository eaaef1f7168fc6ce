"""A reader maps a chunk that is still downloading under its temporary name. If the download finishes (the
temporary file is renamed into place) or fails (it is removed) between the reader learning the name and
opening it, the reader follows the news: it maps the renamed file, or raises the download's error.

The race is made certain, not left to timing: the first call of the ``map_file`` given to ``Progress``
renames the file away itself before opening the old name, and the download's ``complete``/``failed``
report comes from another thread.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import anyio
import pytest
from test_transfer import ScriptedStore, leftovers

from litstream import StorageError
from litstream.storage._files import map_file
from litstream.storage._progress import DownloadAbandoned, Progress
from litstream.storage._transfer import Downloader

if TYPE_CHECKING:
    import mmap
    from collections.abc import Callable
    from pathlib import Path

pytestmark = pytest.mark.anyio

PAYLOAD = bytes(range(256)) * 64


class _Racing:
    """A ``map_file`` for :class:`Progress` whose first call runs ``report()`` (which moves the file away and
    tells the progress from another thread) before it opens the name it was given."""

    def __init__(self, report: Callable[[], None]) -> None:
        self.report = report
        self.tried: list[Path] = []

    def __call__(self, path: Path) -> bytes | mmap.mmap:
        self.tried.append(path)
        if len(self.tried) == 1:
            self.report()
        return map_file(path)


async def test_a_rename_before_mapping_maps_the_final_file(tmp_path: Path) -> None:
    tmp, final = tmp_path / ".chunk-0-0.bin.tmp", tmp_path / "chunk-0-0.bin"
    tmp.write_bytes(PAYLOAD)

    def finish() -> None:
        tmp.rename(final)
        threading.Thread(target=progress.complete, args=(final,)).start()

    racing = _Racing(finish)
    progress = Progress(len(PAYLOAD), map_file=racing)
    progress.opened(tmp)
    progress.landed(0, len(PAYLOAD))
    data = await progress.map_when(128)
    assert bytes(data) == PAYLOAD
    assert racing.tried == [tmp, final]


async def test_a_failure_before_mapping_raises_the_downloads_error(tmp_path: Path) -> None:
    tmp = tmp_path / ".chunk-0-0.bin.tmp"
    tmp.write_bytes(PAYLOAD)

    def fail() -> None:
        tmp.unlink()
        threading.Thread(target=progress.failed, args=(OSError("connection reset by peer"),)).start()

    racing = _Racing(fail)
    progress = Progress(len(PAYLOAD) * 2, map_file=racing)
    progress.opened(tmp)
    progress.landed(0, len(PAYLOAD))
    with pytest.raises(StorageError, match="connection reset by peer"):
        await progress.map_when(128)
    assert racing.tried == [tmp]


async def test_a_finished_file_that_vanished_is_reported(tmp_path: Path) -> None:
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
