"""Argument checks and input planning shared by ``optimize`` and ``map``; all run before any write."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import cloudpickle

from .._core._errors import ConfigurationError
from ..storage._lightning_paths import resolve_time_template
from ..storage._resolver import Dir, resolve_dir, store_for
from .run._env import OptimizerEnv, optimizer_env
from .run._inputs import (
    Assignment,
    Batched,
    Picked,
    assign_inputs,
    check_fast_dev_run,
    check_weights,
    file_weights,
    is_queue,
)
from .run._loader_inputs import LoaderSequence, is_streaming_loader, loader_inputs

if TYPE_CHECKING:
    from ..storage._store import Store

__all__ = [
    "Plan",
    "check_align_chunking",
    "check_start_method",
    "output_store",
    "pick_start_method",
    "pickle_fn",
    "plan_inputs",
]


class Plan:
    """Validated inputs and how they are split (shared by ``optimize`` and ``map``).

    ``items`` is the user's ``list``, ``tuple`` or ``range`` itself (not a copy; any other sequence is
    listed once), grouped on access with ``batch_size``; ``None`` for a queue input.
    """

    def __init__(self, items: Sequence[Any] | None, source: Any, assignment: Assignment, env: OptimizerEnv) -> None:
        self.items = items
        self.source = source
        self.assignment = assignment
        self.env = env

    def shares(self) -> list[tuple[int, Sequence[Any] | None, Sequence[int]]]:
        """Each worker of this node: its global rank, its inputs (a :class:`~.run._inputs.Picked` view, ``None``
        for a queue) and their positions in the user's ``inputs``; the fields every job (``optimize``'s and
        ``map``'s) starts from."""
        return [
            (rank, None if self.items is None else Picked(self.items, positions), positions)
            for rank, positions in zip(self.assignment.global_ranks, self.assignment.positions, strict=True)
        ]


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
    align: int | None = None,
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
    if is_streaming_loader(inputs):  # LitData's inputs=StreamingDataLoader(...): see ._loader_inputs
        inputs = loader_inputs(inputs, weights=weights, batch_size=batch_size)
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
    items: Sequence[Any] | None = None
    if source is None:
        # No copy of a list, tuple or range (a range stays a range); any other sequence is listed once here,
        # so that its own __getitem__ is never called from the threads that feed the workers.
        loader_epoch = isinstance(inputs, LoaderSequence)  # read once, in order (._loader_inputs)
        items = inputs if type(inputs) in (list, tuple, range) or loader_epoch else list(inputs)
        if weights is not None:
            weights = check_weights(weights, len(items))
        if batch_size is not None:
            items = Batched(items, batch_size)
            if weights is not None:
                w = list(weights)
                weights = [sum(w[i : i + batch_size]) for i in range(0, len(w), batch_size)]
        if align is not None:
            check_align(align, len(items), num_workers * env.num_nodes, weights, batch_size)
        assignment = assign_inputs(
            len(items), num_workers, num_nodes=env.num_nodes, node_rank=env.node_rank, weights=weights, keep=keep,
            align=align,
        )  # fmt: skip
        if loader_epoch:
            if use_checkpoint:
                raise ConfigurationError(
                    "use_checkpoint=True needs a sequence of inputs, not a StreamingDataLoader (it cannot be replayed)"
                )
            inputs.want(assignment.positions)
    else:
        if align is not None:
            raise ConfigurationError(
                "align_chunking=True needs a sequence of inputs (LitData's ordered split); a queue or "
                "StreamingDataLoader input has no length to split"
            )
        ranks = [env.node_rank * num_workers + i for i in range(num_workers)]
        assignment = Assignment(positions=[range(0) for _ in ranks], global_ranks=ranks)
    return Plan(items, source, assignment, env), num_workers


def check_align_chunking(align_chunking: bool, chunk_size: int | None) -> int | None:
    """The chunk size the input split keeps aligned to, or ``None`` without ``align_chunking``.

    Raises:
        ConfigurationError: ``align_chunking=True`` without ``chunk_size`` (LitData's ``ValueError``).
    """
    if not align_chunking:
        return None
    if chunk_size is None:
        raise ConfigurationError(
            "align_chunking=True needs chunk_size (items per chunk): the split keeps whole chunks of that size"
        )
    return chunk_size


def check_align(chunk_size: int, num_inputs: int, world: int, weights: object, batch_size: int | None) -> None:
    """Refuse ``align_chunking`` with weights or ``batch_size``; warn (as LitData) when workers would idle.

    Raises:
        ConfigurationError: ``weights`` (or ``reorder_files``' weights) or ``batch_size`` is given.
    """
    if weights is not None or batch_size is not None:
        what = "weights (or reorder_files)" if weights is not None else "batch_size"
        raise ConfigurationError(
            f"align_chunking=True splits the inputs in order, one sample per input; it cannot be combined with {what}"
        )
    if num_inputs // chunk_size // world == 0:
        warnings.warn(
            f"align_chunking: chunk_size={chunk_size} is too large for {num_inputs} inputs over {world} workers; "
            "all of them go to the last worker (the others idle): use a smaller chunk_size or fewer workers",
            stacklevel=4,
        )


def output_store(output_dir: str | os.PathLike[str] | Dir | Store, storage_options: Mapping[str, Any] | None) -> Store:
    """The store to write to.

    Raises:
        ConfigurationError: an unknown scheme, or a read-only location (``hf://``, ``http(s)://``).
    """
    if isinstance(output_dir, str) and "://" not in output_dir and not output_dir.startswith("local:"):
        output_dir = resolve_time_template(output_dir)  # once: the store below must name the same folder
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
    """The start method for optimize's worker processes.

    ``start_method`` when given; else the one this program chose with ``multiprocessing.set_start_method``;
    else ``fork`` where safe (POSIX, and this process has not used obstore); else ``spawn``.
    Call it right before starting workers: preparing a remote output uses obstore in this process.
    """
    if start_method is not None:
        return start_method
    chosen = multiprocessing.get_start_method(allow_none=True)
    if chosen is not None:
        return chosen
    from ..storage._store import obstore_used

    if "fork" in multiprocessing.get_all_start_methods() and not obstore_used():
        return "fork"
    return "spawn"
