"""Running one coroutine from synchronous code (the sync facades' one-off calls)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import sniffio

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

__all__ = ["run_sync"]

T = TypeVar("T")


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
