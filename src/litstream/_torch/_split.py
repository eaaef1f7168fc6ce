"""``train_test_split``: disjoint parts of a ``StreamingDataset``, by chunk regions (nothing is written)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._core._errors import ConfigurationError
from ..read.plan._subset import Selection, check_splits, split_selection
from ._dataset import StreamingDataset

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["train_test_split"]


def train_test_split(
    streaming_dataset: StreamingDataset, splits: Sequence[float], seed: int = 42, shuffle: bool = True
) -> list[StreamingDataset]:
    """Split a dataset into disjoint parts, e.g. ``train, val, test = train_test_split(ds, [0.8, 0.1, 0.1])``.

    Matches LitData's ``train_test_split``: with ``N`` the items ``streaming_dataset`` selects (all
    of them, or its subsample / subset), part ``k`` gets ``int(N * splits[k])`` items. The chunk list
    is permuted once by ``numpy.random.RandomState([seed])`` when ``shuffle`` is true, then the parts
    are carved off one after the other in that chunk order; a chunk that straddles two parts is
    split between them as item ranges (regions), so no chunk file is rewritten. Items beyond the
    parts' total (when the fractions sum to less than 1, or by rounding down) are in no part.

    Each part is a new ``StreamingDataset`` with the same arguments as ``streaming_dataset`` (shuffle,
    seed, transforms, ...), at epoch 1: ``len``, ``ds[i]``, slicing, iteration, ``StreamingDataLoader``
    with any ``num_workers``, ``state_dict`` / ``load_state_dict`` and ``astream(part)`` all work on it.

    Args:
        streaming_dataset: The dataset to split (only its ``index.json`` is read).
        splits: Fractions in ``[0, 1]`` summing to at most 1, one per part; ``0.0`` gives an empty part.
        seed: Seed of the chunk permutation, an int in ``[0, 2**32)``. Default 42.
        shuffle: Permute the chunk list before carving. Default ``True`` (LitData's default).

    Returns:
        ``len(splits)`` datasets, in the order of ``splits``.

    Raises:
        ConfigurationError: (a ``ValueError``) ``splits`` not fractions in ``[0, 1]``, summing to
            more than 1, or empty; a bad ``seed``; ``streaming_dataset`` not a ``StreamingDataset``.
    """
    if not isinstance(streaming_dataset, StreamingDataset):
        raise ConfigurationError(
            f"streaming_dataset must be a StreamingDataset, got {type(streaming_dataset).__name__}; "
            "pass StreamingDataset(input_dir)"
        )
    fractions = check_splits(splits)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ConfigurationError(f"seed must be an int in [0, 2**32), got {seed!r}")
    if not isinstance(shuffle, bool):
        raise ConfigurationError(f"shuffle must be True or False, got {shuffle!r}")
    reader = streaming_dataset._open_reader()
    base = reader.selected() or Selection.full(reader.source().chunk_sizes)
    parts = split_selection(base, fractions, seed=seed, shuffle=shuffle)
    return [streaming_dataset._with_reader(reader.restricted(part)) for part in parts]
