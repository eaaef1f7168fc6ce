"""The end of a run: partial indexes → ``index.json``, on one node or many.

One node: the partials of this run's ranks (``{rank}.index.json``) and, in append mode, the previous
``index.json`` are merged into ``index.json`` (written last, one atomic put); the partials are deleted.

N nodes (``DATA_OPTIMIZER_NUM_NODES``): every node merges its own ranks' partials into
``{node_rank}-index.json`` and stores it next to the data; the last node waits (polling the output
location, up to ``DATA_OPTIMIZER_TIMEOUT`` seconds) until all ``{k}-index.json`` exist, merges them in
node order after the previous dataset's chunks (append), writes ``index.json`` and deletes the node
partials. Unlike LitData, the previous chunks are added once, by the final merge only (LitData adds them
in every node's partial, listing them ``num_nodes`` times), and the node partials do not outlive the
index, so a later run never merges a stale one.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio

from ..._core._crash import crash_point
from ..._core._errors import ObjectNotFoundError, StorageError, WorkerError
from ...format._index import INDEX_FILENAME, Index, merge_partial_indexes, partial_index_name
from ...storage._listing import list_retrying

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    from ...storage._store import Store
    from ._env import OptimizerEnv

__all__ = ["finish_node", "merge_nodes", "node_index_name", "sweep_orphans"]

_CHUNK_RE = re.compile(r"^chunk-(\d+)-(\d+)(?:-u\d+)?(?:\.[A-Za-z0-9:]+)?\.bin$")

BeforeIndex = Callable[[Index], Awaitable[Mapping[str, Any]]]
"""Awaited with the merged index just before ``index.json`` is written; returns top-level keys to add."""

Commit = Callable[[bytes], Awaitable[None]]
"""Writes ``index.json``'s bytes (the writer lock's guarded commit); default: a plain put."""


def node_index_name(node_rank: int) -> str:
    """``{node_rank}-index.json``, LitData's per-node partial index name."""
    return f"{node_rank}-index.json"


async def _read_partials(store: Store, names: Sequence[str]) -> list[tuple[str, Index]]:
    out = []
    for name in names:
        try:
            out.append((name, Index.from_json(await store.get(name), source=name)))
        except ObjectNotFoundError:
            continue
    return out


async def finish_node(
    store: Store,
    ranks: Sequence[int],
    env: OptimizerEnv,
    existing: Index | None,
    sweep: bool = False,
    expected_chunks: Mapping[int, int] | None = None,
    before_index: BeforeIndex | None = None,
    commit: Commit | None = None,
    base: str | None = None,
) -> Index | None:
    """Merge this node's partial indexes: into ``index.json`` on one node, else into ``{node_rank}-index.json``.

    With ``sweep``, chunk files of this node's ranks that no partial (or ``existing``) names are deleted
    first: chunks a killed run stored after its last checkpoint. With ``expected_chunks`` (rank → chunks
    its worker reported in its partial index), a partial that is missing or lists another number of
    chunks stops the merge before anything is written.

    ``before_index`` (single node) is awaited with the merged index before ``index.json`` is written; the
    mapping it returns is added to the index's top level (the ``keys`` sidecar section). ``commit`` writes
    ``index.json`` (the writer lock's guarded put; default a plain put). ``base`` (several nodes): the version this
    node started from (``VersionLog.head_digest``), recorded in its node index so that the last node never merges
    a node index a killed earlier run left (:func:`merge_nodes`).

    Returns:
        The final index on a single node, else ``None``.

    Raises:
        FormatError: two partials carry different configs.
        WorkerError: a partial index does not match what its worker reported.
    """
    own = [partial_index_name(r) for r in ranks]
    partials = await _read_partials(store, own)
    if expected_chunks is not None:
        _check_partials(store, partials, expected_chunks)
    if sweep:
        keep = {c.filename for _, part in partials for c in part.chunks} | set(own)
        if existing is not None:
            keep |= {c.filename for c in existing.chunks}
        await sweep_orphans(store, ranks, keep)
    crash_point("run:partials-written")  # every worker's partial index is stored; nothing is committed
    if env.num_nodes == 1:
        merged = await _with_extra(merge_partial_indexes(partials, existing=existing).stamped(), before_index)
        await _commit(store, merged, commit)
    else:
        share = merge_partial_indexes(partials)
        if base is not None:
            share = replace(share, extra={BASE_KEY: base})
        await store.put(node_index_name(env.node_rank), share.to_json().encode())
        merged = None
    crash_point("run:committed")  # before the partial indexes are removed
    for name, _ in partials:
        await store.delete(name)
    return merged


