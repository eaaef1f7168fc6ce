"""``UploaderStatistics``: the snapshot :meth:`AsyncUploader.statistics` returns."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["UploaderStatistics"]


@dataclass(frozen=True)
class UploaderStatistics:
    """A snapshot of an :class:`AsyncUploader` (all counts are for this session only, unless noted).

    Attributes:
        samples_added: Samples accepted by ``add()``.
        samples_committed: Of those, the samples ``index.json`` now describes.
        dataset_samples: Samples ``index.json`` describes in total (earlier sessions included).
        chunks_closed: Chunks closed (uploaded, uploading, or waiting to be).
        chunks_uploaded: Chunks stored completely.
        chunks_committed: Chunks listed in ``index.json``.
        commits: ``index.json`` writes.
        bytes_reserved: Bytes of the ``max_bytes_in_flight`` budget taken now (chunks being packed,
            queued or uploading).
        buffered_bytes: Item bytes of the open chunk (at most about one chunk).
        peak_held_bytes: The highest ``bytes_reserved + buffered_bytes`` so far; at most
            ``max_bytes_in_flight`` plus one chunk.
        waiting: Calls waiting for the budget right now (backpressure).
    """

    samples_added: int
    samples_committed: int
    dataset_samples: int
    chunks_closed: int
    chunks_uploaded: int
    chunks_committed: int
    commits: int
    bytes_reserved: int
    buffered_bytes: int
    peak_held_bytes: int
    waiting: int
