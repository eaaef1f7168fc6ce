"""Fork safety of obstore: which processes have used it, and the error for a store used across fork."""

from __future__ import annotations

import os

from .._errors import StorageError

__all__ = ["_OBSTORE_USED_IN", "_fork_error", "_used_by_ancestor", "obstore_used"]

_OBSTORE_USED_IN: set[int] = set()


def obstore_used() -> bool:
    """True once an :class:`ObstoreStore` has made a call in this process (forking is then unsafe)."""
    return os.getpid() in _OBSTORE_USED_IN


def _used_by_ancestor() -> int | None:
    """The pid of a process this one was forked from that had used obstore, if any."""
    others = _OBSTORE_USED_IN - {os.getpid()}
    return min(others) if others else None


def _fork_error(url: str, where: int) -> StorageError:
    return StorageError(
        f"{url}: obstore was used in process {where} and this process ({os.getpid()}) was forked from it; "
        "obstore cannot be used across fork: create stores inside the worker, or use "
        "multiprocessing_context='spawn' or 'forkserver'"
    )
