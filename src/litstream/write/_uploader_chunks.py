"""The chunks an ``AsyncUploader`` closed, in order: which finished uploading, and the ``index.json`` a commit
writes (only the uploaded prefix, merged after the dataset's earlier chunks)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import anyio

from ..format._index import ChunkInfo, DatasetConfig, Index, merge_partial_indexes, partial_index_name

if TYPE_CHECKING:
    from ..storage._store import Store
    from ._uploader_keys import UploaderKeys

__all__ = ["ChunkLedger", "ClosedChunk"]


@dataclass
class ClosedChunk:
    """One closed chunk: its index entry and whether its upload finished."""

    info: ChunkInfo
    uploaded: anyio.Event = field(default_factory=anyio.Event)


@dataclass
class ChunkLedger:
    """The closed chunks of one uploader, in closing order, and the counters its statistics report."""

    rank: int
    chunks: list[ClosedChunk] = field(default_factory=list)
    uploaded: int = 0  # chunks whose upload finished
    committed: int = 0  # chunks the last commit listed (a prefix of ``chunks``)
    samples_committed: int = 0
    commits: int = 0

    def close(self, info: ChunkInfo) -> ClosedChunk:
        """Record a chunk closed (its upload about to be queued)."""
        chunk = ClosedChunk(info)
        self.chunks.append(chunk)
        return chunk

    def finished(self, chunk: ClosedChunk) -> None:
        """``chunk``'s upload finished."""
        self.uploaded += 1
        chunk.uploaded.set()

    async def wait(self, chunks: list[ClosedChunk]) -> None:
        """Until every one of ``chunks`` is uploaded."""
        for chunk in chunks:
            await chunk.uploaded.wait()

    async def next_index(
        self, store: Store, config: DatasetConfig | None, existing: Index | None, keys: UploaderKeys | None
    ) -> tuple[Index, int] | None:
        """The ``index.json`` listing the uploaded prefix of the chunks after ``existing``'s, and that prefix's
        length; ``None`` when it adds nothing to the last commit. Publishes the ``keys/`` sidecar first."""
        done = 0
        while done < len(self.chunks) and self.chunks[done].uploaded.is_set():
            done += 1
        if done == self.committed or config is None:
            return None
        new = Index(chunks=tuple(c.info for c in self.chunks[:done]), config=config)
        merged = merge_partial_indexes([(partial_index_name(self.rank), new)], existing=existing)
        if keys is not None:
            extra = await keys.publish(store, merged, new.num_items)
            merged = replace(merged, extra={**merged.extra, **extra})
        return merged, done

    def committed_to(self, done: int) -> None:
        """The commit listing the first ``done`` chunks was written."""
        self.committed = done
        self.samples_committed = sum(c.info.chunk_size for c in self.chunks[:done])
        self.commits += 1
