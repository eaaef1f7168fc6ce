"""The Store protocol, what it returns, how transfers are tuned, and the one place foreign errors are mapped.

``Store`` is what the read and write paths talk to; they never touch files, SDKs or HTTP clients
directly. Paths are ``/``-separated keys relative to the store's root (``"chunk-0-0.bin"``). All sizes
and offsets are in bytes, all durations in seconds.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, Union, runtime_checkable

import anyio
import anyio.lowlevel

from .._core._errors import ConfigurationError, LitstreamError, ObjectNotFoundError, StorageError

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

__all__ = ["ObjectMeta", "PutData", "Store", "TransferConfig", "loop_limiter", "mapped_errors", "put_size"]

MiB = 1024 * 1024

PutData = Union[bytes, bytearray, memoryview, "os.PathLike[str]"]
"""What ``Store.put`` accepts: a bytes-like object, or the path of a local file to upload (streamed)."""


@dataclass(frozen=True)
class ObjectMeta:
    """What a listing or ``head`` returns.

    Attributes:
        path: The key, relative to the store's root.
        size: The object's length in bytes.
        etag: The server's entity tag when it sends one (a multipart S3 upload ends in ``-<parts>``); not
            part of equality.
    """

    path: str
    size: int
    etag: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class TransferConfig:
    """How requests are timed out, retried and split, for every remote store (a value, like ``httpx.Timeout``).

    Attributes:
        timeout: Seconds one request may take, from connecting until its body is read (obstore's ``timeout``;
            for HTTP stores, the longest wait for any one read). Default 200, as LitData's obstore path.
        connect_timeout: Seconds to establish a connection. Default 10.
        max_retries: Retries of a failed request (5xx, 429, connection errors, timeouts of reads); 0 turns
            retries off. Default 100, so that ``retry_timeout`` is what ends a long outage.
        backoff_initial: Seconds before the first retry; later waits grow by ``backoff_base``, with jitter.
            Default 0.2.
        backoff_max: The longest wait between two tries, in seconds. Default 4.
        retry_timeout: The deadline: seconds after the first try past which no retry is started. Default 60,
            enough to ride out a 30 s outage (obstore's own default budget is spent in about 2 s).
        multipart_threshold: Objects of at least this many bytes are uploaded in parts. Default 8 MiB.
        part_size: Bytes per part of a multipart upload (S3 needs at least 5 MiB). Default 8 MiB.
        part_concurrency: Parts of one upload in flight at once. Default 8.
        backoff_base: How much the longest wait grows per retry (> 1). Default 3.

    Raises:
        ConfigurationError: a value is negative, ``backoff_base`` is not above 1, or ``part_size`` is below
            5 MiB.
    """

    timeout: float = 200.0
    connect_timeout: float = 10.0
    max_retries: int = 100
    backoff_initial: float = 0.2
    backoff_max: float = 4.0
    retry_timeout: float = 60.0
    multipart_threshold: int = 8 * MiB
    part_size: int = 8 * MiB
    part_concurrency: int = 8
    backoff_base: float = 3.0

    def __post_init__(self) -> None:
        for name in ("timeout", "connect_timeout", "backoff_initial", "backoff_max", "retry_timeout"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value < 0:
                raise ConfigurationError(f"TransferConfig({name}={value!r}): use a number of seconds >= 0")
        base = self.backoff_base
        if isinstance(base, bool) or not isinstance(base, (int, float)) or base <= 1:
            raise ConfigurationError(f"TransferConfig(backoff_base={self.backoff_base!r}): use a number > 1")
        if not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise ConfigurationError(f"TransferConfig(max_retries={self.max_retries!r}): use an int >= 0")
        if not isinstance(self.part_size, int) or self.part_size < 5 * MiB:
            raise ConfigurationError(
                f"TransferConfig(part_size={self.part_size!r}): use at least 5 MiB ({5 * MiB} bytes), "
                "the smallest part S3 accepts"
            )
        if not isinstance(self.multipart_threshold, int) or self.multipart_threshold < 1:
            raise ConfigurationError(
                f"TransferConfig(multipart_threshold={self.multipart_threshold!r}): use an int >= 1"
            )
        if not isinstance(self.part_concurrency, int) or self.part_concurrency < 1:
            raise ConfigurationError(f"TransferConfig(part_concurrency={self.part_concurrency!r}): use an int >= 1")

    def backoff(self, attempt: int) -> float:
        """The longest wait in seconds before retry number ``attempt`` (0-based); callers draw a jitter below it."""
        return float(min(self.backoff_max, self.backoff_initial * (self.backoff_base ** min(attempt, 64))))


@runtime_checkable
class Store(Protocol):
    """Async access to objects under one root. All sizes and offsets are in bytes.

    A store whose objects are files on this machine also has ``local_path(key)`` (the optional
    :class:`~litstream.storage._files.LocalFiles` capability, which wrapper stores forward); readers then
    map chunks instead of copying them.
    """

    @property
    def url(self) -> str:
        """Where the root is, for messages (``"/data/ds"``, ``"s3://bucket/ds"``, ``"memory://"``)."""
        ...

    async def get(self, path: str) -> bytes:
        """The whole object. Raises ObjectNotFoundError if absent, StorageError on failure."""
        ...

    async def get_range(self, path: str, start: int, length: int) -> bytes:
        """``length`` bytes from offset ``start`` (shorter only at the end of the object)."""
        ...

    async def get_ranges(self, path: str, starts: Sequence[int], lengths: Sequence[int]) -> list[bytes]:
        """Several ``(start, length)`` ranges of one object, in the order given."""
        ...

    async def put(self, path: str, data: PutData) -> None:
        """Write the whole object atomically: readers see the old object, or all of ``data``.

        ``data`` is bytes-like or the path of a local file; objects of at least
        ``TransferConfig.multipart_threshold`` bytes go up in parts where the store supports it.
        """
        ...

    async def head(self, path: str) -> ObjectMeta:
        """Metadata of one object. Raises ObjectNotFoundError if absent."""
        ...

    async def list(self, prefix: str = "") -> list[ObjectMeta]:
        """Every object whose key starts with ``prefix``, sorted by key."""
        ...

    async def delete(self, path: str) -> None:
        """Remove one object; a missing object is not an error."""
        ...


def put_size(data: PutData) -> int:
    """The number of bytes ``data`` will upload (the file's size for a path).

    Raises:
        ObjectNotFoundError: ``data`` is a path to a file that does not exist.
        ConfigurationError: ``data`` is neither bytes-like nor a path.
    """
    if isinstance(data, (bytes, bytearray)):
        return len(data)
    if isinstance(data, memoryview):
        return data.nbytes
    if isinstance(data, os.PathLike):
        try:
            return os.stat(data).st_size
        except FileNotFoundError as exc:
            raise ObjectNotFoundError(f"put: the source file {os.fspath(data)} does not exist") from exc
    raise ConfigurationError(f"put: data of type {type(data).__name__} is not supported; pass bytes or a local path")


def _first_paragraph(exc: BaseException) -> str:
    """obstore appends a long ``Debug source:`` dump to its messages; keep the readable part."""
    return str(exc).split("\n\nDebug source:", 1)[0].strip()


@contextlib.contextmanager
def mapped_errors(operation: str, where: str) -> Iterator[None]:
    """Map every foreign exception raised inside into litstream's tree, once, naming ``operation`` and ``where``.

    Raises:
        ObjectNotFoundError: for ``FileNotFoundError`` and obstore's ``NotFoundError``.
        StorageError: for every other failure (permission, network, server errors).
        ConfigurationError: for obstore's unknown-configuration-key error.
    """
    try:
        yield
    except LitstreamError:  # already ours (e.g. FormatError of a damaged chunk); cancellations are BaseExceptions
        raise
    except FileNotFoundError as exc:
        raise ObjectNotFoundError(f"{operation}: {where} does not exist") from exc
    except OSError as exc:
        raise StorageError(f"{operation} failed for {where}: {exc}") from exc
    except Exception as exc:
        kind = type(exc).__name__
        module = type(exc).__module__
        if module.startswith("obstore"):
            if kind == "NotFoundError":
                raise ObjectNotFoundError(f"{operation}: {where} does not exist") from exc
            if kind == "UnknownConfigurationKeyError":
                raise ConfigurationError(f"{where}: {_first_paragraph(exc)}; fix storage_options") from exc
            if kind in ("PermissionDeniedError", "UnauthenticatedError"):
                raise StorageError(
                    f"{operation} failed for {where}: {kind}: {_first_paragraph(exc)}; check the credentials "
                    "(storage_options or the provider's environment variables) and the endpoint"
                ) from exc
        raise StorageError(f"{operation} failed for {where}: {kind}: {_first_paragraph(exc)}") from exc


def loop_limiter(
    current: tuple[object, anyio.CapacityLimiter] | None, size: int
) -> tuple[object, anyio.CapacityLimiter]:
    """A CapacityLimiter for the running event loop (a limiter belongs to the loop that made it).

    A dataset's store is reused by successive portals, each with its own loop, so the limiter is
    remade whenever the loop changes.
    """
    token = anyio.lowlevel.current_token()
    if current is not None and current[0] == token:
        return current
    return (token, anyio.CapacityLimiter(size))
