"""Stores in forked children: S3 stores rebuild their client there (a private copy of obstore's native
module when the parent had used obstore); HTTP stores make a new client; a wrapped obstore store
refuses with StorageError instead of hanging.

The forking parent is a clean helper process (:func:`clean_process.run_clean`), never the pytest worker;
each forked child runs with a deadline and a child still alive after it is killed (the test then fails
as a hang).
"""

from __future__ import annotations

import os
import select
from typing import TYPE_CHECKING, Any

import anyio
from storage_backends import unique

from clean_process import run_clean
from litstream.storage._resolver import store_for
from litstream.storage._store import ObstoreStore, Store

if TYPE_CHECKING:
    from collections.abc import Callable

    from servers import HubServer, S3Server

DEADLINE = 120.0  # seconds a child may take before it counts as hung (a hang guard, not a speed check)


def in_forked_child(fn: Callable[[], Any]) -> tuple[str, Any]:
    """``fn()`` in a child forked from this process: ``("ok", result)`` or ``(error type name, message)``."""
    import pickle

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        os.close(read_end)
        try:
            outcome: tuple[str, Any] = ("ok", fn())
        except BaseException as exc:
            outcome = (type(exc).__name__, str(exc))
        with os.fdopen(write_end, "wb") as out:
            out.write(pickle.dumps(outcome))
        os._exit(0)
    os.close(write_end)
    try:
        ready, _, _ = select.select([read_end], [], [], DEADLINE)
        if not ready:
            os.kill(pid, 9)
            raise AssertionError(f"the forked child hung for {DEADLINE} s")
        with os.fdopen(read_end, "rb", closefd=False) as answer:
            got: tuple[str, Any] = pickle.loads(answer.read())
        return got
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)


def _get(store: Store, key: str = "x.bin") -> bytes:
    return anyio.run(store.get, key)


def _used_s3_store_in_children(url: str, options: dict[str, str]) -> list[tuple[str, Any]]:
    from litstream.storage import _obstore_fork

    store = store_for(url, options)
    anyio.run(store.put, "x.bin", b"parent")
    assert _get(store) == b"parent"

    def child_work() -> tuple[bytes, bytes, bool, bool, tuple[str, Any]]:
        fresh = store_for(url, options)  # a store made in the child works too
        anyio.run(fresh.put, "y.bin", b"from the child")
        grandchild = in_forked_child(lambda: (_get(store), _get(fresh, "y.bin")))  # and one level further down
        ordinary = _obstore_fork.native() is _obstore_fork._original()
        return _get(store), _get(fresh, "y.bin"), ordinary, _obstore_fork.obstore_used(), grandchild

    first = in_forked_child(child_work)
    again = in_forked_child(lambda: _get(store))  # the parent still works, and so does a second child
    assert _get(store, "y.bin") == b"from the child"
    return [first, again]


def test_an_s3_store_used_before_fork_works_in_forked_children(s3_server: S3Server) -> None:
    url, options = f"s3://{s3_server.bucket}/{unique()}", s3_server.options()
    first, again = run_clean(_used_s3_store_in_children, url, options)
    assert first == ("ok", (b"parent", b"from the child", False, True, ("ok", (b"parent", b"from the child"))))
    assert again == ("ok", b"parent")


def _s3_store_in_a_child_of_a_process_that_never_used_obstore(url: str, options: dict[str, str]) -> Any:
    from litstream.storage import _obstore_fork

    store = store_for(url, options)  # made, never used here
    outcome = in_forked_child(lambda: (_get(store), _obstore_fork.native() is _obstore_fork._original()))
    return outcome, _obstore_fork.obstore_used()


def test_a_child_of_a_process_that_never_used_obstore_uses_the_ordinary_module(s3_server: S3Server) -> None:
    url, options = f"s3://{s3_server.bucket}/{unique()}", s3_server.options()
    anyio.run(store_for(url, options).put, "x.bin", b"seeded")
    outcome, parent_used = run_clean(_s3_store_in_a_child_of_a_process_that_never_used_obstore, url, options)
    assert outcome == ("ok", (b"seeded", True))
    assert parent_used is False


def _wrapped_store_in_children() -> list[tuple[str, Any]]:
    from obstore.store import MemoryStore

    unused = ObstoreStore(MemoryStore(), url="memory://")
    used = ObstoreStore(MemoryStore(), url="memory://used")
    anyio.run(used.put, "x.bin", b"parent")
    made_in_child = in_forked_child(lambda: _get(ObstoreStore(MemoryStore(), url="memory://child")))
    return [in_forked_child(lambda: _get(unused)), in_forked_child(lambda: _get(used)), made_in_child]


def test_a_wrapped_obstore_store_refuses_in_a_forked_child() -> None:
    unused, used, made_in_child = run_clean(_wrapped_store_in_children)
    for kind, message in (unused, used):
        assert kind == "StorageError"
        assert "obstore cannot be used across fork" in message
        assert "multiprocessing_context='spawn'" in message
    # made in the child after the parent used obstore: the ordinary module's runtime is gone there
    assert made_in_child[0] == "StorageError"
    assert "was forked from it" in made_in_child[1]


def _http_store_in_a_child(url: str) -> tuple[bytes, tuple[str, Any]]:
    store = store_for(url)
    parent = _get(store)  # the parent's client has a pooled connection
    return parent, in_forked_child(lambda: _get(store))


def test_an_http_store_works_in_a_forked_child(hub_server: HubServer) -> None:
    name = unique()
    (hub_server.root / "static" / name).mkdir(parents=True)
    (hub_server.root / "static" / name / "x.bin").write_bytes(b"over http")
    parent, child = run_clean(_http_store_in_a_child, f"{hub_server.url}/static/{name}")
    assert parent == b"over http"
    assert child == ("ok", b"over http")


def test_the_installed_obstore_is_a_release_the_fork_seam_was_verified_with() -> None:
    """A newer obstore (a CI that resolves another release) fails here, loudly, before any user's worker."""
    import importlib.metadata

    from litstream.storage._obstore_fork import VERIFIED_OBSTORE, check_verified

    installed = importlib.metadata.version("obstore")
    assert installed.startswith(VERIFIED_OBSTORE), f"verify litstream/storage/_obstore_fork.py with obstore {installed}"
    check_verified(installed)  # accepted


def test_an_unverified_obstore_is_refused_by_name() -> None:
    import pytest

    from litstream.storage._obstore_fork import check_verified

    with pytest.raises(ImportError, match=r"obstore 0\.13\.0 is installed; .* verified with obstore 0\.12\.x"):
        check_verified("0.13.0")
