"""Exception groups never reach the user; the root cause keeps its ``__cause__``; no unrelated chaining."""

from __future__ import annotations

import sys
import traceback
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from obstore.store import MemoryStore

from hostile import write_dataset
from litstream import (
    FormatError,
    ObjectNotFoundError,
    ObstoreStore,
    OutputNotEmptyError,
    StorageError,
    StreamingDataset,
    astream,
    optimize,
)
from litstream._core._bridge import run_sync
from litstream._core._errors import ChecksumError, collapse_exception_group, raise_collapsed

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup, ExceptionGroup

if TYPE_CHECKING:
    from pathlib import Path


def test_collapse_picks_the_litstream_error_keeps_its_cause_and_notes_the_others() -> None:
    root = OSError("connection reset")
    storage = StorageError("get failed for s3://b/chunk-0-1.bin")
    storage.__cause__ = root
    other = ValueError("a transform failed")
    group = ExceptionGroup("outer", [ExceptionGroup("inner", [other]), storage])
    chosen = collapse_exception_group(group)
    assert chosen is storage
    assert chosen.__cause__ is root
    assert chosen.__notes__ == ["also failed at the same time: ValueError: a transform failed"]
    assert collapse_exception_group(other) is other


def test_collapse_prefers_an_interrupt_and_ignores_cancellations_in_notes() -> None:
    class Cancelled(BaseException):  # named like trio's
        pass

    interrupt = KeyboardInterrupt()
    assert collapse_exception_group(BaseExceptionGroup("g", [FormatError("x"), interrupt])) is interrupt
    error = FormatError("bad chunk")
    assert collapse_exception_group(BaseExceptionGroup("g", [Cancelled(), error])) is error
    assert getattr(error, "__notes__", []) == []


def test_raise_collapsed_keeps_the_traceback_and_the_original_context() -> None:
    def fail() -> None:
        try:
            raise KeyError("while handling")
        except KeyError:
            raise FormatError("the real failure") from None

    try:
        fail()
    except FormatError as exc:
        original = exc
    group = ExceptionGroup("tg", [original])
    with pytest.raises(FormatError) as info:
        try:
            raise group
        except ExceptionGroup as caught:
            raise_collapsed(caught)
    assert info.value is original
    assert isinstance(info.value.__context__, KeyError)  # its own context, not the group
    assert info.value.__suppress_context__
    assert any(frame.name == "fail" for frame in traceback.extract_tb(info.value.__traceback__))


@pytest.fixture
def truncated(tmp_path: Path) -> Path:
    """A dataset of 4 chunks whose chunks 1 and 2 are cut in half."""
    ds = tmp_path / "ds"
    write_dataset(ds, [{"i": i, "s": "x" * 50} for i in range(12)], chunk_size=3)
    for name in ("chunk-0-1.bin", "chunk-0-2.bin"):
        data = (ds / name).read_bytes()
        (ds / name).write_bytes(data[: len(data) // 2])
    return ds


async def _plain(ds: Any, **kwargs: Any) -> list[Any]:
    return [s async for s in astream(ds, **kwargs)]


async def _with(ds: Any, **kwargs: Any) -> list[Any]:
    async with astream(ds, **kwargs) as samples:
        return [s async for s in samples]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("form", [_plain, _with])
def test_astream_over_truncated_chunks_raises_one_format_error(truncated: Path, backend: str, form: Any) -> None:
    with pytest.raises(FormatError, match=r"chunk-0-[12]\.bin holds \d+ bytes but index.json records"):
        anyio.run(lambda: form(truncated, max_pre_download=4), backend=backend)


def test_streaming_dataset_with_two_failing_chunks_raises_one_format_error(truncated: Path) -> None:
    with pytest.raises(FormatError, match=r"chunk-0-[12]\.bin holds") as info:
        list(StreamingDataset(truncated, max_pre_download=4))
    assert not isinstance(info.value, BaseExceptionGroup)
    assert "ExceptionGroup" not in "".join(traceback.format_exception(info.value))


def _missing_chunk_store(tmp_path: Path) -> ObstoreStore:
    ds = tmp_path / "ds"
    write_dataset(ds, [{"i": i} for i in range(6)], chunk_size=3)
    memory = MemoryStore()
    for file in ds.iterdir():
        if file.name != "chunk-0-1.bin":
            memory.put(file.name, file.read_bytes())
    return ObstoreStore(memory, url="memory://ds")


def _assert_obstore_cause(exc: BaseException) -> None:
    assert isinstance(exc, ObjectNotFoundError)
    assert "chunk-0-1.bin" in str(exc)
    cause = exc.__cause__
    assert cause is not None
    assert "No data in memory" in str(cause)  # obstore's own details survive
    assert "chunk-0-1.bin" in str(cause)


@pytest.mark.usefixtures("obstore_in_process")
@pytest.mark.parametrize("path", ["iterate", "getitem", "astream", "astream_with_trio"])
def test_an_obstore_error_keeps_its_details_through_every_read_path(tmp_path: Path, path: str) -> None:
    store = _missing_chunk_store(tmp_path)
    with pytest.raises(ObjectNotFoundError) as info:
        if path == "iterate":
            list(StreamingDataset(store))
        elif path == "getitem":
            StreamingDataset(store)[4]
        elif path == "astream":
            anyio.run(_plain, store)
        else:
            anyio.run(_with, store, backend="trio")
    _assert_obstore_cause(info.value)


def test_sync_calls_chain_no_unrelated_error(tmp_path: Path) -> None:
    async def fail() -> None:
        raise FormatError("boom")

    with pytest.raises(FormatError) as info:
        run_sync(fail)
    assert info.value.__context__ is None
    write_dataset(tmp_path / "ds", [{"i": 1}], chunk_size=1)
    with pytest.raises(OutputNotEmptyError) as full:
        optimize(lambda i: {"i": i}, [1], tmp_path / "ds", chunk_size=1, num_workers=1, verbose=False)
    text = "".join(traceback.format_exception(full.value))
    assert "During handling of the above exception" not in text
    assert "AsyncLibraryNotFoundError" not in text


def test_every_task_group_exit_in_src_collapses_through_raise_collapsed() -> None:
    """One helper collapses exception groups (keeping ``__cause__``); no hand-written copy picks ``.exceptions[0]``."""
    import re
    from pathlib import Path

    import litstream

    src = Path(litstream.__file__).parent
    handlers = 0
    for file in sorted(src.rglob("*.py")):
        text = file.read_text()
        assert ".exceptions[0]" not in text, file
        assert "except*" not in text, file
        for found in re.finditer(r"except BaseExceptionGroup as (\w+):\n((?:\s*#.*\n)*)(.*)\n", text):
            handlers += 1  # the handler's first statement (after any comment lines) is the helper
            assert found.group(3).split("#")[0].strip() == f"raise_collapsed({found.group(1)})", (file, found.group(0))
    assert handlers >= 8


@pytest.mark.parametrize("abandoned_first", [True, False])
def test_collapse_raises_the_failure_before_the_download_it_abandoned(abandoned_first: bool) -> None:
    """A checksum failure cancels the read, and a reader of the next chunk reports its download abandoned: the
    checksum error is raised, whichever task failed first."""
    from litstream.storage._progress import DownloadAbandoned

    cause, consequence = ChecksumError("chunk-0-1.bin is corrupt"), DownloadAbandoned("the download was cancelled")
    leaves = [consequence, cause] if abandoned_first else [cause, consequence]
    chosen = collapse_exception_group(ExceptionGroup("read", leaves))
    assert chosen is cause
    assert any("DownloadAbandoned" in note for note in getattr(chosen, "__notes__", ()))
