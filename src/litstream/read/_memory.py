"""Memory limits and the read budget: how much a reader may buffer, and how deep it then prefetches.

Where the limit comes from (:func:`memory_limit`), the first that applies:

1. the explicit setting: ``max_memory=`` of the dataset, else ``LITSTREAM_MAX_MEMORY``: bytes (``"800MB"``) that
   the buffers of all of a loader's readers may hold together, ``"auto"`` (the default: detect a limit, below) or
   ``"off"`` (no budget: ``max_pre_download`` and ``prefetch_factor`` as given);
2. the cgroup of this process: cgroup v2 ``memory.max``, or cgroup v1 ``memory.limit_in_bytes`` of the memory
   controller, the smallest along the path from its own cgroup up to the root of the mount (a parent's limit
   binds its children). The limit is shared by every process of the cgroup (the main process and its
   DataLoader workers), so :data:`LIMIT_FRACTION` of it is the budget, split evenly between the readers;
3. ``RLIMIT_DATA`` or ``RLIMIT_AS`` (per process): :data:`LIMIT_FRACTION` of what is left of it at the start
   of the epoch is that process's budget.

The budget pays for every buffer a reader holds, each counted by its real size (:func:`plan_read`): the chunks
alive in the prefetch pipeline (the one being decoded, the one handed over, those fetched ahead, and the
compressed copy of a chunk being decompressed, all from ``chunk_bytes`` of ``index.json``), the download
pieces in flight of a remote dataset, and the decoded batches a DataLoader worker keeps (its decode buffers,
the shared-memory slots or batches torch holds in its queue: ``prefetch_factor`` per worker). Prefetch depth,
the hand-over buffer, download bytes in flight and ``prefetch_factor`` are lowered until the total fits; when
even one chunk at a time does not, :class:`~litstream.ConfigurationError` names the limit and the fixes
instead of the process being killed by the kernel.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .._environ import environ
from .._errors import ConfigurationError
from ..format._units import parse_bytes
from ._core import piece_chunks

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._core import Piece
    from ._source import DatasetSource

__all__ = [
    "LIMIT_FRACTION",
    "MaxMemory",
    "MemoryLimit",
    "ReadBudget",
    "adapt_reader",
    "budget_for",
    "check_max_memory",
    "memory_limit",
    "plan_read",
]

LIMIT_FRACTION = 0.5
"""The part of a detected limit given to the readers' buffers; the rest is left to the interpreter, torch,
the model and the page cache."""

_UNLIMITED = 2**60  # cgroup v1 writes "no limit" as a page-rounded 2**63 - 1
_SLOT_HEADROOM = 1.25  # litstream._slots sizes a slot at the batch's bytes times this
MaxMemory = int | str | bool | None


@dataclass(frozen=True)
class MemoryLimit:
    """A memory limit and where it comes from.

    Attributes:
        limit: The limit in bytes.
        budget: Bytes the readers' buffers may hold (all readers of the limit together when ``shared``).
        source: What set it, for messages (``"cgroup v1 memory.limit_in_bytes of /sys/fs/cgroup/..."``).
        shared: Whether the processes of a loader share it (a cgroup, the explicit setting) or each process
            has its own (an rlimit).
    """

    limit: int
    budget: int
    source: str
    shared: bool = True


def check_max_memory(value: object, *, argument: str = "max_memory") -> MaxMemory:
    """Validate a ``max_memory`` setting: ``None``, ``"auto"``, ``"off"``/``False``, or bytes (an int or ``"800MB"``).

    Raises:
        ConfigurationError: anything else, naming ``argument`` and the value.
    """
    if value is None or value is False:
        return value
    if isinstance(value, str) and value.strip().lower() in ("auto", "off"):
        return value.strip().lower()
    if isinstance(value, str) and value.strip().isdigit():  # bytes, as an environment variable gives them
        value = int(value)
    if value is True or not isinstance(value, (int, str)):
        raise ConfigurationError(
            f"{argument} must be None, 'auto', 'off' or a number of bytes (an int or e.g. '800MB'), got {value!r}"
        )
    try:
        parse_bytes(value, argument=argument)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{exc}; or pass 'auto' (detect the limit) or 'off' (no budget)") from None
    return value


def memory_limit(max_memory: MaxMemory = None) -> MemoryLimit | None:
    """The memory limit of this process's readers (see the module docstring); ``None``: no budget.

    Args:
        max_memory: The dataset's ``max_memory``; ``None`` defers to ``LITSTREAM_MAX_MEMORY``, then ``"auto"``.

    Raises:
        ConfigurationError: a malformed ``LITSTREAM_MAX_MEMORY``.
    """
    setting: MaxMemory = max_memory
    argument = "max_memory"
    if setting is None:
        setting, argument = environ().litstream_max_memory, "LITSTREAM_MAX_MEMORY"
        setting = check_max_memory(setting, argument=argument)
    if setting is False or setting == "off":
        return None
    if setting is not None and setting != "auto":
        assert isinstance(setting, (int, str))
        budget = parse_bytes(setting, argument=argument)
        return MemoryLimit(budget, budget, f"{argument}={setting!r}")
    return cgroup_limit() or rlimit_limit()


def _cgroup_lines() -> list[tuple[str, str]]:
    """``(controllers, path)`` of each line of ``/proc/self/cgroup``."""
    try:
        text = Path("/proc/self/cgroup").read_text()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            out.append((parts[1], parts[2]))
    return out


def _mounts() -> list[tuple[str, str, str, str]]:
    """``(fstype, root, mount point, super options)`` of each cgroup mount in ``/proc/self/mountinfo``."""
    try:
        text = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        head, _, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if len(fields) >= 5 and len(rest) >= 3 and rest[0] in ("cgroup", "cgroup2"):
            out.append((rest[0], fields[3], fields[4], rest[2]))
    return out


def _read_limit(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if text == "max" or not text.isdigit():
        return None
    value = int(text)
    return value if 0 < value < _UNLIMITED else None


def _smallest_on_path(mount: str, root: str, cgroup: str, filename: str) -> tuple[int, Path] | None:
    """The smallest ``filename`` limit from ``cgroup``'s directory up to the mount's root."""
    try:
        relative = Path(cgroup).relative_to(root)
    except ValueError:  # the cgroup is outside what this mount shows (another namespace)
        relative = Path()
    here = Path(mount) / relative
    best: tuple[int, Path] | None = None
    while True:
        value = _read_limit(here / filename)
        if value is not None and (best is None or value < best[0]):
            best = (value, here / filename)
        if here == Path(mount) or here == here.parent:
            return best
        here = here.parent


def cgroup_limit() -> MemoryLimit | None:
    """The memory limit of this process's cgroup (v2 ``memory.max``, v1 ``memory.limit_in_bytes``), or ``None``."""
    lines, mounts = _cgroup_lines(), _mounts()
    found: list[tuple[int, Path, str]] = []
    for controllers, path in lines:
        if controllers == "":
            for fstype, root, point, _ in mounts:
                if fstype == "cgroup2" and (hit := _smallest_on_path(point, root, path, "memory.max")):
                    found.append((*hit, "cgroup v2 memory.max"))
        elif "memory" in controllers.split(","):
            for fstype, root, point, options in mounts:
                if fstype == "cgroup" and "memory" in options.split(","):
                    if hit := _smallest_on_path(point, root, path, "memory.limit_in_bytes"):
                        found.append((*hit, "cgroup v1 memory.limit_in_bytes"))
    if not found:
        return None
    limit, where, kind = min(found)
    return MemoryLimit(limit, int(limit * LIMIT_FRACTION), f"the {kind} of {where.parent} ({limit} bytes)")


