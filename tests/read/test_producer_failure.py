"""A decode that stops because its chunk's download was cancelled raises why the engine stopped.

A chunk decoded while it downloads is waited for on the reading thread (``Progress.wait``). When the engine
fails (a corrupt chunk, a storage error) its task group cancels that download, and the reading thread can
learn of the cancellation (``DownloadAbandoned``) before the engine's task group has ended with the failure
itself. ``read/_pump._raise_producer_failure`` then waits for the engine and raises its failure; these tests
drive it with a ``concurrent.futures.Future`` in each state the engine's future can end in (the whole read is
tested in ``tests/storage/test_checksum_cache.py::test_streamed_chunks_are_checked_too``).
"""

from __future__ import annotations

import sys
import threading
from concurrent.futures import Future

import pytest

from litstream._core._errors import ChecksumError, StorageError
from litstream.read.engine._pump import _raise_producer_failure
from litstream.storage._progress import DownloadAbandoned

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup


def _abandoned() -> DownloadAbandoned:
    return DownloadAbandoned("the download was cancelled before these bytes were written")


def _failed(exc: BaseException) -> Future[None]:
    future: Future[None] = Future()
    future.set_exception(exc)
    return future


@pytest.mark.parametrize(
    "failure",
    [
        ChecksumError("chunk chunk-0-1.bin is corrupt"),
        BaseExceptionGroup("engine", [_abandoned(), ChecksumError("chunk chunk-0-1.bin is corrupt")]),
        BaseExceptionGroup("engine", [StorageError("HTTP 500"), _abandoned()]),
    ],
    ids=["plain", "group, abandoned first", "group, storage error"],
)
def test_the_engines_failure_is_raised_from_the_abandoned_decode(failure: BaseException) -> None:
    error = _abandoned()
    with pytest.raises((ChecksumError, StorageError)) as raised:
        _raise_producer_failure(_failed(failure), error)
    assert not isinstance(raised.value, DownloadAbandoned)
    assert raised.value.__cause__ is error


def test_it_waits_for_an_engine_that_is_still_ending() -> None:
    future: Future[None] = Future()
    waiting = threading.Event()
    corrupt = ChecksumError("chunk chunk-0-1.bin is corrupt")

    def end_engine() -> None:
        waiting.wait()
        future.set_exception(BaseExceptionGroup("engine", [corrupt]))

    ender = threading.Thread(target=end_engine)
    ender.start()
    try:
        waiting.set()  # the engine ends while (or before) the decode waits for it: the same failure either way
        with pytest.raises(ChecksumError) as raised:
            _raise_producer_failure(future, _abandoned())
        assert raised.value is corrupt
    finally:
        ender.join()


@pytest.mark.parametrize("outcome", ["success", "only abandoned", "cancelled", "interrupted"])
def test_without_a_failure_of_its_own_the_caller_raises_the_abandoned_error(outcome: str) -> None:
    future: Future[None] = Future()
    if outcome == "success":
        future.set_result(None)
    elif outcome == "only abandoned":
        future.set_exception(BaseExceptionGroup("engine", [_abandoned()]))
    elif outcome == "cancelled":
        future.cancel()
    else:
        future.set_exception(KeyboardInterrupt())
    _raise_producer_failure(future, _abandoned())  # returns (raises nothing): the caller re-raises its own
