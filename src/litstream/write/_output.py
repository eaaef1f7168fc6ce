"""What ``mode`` and ``use_checkpoint`` do to an existing output before a run (LitData's §7.7, made safe).

Every check runs before the first write: a refused run leaves the output untouched.

* ``mode=None``: the output must hold none of this node's files (on one node: no files at all), except
  an interrupted run's checkpoints when ``use_checkpoint=True`` (then the run resumes).
* ``mode="overwrite"``: the new dataset replaces the previous one when it is committed, as a new version
  (``_commit.py``): the previous ``index.json`` and chunk files stay until retention expires them, so readers
  of the previous version finish their epoch and a crash leaves it intact. The sidecars that are not
  versioned go now: partial indexes, ``keys/`` and ``*keys.parquet``, ``.checkpoints/``. Other files are kept.
  On N nodes each node removes its own ranks' sidecars (node 0 also the shared ones).
* ``mode="append"``: nothing of the dataset is deleted; the old ``index.json`` is read and the old chunks
  come first in the merged index.

In every mode, each rank numbers its new chunk files after the highest number of that rank's chunk files
in the output (of any kept version), so a new version never overwrites a file a committed version
references. Before that, a run removes what a run killed before its commit left (``_gc.sweep_leftovers``,
with a log line; a node of a multi-node run only its own ranks' files), so such leftovers never block a
run; an interrupted run that saved checkpoints is left alone (it can be resumed) unless ``mode="overwrite"``
discards it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from .._core._errors import OutputNotEmptyError
from ..format._index import INDEX_FILENAME, Index, is_partial_index_name, partial_index_name
from ..format._version_log import parse_log_name
from ..storage._files import remove_stale_temporaries
from ..storage._listing import list_retrying
from ._checkpoint import CHECKPOINT_DIR, RunConfig, WorkerCheckpoint, clear_checkpoints, load_checkpoints
from ._writer_lock import is_lock_name
from .run._nodes import chunk_rank, node_index_name

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Sequence

    from ..storage._store import Store
    from .run._env import OptimizerEnv

__all__ = ["Prepared", "prepare_output"]


@dataclass(frozen=True)
class Prepared:
    """The state a run starts from.

    Attributes:
        existing: The previous ``index.json`` in append mode, else ``None``.
        start_chunks: First chunk number per global rank (append mode).
        checkpoints: Per global rank, where a resumed worker stands (``use_checkpoint`` only; ranks
            without a saved checkpoint start from an empty one).
        resuming: True when an interrupted run is being continued.
    """

    existing: Index | None = None
    start_chunks: dict[int, int] = field(default_factory=dict)
    checkpoints: dict[int, WorkerCheckpoint] = field(default_factory=dict)
    resuming: bool = False


def _is_dataset_file(name: str) -> bool:
    if name.startswith((CHECKPOINT_DIR + "/", "keys/")):
        return True
    if "/" in name:
        return False
    return (
        name == INDEX_FILENAME
        or is_partial_index_name(name)
        or chunk_rank(name) is not None
        or name == "keys.parquet"
        or name.endswith((".keys.parquet", "-keys.parquet"))
    )


def _belongs_to_node(name: str, ranks: Sequence[int], env: OptimizerEnv) -> bool:
    """Dataset files this node writes or owns (on one node: every dataset file); never checkpoints."""
    if not _is_dataset_file(name) or name.startswith(CHECKPOINT_DIR + "/"):
        return False
    if env.num_nodes == 1 or name == INDEX_FILENAME:
        return True
    rank = chunk_rank(name)
    if rank is None and name.endswith((".index.json", ".keys.parquet")) and name.split(".", 1)[0].isdigit():
        rank = int(name.split(".", 1)[0])  # {rank}.index.json, {rank}.keys.parquet: a rank's own files
    if rank is not None:
        return rank in ranks or (env.node_rank == 0 and rank >= env.num_nodes * len(ranks))
    if is_partial_index_name(name):  # {k}-index.json
        return name == node_index_name(env.node_rank)
    return env.node_rank == 0  # keys sidecars


def _unversioned_sidecar(name: str) -> bool:
    """A dataset file that no version keeps, removed by an overwrite: partial indexes and key sidecars."""
    if name == INDEX_FILENAME or chunk_rank(name) is not None or name.startswith(CHECKPOINT_DIR + "/"):
        return False
    return True


def _remove_stale_temporaries(store: Store) -> None:
    """Delete the hidden ``.name.tmp.*`` files a killed local run left mid-write (one node: nobody else writes)."""
    remove_stale_temporaries(store, ("", CHECKPOINT_DIR))


def _describe(names: Sequence[str]) -> str:
    return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")


async def prepare_output(
    store: Store,
    mode: str | None,
    ranks: Sequence[int],
    env: OptimizerEnv,
    run_config: RunConfig | None,
    *,
    unlisted_chunks_ok: bool = False,
    sweep: Callable[[Collection[int] | None, Collection[str]], list[str]] | None = None,
) -> Prepared:
    """Check the output against ``mode`` / checkpoints, then clean or read it.

    Args:
        store: The output location.
        mode: ``None``, ``"overwrite"`` or ``"append"``.
        ranks: This node's global ranks.
        env: Node count and rank.
        run_config: The split to record or match (``use_checkpoint=True``), else ``None``.
        unlisted_chunks_ok: Accept chunk files that no ``index.json`` lists in append mode (the
            ``AsyncUploader``'s uploaded-but-uncommitted chunks). Default ``False``: ``optimize``
            refuses them rather than writing an index that leaves them out.
        sweep: Removes what runs killed before their commit left (the writer lease's ``sweep``), unless an
            interrupted run is to be resumed: on one node everything, on a node of several its own ranks'
            files and partial indexes. ``None``: nothing is removed.

    Raises:
        OutputNotEmptyError: ``mode=None`` and the output holds files (of this node), or a finished
            dataset while resuming.
        ConfigurationError: the saved checkpoints do not match this run.
    """
    names = [m.path for m in await list_retrying(store) if not is_lock_name(m.path)]  # writer leases are not data
    has_checkpoint = f"{CHECKPOINT_DIR}/config-{env.node_rank}.json" in names
    single = env.num_nodes == 1
    resumable = any(n.startswith(CHECKPOINT_DIR + "/") for n in names) if single else has_checkpoint
    if sweep is not None and (mode == "overwrite" or not resumable):  # an interrupted run to resume is left alone
        own = [node_index_name(env.node_rank), *(partial_index_name(r) for r in ranks)]
        if await anyio.to_thread.run_sync(sweep, None if single else ranks, () if single else own):
            names = [m.path for m in await list_retrying(store) if not is_lock_name(m.path)]
    names = [n for n in names if parse_log_name(n) is None]  # the version log is kept across every mode
    if mode is None:
        mine = names if env.num_nodes == 1 else [n for n in names if _belongs_to_node(n, ranks, env)]
        if INDEX_FILENAME in names:
            raise OutputNotEmptyError(
                f"output_dir {store.url} is not empty (it holds a dataset, index.json); pass mode='overwrite' "
                "to replace it, mode='append' to add to it, or choose an empty directory"
            )
        if mine and not (run_config is not None and has_checkpoint):
            hint = (
                "it holds an interrupted run's checkpoints: pass use_checkpoint=True to resume it, "
                if has_checkpoint
                else ""
            )
            raise OutputNotEmptyError(
                f"output_dir {store.url} is not empty (holds {_describe(mine)}); {hint}pass mode='overwrite' to "
                "replace it, mode='append' to add to it, or choose an empty directory"
            )
    if (
        mode == "append"
        and not unlisted_chunks_ok
        and env.num_nodes == 1
        and INDEX_FILENAME not in names
        and not (run_config is not None and has_checkpoint)
    ):
        unlisted = [n for n in names if "/" not in n and n.startswith("chunk-") and n.endswith(".bin")]
        if unlisted:
            raise OutputNotEmptyError(
                f"output_dir {store.url} holds {_describe(unlisted)} but no index.json (an interrupted run?); "
                "appending would leave those chunks out of the index. Run complete_dataset() on it first, "
                "re-run the interrupted job with use_checkpoint=True, or pass mode='overwrite'"
            )
    existing: Index | None = None
    if mode == "append" and INDEX_FILENAME in names:
        existing = Index.from_json(await store.get(INDEX_FILENAME))
    # Every check is done; from here on the output may change.
    if mode == "overwrite":  # index.json and chunks stay: the commit supersedes them (module docstring)
        for name in names:
            if _belongs_to_node(name, ranks, env) and _unversioned_sidecar(name):
                await store.delete(name)
        await clear_checkpoints(store, None if env.num_nodes == 1 else env.node_rank, ranks)
    elif mode == "append" and not (run_config is not None and has_checkpoint):
        for rank in ranks:
            if f"{rank}.index.json" in names:
                await store.delete(f"{rank}.index.json")
        await clear_checkpoints(store, None if env.num_nodes == 1 else env.node_rank, ranks)
    start: dict[int, int] = {}
    listed = names if existing is None else [*names, *(c.filename for c in existing.chunks)]
    for name in listed:
        owner = chunk_rank(name)
        if owner is not None:  # chunk-{rank}-{n}[-uT][.{compression}].bin: continue after every kept file
            number = int(name.split("-")[2].split(".")[0])
            start[owner] = max(start.get(owner, 0), number + 1)
    if run_config is None:
        return Prepared(existing=existing, start_chunks=start)
    resuming, saved = await load_checkpoints(store, env.node_rank, run_config)
    if resuming and env.num_nodes == 1:
        _remove_stale_temporaries(store)
    checkpoints = {r: saved.get(r, WorkerCheckpoint(next_chunk_index=start.get(r, 0))) for r in ranks}
    return Prepared(existing=existing, start_chunks=start, checkpoints=checkpoints, resuming=resuming)
