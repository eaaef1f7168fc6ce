"""``map``: run a file-to-file transform over inputs in worker processes (LitData's ``map``).

For every input the worker makes a fresh temporary directory, calls ``fn(input, tmp_dir)`` (plus
``device=`` / ``is_last=`` when ``fn`` declares them), and stores every file ``fn`` left there under the
same relative path in ``output_dir``, local or remote (one atomic ``put`` per file), then removes the
temporary directory. Input splitting, nodes, executors, the progress bar and argument checks are those
of ``optimize``.
"""

from __future__ import annotations

import inspect
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cloudpickle

from .._core._bridge import run_sync
from .._core._errors import ConfigurationError, OutputNotEmptyError, WorkerError
from ..storage._files import remove_stale_temporaries_below
from ._args import check_start_method, output_store, pick_start_method, plan_inputs
from ._params import start_write
from ._summary import WorkerSummary, summarize
from ._writer_lock import WriterLock, is_lock_name
from .run._feed import run_ahead
from .run._runner import run_jobs
from .run._sequence_feed import job_inputs

if TYPE_CHECKING:
    import concurrent.futures
    from collections.abc import Callable, Mapping, Sequence

    from ..storage._resolver import Dir
    from ..storage._store import Store
    from ._summary import RunSummary
    from .run._worker import Report

__all__ = ["map"]


def _device(rank: int) -> str:
    import torch

    if torch.cuda.is_available():
        return f"cuda:{rank % torch.cuda.device_count()}"
    return "cpu"


@dataclass(frozen=True)
class MapJob:
    """The work of one map worker (see :class:`~._worker.OptimizeJob` for the fields)."""

    rank: int
    items: Sequence[Any] | None
    positions: Sequence[int]
    fn_pickle: bytes
    store: Store
    queue_timeout: float = 300.0

    @property
    def num_inputs(self) -> int | None:
        return None if self.items is None else len(self.items)

    @property
    def first_input(self) -> int:
        return 0

    def without_inputs(self) -> MapJob:
        return replace(self, items=None, positions=())

    async def run(self, report: Report, source: Any = None) -> WorkerSummary:
        """Transform every input and store its files; raises WorkerError naming a failing input.

        ``fn`` runs in a worker thread, one batch of inputs ahead of the uploads (see :mod:`._feed`).
        """
        fn = cloudpickle.loads(self.fn_pickle)
        params = inspect.signature(fn).parameters
        inputs = files = stored = 0

        def call(item: Any, where: str, is_last: bool) -> str:
            kwargs: dict[str, Any] = {}
            if "device" in params:
                kwargs["device"] = _device(self.rank)
            if "is_last" in params:
                kwargs["is_last"] = is_last
            tmp = tempfile.mkdtemp(prefix="litstream-map-")
            try:
                try:
                    result = fn(item, tmp, **kwargs)
                except Exception as exc:
                    raise WorkerError(
                        f"fn failed on input {item!r:.200} ({where}, worker {self.rank}): {type(exc).__name__}: {exc}"
                    ) from exc
                if result is not None:
                    raise WorkerError(
                        f"fn returned {result!r:.80} for input {item!r:.200} ({where}, worker {self.rank}); map's fn "
                        "must write its files into the output_dir it is given and return None (use optimize to "
                        "write samples)"
                    )
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            return tmp

        async def handle(item: Any, where: str, tmp: str) -> None:
            nonlocal inputs, files, stored
            try:
                for path in sorted(_files(tmp)):
                    size = path.stat().st_size
                    await self.store.put(path.relative_to(tmp).as_posix(), path)
                    files += 1
                    stored += size
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            inputs += 1
            report(("progress", self.rank, 1))

        halt = threading.Event()
        await run_ahead(job_inputs(self, source, halt), call, handle, halt)
        return WorkerSummary(rank=self.rank, inputs=inputs, files=files, bytes=stored)


def _files(root: str) -> list[Path]:
    return [Path(d) / name for d, _, names in os.walk(root) for name in names]


