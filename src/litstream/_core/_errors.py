"""The litstream exception tree.

Every error litstream raises on purpose derives from :class:`LitstreamError`. Classes that describe
bad input also derive from :class:`ValueError`, so code written against LitData (which raises plain
``ValueError``) keeps working::

    LitstreamError
    ├── FormatError (ValueError)        bytes, index.json or a sample that cannot be encoded/decoded
    │   ├── EncryptionError             an encrypted dataset read without its key, or with a wrong one
    │   ├── SampleTypeError (TypeError) a sample value of a type the encoding refuses (LitData: TypeError)
    │   └── ChecksumError               a chunk's bytes differ from the checksum index.json records
    ├── PlanError (ValueError)          bad sharding / shuffle / resume arguments
    ├── ConfigurationError (ValueError) bad arguments to optimize, astream, StreamingDataset, ...
    │   └── PickleRefusedError          a dataset stores pickled leaves and allow_pickle is off
    ├── DuplicateKeyError (ValueError)  key_fn gave two samples one key (names both inputs)
    ├── KeyNotFoundError (KeyError)     ds["id"] / get_by_key / dataset_update: no such key
    ├── DatasetNotFoundError (FileNotFoundError)   no index.json where a dataset was expected
    ├── OutputNotEmptyError (RuntimeError)         optimize into a directory that holds a dataset
    ├── OutputLockedError (RuntimeError)           another run writes the output (names it), or the lock was lost
    ├── StorageError (OSError)          a store operation failed (foreign errors mapped once)
    │   ├── ObjectNotFoundError (FileNotFoundError)
    │   ├── RetriesExhaustedError       retries spent; names the URL, the attempts and the seconds
    │   └── ChunkWaitTimeoutError (FileNotFoundError)  LitData's name for "a chunk never arrived in time"
    └── WorkerError (RuntimeError)      an optimize worker failed; names the input

Every class can be built from one message string: torch re-raises errors from DataLoader workers as
``type(exc)(message)``. Task-group failures never reach the user as an ``ExceptionGroup``: every place
that leaves a task group re-raises through :func:`raise_collapsed` (never ``raise one from None``, which
would drop the root cause's own ``__cause__``: an obstore error's status and request).
"""

from __future__ import annotations

import sys
from typing import NoReturn

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

__all__ = [
    "ChecksumError",
    "ChunkWaitTimeoutError",
    "ConfigurationError",
    "DatasetNotFoundError",
    "DuplicateKeyError",
    "EncryptionError",
    "FormatError",
    "KeyNotFoundError",
    "LitstreamError",
    "ObjectNotFoundError",
    "OutputLockedError",
    "OutputNotEmptyError",
    "PickleRefusedError",
    "PlanError",
    "RetriesExhaustedError",
    "SampleTypeError",
    "StorageError",
    "VersionNotFoundError",
    "WorkerError",
    "collapse_exception_group",
    "raise_collapsed",
]


class LitstreamError(Exception):
    """Base class of every error litstream raises on purpose."""

    follows_another_failure: bool = False
    """True for an error that only reports the consequence of another failure (a download abandoned because the
    read is shutting down): a task group's other errors are raised before it (:func:`collapse_exception_group`)."""


class FormatError(LitstreamError, ValueError):
    """Bytes, an index or a sample that cannot be encoded or decoded."""


class EncryptionError(FormatError):
    """An encrypted dataset read without ``encryption=``, with a wrong key, or a key that does not match it."""


class SampleTypeError(FormatError, TypeError):
    """A sample value of a type its encoding refuses, where LitData raises ``TypeError`` (``Graph(data=...)``)."""


class ChecksumError(FormatError):
    """A chunk file's bytes do not match the checksum its ``index.json`` entry records (a corrupt chunk).

    The message names the chunk and where it was read. A corrupt copy in the chunk cache is deleted and
    downloaded again once before this is raised, so it means the source itself (or every copy read) is corrupt.
    """


class PlanError(LitstreamError, ValueError):
    """Invalid sharding, shuffling or resume arguments."""


class ConfigurationError(LitstreamError, ValueError):
    """An argument has a value litstream cannot use; the message names the argument and the fix."""


class PickleRefusedError(ConfigurationError):
    """A dataset stores leaves with the ``pickle`` serializer and reading them is not allowed.

    Raised before any ``pickle.loads`` runs; pass ``allow_pickle=True`` (or call
    ``litstream.set_allow_pickle(True)``) only for data you trust. See docs/security.md.
    """


class DatasetNotFoundError(LitstreamError, FileNotFoundError):
    """No committed version (no ``index.json``) where a dataset was expected; the message names an interrupted
    run's files when there are some."""


class VersionNotFoundError(DatasetNotFoundError):
    """The version asked for (``version=N``, a time, or the version a reader or a checkpoint pinned) is not in
    the dataset's version log: never committed, or removed by retention (``docs/versions.md``)."""


