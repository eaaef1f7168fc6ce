"""LitData's item-loader hooks ``setup`` and ``encode_data`` on litstream's loaders.

litstream's engine does not call them (its encoders and decoders take the index config directly); they
exist for code written against LitData's loader interface, with LitData's meaning and bytes:

* ``setup(config, chunks, serializers, region_of_interest=None)`` binds a loader to a dataset: it keeps
  the ``index.json`` config, the chunk entries, the serializers and the selection as attributes.
* ``encode_data(data, sizes, flattened)`` packs the serialized leaves of one sample into item bytes:
  for ``PyTreeLoader`` a header of one little-endian uint32 size per leaf followed by the leaves
  (``format._chunk``'s item layout), for ``TokensLoader`` the token bytes as they are, with the token count.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from .._core._errors import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ._serializer_base import Serializer

__all__ = ["PyTreeHooks", "TokensHooks"]


class PyTreeHooks:
    """``setup`` / ``encode_data`` of ``PyTreeLoader`` (see the module docstring)."""

    _config: dict[str, Any] | None = None
    _chunks: list[Any] | None = None
    _serializers: dict[str, Serializer] | None = None
    _data_format: list[str] | None = None
    region_of_interest: list[tuple[int, int]] | None = None

    def setup(
        self,
        config: Mapping[str, Any],
        chunks: Sequence[Any],
        serializers: Mapping[str, Serializer],
        region_of_interest: Sequence[tuple[int, int]] | None = None,
    ) -> None:
        """Bind this loader to a dataset (LitData's hook): keep its config, chunks, serializers and selection.

        Args:
            config: ``index.json``'s ``config`` object (with ``data_format``).
            chunks: ``index.json``'s chunk entries.
            serializers: Serializers by data format name.
            region_of_interest: ``(start, end)`` items of each chunk to serve; ``None``: all.

        Raises:
            ConfigurationError: ``config`` has no ``data_format`` list.
        """
        data_format = config.get("data_format") if isinstance(config, dict) else None
        if not isinstance(data_format, list):
            raise ConfigurationError(f"{type(self).__name__}.setup(config=...): the config needs a data_format list")
        self._config = dict(config)
        self._chunks = list(chunks)
        self._serializers = dict(serializers)
        self._data_format = list(data_format)
        self.region_of_interest = None if region_of_interest is None else [(r[0], r[1]) for r in region_of_interest]

    def encode_data(
        self, data: Sequence[bytes], sizes: Sequence[int], flattened: Sequence[Any]
    ) -> tuple[bytes, int | None]:
        """One item's bytes from its serialized leaves: the uint32 sizes, then the leaves; no ``dim``.

        Raises:
            ConfigurationError: ``sizes`` does not give each leaf's length.
        """
        if len(sizes) != len(data) or any(len(d) != s for d, s in zip(data, sizes, strict=True)):
            raise ConfigurationError("encode_data(data, sizes, ...): sizes must be the byte length of each leaf")
        return struct.pack(f"<{len(sizes)}I", *sizes) + b"".join(data), None


class TokensHooks(PyTreeHooks):
    """``setup`` / ``encode_data`` of ``TokensLoader``: one headerless token array per item."""

    # Repeats PyTreeHooks.setup's signature to extend it: LitData's public hook, documented per loader.
    def setup(
        self,
        config: Mapping[str, Any],
        chunks: Sequence[Any],
        serializers: Mapping[str, Serializer],
        region_of_interest: Sequence[tuple[int, int]] | None = None,
    ) -> None:
        """As :meth:`PyTreeHooks.setup`, for a token dataset.

        Raises:
            ConfigurationError: the data format is not one headerless array (``no_header_numpy:N`` or
                ``no_header_tensor:N``), as LitData refuses it (with ``ValueError``; this is one).
        """
        super().setup(config, chunks, serializers, region_of_interest)
        formats = self._data_format or []
        if len(formats) != 1 or formats[0].split(":")[0] not in ("no_header_numpy", "no_header_tensor"):
            raise ConfigurationError(
                f"TokensLoader.setup: data_format {formats!r} is not a token dataset (one no_header_numpy or "
                "no_header_tensor leaf); read it with PyTreeLoader()"
            )

    def encode_data(
        self, data: Sequence[bytes], sizes: Sequence[int], flattened: Sequence[Any]
    ) -> tuple[bytes, int | None]:
        """The token bytes as they are, and the token count (the array's first dimension)."""
        if len(data) != 1 or len(flattened) != 1:
            raise ConfigurationError("TokensLoader.encode_data: an item is one token array")
        leaf = flattened[0]
        shape = getattr(leaf, "shape", None)
        return data[0], int(shape[0]) if shape else len(leaf)