def map(
    fn: Callable[..., None],
    inputs: Sequence[Any] | Any,
    output_dir: str | os.PathLike[str] | Dir | Store,
    *,
    input_dir: str | os.PathLike[str] | Dir | None = None,
    weights: Sequence[float] | None = None,
    num_workers: int | None = None,
    fast_dev_run: bool | int = False,
    reorder_files: bool = True,
    error_when_not_empty: bool = False,
    batch_size: int | None = None,
    start_method: str | None = None,
    executor: concurrent.futures.Executor | None = None,
    storage_options: Mapping[str, Any] | None = None,
    verbose: bool = True,
    num_nodes: int | None = None,
    machine: Any = None,
    num_downloaders: int | None = None,
    num_uploaders: int | None = None,
    reader: Any = None,
    optimize_dns: bool | None = None,
    keep_data_ordered: bool | None = None,
    broadcast_paths: bool = False,
) -> RunSummary:
    """Run ``fn(input, output_dir)`` over every input in worker processes; ``fn`` writes files.

    Matches LitData's ``map``: ``fn`` gets a fresh temporary directory per input (not ``output_dir``
    itself), writes any files (sub-directories allowed) there and returns ``None``; the files are then
    stored under the same relative paths in ``output_dir`` (uploaded for a URL), replacing files of the
    same name. ``fn`` may declare ``device`` (``"cuda:{rank % gpus}"``, else ``"cpu"``) and ``is_last``
    (True for a worker's last input) keyword parameters.

    Args:
        fn: ``fn(input, output_dir, [device=...], [is_last=...]) -> None``.
        inputs: A non-empty sequence, a queue ended by ``"ALL_DONE"`` or a ``StreamingDataLoader`` (as in ``optimize``).
        output_dir: Local directory, URL (``s3://``, ``gs://``, ``azure://``), ``Dir`` or ``Store``.
        input_dir: As in ``optimize``; so are ``weights``, ``num_workers``, ``fast_dev_run``, ``reorder_files``,
            ``batch_size``, ``start_method``, ``executor``, ``storage_options`` and ``verbose``.
        error_when_not_empty: Refuse an ``output_dir`` that already holds files (LitData checks only
            remote outputs; litstream checks every kind).
        reader: LitData's input reader (``ParquetReader(...)`` or a ``BaseReader`` subclass): the inputs
            become ``reader.remap_items(inputs, num_workers)`` and ``fn`` gets ``reader.read(item)``.
        num_nodes, machine, broadcast_paths: LitData's Lightning-job switches; only their defaults
            (``None``, ``None``, ``False``), else ``ConfigurationError``.
        num_downloaders, num_uploaders, optimize_dns: LitData's I/O tuning (``None`` or an int >= 1; a
            bool): accepted without effect (``optimize_dns`` only matters on Lightning AI).
        keep_data_ordered: ``None``, ``True`` or ``False``, without effect: litstream always gives each
            worker its slice in input order, which is what LitData's ``True`` promises.

    Returns:
        A :class:`~litstream.RunSummary`: inputs finished, ``files`` and ``bytes`` stored, seconds
        (``samples`` and ``chunks`` are 0). LitData returns ``None``.

    Raises:
        ConfigurationError: a bad argument; raised before anything is written.
        OutputNotEmptyError: ``error_when_not_empty`` and ``output_dir`` holds files.
        OutputLockedError: another ``optimize``, ``map`` or ``AsyncUploader`` is writing ``output_dir`` (named);
            one run at a time holds its writer lock (see ``docs/storage.md``).
        WorkerError: an input was lost: ``fn`` failed or returned something other than ``None`` (names the
            input), a worker process died, an executor task was cancelled, or a queue input raised or held
            an item that cannot be pickled. Files of inputs that finished stay in ``output_dir``.
    """
    # The keyword lists handed to start_write, plan_inputs and run_jobs below stand in optimize too: they forward
    # the public arguments both functions take; what they feed is written once (_params, _args, run/_runner).
    started = time.monotonic()
    fn_pickle, inputs = start_write(  # the LitData-only arguments optimize and map share, checked once
        fn,
        inputs,
        num_workers,
        num_nodes=num_nodes,
        machine=machine,
        num_downloaders=num_downloaders,
        num_uploaders=num_uploaders,
        reader=reader,
        optimize_dns=optimize_dns,
        keep_data_ordered=keep_data_ordered,
        broadcast_paths=broadcast_paths,
    )
    if not isinstance(error_when_not_empty, bool):
        raise ConfigurationError(f"error_when_not_empty must be True or False, got {error_when_not_empty!r}")
    check_start_method(start_method)
    plan, num_workers = plan_inputs(
        inputs,
        None,
        num_workers=num_workers,
        weights=weights,
        reorder_files=reorder_files,
        input_dir=input_dir,
        fast_dev_run=fast_dev_run,
        batch_size=batch_size,
        executor=executor,
    )
    store = output_store(output_dir, storage_options)
    env = plan.env
    lock = WriterLock(store, "map", node_rank=env.node_rank, num_nodes=env.num_nodes).acquire()  # see _writer_lock
    try:
        if error_when_not_empty:
            listing = [m for m in run_sync(store.list) if not is_lock_name(m.path)]
            if listing:
                names = ", ".join(m.path for m in listing[:3])
                raise OutputNotEmptyError(
                    f"output_dir {store.url} is not empty (holds {names}{', ...' if len(listing) > 3 else ''}) and "
                    "error_when_not_empty=True; choose an empty directory or pass error_when_not_empty=False"
                )
        jobs = [
            MapJob(
                rank=rank,
                items=items,
                positions=positions,
                fn_pickle=fn_pickle,
                store=store,
                queue_timeout=plan.env.timeout,
            )
            for rank, items, positions in plan.shares()
        ]
        try:
            workers = run_jobs(
                jobs,
                total=None if plan.items is None else plan.assignment.num_inputs,
                num_workers=num_workers,
                start_method=pick_start_method(start_method),
                executor=executor,
                source=plan.source,
                queue_timeout=plan.env.timeout,
                verbose=verbose,
                desc="Mapping",
                label="map",
                abort=lambda: lock.lost,
            )
        finally:  # a killed worker (or a Dask task run again) may have left a half-written temporary
            if env.num_nodes == 1 and not lock.lost:  # this run is the only writer and its workers ended
                remove_stale_temporaries_below(store)
    finally:
        lock.release()
    return summarize(workers, seconds=time.monotonic() - started, output=store.url)
