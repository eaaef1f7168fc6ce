"""``litdata_collate``: LitData 0.2.76's default batch builder, graphs included.

Graphs (``Graph`` wrappers and PyG ``Data`` / ``HeteroData``) are batched with PyG's
``Batch.from_data_list`` (a list of the samples when torch-geometric is not installed); a ``dict``
sample with a graph value is collated key by key; everything else is collated exactly as torch's
``default_collate`` does (through :func:`litstream._torch._collate.fast_collate`, which skips its stacking
copy where it can).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..format.media._graph import Graph, is_pyg_data

__all__ = ["litdata_collate"]


def _is_graph(item: object) -> bool:
    return isinstance(item, Graph) or is_pyg_data(item)


def litdata_collate(items: list[Any]) -> Any:
    """Collate one batch of samples as LitData's ``litdata_collate`` does.

    Args:
        items: The samples of the batch.

    Returns:
        ``items`` itself when empty; a PyG ``Batch`` (or the list of graphs, without torch-geometric)
        for graph samples; a ``dict`` collated per key when a value of the first sample is a graph;
        otherwise what ``torch.utils.data.default_collate(items)`` returns.
    """
    if not items:
        return items
    first = items[0]
    if _is_graph(first):
        try:
            from torch_geometric.data import Batch  # type: ignore[import-not-found,import-untyped,unused-ignore]
        except ImportError:
            return items
        return Batch.from_data_list([item.to_pyg() if isinstance(item, Graph) else item for item in items])
    if isinstance(first, Mapping) and any(_is_graph(first[key]) for key in first):
        return {key: litdata_collate([item[key] for item in items]) for key in first}
    from ._collate import fast_collate  # torch is imported on first use, not with litstream

    return fast_collate(items)
