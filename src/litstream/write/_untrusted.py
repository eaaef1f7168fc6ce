"""Trust that travels through ``optimize``: a run that reads a dataset published by others writes the marker.

``optimize(fn, inputs=StreamingDataset("https://..."))`` (or a ``StreamingDataLoader`` / composite dataset
over one) copies samples from a location whose pickled leaves a reader refuses by default into, say, a
local directory, which a reader would trust. The run therefore records the reader's untrusted sources in
the output's ``index.json`` (``format/_trust_marker.py``), so the default read of the output refuses them
as the read of the original did. A reader counts as untrusted when its location is ``hf://`` /
``http(s)://``, when it was built with pickles refused, or when its own index carries the marker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..format._trust_marker import is_untrusted_location, untrusted_sources, with_untrusted

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from ..format._index import Index

__all__ = ["marking_hook", "reader_sources"]

_CHILDREN = ("dataset", "_datasets")  # a loader's dataset, a composite's members


def reader_sources(inputs: object) -> list[str]:
    """The untrusted locations of the litstream readers in ``inputs`` (a dataset, a composite or a
    ``StreamingDataLoader``); ``[]`` for anything else. Reads nothing: a reader's index is consulted only
    if it was already opened."""
    found: list[str] = []
    seen: set[int] = set()

    def visit(obj: object, depth: int) -> None:
        module = type(obj).__module__
        if depth > 4 or id(obj) in seen or not (module == "litstream" or module.startswith("litstream.")):
            return
        seen.add(id(obj))
        state: dict[str, Any] = getattr(obj, "__dict__", {})
        reader = state.get("_reader")  # a StreamingDataset's DatasetReader (read/_reader.py) holds its ReadSpec
        if reader is not None:
            state = {**state, "_spec": reader.spec, "_source": reader.opened}
        spec = state.get("_spec")  # a raw dataset keeps its ReadSpec itself
        if spec is not None:
            input_dir, allow = getattr(spec, "input_dir", None), getattr(spec, "allow_pickle", None)
        else:
            input_dir, allow = state.get("input_dir"), state.get("allow_pickle")
        if input_dir is not None and isinstance(allow, bool):
            where = getattr(input_dir, "url", None) or getattr(input_dir, "path", None)
            if is_untrusted_location(where) or not allow:
                found.append(str(where))
            source = state.get("_source")
            if source is not None:
                found.extend(untrusted_sources(source.index.extra))
        for name in _CHILDREN:
            child = state.get(name)
            for member in child if isinstance(child, (list, tuple)) else [child]:
                if member is not None:
                    visit(member, depth + 1)

    visit(inputs, 0)
    return list(dict.fromkeys(found))


def marking_hook(
    inner: Callable[[Index], Awaitable[Mapping[str, Any]]] | None, sources: Sequence[str]
) -> Callable[[Index], Awaitable[Mapping[str, Any]]]:
    """A ``before_index`` hook (``write/run/_nodes.py``) adding the trust marker for ``sources`` to what ``inner``
    (if any) adds."""

    async def hook(index: Index) -> Mapping[str, Any]:
        extra = dict(await inner(index)) if inner is not None else {}
        return with_untrusted({**index.extra, **extra}, sources)

    return hook