class OutputNotEmptyError(LitstreamError, RuntimeError):
    """``optimize`` was pointed at a directory that already holds data, without ``mode``."""


class OutputLockedError(LitstreamError, RuntimeError):
    """Another run is writing the output (names it: operation, run id, host, pid, start), or this run lost
    its writer lock or found ``index.json`` changed by another writer before its commit (nothing committed)."""


class StorageError(LitstreamError, OSError):
    """A store operation failed; the message names the operation and the location."""


class ObjectNotFoundError(StorageError, FileNotFoundError):
    """The requested object or file does not exist."""


class RetriesExhaustedError(StorageError):
    """A remote operation kept failing (5xx, dropped connections, timeouts) until its retry budget was spent.

    The message names the URL, the attempts made, the seconds spent and how to give more (``storage_options``
    keys ``retry_timeout`` and ``max_retries``).
    """


class ChunkWaitTimeoutError(StorageError, FileNotFoundError):
    """Waiting for a chunk file to arrive in the cache took too long; LitData 0.2.76's public exception.

    A ``FileNotFoundError`` as in LitData, so ``except FileNotFoundError`` handlers written for LitData
    still catch it. Built from one message string like every litstream error, or as LitData builds it,
    ``ChunkWaitTimeoutError(path, waited_s)``, which writes the message.

    Args:
        path: The chunk's path or URL; or, when ``waited_s`` is ``None``, the whole message.
        waited_s: Seconds waited, or ``None``.

    Attributes:
        path: The chunk (``None`` when built from a message).
        waited_s: Seconds waited (``None`` when built from a message).
    """

    def __init__(self, path: str, waited_s: float | None = None) -> None:
        self.path: str | None = None if waited_s is None else path
        self.waited_s = waited_s
        if waited_s is None:
            super().__init__(path)
        else:
            super().__init__(
                f"timed out after {waited_s:.0f}s waiting for chunk {path}: the download or decompression stalled "
                "or failed (the chunk need not be missing); see the earlier errors or retry with more time"
            )


class WorkerError(LitstreamError, RuntimeError):
    """An ``optimize`` worker failed; the message names the input and carries the traceback."""


class KeyNotFoundError(LitstreamError, KeyError):
    """``ds[key]`` / ``get_by_key`` / ``dataset_update`` named a key the dataset's ``keys/`` sidecar lacks."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


class DuplicateKeyError(LitstreamError, ValueError):
    """``key_fn`` gave two samples the same key; the message names the key and both inputs."""


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _rank(exc: BaseException) -> int:
    """Which failure of a group is the root cause to raise: lower ranks first."""
    if isinstance(exc, LitstreamError):
        return 1 if exc.follows_another_failure else 0
    if isinstance(exc, Exception):
        return 1
    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
        return -1  # the user's interrupt always wins
    return 2  # cancellation and other BaseExceptions: only when nothing else failed


def collapse_exception_group(exc: BaseException) -> BaseException:
    """The one exception to raise for ``exc``: ``exc`` itself unless it is an exception group.

    Task groups wrap their children's failures in (possibly nested) ``ExceptionGroup`` objects. The
    result is the root cause: the first litstream error among the group's leaves, else the first
    other ``Exception``, else the first leaf (an interrupt always wins). The other leaves are added to
    it as notes (``add_note``), so nothing is lost; each leaf keeps its own ``__cause__`` (an obstore
    error under a ``StorageError``, say).
    """
    if not isinstance(exc, BaseExceptionGroup):
        return exc
    leaves = _leaves(exc)
    if not leaves:  # pragma: no cover - groups are never empty
        return exc
    chosen = min(leaves, key=_rank)  # min is stable: the first of the best rank
    for other in leaves:
        if other is not chosen and not _is_cancellation(other):
            note = f"also failed at the same time: {type(other).__name__}: {other}"
            if note not in getattr(chosen, "__notes__", ()):
                chosen.add_note(note)
    return chosen


def _is_cancellation(exc: BaseException) -> bool:
    # asyncio.CancelledError or trio.Cancelled, told apart without importing either backend
    return type(exc).__name__ in ("CancelledError", "Cancelled")


def raise_collapsed(group: BaseException) -> NoReturn:
    """Raise :func:`collapse_exception_group` of ``group``, keeping its own traceback and ``__cause__``.

    Use it as ``except BaseExceptionGroup as group: raise_collapsed(group)``. The raised exception's
    ``__context__`` and ``__cause__`` stay those it had in its task (not the group).

    Raises:
        BaseException: always.
    """
    chosen = collapse_exception_group(group)
    if chosen is group:
        raise group
    context = chosen.__context__  # what it was raised during, in its own task; the group would replace it
    try:
        raise chosen.with_traceback(chosen.__traceback__)
    finally:
        chosen.__context__ = context
        del chosen, group, context
