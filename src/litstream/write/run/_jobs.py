"""The jobs ``optimize`` hands to its workers: one per rank, each with the writer settings it needs; and
:class:`Job`, what the runner needs from a job (``OptimizeJob`` and ``map``'s ``MapJob``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ._worker import OptimizeJob

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ...format._index import Index
    from ...format._loaders import PyTreeLoader, TokensLoader
    from ...format._serializers import Serializer
    from ...storage._store import Store
    from .._args import Plan
    from .._output import Prepared
    from .._summary import WorkerSummary
    from ._worker import Report

__all__ = ["Job", "build_jobs", "json_leaves"]


class Job(Protocol):
    """What the runner needs from a job (see ``OptimizeJob`` and ``MapJob``)."""

    @property
    def rank(self) -> int: ...

    @property
    def items(self) -> Sequence[Any] | None: ...

    @property
    def positions(self) -> Sequence[int]: ...

    @property
    def num_inputs(self) -> int | None: ...

    @property
    def first_input(self) -> int: ...

    @property
    def queue_timeout(self) -> float: ...

    def without_inputs(self) -> Job: ...

    async def run(self, report: Report, source: Any = None) -> WorkerSummary: ...


def build_jobs(
    plan: Plan,
    prepared: Prepared,
    fn_pickle: bytes,
    store: Store,
    chunk_size: int | None,
    chunk_bytes: int | None,
    compression: Mapping[str, Any],
    item_loader: PyTreeLoader | TokensLoader | None,
    serializers: Mapping[str, Serializer] | None,
) -> list[OptimizeJob]:
    """One job per rank this node runs: its positions of the inputs, the pickled ``fn`` and the writer's
    settings (chunk limits, compression, loader, serializers, where its chunk numbering starts)."""
    writer_kwargs: dict[str, Any] = {
        "chunk_size": chunk_size,
        "chunk_bytes": chunk_bytes,
        **compression,
        "serializers": serializers,
        "item_loader": item_loader,
    }
    jobs = []
    for rank, items, positions in plan.shares():
        jobs.append(
            OptimizeJob(
                rank=rank,
                items=items,
                positions=positions,
                fn_pickle=fn_pickle,
                store=store,
                writer_kwargs={
                    **writer_kwargs,
                    "start_chunk": prepared.start_chunks.get(rank, 0),
                    "json_leaves": json_leaves(prepared.existing),
                },
                checkpoint=prepared.checkpoints.get(rank) if prepared.checkpoints else None,
                queue_timeout=plan.env.timeout,
            )
        )
    return jobs


def json_leaves(existing: Index | None) -> bool:
    """Whether new chunks store list fields as ``json`` leaves: yes, unless appending to a dataset whose
    lists were flattened (written before LitData 0.2.76, or without list fields at all)."""
    return existing is None or existing.config is None or "json" in existing.config.data_format
