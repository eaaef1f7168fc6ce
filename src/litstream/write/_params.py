"""The opening both ``optimize`` and ``map`` share: ``fn`` checked and pickled, LitData 0.2.76's write parameters
that litstream accepts for drop-in use but does not act on (the two kinds are described in ``read/_params.py``)
validated, and LitData's input ``reader`` applied."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._core._errors import ConfigurationError
from .._core._litdata_env import warn_ignored
from ..read._params import optional_bool, optional_count, refuse
from ._args import pickle_fn
from ._readers import with_reader

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["start_write"]


def start_write(
    fn: Callable[..., Any],
    inputs: Any,
    num_workers: int | None,
    *,
    num_nodes: Any = None,
    machine: Any = None,
    num_downloaders: Any = None,
    num_uploaders: Any = None,
    reader: Any = None,
    optimize_dns: Any = None,
    keep_data_ordered: Any = None,
    broadcast_paths: Any = False,
    align_chunking: Any = False,
    item_loader: Any = None,
) -> tuple[bytes, Any]:
    """Check and pickle ``fn``, validate the LitData-only arguments of ``optimize`` / ``map`` and apply ``reader``.

    Also warns once for each ``LITDATA_*`` variable that is set and that litstream ignores (``_litdata_env``).
    With a ``reader`` (``_readers.py``) the inputs are remapped and ``fn`` reads each item first.

    Returns:
        ``fn`` pickled for the workers (wrapped with the reader when one is given) and the inputs to plan.

    Raises:
        ConfigurationError: ``fn`` is not callable or cannot be pickled, a behaviour switch has a value other
            than its default, or a knob a bad type.
    """
    fn_pickle = pickle_fn(fn)
    warn_ignored(stacklevel=4)  # the caller of optimize(...) / map(...)
    refuse(
        "num_nodes",
        num_nodes,
        None,
        "it launches a Lightning multi-node job; set DATA_OPTIMIZER_NUM_NODES "
        "and DATA_OPTIMIZER_NODE_RANK and run optimize on each node instead, see docs/environment.md",
    )
    refuse("machine", machine, None, "it selects a Lightning AI machine; run on the machine you want instead")
    refuse("broadcast_paths", broadcast_paths, False, "it resolves Lightning Studio paths across nodes")
    if not isinstance(align_chunking, bool):
        raise ConfigurationError(f"align_chunking must be True or False, got {align_chunking!r}")
    if type(item_loader).__name__ == "TemporalArrayLoader":
        raise ConfigurationError(
            "item_loader=TemporalArrayLoader() cannot be written by litstream yet (it reads such datasets); "
            "write them with LitData, or store the tracks with PyTreeLoader()"
        )
    optional_count("num_downloaders", num_downloaders)
    optional_count("num_uploaders", num_uploaders)
    optional_bool("optimize_dns", optimize_dns)
    optional_bool("keep_data_ordered", keep_data_ordered)
    if reader is not None:  # LitData's readers: remap the inputs, read each item before fn
        fn, inputs = with_reader(reader, fn, inputs, num_workers)
        fn_pickle = pickle_fn(fn)
    return fn_pickle, inputs
