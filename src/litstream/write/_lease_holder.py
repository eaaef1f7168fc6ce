"""Who holds a writer lease, and whether that run still counts as alive (see :mod:`._writer_lock`).

A lease names its run's machine as host name, boot id and pid namespace, so "this machine" means the
same kernel and the same pid numbering (two containers with one host name are two machines), and its
process by pid and start time, so a reused pid is not taken for the run.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone

__all__ = ["Holder", "alive", "iso", "machine", "start_time"]


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def machine() -> str:
    """This machine and pid namespace: host name, boot id and the pid namespace's inode (Linux)."""
    boot = _read_text("/proc/sys/kernel/random/boot_id") or ""
    try:
        pidns = str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        pidns = ""
    return f"{socket.gethostname()}|{boot}|{pidns}"


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), to tell a reused pid apart."""
    stat = _read_text(f"/proc/{pid}/stat")
    if stat is None or ")" not in stat:
        return None
    parts = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state is parts[0], starttime parts[19]
    return parts[19] if len(parts) > 19 and parts[0] != "Z" else None


def alive(pid: int, start: str | None) -> bool:
    """Whether process ``pid`` of this machine runs and (where known) started at ``start``; a zombie is not.

    Another user's process counts as alive (its start time may be hidden): the safe side.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    now = start_time(pid)
    if now is None:  # on Linux: a zombie (killed, not yet reaped) or gone meanwhile
        return not os.path.isdir("/proc/self")
    return start is None or now == start


def iso(seconds: float) -> str:
    """Unix seconds as ``2026-12-04T16:50:24Z`` (UTC), for messages."""
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Holder:
    """Who holds a lease (the JSON object's fields); times are Unix seconds."""

    run_id: str
    operation: str
    host: str
    machine: str
    pid: int
    pid_start: str | None
    started: float
    renewed: float
    expires: float
    node_rank: int = 0
    num_nodes: int = 1
    state: str = "running"

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Holder | None:
        """Parse a lease; ``None`` when it is not one of ours (a stranger's file: never trusted)."""
        try:
            raw = json.loads(data.decode())
            known = {f.name for f in fields(cls)}
            holder = cls(**{k: v for k, v in raw.items() if k in known}) if isinstance(raw, dict) else None
        except (ValueError, TypeError, UnicodeDecodeError):
            return None
        if holder is None or not (holder.pid_start is None or isinstance(holder.pid_start, str)):
            return None
        if not isinstance(holder.state, str):
            return None
        numbers = (holder.started, holder.renewed, holder.expires)
        ints = (holder.pid, holder.node_rank, holder.num_nodes)
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in numbers):
            return None
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in ints):
            return None
        if not all(isinstance(v, str) for v in (holder.run_id, holder.operation, holder.host, holder.machine)):
            return None
        return holder

    def describe(self) -> str:
        node = f", node {self.node_rank} of {self.num_nodes}" if self.num_nodes > 1 else ""
        return (
            f"{self.operation} run {self.run_id} (host {self.host}, pid {self.pid}, started {iso(self.started)}{node})"
        )

    def stale_reason(self, now: float, by: Holder | None = None) -> str | None:
        """Why this lease may be taken over (by ``by``), or ``None`` while its run counts as alive."""
        if self.state == "finished" and by is not None and by.num_nodes == self.num_nodes:
            return f"node {self.node_rank} had finished its share; this is a re-run of that node"
        if self.machine == machine() and self.state == "running":
            return None if alive(self.pid, self.pid_start) else f"its process {self.pid} on this host is gone"
        if now > self.expires:
            return f"its lease expired at {iso(self.expires)} (last renewed {iso(self.renewed)})"
        return None