def _check_partials(store: Store, partials: list[tuple[str, Index]], expected: Mapping[int, int]) -> None:
    found = {int(name.split(".", 1)[0]): len(index.chunks) for name, index in partials}
    for rank, count in sorted(expected.items()):
        if found.get(rank, 0) != count:
            got = "is missing" if rank not in found else f"lists {found[rank]} chunk(s)"
            raise WorkerError(
                f"worker {rank} reported {count} chunk(s), but its partial index {partial_index_name(rank)} in "
                f"{store.url} {got}; nothing was committed"
            )


async def _commit(store: Store, index: Index, commit: Commit | None) -> None:
    data = index.to_json().encode()
    await (store.put(INDEX_FILENAME, data) if commit is None else commit(data))


async def _with_extra(index: Index, before_index: BeforeIndex | None) -> Index:
    if before_index is None:
        return index
    return replace(index, extra={**index.extra, **(await before_index(index))})


async def merge_nodes(
    store: Store,
    env: OptimizerEnv,
    existing: Index | None,
    poll_interval: float = 0.2,
    before_index: BeforeIndex | None = None,
    commit: Commit | None = None,
    base: str | None = None,
) -> Index:
    """On the last node: wait for every ``{k}-index.json``, merge them into ``index.json``, delete them.

    With ``base`` (the version this node started from), a node index that records another base was left by a
    killed earlier run (its last node died after its commit, before removing the node indexes): it is not
    merged, and its node's fresh one is waited for (the node removes its stale one when it starts).

    Raises:
        FormatError: two nodes' configs differ.
        StorageError: a node index was still missing after ``env.timeout`` seconds. This node's own
            output is complete and kept.
    """
    wanted = [node_index_name(k) for k in range(env.num_nodes)]
    nodes: list[tuple[str, Index]] = []
    with anyio.move_on_after(env.timeout):
        while True:
            present = {m.path for m in await list_retrying(store)}
            if all(name in present for name in wanted):
                nodes = [(n, i) for n, i in await _read_partials(store, wanted) if _same_base(i, base)]
                if len(nodes) == len(wanted):
                    break
            await anyio.sleep(poll_interval)
    missing = [name for name in wanted if name not in {n for n, _ in nodes}]
    if missing:
        raise StorageError(
            f"waited {env.timeout:g} s (DATA_OPTIMIZER_TIMEOUT) for {', '.join(missing)} in {store.url}: the "
            "other nodes have not finished. This node's share is written; once they have, re-run this node "
            "with mode='overwrite' (it redoes only its own share) to write index.json"
        )
    merged = await _with_extra(merge_partial_indexes(nodes, existing=existing).stamped(), before_index)
    await _commit(store, merged, commit)
    for name in wanted:
        await store.delete(name)
    return merged


BASE_KEY = "litstream_base"
"""The key of a node index recording the version its node started from (a key LitData ignores)."""


def _same_base(index: Index, base: str | None) -> bool:
    found = index.extra.get(BASE_KEY)
    return base is None or found is None or found == base  # an index without it (older litstream) is merged


def chunk_rank(name: str) -> int | None:
    """The writer rank in a ``chunk-{rank}-{n}[.{compression}].bin`` name, else ``None``."""
    match = _CHUNK_RE.match(name)
    return int(match.group(1)) if match else None


async def sweep_orphans(store: Store, ranks: Collection[int], keep: Collection[str]) -> list[str]:
    """Delete chunk files and partial indexes of ``ranks`` that ``keep`` does not name.

    Used after a failed run without checkpoints (nothing of it may remain) and after a resumed run
    (a chunk stored after the last checkpoint and not rewritten). Returns the deleted names.
    """
    ranks = set(ranks)
    deleted = []
    for meta in await list_retrying(store):
        name = meta.path
        if "/" in name or name in keep:
            continue
        rank = chunk_rank(name)
        if rank is None and name.endswith(".index.json") and name.split(".", 1)[0].isdigit():
            rank = int(name.split(".", 1)[0])
        if rank is not None and rank in ranks:
            await store.delete(name)
            deleted.append(name)
    return deleted