def _status_bytes(field: str) -> int | None:
    """A ``kB`` field of ``/proc/self/status`` (``VmData``, ``VmSize``) in bytes."""
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return None


def rlimit_limit() -> MemoryLimit | None:
    """``RLIMIT_DATA`` or ``RLIMIT_AS`` of this process (the one with less room left), or ``None``."""
    best: MemoryLimit | None = None
    for name, kind, field in (
        ("RLIMIT_DATA", resource.RLIMIT_DATA, "VmData"),
        ("RLIMIT_AS", resource.RLIMIT_AS, "VmSize"),
    ):
        soft, _ = resource.getrlimit(kind)
        if soft == resource.RLIM_INFINITY or soft <= 0:
            continue
        used = _status_bytes(field) or 0
        budget = max(0, int((soft - used) * LIMIT_FRACTION))
        if best is None or budget < best.budget:
            best = MemoryLimit(soft, budget, f"{name} of process {os.getpid()} ({soft} bytes, {used} in use)", False)
    return best


@dataclass(frozen=True)
class ReadBudget:
    """How one reader buffers under a budget (see :func:`plan_read`).

    Attributes:
        ahead: Chunks fetched ahead (``max_pre_download``), >= 1.
        handover: Chunks waiting between the producer and the decoder (the stream's buffer): 0 or 1.
        download_bytes: Download bytes in flight (the ``Downloader``'s ``max_bytes_in_flight``), or ``None``
            when nothing is downloaded.
        prefetch_factor: Batches a DataLoader worker builds ahead (torch's ``prefetch_factor``).
        bytes: What these buffers hold at most, in bytes.
        share: The bytes this reader was given.
    """

    ahead: int
    handover: int
    download_bytes: int | None
    prefetch_factor: int
    bytes: int
    share: int


