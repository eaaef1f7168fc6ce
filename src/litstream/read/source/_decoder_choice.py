"""Choosing the decoder of an opened dataset from its index and ``item_loader``: pytree samples (with a
deferred error for indexes of Arrow rows), token windows, Parquet rows, MDS shards or temporal records."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from ..._core._errors import ConfigurationError, FormatError
from ...format._compression import decompress
from ...format._loaders import SampleDecoder
from ...format._temporal import TemporalDecoder
from ...format._tokens import TokenLayout, check_item_loader
from ...format._trust_marker import untrusted_sources
from ...format.arrow._chunk import ArrowRowsOnly
from ...format.arrow._parquet import ParquetLoader, RowDecoder, check_parquet_loader
from ...format.mds._encodings import MdsDecoder
from ...format.mds._index import decompress_shard, is_mds_config

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ...format._index import DatasetConfig, Index
    from ...format._serializers import Serializer

__all__ = ["DecoderChoice", "choose_decoder"]


class DecoderChoice(NamedTuple):
    """What :func:`choose_decoder` picked for a ``DatasetSource``."""

    decoder: SampleDecoder | TokenLayout | RowDecoder | MdsDecoder | ArrowRowsOnly | TemporalDecoder
    tokens: TokenLayout | None = None  # ``TokensLoader(block_size)``'s layout
    parquet: ParquetLoader | None = None
    unpack: Callable[[bytes | memoryview, str], bytes] = decompress  # whole-file decompression


def choose_decoder(
    url: str,
    index: Index,
    item_loader: Any,
    serializers: Mapping[str, Serializer] | None,
    allow_pickle: bool | None,
    *,
    encrypted: bool = False,
) -> DecoderChoice:
    """The decoder of the dataset at ``url`` (whose ``index.config`` is set) read with ``item_loader``
    (``encrypted``: the dataset's chunks or items are encrypted, which only the pytree loader reads).

    ``allow_pickle=None`` allows pickled leaves unless ``index.json`` carries the trust marker
    (``format/_trust_marker.py``), whose sources the refusal then names.

    Raises:
        ConfigurationError: ``item_loader`` does not match the dataset.
        FormatError: an index litstream cannot decode.
        PickleRefusedError: pickled leaves are refused.
    """
    config = index.config
    assert config is not None  # checked by DatasetSource.open
    if encrypted and item_loader is not None and type(item_loader).__name__ != "PyTreeLoader":
        raise ConfigurationError(
            f"item_loader={item_loader!r} cannot read the encrypted dataset at {url}; use PyTreeLoader()"
        )
    where = f"the dataset {url}"
    if allow_pickle is None:  # left to the location, which allows: the dataset's own trust marker decides
        marked = untrusted_sources(index.extra)
        allow_pickle = not marked
        if marked:
            where += f" (written from {', '.join(marked[:3])}, which index.json marks as untrusted)"
    parquet = check_parquet_loader(url, config, item_loader)
    if is_mds_config(config):  # a Mosaic MDS directory: its own decoder and codecs
        if item_loader is not None and type(item_loader).__name__ != "PyTreeLoader":
            raise ConfigurationError(f"item_loader={item_loader!r} cannot read the MDS dataset at {url}")
        return DecoderChoice(MdsDecoder(config, allow_pickle=allow_pickle, where=where), unpack=decompress_shard)
    if parquet is not None:
        return DecoderChoice(RowDecoder(), parquet=parquet)
    if config.item_loader == "TemporalArrayLoader":  # LitData's temporal array records
        if type(item_loader).__name__ not in ("NoneType", "PyTreeLoader", "TemporalArrayLoader"):
            raise ConfigurationError(
                f"item_loader={item_loader!r} cannot read the temporal dataset at {url}; use TemporalArrayLoader()"
            )
        return DecoderChoice(TemporalDecoder(config.extra.get("temporal_schema")))
    tokens = check_item_loader(url, config, index.chunks, item_loader, serializers)
    if tokens is not None:
        return DecoderChoice(tokens, tokens=tokens)
    return DecoderChoice(_sample_decoder(config, serializers, allow_pickle=allow_pickle, where=where))


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
