"""The one crossing between synchronous code and the async core.

* :func:`run_sync` — runs one coroutine to completion on a fresh event loop, in this thread, or in a
  short-lived helper thread when this thread already runs a loop (a sync litstream call made from async
  code). For one-off calls of the write path, the CLI and the stores' synchronous adapters.
* :func:`daemon_portal` — an anyio blocking portal whose event loop runs in a **daemon** thread, so
  a half-consumed iterator that is still alive when the interpreter exits can never keep the
  process from ending (anyio's ``start_blocking_portal`` uses a non-daemon pool thread).
* :func:`call` / :func:`start_soon` — run a coroutine function from synchronous code on a per-process
  portal that is kept between calls (``ds[i]``, ``len(ds)``): starting a fresh event loop per call costs
  more than the read itself. The portal is stopped before this process forks (``os.register_at_fork``)
  and at exit, so a forked DataLoader worker never inherits a loop thread or its locks; it is started
  again on the next call.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import queue
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import sniffio
from anyio.from_thread import BlockingPortal

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

__all__ = ["call", "daemon_portal", "run_sync", "start_soon"]

# anyio imports its asyncio backend when the first event loop starts (~10 ms); do it at import time,
# so the first `iter()` / `ds[i]` of a process (and of every forked DataLoader worker) does not pay it.
with contextlib.suppress(ImportError):
    importlib.import_module("anyio._backends._asyncio")

T = TypeVar("T")


@contextlib.contextmanager
def daemon_portal(backend: str = "asyncio") -> Iterator[BlockingPortal]:
    """A blocking portal on an event loop in a daemon thread; stopped (tasks cancelled) on exit."""
    ready: queue.SimpleQueue[BlockingPortal | BaseException] = queue.SimpleQueue()

    async def main() -> None:
        async with BlockingPortal() as portal:
            ready.put(portal)
            await portal.sleep_until_stopped()

    def run() -> None:
        try:
            anyio.run(main, backend=backend)
        except BaseException as exc:  # pragma: no cover - only if the loop itself cannot start
            ready.put(exc)

    thread = threading.Thread(target=run, name="litstream-portal", daemon=True)
    thread.start()
    got = ready.get()
    if isinstance(got, BaseException):  # pragma: no cover
        raise got
    try:
        yield got
    finally:
        if not sys.is_finalizing() and thread.is_alive():
            got.call(got.stop, True)
            thread.join()


class _SharedPortal:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stack: contextlib.ExitStack | None = None
        self._portal: BlockingPortal | None = None
        self._pid = 0

    def get(self) -> BlockingPortal:
        with self._lock:
            if self._portal is None or self._pid != os.getpid():
                stack = contextlib.ExitStack()
                self._portal = stack.enter_context(daemon_portal())
                self._stack, self._pid = stack, os.getpid()
            return self._portal

    def close(self) -> None:
        with self._lock:
            stack, self._stack, self._portal = self._stack, None, None
            if stack is not None and self._pid == os.getpid():
                stack.close()


_SHARED = _SharedPortal()
os.register_at_fork(before=_SHARED.close)
atexit.register(_SHARED.close)


def call(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run ``fn(*args)`` on this process's shared portal and return its result.

    Safe to call from a thread that runs its own event loop (the work runs on the portal's loop).
    """
    return _SHARED.get().call(fn, *args)


def start_soon(fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
    """Start ``fn(*args)`` in the background on this process's shared portal (its outcome is dropped).

    For best-effort work (look-ahead fetches): it is cancelled when the portal stops (before a fork,
    at exit).
    """
    future = _SHARED.get().start_task_soon(fn, *args)
    future.add_done_callback(lambda f: f.cancelled() or f.exception())


def run_sync(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run ``fn(*args)`` to completion on a fresh event loop and return its result.

    The loop runs in this thread, or in a short-lived helper thread when this thread already runs
    an event loop (a sync litstream call made from async code).
    """
    try:
        sniffio.current_async_library()
        inside_loop = True
    except sniffio.AsyncLibraryNotFoundError:
        inside_loop = False
    if not inside_loop:  # outside the except block, so errors of fn are not chained to sniffio's
        return anyio.run(fn, *args)
    with ThreadPoolExecutor(1, thread_name_prefix="litstream-sync") as pool:
        return pool.submit(anyio.run, fn, *args).result()
