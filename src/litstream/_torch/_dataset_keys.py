"""Keyed access of ``StreamingDataset`` (LitData 0.2.76's ``ds["id"]`` / ``get_by_key``): dispatch only.

The lookup lives in :mod:`litstream.read._keys`; this mixin holds one lazily made
:class:`~litstream.read._keys.KeyReader` per dataset object and calls it on the portal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._core import _bridge
from ..read._keys import KeyReader, read_by_keys

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..read._source import DatasetSource
    from ..read.plan._subset import Selection

__all__ = ["KeyedMixin"]


class KeyedMixin:
    """``get_by_key`` / ``get_by_keys``; ``StreamingDataset.__getitem__`` sends ``str`` indices here."""

    if TYPE_CHECKING:

        def _get_source(self) -> DatasetSource: ...
        def _selected(self) -> Selection | None: ...
        def _apply(self, sample: Any) -> Any: ...

    def _keys(self) -> KeyReader:
        reader = self.__dict__.get("_key_reader")
        if reader is None:
            reader = self.__dict__["_key_reader"] = KeyReader()
        return reader

    def get_by_key(self, key: str | int) -> Any:
        """The sample whose ``key_fn`` value is ``key`` (``ds["id"]`` does the same for ``str`` keys).

        ``int`` keys go through this method: ``ds[5]`` stays the sample at position 5, as in LitData.
        The first lookup in a process loads the key shard (``keys/shard-*.parquet``); each lookup then
        reads only its sample. Transforms apply as for ``ds[i]``.

        Raises:
            KeyNotFoundError: (a ``KeyError``) the key is not in the dataset, or not in this subset/split,
                or the dataset has no ``keys/`` sidecar; the message names the key.
            ConfigurationError: ``key`` is neither str nor int.
        """
        return self.get_by_keys([key])[0]

    def get_by_keys(self, keys: Sequence[str | int]) -> list[Any]:
        """The samples of ``keys``, in that order, in one call to the read engine (see :meth:`get_by_key`)."""
        source = self._get_source()
        samples = _bridge.call(read_by_keys, source, self._keys(), list(keys), self._selected())
        return [self._apply(sample) for sample in samples]
