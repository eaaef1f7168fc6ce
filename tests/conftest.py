from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from servers import ServerMissing, seaweedfs

if TYPE_CHECKING:
    from collections.abc import Iterator

    from servers import S3Server

_SERVER_FIXTURES = {
    "s3_server",
    "azure_server",
    "gcs_server",
    "hub_server",
    "writable",
    "backend",
    "obstore_in_process",
}


FORKSERVER_PRELOAD = ["numpy", "torch", "litstream", "litdata"]
"""Imported once by each pytest worker's fork server, so that its children start in milliseconds.

Loaders in this suite that must not fork from the threaded pytest worker use ``forkserver`` (see
``peer.peer_workers``, and litstream's own loader once obstore has run here). A module that fails to
import is skipped by the fork server.
"""


def pytest_configure(config: pytest.Config) -> None:
    """No test forks the pytest process: workers that a test does not start with an explicit context come
    from a fork server (a fresh, single-threaded interpreter that preloads :data:`FORKSERVER_PRELOAD`).

    A pytest worker has threads (xdist's I/O thread, in-process servers, obstore's runtime), and a child
    forked from a threaded process can hang or abort on state another thread held at the fork. Tests that
    fork on purpose are marked ``forks`` and run in a clean pytest process of their own.
    """
    multiprocessing.set_start_method("forkserver", force=True)
    multiprocessing.set_forkserver_preload(FORKSERVER_PRELOAD)
    # Every Python process the suite starts (fork servers and their workers, spawned workers, CLI runs)
    # prints the Python stack of each of its threads if a fatal signal (SIGABRT, SIGSEGV, ...) ends it, so
    # that a worker's crash shows where it happened in the failing test's report. Nothing else changes.
    os.environ.setdefault("PYTHONFAULTHANDLER", "1")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the storage tests, and every test that uses a storage server, after all others.

    They use obstore in the pytest process, after which forking is unsafe: litstream then picks
    ``spawn`` for optimize/DataLoader workers, which is much slower. Running them last keeps the rest
    of the suite on ``fork``.
    """

    storage_dir = Path(__file__).resolve().parent / "storage"  # by identity, not a path fragment

    def late(item: pytest.Item) -> bool:
        in_storage = storage_dir in Path(item.path).resolve().parents
        if in_storage or _SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            return True
        callspec = getattr(item, "callspec", None)  # a test parametrized over backends, with "s3" among them
        return callspec is not None and any(isinstance(v, str) and v == "s3" for v in callspec.params.values())

    last = [item for item in items if late(item)]
    if last and len(last) < len(items):
        items[:] = [item for item in items if not late(item)] + last


IN_CLEAN_PROCESS = "LITSTREAM_TEST_IN_CLEAN_PROCESS"
"""Set in the fresh pytest process that runs a ``forks`` test (see :func:`pytest_pyfunc_call`)."""


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run a test marked ``forks`` in a fresh pytest process of its own, which is then what forks.

    A pytest worker has threads (xdist's I/O thread, in-process servers, obstore's runtime): a child
    forked from it can hang on a lock one of them held at the fork. The fresh process runs only this
    test (no xdist, no other test's threads); its failure fails this test with its report.
    """
    if pyfuncitem.get_closest_marker("forks") is None or os.environ.get(IN_CLEAN_PROCESS):
        return None
    env = {**os.environ, IN_CLEAN_PROCESS: "1"}
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "--no-header", "-x", pyfuncitem.nodeid]
    done = subprocess.run(
        args, cwd=pyfuncitem.config.rootpath, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    if done.returncode == 0 and "1 skipped" in done.stdout:
        pytest.skip(f"skipped in the clean pytest process: {done.stdout[-2000:]}")
    if done.returncode != 0 or "1 passed" not in done.stdout:
        pytest.fail(f"in a clean pytest process: {done.stdout[-6000:]}{done.stderr[-2000:]}", pytrace=False)
    return True


_FORKS = [0]  # os.fork() calls of this process (multiprocessing's "fork" included; subprocess's fork+exec is not)


def _count_fork() -> None:
    _FORKS[0] += 1


os.register_at_fork(before=_count_fork)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    return (yield from _refuse_forks(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    return (yield from _refuse_forks(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    return (yield from _refuse_forks(item))


def _refuse_forks(item: pytest.Item) -> Iterator[None]:
    """Fails a test (or its fixtures) that forked the pytest process, which has threads: mark it ``forks`` (it
    then runs alone in a clean pytest process) or fork from ``clean_process.run_clean``."""
    before = _FORKS[0]
    result = yield
    if _FORKS[0] != before and not os.environ.get(IN_CLEAN_PROCESS):
        pytest.fail(
            f"{item.nodeid} forked the threaded pytest process {_FORKS[0] - before} time(s): mark it "
            "@pytest.mark.forks or fork inside clean_process.run_clean",
            pytrace=False,
        )
    return result


@pytest.fixture
def obstore_in_process() -> None:
    """Marks a test that uses obstore in the pytest process, so that it runs late (see above)."""


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """SeaweedFS on 127.0.0.1 with one bucket, for the whole session."""
    try:
        with seaweedfs(tmp_path_factory.mktemp("s3")) as server:
            yield server
    except ServerMissing as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Every async test runs on asyncio and on trio."""
    return str(request.param)


@pytest.fixture(autouse=True)
def _clean_distributed_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Tests start as a single process, whatever the shell exported, with a private chunk cache."""
    for name in ("WORLD_SIZE", "RANK", "GLOBAL_RANK", "LOCAL_RANK", "NNODES", "MAX_CACHE_SIZE", "LITDATA_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    for name in [n for n in os.environ if n.startswith("LITDATA_")]:  # LitData's knobs: read or warned about
        monkeypatch.delenv(name)
    monkeypatch.setenv("LITSTREAM_CACHE_DIR", str(tmp_path_factory.mktemp("chunk-cache")))
    yield
    os.environ.pop("DATA_OPTIMIZER_GLOBAL_RANK", None)
