"""Run a command under a hard memory limit: a child cgroup (v2 ``memory.max`` or v1 ``memory.limit_in_bytes``)
of this process's own cgroup, else ``RLIMIT_DATA`` set in the child (what ``prlimit --data`` sets, applied by a
small interpreter that then execs the command).

:func:`capped` picks the first mechanism this machine allows and says which (``Cap.mechanism``); ``None``
when neither works (the caller skips with :attr:`Unavailable.reason`). A cgroup is removed after the run,
with any process still in it killed first (a worker orphaned by an OOM kill of its parent).
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["Cap", "Result", "Unavailable", "capped"]


@dataclass(frozen=True)
class Result:
    """How the capped command ended: its exit status, output, and whether the kernel OOM-killed a process."""

    returncode: int
    stdout: str
    stderr: str
    oom_kills: int
    peak: int | None  # the cgroup's peak usage in bytes (page cache included), None under an rlimit


@dataclass(frozen=True)
class Unavailable:
    reason: str


def _own_cgroup_dirs() -> list[tuple[str, Path]]:
    """``(kind, directory)`` of this process's memory cgroup: ``("v2", ...)`` and/or ``("v1", ...)``."""
    mounts: list[tuple[str, str, str, str]] = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        head, _, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if len(fields) >= 5 and len(rest) >= 3 and rest[0] in ("cgroup", "cgroup2"):
            mounts.append((rest[0], fields[3], fields[4], rest[2]))
    out: list[tuple[str, Path]] = []
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for fstype, root, point, options in mounts:
            v2 = controllers == "" and fstype == "cgroup2"
            v1 = "memory" in controllers.split(",") and fstype == "cgroup" and "memory" in options.split(",")
            if v2 or v1:
                with contextlib.suppress(ValueError):
                    out.append(("v2" if v2 else "v1", Path(point) / Path(path).relative_to(root)))
    return sorted(out)  # v1 before v2: v2 needs the memory controller delegated, which v1 machines lack


class Cap:
    """A way to run commands under ``limit`` bytes; ``mechanism`` names it for the test's report."""

    def __init__(self, limit: int, mechanism: str, parent: Path | None) -> None:
        self.limit = limit
        self.mechanism = mechanism
        self._parent = parent

    def run(self, argv: Sequence[str], env: Mapping[str, str], timeout: float) -> Result:
        """Run ``argv`` under the limit (its child processes too) and wait at most ``timeout`` seconds."""
        if self._parent is None:
            return self._run_rlimit(argv, env, timeout)
        group = self._parent / f"litstream-memtest-{uuid.uuid4().hex[:12]}"
        group.mkdir()
        try:
            v2 = self.mechanism.startswith("cgroup v2")
            (group / ("memory.max" if v2 else "memory.limit_in_bytes")).write_text(str(self.limit))
            if v2 and (group / "memory.swap.max").exists():
                (group / "memory.swap.max").write_text("0")
            if not v2 and (group / "memory.memsw.limit_in_bytes").exists():  # no swapping out instead of a kill
                with contextlib.suppress(OSError):
                    (group / "memory.memsw.limit_in_bytes").write_text(str(self.limit))
            shell = 'echo $$ > "$0/cgroup.procs" && exec "$@"'
            done = subprocess.run(["sh", "-c", shell, str(group), *argv], env=dict(env), capture_output=True,
                                  text=True, timeout=timeout, check=False)  # fmt: skip
            return Result(done.returncode, done.stdout, done.stderr, _oom_kills(group, v2), _peak(group, v2))
        finally:
            _remove(group)

    def _run_rlimit(self, argv: Sequence[str], env: Mapping[str, str], timeout: float) -> Result:
        # the limit is set by a small interpreter that then execs the command (no preexec_fn: that would fork
        # this threaded process)
        setter = "import os, resource, sys; n = int(sys.argv[1]); resource.setrlimit(resource.RLIMIT_DATA, (n, n)); "
        setter += "os.execv(sys.argv[2], sys.argv[2:])"
        command = [sys.executable, "-c", setter, str(self.limit), *argv]
        done = subprocess.run(command, env=dict(env), capture_output=True, text=True, timeout=timeout, check=False)
        return Result(done.returncode, done.stdout, done.stderr, 0, None)


def _read_counter(path: Path, key: str) -> int:
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    return 0


def _oom_kills(group: Path, v2: bool) -> int:
    return _read_counter(group / ("memory.events" if v2 else "memory.oom_control"), "oom_kill")


def _peak(group: Path, v2: bool) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        return int((group / ("memory.peak" if v2 else "memory.max_usage_in_bytes")).read_text())
    return None


def _remove(group: Path) -> None:
    """Kill what is left in ``group`` (processes this test started), then remove it."""
    deadline = time.monotonic() + 30
    while True:
        try:
            group.rmdir()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
        for pid in (group / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        time.sleep(0.05)  # the kernel takes the killed processes out of the group


def _try_cgroup(limit: int) -> Cap | Unavailable:
    reasons = []
    try:
        dirs = _own_cgroup_dirs()
    except OSError as exc:
        return Unavailable(f"no /proc cgroup information ({exc})")
    for kind, directory in dirs:
        probe = directory / f"litstream-memtest-probe-{uuid.uuid4().hex[:8]}"
        try:
            probe.mkdir()
        except OSError as exc:
            reasons.append(f"cannot create a child of the cgroup {directory} ({exc.strerror})")
            continue
        try:
            name = "memory.max" if kind == "v2" else "memory.limit_in_bytes"
            if not (probe / name).exists():
                reasons.append(f"{directory} has no {name} (memory controller not delegated)")
                continue
            (probe / name).write_text(str(limit))
            # can this process move a child into it? (a v2 group needs write access to the common ancestor)
            moved = subprocess.run(["sh", "-c", 'echo $$ > "$0/cgroup.procs"', str(probe)], capture_output=True,
                                   check=False, timeout=30)  # fmt: skip
            if moved.returncode != 0:
                reasons.append(f"cannot move a process into {probe}: {moved.stderr.decode().strip()}")
                continue
            return Cap(limit, f"cgroup {kind} {name} of a child of {directory}", directory)
        except OSError as exc:
            reasons.append(f"cannot set {probe}'s limit ({exc.strerror})")
        finally:
            _remove(probe)
    return Unavailable("; ".join(reasons) or "no memory cgroup")


def capped(limit: int, *, allow_rlimit: bool = True) -> Cap | Unavailable:
    """A :class:`Cap` of ``limit`` bytes: a child cgroup where this machine allows one, else ``RLIMIT_DATA``."""
    if not sys.platform.startswith("linux"):
        return Unavailable(f"memory cgroups and RLIMIT_DATA need Linux, this is {sys.platform}")
    found = _try_cgroup(limit)
    if isinstance(found, Cap) or not allow_rlimit:
        return found
    soft, _ = resource.getrlimit(resource.RLIMIT_DATA)
    if soft != resource.RLIM_INFINITY and soft < limit:
        return Unavailable(f"{found.reason}; and RLIMIT_DATA is already {soft} bytes, below {limit}")
    return Cap(limit, f"RLIMIT_DATA in the child (no cgroup: {found.reason})", None)
