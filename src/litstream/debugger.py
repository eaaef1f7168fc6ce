"""Tracing of the data pipeline: LitData 0.2.76's ``litdata.debugger.enable_tracer``, writing a Chrome trace.

``enable_tracer()`` records, per process, the spans of chunk downloads, cache writes, chunk reads,
decompression, decoding, cache deletes (and, by level, epochs, batches and cache locks), and writes
them as a Chrome trace event JSON file (``{"traceEvents": [...]}``) that Perfetto
(https://ui.perfetto.dev) and ``chrome://tracing`` open. See ``docs/tracing.md``.

This module imports neither torch nor the read path: importing it is cheap.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from pathlib import Path
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

from ._core import _trace_categories
from ._core._errors import ConfigurationError
from ._core._trace import TRACER
from ._core._trace import merge as _merge
from ._core._trace_categories import ALL_CATEGORIES as ALL_CATEGORIES
from ._core._trace_categories import CAT_BATCH as CAT_BATCH
from ._core._trace_categories import CAT_CRASH as CAT_CRASH
from ._core._trace_categories import CAT_DECOMPRESS as CAT_DECOMPRESS
from ._core._trace_categories import CAT_DELETE as CAT_DELETE
from ._core._trace_categories import CAT_DOWNLOAD as CAT_DOWNLOAD
from ._core._trace_categories import CAT_EPOCH as CAT_EPOCH
from ._core._trace_categories import CAT_LOCK as CAT_LOCK
from ._core._trace_categories import CAT_READ as CAT_READ
from ._core._trace_categories import CAT_SAMPLE as CAT_SAMPLE
from ._core._trace_categories import CAT_WRITE as CAT_WRITE

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

__all__ = [
    "LEVEL_CATEGORIES",
    "active_categories",
    "emit_trace",
    "enable_tracer",
    "is_tracing",
    "merge_traces",
    "trace_span",
]
__all__ += _trace_categories.__all__  # LitData's trace categories (their one table is in _core)

_CHUNK = frozenset({CAT_EPOCH, CAT_BATCH, CAT_DOWNLOAD, CAT_READ, CAT_DELETE, CAT_DECOMPRESS, CAT_CRASH, CAT_WRITE})

LEVEL_CATEGORIES: dict[str, frozenset[str]] = {
    "off": frozenset(),
    "batch": frozenset({CAT_EPOCH, CAT_BATCH, CAT_CRASH}),
    "chunk": _CHUNK,
    "sample": _CHUNK | {CAT_SAMPLE},
    "debug": frozenset(ALL_CATEGORIES),
}
"""The categories each level records (LitData's levels; ``write`` is litstream's addition)."""

DEFAULT_TRACE_FILE = "litstream_trace.json"


class _TraceLogHandler(logging.Handler):
    """Puts each record of the returned logger in the trace, as an instant event."""

    def emit(self, record: logging.LogRecord) -> None:
        TRACER.instant(record.getMessage(), CAT_CRASH if record.levelno >= logging.ERROR else CAT_EPOCH,
                       {"level": record.levelname, "logger": record.name})  # fmt: skip


def _logger() -> logging.Logger:
    logger = logging.getLogger("litstream.trace")
    if not any(isinstance(h, _TraceLogHandler) for h in logger.handlers):
        logger.addHandler(_TraceLogHandler())
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    return logger


def _categories(level: str, categories: Sequence[str] | None) -> frozenset[str]:
    if categories is not None:
        if isinstance(categories, str):
            raise ConfigurationError(f"categories must be a list of names, got the string {categories!r}")
        chosen = frozenset(c.strip().lower() for c in categories)
        unknown = sorted(chosen - set(ALL_CATEGORIES))
        if unknown:
            raise ConfigurationError(
                f"categories={list(categories)!r}: unknown {unknown}; use names among {list(ALL_CATEGORIES)}"
            )
        return chosen
    if not isinstance(level, str) or level.strip().lower() not in LEVEL_CATEGORIES:
        raise ConfigurationError(f"Unknown tracer level {level!r}; use one of {list(LEVEL_CATEGORIES)}")
    return LEVEL_CATEGORIES[level.strip().lower()]


def enable_tracer(
    level: str = "chunk",
    *,
    categories: Sequence[str] | None = None,
    flush_interval: int = 5,
    log_file: str = DEFAULT_TRACE_FILE,
    item_loader: bool | None = None,
    iterating_dataset: bool | None = None,
    getitem_dataset_for_chunk_index: bool | None = None,
) -> logging.Logger:
    """Record the pipeline's spans in this process and its worker processes, into a Chrome trace file.

    LitData 0.2.76's ``litdata.debugger.enable_tracer`` (same parameters, levels and categories).
    LitData writes semicolon-separated log lines for its Litracer tool; litstream writes the trace
    itself, as Chrome trace event JSON that Perfetto and ``chrome://tracing`` open.

    Call it before iterating (DataLoader workers started later inherit it: forked ones by copy, the
    others through ``LITSTREAM_TRACE``/``LITSTREAM_TRACE_FILE`` and ``StreamingDataLoader``'s
    ``worker_init_fn``). Each process writes ``<stem>.pid<PID><suffix>`` next to ``log_file`` (at the
    first event ``flush_interval`` seconds after its last write, and at exit); this process merges them
    into ``log_file`` at exit, on ``enable_tracer("off")`` and on :func:`merge_traces`. Enabling removes
    part files of ``log_file`` left by an earlier run.

    Args:
        level: ``"batch"`` (epochs and batches), ``"chunk"`` (default: also downloads, cache writes,
            reads, decompression, decoding, deletes, optimize's chunk writes), ``"sample"`` (LitData's
            per-item spans: litstream decodes in batches and records none, so this is ``"chunk"``),
            ``"debug"`` (also cache locks) or ``"off"`` (stop: write the trace and record nothing more).
        categories: Instead of a level, the categories to record, among ``epoch``, ``batch``,
            ``download``, ``read``, ``delete``, ``decompress``, ``sample``, ``lock``, ``crash``, ``write``.
        flush_interval: Seconds after which the next event rewrites its process's part file (default
            5; ``0``: only at exit and on ``merge_traces``).
        log_file: The trace file (default ``"litstream_trace.json"``; LitData's default is
            ``"litdata_debug.log"``, a file of another format). A relative path is taken from the
            current directory now.
        item_loader: ``False`` drops the ``sample`` category (LitData's switch).
        iterating_dataset: ``False`` drops the ``epoch`` category (LitData's switch).
        getitem_dataset_for_chunk_index: ``False`` drops the ``sample`` category (LitData's switch).

    Returns:
        The ``"litstream.trace"`` logger: each message logged to it becomes an instant event in the
        trace (a marker at that time).

    Raises:
        ConfigurationError: unknown ``level`` or category, or a negative ``flush_interval``. (A
            ``ValueError``, as LitData's.)
    """
    cats = _categories(level, categories)
    if iterating_dataset is False:
        cats -= {CAT_EPOCH}
    if item_loader is False or getitem_dataset_for_chunk_index is False:
        cats -= {CAT_SAMPLE}
    if isinstance(flush_interval, bool) or not isinstance(flush_interval, (int, float)) or flush_interval < 0:
        raise ConfigurationError(f"flush_interval must be a number of seconds >= 0, got {flush_interval!r}")
    path = Path(os.path.abspath(os.fspath(log_file)))
    if cats and not (TRACER.on and TRACER.path == path):
        path.parent.mkdir(parents=True, exist_ok=True)
        from ._core._trace import part_files

        for stale in part_files(path):
            stale.unlink(missing_ok=True)
    TRACER.configure(cats, path, owner=True, flush_interval=float(flush_interval))
    return _logger()


def is_tracing(category: str) -> bool:
    """Whether ``category`` is being recorded in this process (LitData's ``is_tracing``)."""
    return category in TRACER.categories and TRACER.on


def active_categories() -> frozenset[str]:
    """The categories being recorded in this process (empty when tracing is off)."""
    return TRACER.categories if TRACER.on else frozenset()


@contextlib.contextmanager
def trace_span(name: str, cat: str, **fields: Any) -> Iterator[None]:
    """Record the ``with`` block as a span named ``name`` in category ``cat`` (LitData's ``trace_span``).

    For your own code, e.g. ``with trace_span("train step", "batch", step=i):``. ``fields`` become the
    event's ``args``. Nothing is recorded when ``cat`` is not enabled; the span is recorded also when
    the block raises.
    """
    t0 = perf_counter_ns() if cat in TRACER.categories and TRACER.on else 0
    try:
        yield
    finally:
        if t0:
            TRACER.span(name, cat, t0, fields or None)


_open_spans = threading.local()  # per thread: (name, cat) -> start times of "B" events not yet ended


def emit_trace(name: str, ph: str, cat: str, **fields: Any) -> None:
    """Record one event in the style of LitData's ``emit_trace`` (a no-op when ``cat`` is not recorded).

    Args:
        name: The event's name (``"read"``, ``"my step"``).
        ph: Chrome's phase: ``"B"`` begins a span on this thread and ``"E"`` ends the most recent open
            span of the same ``name`` and ``cat`` (the pair is written as one complete ``"X"`` event, so
            a file stays valid if the process dies between them); anything else (``"i"``, ``"I"``,
            ``"n"``, ...) is written as an instant event. An ``"E"`` without its ``"B"`` is dropped.
        cat: The category (one of :data:`ALL_CATEGORIES` to be recorded by a level).
        **fields: The event's ``args`` (shown by Perfetto); those of the ``"B"`` event are kept.

    Matches ``litdata.debugger.emit_trace`` (0.2.76) in name and arguments; LitData writes ``B``/``E``
    lines to a log file, litstream writes the span.
    """
    if not (TRACER.on and cat in TRACER.categories):
        return
    opened: dict[tuple[str, str], list[tuple[int, dict[str, Any]]]] = _open_spans.__dict__.setdefault("spans", {})
    if ph == "B":
        opened.setdefault((name, cat), []).append((perf_counter_ns(), fields))
    elif ph == "E":
        stack = opened.get((name, cat))
        if stack:
            start, begin_fields = stack.pop()
            TRACER.span(name, cat, start, {**fields, **begin_fields} or None)
    else:
        TRACER.instant(name, cat, fields or None)


def merge_traces(log_file: str | os.PathLike[str] | None = None) -> Path:
    """Write this process's events and merge every process's part file into the trace file; return its path.

    Worker processes write their part when they exit (a DataLoader's workers: at the end of each epoch
    unless ``persistent_workers=True``), so call this after the loop to get them all before this
    process exits (it also happens at exit and on ``enable_tracer("off")``).

    Args:
        log_file: The trace file; default: the one given to :func:`enable_tracer` in this process.

    Raises:
        ConfigurationError: no ``log_file`` and tracing was never enabled in this process.
    """
    if log_file is None:
        if TRACER.path is None:
            raise ConfigurationError("merge_traces() needs log_file= when enable_tracer() was not called here")
        path = TRACER.path
    else:
        path = Path(os.path.abspath(os.fspath(log_file)))
    if path == TRACER.path:
        TRACER.flush()
    return _merge(path)
