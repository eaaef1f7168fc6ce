"""Where a reader's memory limit comes from: the explicit setting, the process's cgroup, or its rlimits.

See ``read/engine/_memory.py`` for how the budget is spent; :func:`memory_limit` gives the limit in order:

1. ``max_memory=`` of the dataset, else ``LITSTREAM_MAX_MEMORY``: the bytes that the buffers of all of a
   loader's readers may hold together, ``"auto"`` (the default: detect a limit, below) or ``"off"``;
2. the cgroup of this process: cgroup v2 ``memory.max``, or cgroup v1 ``memory.limit_in_bytes`` of the memory
   controller, the smallest along the path from its own cgroup up to the root of the mount (a parent's limit
   binds its children), read through ``/proc/self/cgroup`` and ``/proc/self/mountinfo``. Every process of the
   cgroup shares it, so :data:`LIMIT_FRACTION` of it is the readers' budget, split evenly between them;
3. ``RLIMIT_DATA`` or ``RLIMIT_AS`` (per process): :data:`LIMIT_FRACTION` of what is left of it (``VmData`` /
   ``VmSize`` of ``/proc/self/status``) is that process's budget.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ..._core._environ import environ
from ..._core._errors import ConfigurationError
from ..._core._units import parse_bytes

__all__ = [
    "LIMIT_FRACTION",
    "MaxMemory",
    "MemoryLimit",
    "cgroup_limit",
    "check_max_memory",
    "memory_limit",
    "rlimit_limit",
]

LIMIT_FRACTION = 0.5
"""The part of a detected limit given to the readers' buffers; the rest is left to the interpreter, torch,
the model and the page cache."""

_UNLIMITED = 2**60  # cgroup v1 writes "no limit" as a page-rounded 2**63 - 1
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
    if sys.platform == "win32":  # no rlimits
        return None
    import resource

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