def _reader_bytes(ahead: int, handover: int, chunk: int, transient: int, download: int, window: int,
                  batch: int, prefetch: int) -> int:  # fmt: skip
    # chunks: the decoder's one, the hand-over buffer, the producer's in hand, ahead - 1 fetched ahead (a
    # window piece: two windows at a boundary), the compressed copy of one being decompressed
    chunks = (1 + handover + max(ahead, 2 * window)) * chunk + transient
    # batches (a DataLoader worker): ``prefetch`` in torch's queue (slots or shared memory, with the slots'
    # headroom) plus the one being built and the decode buffer it reuses
    batches = int((prefetch + 1) * batch * _SLOT_HEADROOM) + 2 * batch if prefetch else 0
    return chunks + download + batches


def plan_read(
    limit: MemoryLimit,
    *,
    readers: int,
    chunk_bytes: int,
    compressed: bool,
    piece_size: int | None,
    max_pre_download: int,
    window: int = 0,
    batch_bytes: int = 0,
    prefetch_factor: int = 0,
    fixed_prefetch: bool = True,
) -> ReadBudget:
    """The deepest prefetch whose buffers fit this reader's share of ``limit``.

    Tried in order: ``max_pre_download`` down to 1 with a hand-over buffer of one chunk, then without it; for
    each ``prefetch_factor`` from the one asked for down to 1 unless ``fixed_prefetch``.

    Args:
        limit: The limit (:func:`memory_limit`).
        readers: Processes sharing ``limit.budget`` (a loader's workers); ignored for a per-process limit.
        chunk_bytes: The largest chunk, decompressed (``chunk_bytes`` of ``index.json``).
        compressed: Whether chunks are decompressed (or decrypted) in memory (a compressed copy lives meanwhile).
        piece_size: Bytes per ranged GET when chunks are downloaded; ``None`` for local data.
        max_pre_download: The depth asked for (the most it may be).
        window: Chunks per window with ``shuffle="window"``, else 0.
        batch_bytes: Bytes of one decoded batch (a DataLoader worker), 0 when no batches are built.
        prefetch_factor: Batches a worker builds ahead, as asked (0: not a DataLoader worker).
        fixed_prefetch: ``prefetch_factor`` is given (a worker cannot change torch's); else it may be lowered
            (the loader, before it starts its workers).

    Raises:
        ConfigurationError: even one chunk at a time (and one batch ahead) does not fit, naming the limit and
            the fixes.
    """
    share = limit.budget // max(readers, 1) if limit.shared else limit.budget
    transient = chunk_bytes if compressed else 0
    download = 2 * piece_size if piece_size is not None else 0
    least = min(prefetch_factor, 1) if not fixed_prefetch else prefetch_factor
    prefetches = range(prefetch_factor, least - 1, -1) if prefetch_factor > 0 else (0,)
    candidates = [(a, 1, p) for p in prefetches for a in range(max(max_pre_download, 1), 0, -1)]
    candidates += [(1, 0, p) for p in prefetches]
    for ahead, handover, prefetch in candidates:
        need = _reader_bytes(ahead, handover, chunk_bytes, transient, download, window, batch_bytes, prefetch)
        if need <= share:
            return ReadBudget(ahead, handover, download or None, prefetch, need, share)
    need = _reader_bytes(1, 0, chunk_bytes, transient, download, window, batch_bytes, least)
    who = f"{readers} readers" if limit.shared and readers > 1 else "this reader"
    raise ConfigurationError(
        f"memory limit: one reader needs at least {need} bytes (chunks of up to {chunk_bytes} bytes"
        + (f", windows of {window} chunks" if window else "")
        + (f", batches of {batch_bytes} bytes" if batch_bytes else "")
        + f") but {who} may use only {share} bytes of the budget of {limit.budget} bytes set by {limit.source}. "
        "Fix: use fewer DataLoader workers, a smaller batch_size or shuffle_window, re-optimize with a smaller "
        "chunk_bytes, raise the memory limit, or set max_memory= (LITSTREAM_MAX_MEMORY) to the bytes the readers "
        "may use ('off': no budget)"
    )


