"""The end of an ``optimize`` run: what a failed run removes, and what a successful one does after its workers.

Split from :mod:`._optimize` (which checks arguments, prepares the output and runs the workers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from ..read.source._versions import VersionLog
from ._checkpoint import clear_checkpoints
from ._gc import referenced_files
from ._keys import discard_rank_keys
from .run._nodes import merge_nodes, sweep_orphans

if TYPE_CHECKING:
    from ..storage._store import Store
    from ._output import Prepared
    from ._writer_lock import WriterLock
    from .run._env import OptimizerEnv
    from .run._nodes import BeforeIndex

__all__ = ["discard_run", "finish_run"]


async def discard_run(store: Store, ranks: list[int], prepared: Prepared) -> None:
    """Remove this run's chunks and partials after a failure; never a file that a kept version references."""
    keep = {c.filename for c in prepared.existing.chunks} if prepared.existing is not None else set()
    log = VersionLog(store)
    keep |= await anyio.to_thread.run_sync(lambda: referenced_files(log, log.numbers()))
    await sweep_orphans(store, ranks, keep)
    await discard_rank_keys(store, ranks)


async def finish_run(
    store: Store,
    ranks: list[int],
    env: OptimizerEnv,
    prepared: Prepared,
    checkpoints: bool,
    before_index: BeforeIndex | None,
    lock: WriterLock,
    base: str | None,
) -> None:
    """After every node's workers succeeded: clear the checkpoints; on the last of several nodes, merge the node
    indexes and commit (``run._nodes.merge_nodes``), then remove what earlier runs of any node left."""
    if checkpoints:
        await clear_checkpoints(store, None if env.num_nodes == 1 else env.node_rank, ranks)
    if env.num_nodes > 1 and env.is_last_node:
        await merge_nodes(
            store, env, prepared.existing, before_index=before_index, commit=lock.acommit_index, base=base
        )
        # Every node of this job is done and holds its lease until release_run: no file that no version references
        # can be in use now, so what earlier runs of any node left goes (a node re-run cannot tell on its own).
        await anyio.to_thread.run_sync(lock.sweep)
