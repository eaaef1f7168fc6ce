"""The two ways tests fork from a clean process: the ``forks`` marker and :func:`clean_process.run_clean`.

A clean process is a fresh interpreter with no thread but its main one, so that what it forks cannot
inherit a lock held by another thread (a pytest-xdist worker has its I/O thread, in-process servers and
obstore's runtime threads).
"""

from __future__ import annotations

import os
import threading

import pytest

from clean_process import run_clean


def _threads_and_pid() -> tuple[int, int]:
    return threading.active_count(), os.getpid()


@pytest.mark.forks
def test_a_forks_test_runs_alone_in_a_single_threaded_pytest_process() -> None:
    assert os.environ.get("LITSTREAM_TEST_IN_CLEAN_PROCESS") == "1"  # set by tests/conftest.py for the fresh process
    assert threading.active_count() == 1


def test_run_clean_runs_the_body_in_a_fresh_single_threaded_process() -> None:
    threads, pid = run_clean(_threads_and_pid)
    assert threads == 1
    assert pid != os.getpid()


def _fails() -> None:
    raise ZeroDivisionError("boom in the clean process")


def test_run_clean_reports_the_bodys_failure() -> None:
    with pytest.raises(AssertionError, match=r"ZeroDivisionError: boom in the clean process"):
        run_clean(_fails)