def budget_for(
    source: DatasetSource,
    pieces: Sequence[Piece],
    limit: MemoryLimit,
    *,
    readers: int,
    max_pre_download: int,
    window: int = 0,
    batch_size: int = 0,
    prefetch_factor: int = 0,
    fixed_prefetch: bool = True,
) -> ReadBudget:
    """:func:`plan_read` for reading ``pieces`` of ``source``: sizes from its ``index.json``.

    Args:
        source: The open dataset.
        pieces: What the reader serves (only their chunks are counted).
        limit: The limit (:func:`memory_limit`).
        readers: Readers sharing ``limit`` (workers times the datasets each worker reads at once).
        max_pre_download: The depth asked for.
        window: Chunks per window with ``shuffle="window"``, else 0.
        batch_size: Samples per batch of a DataLoader worker, 0 when none is built.
        prefetch_factor: Batches a DataLoader worker builds ahead, 0 when none is built.
        fixed_prefetch: As :func:`plan_read`.

    Raises:
        ConfigurationError: as :func:`plan_read`.
    """
    chunks = source.index.chunks
    used = {c for piece, _ in pieces for c in piece_chunks(piece)} or set(range(len(chunks)))
    chunk_bytes = max((chunks[c].chunk_bytes for c in used), default=0)
    item_bytes = max((-(-chunks[c].chunk_bytes // max(chunks[c].chunk_size, 1)) for c in used), default=0)
    config = source.index.config
    compressed = bool(config is not None and config.compression) or source.encryption_level is not None
    downloader = source.downloader
    return plan_read(
        limit,
        readers=readers,
        chunk_bytes=chunk_bytes,
        compressed=compressed,
        piece_size=None if downloader is None else downloader.piece_size,
        max_pre_download=max_pre_download,
        window=window,
        batch_bytes=batch_size * item_bytes if prefetch_factor else 0,
        prefetch_factor=prefetch_factor,
        fixed_prefetch=fixed_prefetch,
    )


def adapt_reader(
    source: DatasetSource,
    pieces: Sequence[Piece],
    setting: MaxMemory,
    *,
    readers: int,
    max_pre_download: int,
    window: int = 0,
    batch_size: int = 0,
    prefetch_factor: int = 0,
) -> tuple[int, int]:
    """``(max_pre_download, hand-over buffer)`` for a reader of ``pieces`` under the limit of ``setting``
    (:func:`memory_limit`): as asked (and a buffer of 1) without a limit; else :func:`budget_for`'s, with the
    download bytes in flight of ``source`` lowered to its plan.

    Raises:
        ConfigurationError: as :func:`plan_read`, or a malformed ``LITSTREAM_MAX_MEMORY``.
    """
    limit = memory_limit(setting)
    if limit is None:
        return max_pre_download, 1
    budget = budget_for(source, pieces, limit, readers=readers, max_pre_download=max_pre_download, window=window,
                        batch_size=batch_size, prefetch_factor=prefetch_factor)  # fmt: skip
    if source.downloader is not None and budget.download_bytes is not None:
        source.downloader.limit_bytes_in_flight(budget.download_bytes)
    return budget.ahead, budget.handover
