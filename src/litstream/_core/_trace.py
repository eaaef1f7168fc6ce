"""The trace recorder behind :func:`litstream.debugger.enable_tracer`: spans in Chrome's trace event format.

One :class:`Tracer` per process, ``TRACER``. Code on the read and write paths records a span with two
one-line hooks; when tracing is off the whole cost is one attribute check (``TRACER.on``)::

    t0 = perf_counter_ns() if TRACER.on else 0
    ...                                   # the work being timed
    if t0:
        TRACER.span("read", CAT_READ, t0, {"chunk": 3})

``span`` is for code that runs on one thread from start to end (its events nest on that thread's
track); ``async_span`` is for a coroutine, whose spans overlap others on the event loop's thread: each
goes on the lowest "lane" of its category free since it started (``tid`` = ``_LANE_TID`` + lane), so
every track holds properly nested complete events (``"ph": "X"``, ``ts`` and ``dur`` in microseconds,
``ts`` on the wall clock so that the files of several processes line up).

Files: events stay in memory (a tuple each) and are written as one ``{"traceEvents": [...]}`` JSON
document per process, to ``<stem>.pid<PID><suffix>`` next to the trace file (temp name, then rename):
at the first event ``flush_interval`` seconds after the last write, and when the process exits
(``atexit`` in a main or spawned process, a ``multiprocessing`` finalizer in a worker process, which
skips ``atexit``). A part of ``_SEGMENT_EVENTS`` events is final: they leave memory and the process
goes on in ``<stem>.pid<PID>-1<suffix>``, ``-2``, ... The process that called ``enable_tracer`` (the
owner) merges every part file into the trace file when it exits, when tracing is switched off, or on
:func:`merge`.

Worker processes: a forked child keeps the parent's settings (its buffer is emptied after the fork); a
spawned or forkserver child reads them from ``LITSTREAM_TRACE`` / ``LITSTREAM_TRACE_FILE`` when this
module is imported (:func:`_from_environment`, the one place they are read), and
``StreamingDataLoader`` also hands them to its workers in its ``worker_init_fn``.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _trace_categories
from ._environ import environ, export, unexport
from ._trace_categories import ALL_CATEGORIES as ALL_CATEGORIES
from ._trace_categories import CAT_BATCH as CAT_BATCH
from ._trace_categories import CAT_CRASH as CAT_CRASH
from ._trace_categories import CAT_DECOMPRESS as CAT_DECOMPRESS
from ._trace_categories import CAT_DELETE as CAT_DELETE
from ._trace_categories import CAT_DOWNLOAD as CAT_DOWNLOAD
from ._trace_categories import CAT_EPOCH as CAT_EPOCH
from ._trace_categories import CAT_LOCK as CAT_LOCK
from ._trace_categories import CAT_READ as CAT_READ
from ._trace_categories import CAT_SAMPLE as CAT_SAMPLE
from ._trace_categories import CAT_WRITE as CAT_WRITE

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = [
    "ENV_CATEGORIES",
    "ENV_FILE",
    "TRACER",
    "Tracer",
    "merge",
    "part_files",
]
__all__ += _trace_categories.__all__  # the trace categories (their one table), re-exported

ENV_CATEGORIES = "LITSTREAM_TRACE"
ENV_FILE = "LITSTREAM_TRACE_FILE"

_LANE_TID = 1_000_000_000  # lanes of async spans: far above any OS thread id
_LANE_STRIDE = 1_000  # per category
_SEGMENT_EVENTS = 20_000  # a part file this full is left as it is and the process starts the next one

# (ph, name, cat, start perf ns, end perf ns, tid, args)
_Event = tuple[str, str, str, int, int, int, "dict[str, Any] | None"]


def part_files(trace_file: Path) -> list[Path]:
    """The per-process part files of ``trace_file`` present now (``<stem>.pid<PID>[-<k>]<suffix>``), sorted."""
    pattern = re.compile(re.escape(trace_file.stem) + r"\.pid\d+(-\d+)?" + re.escape(trace_file.suffix) + "$")
    if not trace_file.parent.is_dir():
        return []
    return sorted(p for p in trace_file.parent.iterdir() if pattern.match(p.name))


def _write_json(path: Path, document: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}.{threading.get_ident()}")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(document, handle, separators=(",", ":"))
    os.replace(tmp, path)


def merge(trace_file: Path) -> Path:
    """Write ``trace_file``: the events of every part file of it, one JSON document (temp name, then rename).

    A part file that cannot be read (being replaced, or damaged) is skipped, with its name in
    ``otherData.skipped``.
    """
    events: list[Any] = []
    skipped: list[str] = []
    for part in part_files(trace_file):
        try:
            with open(part, encoding="utf-8") as handle:
                events.extend(json.load(handle)["traceEvents"])
        except (OSError, ValueError, KeyError, TypeError):
            skipped.append(part.name)
    other: dict[str, Any] = {"producer": "litstream", "parts": len(part_files(trace_file))}
    if skipped:
        other["skipped"] = skipped
    _write_json(trace_file, {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other})
    return trace_file


class Tracer:
    """The recorder of one process. Thread-safe; ``on`` and ``categories`` are read without the lock.

    The process has one, :data:`TRACER`; tests make their own.

    Args:
        clock: ``time.perf_counter_ns`` (the default) or a stand-in: when an event's end is taken and
            when ``flush_interval`` has passed.
        segment_events: A part file holding this many events is final (default 20,000).
    """

    def __init__(
        self, *, clock: Callable[[], int] = time.perf_counter_ns, segment_events: int = _SEGMENT_EVENTS
    ) -> None:
        self._clock = clock
        self._segment_events = segment_events
        self.on = False
        self.categories: frozenset[str] = frozenset()
        self.path: Path | None = None  # the merged trace file
        self.owner = False  # this process called enable_tracer: it merges the parts
        self.flush_interval = 5.0
        self._reset_process_state()
        self._exit_hooked: int | None = None  # pid whose exit hooks are installed

    def _reset_process_state(self) -> None:
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()  # one writer of the part file at a time
        self._segment = 0  # parts of this process already full (memory stays bounded)
        self._events: list[_Event] = []
        self._written = 0  # events in the part file
        self._lanes: dict[str, list[int]] = {}  # category -> end (perf ns) of the last span on each lane
        self._threads: dict[int, str] = {}
        self._pid: int | None = None
        self._offset_ns = 0  # wall clock minus perf counter, in this process
        self._next_flush = 0  # perf ns after which the next event writes the part file

    # -- configuration -------------------------------------------------------------------------

    def configure(self, categories: Iterable[str], path: Path | None, *, owner: bool, flush_interval: float) -> None:
        """Switch tracing to ``categories`` (empty: off), written under ``path``; export them to children."""
        if self.on and self.path is not None and (path != self.path or not categories):
            self.finish()  # write what the previous settings recorded before changing them
        cats = frozenset(categories)
        with self._lock:
            if path != self.path or not cats:  # a new trace, or the end of this one
                self._events.clear()
                self._written = 0
            self.categories = cats
            self.path = path
            self.owner = owner
            self.flush_interval = flush_interval
            self.on = bool(cats) and path is not None
            if not self.on:
                self._pid = None  # the next trace attaches afresh (clock offset, first write time)
            elif self._pid is not None:
                self._next_flush = self._later(self._clock())
        if self.on and path is not None:
            export({ENV_CATEGORIES: ",".join(sorted(cats)), ENV_FILE: str(path)})
        else:
            unexport((ENV_CATEGORIES, ENV_FILE))

    def settings(self) -> tuple[tuple[str, ...], str | None, float]:
        """What a worker process needs to trace like this one (picklable)."""
        return tuple(sorted(self.categories)), None if self.path is None else str(self.path), self.flush_interval

    def adopt(self, settings: tuple[tuple[str, ...], str | None, float]) -> None:
        """Take a parent's :meth:`settings` (in a worker process; never the owner)."""
        categories, path, interval = settings
        if (frozenset(categories), path) != (self.categories, None if self.path is None else str(self.path)):
            self.configure(categories, None if path is None else Path(path), owner=False, flush_interval=interval)

    # -- recording -----------------------------------------------------------------------------

    def span(self, name: str, cat: str, start_ns: int, args: dict[str, Any] | None = None) -> None:
        """Record a complete event from ``start_ns`` (``time.perf_counter_ns()``) to now on this thread."""
        if cat not in self.categories:
            return
        self._record_here("X", name, cat, start_ns, self._clock(), args)

    def async_span(self, name: str, cat: str, start_ns: int, args: dict[str, Any] | None = None) -> None:
        """Record a complete event of a coroutine from ``start_ns`` to now, on the first free lane of ``cat``."""
        if cat not in self.categories:
            return
        end = self._clock()
        with self._lock:
            if self._pid is None:
                self._attach()
            lanes = self._lanes.setdefault(cat, [])
            lane = next((i for i, busy in enumerate(lanes) if busy <= start_ns), len(lanes))
            if lane == len(lanes):
                lanes.append(end)
            lanes[lane] = end
            base = _LANE_TID + ALL_CATEGORIES.index(cat) * _LANE_STRIDE if cat in ALL_CATEGORIES else _LANE_TID
            tid = base + lane
            if tid not in self._threads:
                self._threads[tid] = f"{cat} {lane}"
            self._events.append(("X", name, cat, start_ns, end, tid, args))
        self._due(end)

    def instant(self, name: str, cat: str, args: dict[str, Any] | None = None) -> None:
        """Record an instant event (``"ph": "i"``) now on this thread."""
        if cat not in self.categories:
            return
        now = self._clock()
        self._record_here("i", name, cat, now, now, args)

    def _record_here(
        self, ph: str, name: str, cat: str, start_ns: int, end_ns: int, args: dict[str, Any] | None
    ) -> None:
        """Record an event of phase ``ph`` (``"X"`` complete, ``"i"`` instant) from ``start_ns`` to ``end_ns``
        (``time.perf_counter_ns()``) on this thread."""
        tid = threading.get_native_id()
        with self._lock:
            if self._pid is None:
                self._attach()
            if tid not in self._threads:
                self._threads[tid] = threading.current_thread().name
            self._events.append((ph, name, cat, start_ns, end_ns, tid, args))
        self._due(end_ns)

    def _attach(self) -> None:
        """First event in this process (lock held): clocks, exit hooks, the periodic flush."""
        pid = os.getpid()
        self._pid = pid
        self._offset_ns = time.time_ns() - self._clock()
        if self._exit_hooked != pid:
            self._exit_hooked = pid
            atexit.register(self._at_exit)
            mp_util = sys.modules.get("multiprocessing.util")
            if mp_util is not None:  # a worker process leaves by os._exit: atexit never runs there
                mp_util.Finalize(None, self._at_exit, exitpriority=100)
        self._next_flush = self._later(self._clock())

    def _later(self, now: int) -> int:
        return now + int(self.flush_interval * 1e9) if self.flush_interval > 0 else 1 << 62

    def _due(self, now: int) -> None:
        """Write the part file if ``flush_interval`` has passed (no thread of its own: nothing to fork with)."""
        if now >= self._next_flush:
            self._next_flush = self._later(now)
            with contextlib.suppress(OSError):
                self.flush()

    # -- files ---------------------------------------------------------------------------------

    def part_path(self) -> Path | None:
        """This process's part file (``None`` when tracing has no file)."""
        if self.path is None:
            return None
        segment = f"-{self._segment}" if self._segment else ""
        return self.path.with_name(f"{self.path.stem}.pid{os.getpid()}{segment}{self.path.suffix}")

    def flush(self) -> Path | None:
        """Write this process's events to its part file if there are new ones; return the file (or ``None``).

        A part holding ``segment_events`` events is final: its events leave memory and the next ones go
        to ``<stem>.pid<PID>-<k><suffix>``.
        """
        with self._flush_lock:
            return self._flush()

    def _flush(self) -> Path | None:
        with self._lock:
            part = self.part_path()
            if part is None or self._pid != os.getpid() or self._written == len(self._events):
                return None
            events = list(self._events)
            threads = dict(self._threads)
            offset = self._offset_ns
        pid = os.getpid()
        out: list[dict[str, Any]] = [
            {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": _process_name(pid)}},
            *({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}
              for tid, name in threads.items()),
        ]  # fmt: skip
        for ph, name, cat, start, end, tid, args in events:
            event: dict[str, Any] = {"ph": ph, "name": name, "cat": cat, "pid": pid, "tid": tid,
                                     "ts": round((start + offset) / 1000, 3)}  # fmt: skip
            if ph == "X":
                event["dur"] = round((end - start) / 1000, 3)
            else:
                event["s"] = "t"
            if args:
                event["args"] = args
            out.append(event)
        part.parent.mkdir(parents=True, exist_ok=True)
        _write_json(part, {"traceEvents": out, "displayTimeUnit": "ms"})
        with self._lock:
            if len(events) >= self._segment_events:
                del self._events[: len(events)]
                self._written = 0
                self._segment += 1
            else:
                self._written = len(events)
        return part

    def finish(self) -> Path | None:
        """Flush this process; in the owner, merge every part into the trace file. Returns the file written."""
        part = self.flush()
        if self.owner and self.path is not None:
            return merge(self.path)
        return part

    def _at_exit(self) -> None:
        if self.on:  # switched off: the trace was written then
            with contextlib.suppress(OSError):
                self.finish()

    def _after_fork(self) -> None:
        self._reset_process_state()
        self.owner = False


def _process_name(pid: int) -> str:
    worker = sys.modules.get("torch.utils.data._utils.worker")
    info = worker.get_worker_info() if worker is not None else None
    if info is not None:
        return f"DataLoader worker {info.id} (pid {pid})"
    return f"{'main' if TRACER.owner else 'process'} (pid {pid})"


def _from_environment() -> None:
    """Turn tracing on in a child started with ``LITSTREAM_TRACE`` (categories) and ``LITSTREAM_TRACE_FILE``."""
    env = environ()
    raw, path = env.litstream_trace or "", env.litstream_trace_file or ""
    categories = [c for c in (part.strip().lower() for part in raw.split(",")) if c in ALL_CATEGORIES]
    if categories and path:
        TRACER.configure(categories, Path(path), owner=False, flush_interval=TRACER.flush_interval)


TRACER = Tracer()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=TRACER._after_fork)
_from_environment()
