"""Stores in forked children: obstore stores raise StorageError at once instead of hanging; HTTP stores work.

Each child runs with a deadline; a child still alive after it is killed and the test fails as a hang.
"""

from __future__ import annotations

import multiprocessing
import time
import warnings
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from storage_backends import unique

from litstream import StorageError
from litstream.storage._resolver import store_for
from litstream.storage._store import ObstoreStore, Store

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from servers import HubServer, S3Server

DEADLINE = 120.0  # seconds a child may take before it counts as hung (a hang guard, not a speed check)


def _read_in_child(make: Any, conn: Connection) -> None:
    started = time.monotonic()
    try:
        store: Store = make() if callable(make) and not isinstance(make, Store) else make
        data = anyio.run(store.get, "x.bin")
        conn.send(("ok", data, time.monotonic() - started))
    except StorageError as exc:
        conn.send(("StorageError", str(exc), time.monotonic() - started))
    except BaseException as exc:
        conn.send((type(exc).__name__, str(exc), time.monotonic() - started))


def run_forked(make: Any) -> tuple[str, Any, float]:
    """Run ``_read_in_child`` in a forked child; return what it sent, or fail if it hangs."""
    context = multiprocessing.get_context("fork")
    parent, child = context.Pipe(duplex=False)
    with warnings.catch_warnings():  # Python >= 3.12 warns about fork with threads; that is the point here
        warnings.simplefilter("ignore", DeprecationWarning)
        process = context.Process(target=_read_in_child, args=(make, child))
        process.start()
    child.close()
    try:
        if not parent.poll(DEADLINE):
            pytest.fail(f"the forked child hung for {DEADLINE} s")
        outcome: tuple[str, Any, float] = parent.recv()
        return outcome
    finally:
        process.join(5)
        if process.is_alive():
            process.kill()
            process.join()
        parent.close()


def test_a_used_s3_store_raises_in_a_forked_child(s3_server: S3Server) -> None:
    store = store_for(f"s3://{s3_server.bucket}/{unique()}", s3_server.options())
    anyio.run(store.put, "x.bin", b"parent")
    assert anyio.run(store.get, "x.bin") == b"parent"
    kind, message, _ = run_forked(store)  # the message proves the pid check refused it before any request
    assert kind == "StorageError"
    assert "obstore cannot be used across fork" in message
    assert "multiprocessing_context='spawn'" in message


def test_a_new_s3_store_in_a_child_of_an_obstore_user_raises(s3_server: S3Server) -> None:
    used = store_for(f"s3://{s3_server.bucket}/{unique()}", s3_server.options())
    anyio.run(used.put, "x.bin", b"parent")
    url, options = f"s3://{s3_server.bucket}/{unique()}", s3_server.options()
    kind, message, _ = run_forked(lambda: store_for(url, options))
    assert kind == "StorageError"
    assert "obstore was used in process" in message


def test_an_unused_wrapped_obstore_store_in_a_child_still_refuses() -> None:
    from obstore.store import MemoryStore

    store = ObstoreStore(MemoryStore(), url="memory://")
    kind, message, _ = run_forked(store)
    assert kind == "StorageError"
    assert "cannot be used across fork" in message


def test_an_http_store_works_in_a_forked_child(hub_server: HubServer) -> None:
    name = unique()
    (hub_server.root / "static" / name).mkdir(parents=True)
    (hub_server.root / "static" / name / "x.bin").write_bytes(b"over http")
    store = store_for(f"{hub_server.url}/static/{name}")
    assert anyio.run(store.get, "x.bin") == b"over http"  # the parent's client has a pooled connection
    kind, data, _ = run_forked(store)
    assert (kind, data) == ("ok", b"over http")
