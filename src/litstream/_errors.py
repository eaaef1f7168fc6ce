"""The litstream exception tree.

Every error litstream raises on purpose derives from :class:`LitstreamError`. Classes that describe
bad input also derive from :class:`ValueError`, so code written against LitData (which raises plain
``ValueError``) keeps working::

    LitstreamError
    ├── FormatError (ValueError)        bytes, index.json or a sample that cannot be encoded/decoded
    │   └── EncryptionError             an encrypted dataset read without its key, or with a wrong one
    ├── PlanError (ValueError)          bad sharding / shuffle / resume arguments
    ├── ConfigurationError (ValueError) bad arguments to optimize, astream, StreamingDataset, ...
    ├── DuplicateKeyError (ValueError)  key_fn gave two samples one key (names both inputs)
    ├── KeyNotFoundError (KeyError)     ds["id"] / get_by_key / dataset_update: no such key
    ├── DatasetNotFoundError (FileNotFoundError)   no index.json where a dataset was expected
    ├── OutputNotEmptyError (RuntimeError)         optimize into a directory that holds a dataset
    ├── StorageError (OSError)          a store operation failed (foreign errors mapped once)
    │   ├── ObjectNotFoundError (FileNotFoundError)
    │   └── RetriesExhaustedError       retries spent; names the URL, the attempts and the seconds
    └── WorkerError (RuntimeError)      an optimize worker failed; names the input

Every class can be built from one message string: torch re-raises errors from DataLoader workers as
``type(exc)(message)``.
"""

from __future__ import annotations

import sys

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

__all__ = [
    "ConfigurationError",
    "DatasetNotFoundError",
    "DuplicateKeyError",
    "EncryptionError",
    "FormatError",
    "KeyNotFoundError",
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


class WorkerError(LitstreamError, RuntimeError):
    """An ``optimize`` worker failed; the message names the input and carries the traceback."""


class KeyNotFoundError(LitstreamError, KeyError):
    """``ds[key]`` / ``get_by_key`` / ``dataset_update`` named a key the dataset's ``keys/`` sidecar lacks."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


class DuplicateKeyError(LitstreamError, ValueError):
    """``key_fn`` gave two samples the same key; the message names the key and both inputs."""


def collapse_exception_group(exc: BaseException) -> BaseException:
    """The single exception inside (possibly nested) one-member exception groups, else ``exc``.

    Task groups wrap a failure of one child in an ``ExceptionGroup``; litstream re-raises that one
    failure as itself so callers can catch ``FormatError`` etc. directly.
    """
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc
