"""``optimize``: run a user function over inputs in worker processes and write one dataset.

Flow: validate every argument (nothing is written before that) → split ``inputs`` over
``num_nodes x num_workers`` workers (:mod:`._inputs`; nodes from ``DATA_OPTIMIZER_*``, :mod:`._env`) →
check and prepare the output for ``mode`` / ``use_checkpoint`` (:mod:`._output`) → run one
:class:`~._worker.OptimizeJob` per worker in this process, in worker processes or on an executor
(:mod:`._runner`) → merge the partial indexes, across nodes if several (:mod:`._nodes`); ``index.json``
is written last. A failing worker stops the job with :class:`~litstream.WorkerError` naming the input;
without ``use_checkpoint`` the files of this run are removed, with it they stay and a re-run resumes.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import cloudpickle

from .._errors import ConfigurationError, FormatError, ObjectNotFoundError
from .._sync import run_sync
from ..format._compression import validate_compression
from ..format._index import INDEX_FILENAME, Index
from ..format._loaders import PyTreeLoader
from ..storage._resolver import Dir, resolve_dir, store_for
from ._checkpoint import RunConfig, clear_checkpoints, inputs_digest
from ._env import OptimizerEnv, optimizer_env
from ._inputs import (
    Assignment,
    assign_inputs,
    check_fast_dev_run,
    check_weights,
    file_weights,
    is_queue,
    split_inputs,
)
from ._nodes import finish_node, merge_nodes, sweep_orphans
from ._output import Prepared, prepare_output
from ._runner import run_jobs
from ._worker import OptimizeJob
from ._writer import check_chunking

if TYPE_CHECKING:
    from ..format._serializers import Serializer
    from ..storage._store import Store

__all__ = ["Plan", "optimize", "plan_inputs", "split_inputs"]

_MODES = (None, "append", "overwrite")


class Plan:
    """Validated inputs and how they are split (shared by ``optimize`` and ``map``)."""

    def __init__(self, items: list[Any] | None, source: Any, assignment: Assignment, env: OptimizerEnv) -> None:
        self.items = items
        self.source = source
        self.assignment = assignment
        self.env = env


def plan_inputs(
    inputs: Any,
    queue: Any,
    *,
    num_workers: int | None,
    weights: Sequence[float] | None,
    reorder_files: bool,
    input_dir: str | os.PathLike[str] | Dir | None,
    fast_dev_run: bool | int,
    batch_size: int | None,
    executor: concurrent.futures.Executor | None,
    use_checkpoint: bool = False,
) -> tuple[Plan, int]:
    """Validate the input arguments and split the inputs; returns the plan and ``num_workers``.

    Raises:
        ConfigurationError: any invalid input argument (see ``optimize``).
    """
    if inputs is not None and queue is not None:
        raise ConfigurationError("give inputs or queue, not both (queue is LitData's name for a queue input)")
    if queue is not None:
        if not is_queue(queue):
            raise ConfigurationError(
                f"queue must be a queue.Queue or multiprocessing.Queue, got {type(queue).__name__}"
            )
        inputs = queue
    if inputs is None:
        raise ConfigurationError("give inputs: a non-empty sequence, or a queue ended by the sentinel 'ALL_DONE'")
    source = inputs if is_queue(inputs) else None
    if source is None and (isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence) or len(inputs) == 0):
        raise ConfigurationError(
            "inputs must be a non-empty sequence (list, tuple, range) or a queue.Queue/multiprocessing.Queue, "
            f"got {type(inputs).__name__} {inputs!r:.80}"
        )
    if num_workers is None:
        num_workers = os.cpu_count() or 1
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
        raise ConfigurationError(f"num_workers must be a non-negative int, got {num_workers!r}")
    num_workers = max(num_workers, 1)
    keep = check_fast_dev_run(fast_dev_run)
    if not isinstance(reorder_files, bool):
        raise ConfigurationError(f"reorder_files must be True or False, got {reorder_files!r}")
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1):
        raise ConfigurationError(f"batch_size must be a positive int (inputs per fn call) or None, got {batch_size!r}")
    if executor is not None and not isinstance(executor, concurrent.futures.Executor):
        raise ConfigurationError(
            f"executor must be a concurrent.futures.Executor (e.g. dask's Client.get_executor()), got {executor!r}"
        )
    if source is not None:
        for name, value in (("weights", weights), ("batch_size", batch_size), ("executor", executor)):
            if value is not None:
                raise ConfigurationError(f"{name}={value!r:.60} cannot be used with a queue input; give a sequence")
        if use_checkpoint:
            raise ConfigurationError(
                "use_checkpoint=True needs a sequence of inputs, not a queue (it cannot be replayed)"
            )
    env = optimizer_env()
    if input_dir is not None:
        resolved = resolve_dir(input_dir, argument="input_dir")
        if weights is None and reorder_files and resolved.path is not None and source is None:
            weights = file_weights(inputs, resolved.path)
    items: list[Any] | None = None
    if source is None:
        items = list(inputs)
        if weights is not None:
            weights = check_weights(weights, len(items))
        if batch_size is not None:
            items = [items[i : i + batch_size] for i in range(0, len(items), batch_size)]
            if weights is not None:
                w = list(weights)
                weights = [sum(w[i : i + batch_size]) for i in range(0, len(w), batch_size)]
        assignment = assign_inputs(
            len(items), num_workers, num_nodes=env.num_nodes, node_rank=env.node_rank, weights=weights, keep=keep
        )
    else:
        ranks = [env.node_rank * num_workers + i for i in range(num_workers)]
        assignment = Assignment(positions=[[] for _ in ranks], global_ranks=ranks)
    return Plan(items, source, assignment, env), num_workers


def output_store(
    output_dir: str | os.PathLike[str] | Dir | Store, storage_options: Mapping[str, Any] | None
) -> Store:
    """The store to write to.

    Raises:
        ConfigurationError: an unknown scheme, or a read-only location (``hf://``, ``http(s)://``).
    """
    if isinstance(output_dir, (str, os.PathLike, Dir)):
        resolved = resolve_dir(output_dir, argument="output_dir")
        scheme = (resolved.url or "").split("://", 1)[0].lower()
        if scheme in ("hf", "http", "https"):
            raise ConfigurationError(
                f"output_dir={resolved.url!r}: cannot write datasets to {scheme}:// (read-only here); write to a "
                "local directory or s3://, gs://, azure:// and upload from there"
            )
    return store_for(output_dir, storage_options, argument="output_dir")


def pickle_fn(fn: Any) -> bytes:
    """``fn`` cloudpickled for the workers.

    Raises:
        ConfigurationError: ``fn`` is not callable or cannot be pickled.
    """
    if not callable(fn):
        raise ConfigurationError(f"fn must be callable, got {fn!r}")
    try:
        return bytes(cloudpickle.dumps(fn))
    except Exception as exc:
        raise ConfigurationError(f"fn={fn!r} cannot be sent to worker processes: {exc}") from exc


def check_start_method(start_method: str | None) -> None:
    """Raises ConfigurationError when ``start_method`` is not available here."""
    if start_method is not None and start_method not in multiprocessing.get_all_start_methods():
        raise ConfigurationError(
            f"start_method={start_method!r} is not available here; use one of {multiprocessing.get_all_start_methods()}"
        )


def pick_start_method(start_method: str | None) -> str:
    """``start_method``, else ``fork`` where safe (POSIX, and this process has not used obstore), else ``spawn``.

    Call it right before starting workers: preparing a remote output uses obstore in this process.
    """
    if start_method is not None:
        return start_method
    from ..storage._store import obstore_used

    if "fork" in multiprocessing.get_all_start_methods() and not obstore_used():
        return "fork"
    return "spawn"


def optimize(
    fn: Callable[[Any], Any],
    inputs: Sequence[Any] | Any = None,
    output_dir: str | os.PathLike[str] | Dir | Store = "optimized_data",
    *,
    queue: Any = None,
    input_dir: str | os.PathLike[str] | Dir | None = None,
    weights: Sequence[float] | None = None,
    chunk_size: int | None = None,
    chunk_bytes: int | str | None = None,
    compression: str | None = None,
    num_workers: int | None = None,
    fast_dev_run: bool | int = False,
    reorder_files: bool = True,
    batch_size: int | None = None,
    mode: str | None = None,
    use_checkpoint: bool = False,
    item_loader: PyTreeLoader | None = None,
    serializers: Mapping[str, Serializer] | None = None,
    start_method: str | None = None,
    executor: concurrent.futures.Executor | None = None,
    storage_options: Mapping[str, Any] | None = None,
    verbose: bool = True,
) -> None:
    """Apply ``fn`` to every input and write the samples as a LitData-format dataset.

    Matches LitData's ``optimize`` for the arguments it shares (names, defaults, the ordered input split,
    file names, ``DATA_OPTIMIZER_*`` nodes); see ``docs/environment.md`` for the environment.

    Args:
        fn: ``fn(input) -> sample`` (``None`` results are skipped) or a generator function yielding
            any number of samples per input. A sample is any pytree of supported leaves (see
            ``litstream.format``); the first sample fixes the format.
        inputs: A non-empty sequence (worker ``w`` of node ``k`` gets slice ``k·num_workers + w``), or a
            ``queue.Queue`` / ``multiprocessing.Queue`` that a producer ends with the string ``"ALL_DONE"``
            (or by ``DATA_OPTIMIZER_TIMEOUT`` seconds, default 300, of silence).
        output_dir: Local directory (created if missing), URL (``s3://``, ``gs://``, ``azure://``), ``Dir``
            or ``Store``. Default ``"optimized_data"`` as LitData.
        queue: LitData's name for a queue input; give ``inputs`` or ``queue``.
        input_dir: Local directory holding the files the inputs name; with ``reorder_files`` the inputs
            are balanced across workers by the bytes of those files.
        weights: One positive number per input; workers get bins of about equal total weight (greedy
            packing, heaviest first), each bin in input order.
        chunk_size: Items per chunk. Give exactly one of ``chunk_size`` / ``chunk_bytes``.
        chunk_bytes: Payload bytes per chunk: an int, or a string with decimal units (``"64MB"``).
        compression: ``None``, ``"zstd"`` (level 4) or ``"zstd:N"`` (N in 1..22).
        num_workers: Workers per node (default ``os.cpu_count()``; 0 counts as 1). One worker without an
            executor runs in this process.
        fast_dev_run: ``True`` keeps the first 10 inputs of every worker, an int that many; ``False``
            (default) processes everything.
        reorder_files: Balance by file sizes under ``input_dir`` (default True; no effect without it).
        batch_size: Group inputs into lists of this many; ``fn`` gets a list.
        mode: ``None`` (the output must hold no files), ``"overwrite"`` (remove a previous dataset,
            sidecars and checkpoints included) or ``"append"`` (add chunks after an existing dataset's;
            the new samples must have the same format).
        use_checkpoint: Save each worker's progress after every stored chunk under ``.checkpoints/``; a run
            that was killed or failed is completed by calling ``optimize`` again with the same arguments,
            every input landing in the dataset exactly once. ``fn`` must be deterministic. Checkpoints
            are deleted after success.
        item_loader: ``PyTreeLoader()`` (default).
        serializers: Extra serializers by registry key, tried before the built-ins.
        start_method: Multiprocessing start method. Default: ``"fork"`` where available and safe
            (this process has not used obstore, which hangs in forked children), else ``"spawn"``.
        executor: Any ``concurrent.futures.Executor`` (a Dask ``Client.get_executor()``, Ray's, a
            ``ProcessPoolExecutor``) to run the per-worker jobs on instead of our processes; each job
            writes straight to ``output_dir``, which its workers must reach.
        storage_options: Credentials and client options when ``output_dir`` is an object-store URL;
            chunks are uploaded as they are written and ``index.json`` last.
        verbose: Show a tqdm progress bar.

    Raises:
        ConfigurationError: a bad argument or ``DATA_OPTIMIZER_*`` value; raised before anything is
            written. Also when checkpoints were made by a different run.
        OutputNotEmptyError: ``output_dir`` already holds files and ``mode`` is ``None``.
        WorkerError: ``fn`` or the writer failed in a worker; names the input and chains the worker's
            exception. Without ``use_checkpoint`` no ``index.json`` is written and this run's files are
            removed; with it they stay for a re-run.
        StorageError: on N nodes, the last node waited ``DATA_OPTIMIZER_TIMEOUT`` s for another node.
    """
    fn_pickle = pickle_fn(fn)
    chunk_size, chunk_bytes_int = check_chunking(chunk_size, chunk_bytes)
    validate_compression(compression)
    if mode not in _MODES:
        raise ConfigurationError(f"mode must be None, 'append' or 'overwrite', got {mode!r}")
    if item_loader is not None and not isinstance(item_loader, PyTreeLoader):
        raise ConfigurationError(f"item_loader={item_loader!r} is not supported yet; use PyTreeLoader()")
    if not isinstance(use_checkpoint, bool):
        raise ConfigurationError(f"use_checkpoint must be True or False, got {use_checkpoint!r}")
    check_start_method(start_method)
    plan, num_workers = plan_inputs(
        inputs,
        queue,
        num_workers=num_workers,
        weights=weights,
        reorder_files=reorder_files,
        input_dir=input_dir,
        fast_dev_run=fast_dev_run,
        batch_size=batch_size,
        executor=executor,
        use_checkpoint=use_checkpoint,
    )
    store = output_store(output_dir, storage_options)
    assignment = plan.assignment
    run_config = None
    if use_checkpoint:
        assert plan.items is not None
        items = plan.items
        run_config = RunConfig(
            num_nodes=plan.env.num_nodes,
            num_workers=num_workers,
            global_ranks=tuple(assignment.global_ranks),
            inputs=tuple(inputs_digest([items[i] for i in p]) for p in assignment.positions),
        )
    prepared = run_sync(prepare_output, store, mode, assignment.global_ranks, plan.env, run_config)
    jobs = _jobs(plan, prepared, fn_pickle, store, chunk_size, chunk_bytes_int, compression, item_loader, serializers)
    total = None if plan.items is None else sum(job.num_inputs or 0 for job in jobs)
    try:
        run_jobs(
            jobs,
            total=total,
            num_workers=num_workers,
            start_method=pick_start_method(start_method),
            executor=executor,
            source=plan.source,
            queue_timeout=plan.env.timeout,
            verbose=verbose,
        )
        run_sync(finish_node, store, assignment.global_ranks, plan.env, prepared.existing, use_checkpoint)
    except BaseException:
        if not use_checkpoint:
            run_sync(_discard, store, assignment.global_ranks, prepared)
        raise
    run_sync(_finish, store, assignment.global_ranks, plan.env, prepared, use_checkpoint)


def _jobs(
    plan: Plan,
    prepared: Prepared,
    fn_pickle: bytes,
    store: Store,
    chunk_size: int | None,
    chunk_bytes: int | None,
    compression: str | None,
    item_loader: PyTreeLoader | None,
    serializers: Mapping[str, Serializer] | None,
) -> list[OptimizeJob]:
    writer_kwargs: dict[str, Any] = {
        "chunk_size": chunk_size,
        "chunk_bytes": chunk_bytes,
        "compression": compression,
        "serializers": serializers,
        "item_loader": item_loader,
    }
    jobs = []
    for rank, positions in zip(plan.assignment.global_ranks, plan.assignment.positions, strict=True):
        items = None if plan.items is None else [plan.items[i] for i in positions]
        jobs.append(
            OptimizeJob(
                rank=rank,
                items=items,
                positions=positions,
                fn_pickle=fn_pickle,
                store=store,
                writer_kwargs={**writer_kwargs, "start_chunk": prepared.start_chunks.get(rank, 0)},
                checkpoint=prepared.checkpoints.get(rank) if prepared.checkpoints else None,
                queue_timeout=plan.env.timeout,
            )
        )
    return jobs


async def _discard(store: Store, ranks: list[int], prepared: Prepared) -> None:
    """Remove this run's chunks and partials after a failure; never a chunk an ``index.json`` names."""
    keep = {c.filename for c in prepared.existing.chunks} if prepared.existing is not None else set()
    try:
        current = Index.from_json(await store.get(INDEX_FILENAME))
    except (ObjectNotFoundError, FormatError):
        current = None
    if current is not None:
        keep |= {c.filename for c in current.chunks}
    await sweep_orphans(store, ranks, keep)


async def _finish(store: Store, ranks: list[int], env: OptimizerEnv, prepared: Prepared, checkpoints: bool) -> None:
    if checkpoints:
        await clear_checkpoints(store, None if env.num_nodes == 1 else env.node_rank, ranks)
    if env.num_nodes > 1 and env.is_last_node:
        await merge_nodes(store, env, prepared.existing)
