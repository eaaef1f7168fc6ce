"""What litstream writes as the ``config`` of an index over Parquet files (shared by the format and write tests)."""

from __future__ import annotations

from typing import Any

__all__ = ["INT64_STRING_CONFIG"]

INT64_STRING_CONFIG: dict[str, Any] = {
    "chunk_bytes": None,
    "chunk_size": None,
    "compression": None,
    "data_format": ["int64", "string"],
    "data_spec": None,
    "encryption": None,
    "item_loader": "ParquetLoader",
    "types": None,  # LitData 0.2.76 writes the key
}
"""The index ``config`` of Parquet files with an ``int64`` and a ``string`` column."""
