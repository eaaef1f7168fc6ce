"""The two ways tests fork from a clean process: the ``forks`` marker and :func:`clean_process.run_clean`.

A clean process is a fresh interpreter with no thread but its main one, so that what it forks cannot
inherit a lock held by another thread (a pytest-xdist worker has its I/O thread, in-process servers and
obstore's runtime threads).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

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


FORKING_TEST = """
import multiprocessing


def _nothing() -> None:
    pass


def test_forks_the_pytest_process() -> None:
    process = multiprocessing.get_context("fork").Process(target=_nothing)
    process.start()
    process.join()


def test_starts_a_worker_from_the_fork_server() -> None:
    process = multiprocessing.Process(target=_nothing)  # the suite's default context
    process.start()
    process.join()
"""


def test_a_test_that_forks_the_pytest_process_fails(tmp_path: Path) -> None:
    """tests/conftest.py fails a test that forks the pytest process itself; the default context (the preloaded
    fork server) is fine."""
    (tmp_path / "test_forking.py").write_text(FORKING_TEST)
    here = Path(__file__).resolve().parent
    env = {k: v for k, v in os.environ.items() if k != "LITSTREAM_TEST_IN_CLEAN_PROCESS"}
    env["PYTHONPATH"] = os.pathsep.join([str(here), *(p for p in sys.path if p)])
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", "-p", "conftest",
         "--rootdir", str(tmp_path), str(tmp_path / "test_forking.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert "1 failed, 1 passed" in done.stdout, done.stdout[-3000:]
    assert "test_forks_the_pytest_process forked the threaded pytest process 1 time(s)" in done.stdout
