"""The trust marker: an ``index.json`` field saying the dataset was written from data published by others.

``pickle.loads`` runs whatever a payload names, so a reader refuses pickled leaves of data published by
others (``hf://``, ``http(s)://``; ``read/_trust.py``). That decision must survive a copy: a dataset that
``merge_datasets`` assembled from such inputs, or that ``optimize`` wrote while reading one, lands in a
local directory that a reader would trust by its location. The writer therefore records the untrusted
sources in the top-level key :data:`UNTRUSTED_KEY` (a list of URLs; LitData ignores keys it does not know),
and a reader whose pickle decision was left to the location refuses pickled leaves of such a dataset.
An explicit ``allow_pickle=True`` (or ``set_allow_pickle(True)`` / ``LITSTREAM_ALLOW_PICKLE=1``) still reads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = ["UNTRUSTED_KEY", "UNTRUSTED_SCHEMES", "is_untrusted_location", "untrusted_sources", "with_untrusted"]

UNTRUSTED_KEY = "litstream_untrusted_sources"
"""Top-level ``index.json`` key: the untrusted locations the dataset was written from."""

UNTRUSTED_SCHEMES = ("hf://", "http://", "https://")
"""Locations whose data is published by others: pickled leaves are refused there by default."""


def is_untrusted_location(url: object) -> bool:
    """True for an ``hf://``, ``http://`` or ``https://`` location."""
    return isinstance(url, str) and url.lower().startswith(UNTRUSTED_SCHEMES)


def untrusted_sources(extra: Mapping[str, Any]) -> list[str]:
    """The sources an index's top level (``Index.extra``) records under :data:`UNTRUSTED_KEY`; ``[]`` if
    none. Any other non-empty value counts as a marker too (a damaged marker never makes data trusted)."""
    value = extra.get(UNTRUSTED_KEY)
    if value is None or value is False or value == []:
        return []
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return ["(unnamed source)"]


def with_untrusted(extra: Mapping[str, Any], sources: Iterable[str]) -> dict[str, Any]:
    """``extra`` with ``sources`` added to its marker (order kept, no duplicates); unchanged without sources."""
    merged = list(dict.fromkeys([*untrusted_sources(extra), *sources]))
    return {**extra, UNTRUSTED_KEY: merged} if merged else dict(extra)
