"""Which ``index.json`` config keys and values litstream understands (LitData up to 0.2.76).

:func:`check_config_keys` refuses a config that carries a key or a format litstream does not know,
naming it and, when the index records one, the version that wrote it, instead of misreading the data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._core._errors import FormatError
from ._compression import compression_from_config

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["KNOWN_CONFIG_KEYS", "check_config_keys"]

#: Every key LitData <= 0.2.76 and litstream write in ``config`` (``format``/``version``/... are MosaicML MDS).
KNOWN_CONFIG_KEYS = frozenset(
    {
        "chunk_bytes", "chunk_size", "compression", "compression_batch_size", "compression_level",
        "data_format", "data_spec", "encryption", "ipc_compression", "item_loader", "types",
        # Parquet indexes, TemporalArrayLoader and MDS datasets (read by other modules or refused there)
        "column_names", "temporal_schema", "format", "version", "hashes", "size_limit", "column_encodings",
        "column_sizes", "raw_data", "raw_meta", "samples", "zip_data", "zip_meta", "compression_algo",
    }
)  # fmt: skip


def _writer(config: Mapping[str, Any], top: Mapping[str, Any] | None) -> str:
    for where in (config, top or {}):
        for key in ("litdata_version", "version", "__version__"):
            if key in where:
                return f"LitData {where[key]}" if key != "version" else f"format version {where[key]}"
    return "a LitData version newer than 0.2.76 (index.json records no version)"


def check_config_keys(config: Mapping[str, Any], top: Mapping[str, Any] | None = None) -> None:
    """Raise on config keys or compression settings litstream does not know.

    Args:
        config: ``index.json``'s ``config`` object.
        top: The whole ``index.json`` object, to name the writer's version if it records one.

    Raises:
        FormatError: an unknown key (named, with the writer), or an unknown ``compression``,
            ``compression_level`` or ``ipc_compression``.
    """
    unknown = sorted(str(key) for key in config if key not in KNOWN_CONFIG_KEYS)
    if unknown:
        raise FormatError(
            f"index.json config has the key(s) {', '.join(map(repr, unknown))}, which litstream does not "
            f"understand; written by {_writer(config, top)}. litstream reads datasets of LitData <= 0.2.76"
        )
    try:
        compression_from_config(config)
    except FormatError as exc:
        raise FormatError(f"{exc} (written by {_writer(config, top)})") from exc
    ipc = config.get("ipc_compression")
    if ipc not in (None, "zstd", "lz4"):
        raise FormatError(
            f"index.json config has ipc_compression={ipc!r}, which litstream cannot read; written by "
            f"{_writer(config, top)}"
        )
