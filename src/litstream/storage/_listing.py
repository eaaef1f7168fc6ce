"""Listings retried like GETs: a listing that breaks off part way is asked for again.

A GET that fails on a dropped connection or a 5xx is retried inside the store (obstore's client, the
HTTP store's loop), but a listing is many requests (ListObjectsV2 pages) whose answer is parsed as it
arrives: a page cut short (a truncated body, a reset connection) surfaces as a
:class:`~litstream.StorageError` from the listing as a whole. Listing is idempotent, so the whole
listing is retried here, with the store's own retry settings (``TransferConfig``: ``max_retries``,
``retry_timeout``, ``backoff_*``, set by ``storage_options``), and then fails with a
:class:`~litstream.RetriesExhaustedError` naming the location, the attempts and the seconds.

Not retried: a missing location (``ObjectNotFoundError``), a budget the store already spent
(``RetriesExhaustedError``), refused credentials, bad configuration, and local directories (their
errors are not transient). The store is the seam: any :class:`~litstream.Store` (a wrapper that
injects faults included) is listed through :func:`list_retrying`.
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING

import anyio

from .._core._errors import ObjectNotFoundError, RetriesExhaustedError, StorageError
from ._base import TransferConfig
from ._faults import retries_exhausted
from ._files import local_path

if TYPE_CHECKING:
    from ._base import ObjectMeta, Store

__all__ = ["list_retrying", "transfer_of"]

_FINAL = ("PermissionDenied", "Unauthenticated", "credentials", "does not exist")


def transfer_of(store: object) -> TransferConfig:
    """The retry settings of ``store`` (its ``transfer`` attribute), else the defaults."""
    transfer = getattr(store, "transfer", None)
    return transfer if isinstance(transfer, TransferConfig) else TransferConfig()


def _transient(exc: StorageError) -> bool:
    if isinstance(exc, (ObjectNotFoundError, RetriesExhaustedError)) or type(exc).__name__ == "UnsafeFileError":
        return False
    return not any(word in str(exc) for word in _FINAL)


async def list_retrying(store: Store, prefix: str = "") -> list[ObjectMeta]:
    """``store.list(prefix)``, retried as a whole while it fails with a transient error (module docstring).

    Raises:
        RetriesExhaustedError: it kept failing; names the location, the attempts and the seconds.
        StorageError: a failure that is not transient, or any failure of a local directory.
    """
    if local_path(store, "") is not None:
        return await store.list(prefix)
    t = transfer_of(store)
    first = time.monotonic()
    attempt = 0
    while True:
        try:
            return await store.list(prefix)
        except StorageError as exc:
            if not _transient(exc):
                raise
            elapsed = time.monotonic() - first
            if attempt >= t.max_retries or elapsed >= t.retry_timeout:
                if attempt == 0:
                    raise
                where = f"{store.url}/{prefix}" if prefix else store.url
                raise retries_exhausted("list", where, attempt + 1, elapsed, str(exc)) from exc
        await anyio.sleep(random.uniform(0, t.backoff(attempt)))
        attempt += 1
