"""Choosing the pytree decoder of a dataset, with a deferred error for indexes of Arrow rows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._core._errors import ConfigurationError, FormatError
from ..format._loaders import SampleDecoder
from ..format.arrow._chunk import ArrowRowsOnly

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..format._index import DatasetConfig
    from ..format._serializers import Serializer

__all__ = ["_sample_decoder"]


def _sample_decoder(
    config: DatasetConfig, serializers: Mapping[str, Serializer] | None, *, allow_pickle: bool, where: str
) -> SampleDecoder | ArrowRowsOnly:
    """The pytree decoder; for an index whose ``types`` mark Arrow rows, a decoder that defers the
    set-up error (a refused pickle included) to the first plain item (its Arrow chunks need no pytree
    decoder)."""
    try:
        return SampleDecoder(config, serializers, allow_pickle=allow_pickle, where=where)
    except (FormatError, ConfigurationError) as exc:
        if not (getattr(config, "types", None) or config.extra.get("types")):
            raise
        return ArrowRowsOnly(exc)
