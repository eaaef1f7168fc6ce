"""``AsyncUploader(key_fn=...)``: the ``keys/`` sidecar kept in step with every commit.

The uploader's samples are numbered in the order they enter its chunk builder; a commit lists a
prefix of its chunks, so it covers a prefix of those keys. Each commit writes the whole sidecar (the
previous dataset's keys first) before ``index.json``, so a reader never sees an index whose samples
lack keys. A duplicate key is refused by ``add`` itself, before the sample is accepted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._core._errors import ConfigurationError, DuplicateKeyError
from ..format._keys import KeyTable, normalize_key, table_from_values
from ._keys import has_sidecar, load_sidecar, merge_key_tables, write_sidecar

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ..format._index import Index
    from ..storage._store import Store

__all__ = ["UploaderKeys"]


@dataclass
class UploaderKeys:
    """Keys of one uploader session; see the module docstring."""

    key_fn: Callable[[Any], Any]
    previous: tuple[KeyTable, int] | None = None
    keys: list[str | int] = field(default_factory=list)
    seen: dict[str | int, str] = field(default_factory=dict)

    @classmethod
    async def open(
        cls, store: Store, existing: Index | None, key_fn: Callable[[Any], Any] | None
    ) -> UploaderKeys | None:
        """Check the dataset there against ``key_fn`` and load its sidecar.

        Raises:
            ConfigurationError: the dataset has samples but no sidecar while ``key_fn`` is given, or a
                sidecar while ``key_fn`` is not.
        """
        present = existing is not None and existing.num_items > 0 and await has_sidecar(store)
        if key_fn is None:
            if present:
                raise ConfigurationError(
                    f"the dataset in {store.url} has a keys/ sidecar; pass key_fn= so appended samples get keys"
                )
            return None
        if existing is not None and existing.num_items > 0 and not present:
            raise ConfigurationError(
                f"key_fn given but the dataset in {store.url} has no keys/ sidecar; run build_keys_index on it first"
            )
        keys = cls(key_fn)
        if present:
            assert existing is not None
            keys.previous = await load_sidecar(store, existing)
            if keys.previous is not None:
                for value, position in zip(keys.previous[0].keys.to_pylist(), keys.previous[0].indices, strict=True):
                    keys.seen[value] = f"sample {int(position)} of the previous dataset"
        return keys

    def key_of(self, sample: Any, number: int) -> str | int:
        """``key_fn(sample)`` normalised; ``number`` names the sample in messages.

        Raises:
            DuplicateKeyError: the key was given to an earlier sample (named).
            ConfigurationError: not a str or int.
        """
        key = normalize_key(self.key_fn(sample), argument=f"key_fn(sample {number} of this uploader)")
        if key in self.seen:
            raise DuplicateKeyError(
                f"duplicate key {key!r}: sample {number} of this uploader and {self.seen[key]}; key_fn must give "
                "every sample its own key"
            )
        return key

    def accept(self, key: str | int) -> None:
        """Record the key of the sample just accepted (in builder order)."""
        self.seen[key] = f"sample {len(self.keys)} of this uploader"
        self.keys.append(key)

    async def publish(self, store: Store, index: Index, committed: int) -> Mapping[str, Any]:
        """Write the sidecar for ``index`` (previous samples + this session's first ``committed``); return
        the ``index.json`` extra."""
        array, indices = table_from_values(self.keys[:committed], source=store.url)
        own = KeyTable(keys=array, indices=indices)
        previous_items = index.num_items - committed
        parts: list[tuple[str, KeyTable, int]] = []
        if self.previous is not None:
            parts.append(("the previous dataset", self.previous[0], previous_items))
        parts.append(("this uploader", own, committed))
        table = merge_key_tables(parts, source=store.url)
        num_shards = self.previous[1] if self.previous is not None else 1
        return {"keys": await write_sidecar(store, table, index, num_shards)}
