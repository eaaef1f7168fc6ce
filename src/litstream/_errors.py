"""The litstream exception tree.

Every error litstream raises on purpose derives from :class:`LitstreamError`. Classes that describe
bad input also derive from :class:`ValueError`, so code written against LitData (which raises plain
``ValueError``) keeps working::

    LitstreamError
    ├── FormatError (ValueError)        bytes, index.json or a sample that cannot be encoded/decoded
    │   └── EncryptionError             an encrypted dataset read without its key, or with a wrong one
    ├── PlanError (ValueError)          bad sharding / shuffle / resume arguments
    ├── ConfigurationError (ValueError) bad arguments to optimize, astream, StreamingDataset, ...
    ├── DatasetNotFoundError (FileNotFoundError)   no index.json where a dataset was expected
    ├── OutputNotEmptyError (RuntimeError)         optimize into a directory that holds a dataset
    ├── StorageError (OSError)          a store operation failed (foreign errors mapped once)
    │   ├── ObjectNotFoundError (FileNotFoundError)
    │   ├── RetriesExhaustedError       retries spent; names the URL, the attempts and the seconds
    │   └── ChunkWaitTimeoutError (FileNotFoundError)  LitData's name for "a chunk never arrived in time"
    └── WorkerError (RuntimeError)      an optimize worker failed; names the input

Every class can be built from one message string: torch re-raises errors from DataLoader workers as
``type(exc)(message)``.
"""

from __future__ import annotations

import sys

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

__all__ = [
    "ChunkWaitTimeoutError",
    "ConfigurationError",
    "DatasetNotFoundError",
    "EncryptionError",
    "FormatError",
    "LitstreamError",
    "ObjectNotFoundError",
    "OutputNotEmptyError",
    "PlanError",
    "RetriesExhaustedError",
    "StorageError",
    "WorkerError",
]


class LitstreamError(Exception):
    """Base class of every error litstream raises on purpose."""


class FormatError(LitstreamError, ValueError):
    """Bytes, an index or a sample that cannot be encoded or decoded."""


class EncryptionError(FormatError):
    """An encrypted dataset read without ``encryption=``, with a wrong key, or a key that does not match it."""


class PlanError(LitstreamError, ValueError):
    """Invalid sharding, shuffling or resume arguments."""


class ConfigurationError(LitstreamError, ValueError):
    """An argument has a value litstream cannot use; the message names the argument and the fix."""


class DatasetNotFoundError(LitstreamError, FileNotFoundError):
    """No ``index.json`` (and no partial indexes) where a dataset was expected."""


class OutputNotEmptyError(LitstreamError, RuntimeError):
    """``optimize`` was pointed at a directory that already holds data, without ``mode``."""


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


def collapse_exception_group(exc: BaseException) -> BaseException:
    """The single exception inside (possibly nested) one-member exception groups, else ``exc``.

    Task groups wrap a failure of one child in an ``ExceptionGroup``; litstream re-raises that one
    failure as itself so callers can catch ``FormatError`` etc. directly.
    """
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc
