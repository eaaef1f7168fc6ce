"""The ``keys/`` sidecar: a sample's own id → its position, in LitData 0.2.76's layout.

Layout (written by ``optimize(..., key_fn=...)``, ``build_keys_index``, read by ``ds[key]``)::

    index.json      top-level "keys": {"version": 1, "num_shards": N, "sharding": "none"|"hash"}
    keys/shard-00000.parquet   (shard-00001.parquet ... when N > 1)
    keys.parquet               LitData's older single-file sidecar (same columns, one shard); read when
                               keys/shard-00000.parquet is absent, removed when a keys/ store is written

Each shard is a Parquet file sorted by ``key`` with the columns ``key`` (UTF-8 string or int64, one type
per dataset), ``index`` (int64 global sample index), and optionally ``chunk_index`` (int32 position in
``index.json``'s ``chunks``) and ``chunk_offset`` (int32; LitData stores the global index there too).
With N > 1 a key lives in shard ``blake2b(str(key), digest_size=8)`` (little-endian) ``% N``. A writer's
partial ``{rank}.keys.parquet`` holds ``key`` and ``index`` (rank-local) in sample order; litstream adds an
``input`` column (which input produced the sample) that LitData ignores.

Pure and synchronous: bytes in, tables out (pyarrow, imported lazily). Every field is validated here.
"""

from __future__ import annotations

import bisect
import hashlib
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from .._core._errors import ConfigurationError, DuplicateKeyError, FormatError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

__all__ = [
    "KEYS_DIR",
    "KEYS_SECTION",
    "LEGACY_KEYS_NAME",
    "KeyTable",
    "decode_key_table",
    "encode_key_table",
    "key_shard",
    "keys_config",
    "normalize_key",
    "parse_keys_config",
    "rank_keys_name",
    "shard_name",
]

KEYS_DIR = "keys"
KEYS_SECTION = "keys"
LEGACY_KEYS_NAME = "keys.parquet"
"""LitData's older single-file sidecar at the dataset root (LitData 0.2.76 still reads it)."""
MAX_SHARDS = 4096
_SHARD_TEMPLATE = "shard-{:05d}.parquet"
_INT64 = (-(2**63), 2**63 - 1)


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.compute
        import pyarrow.parquet
    except ImportError:  # pragma: no cover - pyarrow is a dependency of the keys extra
        raise ImportError("keyed datasets need pyarrow: pip install 'litstream[keys]'") from None
    return pa


def shard_name(shard: int) -> str:
    """Store name of key shard ``shard``: ``keys/shard-00000.parquet``."""
    return f"{KEYS_DIR}/{_SHARD_TEMPLATE.format(shard)}"


def rank_keys_name(rank: int) -> str:
    """Name of writer ``rank``'s partial key file, ``{rank}.keys.parquet`` (LitData's)."""
    return f"{rank}.keys.parquet"


def normalize_key(key: object, *, argument: str = "key") -> str | int:
    """A key as stored: ``str`` or ``int`` (numpy integers become int, bytes are decoded as UTF-8).

    Raises:
        ConfigurationError: ``key`` is ``None``, a bool, another type, or an int outside int64. (A
            ``TypeError`` in LitData; ours is a ``ValueError`` naming the argument.)
    """
    if isinstance(key, str):
        return key
    if isinstance(key, bool) or key is None:
        raise ConfigurationError(f"{argument}={key!r}: keys must be str or int")
    if isinstance(key, int) or (type(key).__module__ == "numpy" and hasattr(key, "__index__")):
        value = int(key)
        if not _INT64[0] <= value <= _INT64[1]:
            raise ConfigurationError(f"{argument}={value}: int keys must fit in int64")
        return value
    if isinstance(key, (bytes, bytearray, memoryview)):
        try:
            return bytes(key).decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigurationError(f"{argument}={bytes(key)[:40]!r}: bytes keys must be UTF-8") from None
    raise ConfigurationError(f"{argument}={key!r:.80}: keys must be str or int, got {type(key).__name__}")


def key_shard(key: str | int, num_shards: int) -> int:
    """The shard holding ``key`` (LitData's stable hash; 0 when ``num_shards <= 1``)."""
    if num_shards <= 1:
        return 0
    digest = hashlib.blake2b(str(key).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") % num_shards


def keys_config(num_shards: int) -> dict[str, Any]:
    """The ``keys`` section of ``index.json`` for a sidecar of ``num_shards`` shards."""
    return {"num_shards": int(num_shards), "sharding": "hash" if num_shards > 1 else "none", "version": 1}


def parse_keys_config(obj: object, *, source: str = "index.json") -> int | None:
    """The shard count in an ``index.json`` ``keys`` section, ``None`` when absent.

    Raises:
        FormatError: the section is not an object, or its shard count / sharding is not one litstream reads.
    """
    if obj is None:
        return None
    if not isinstance(obj, dict):
        raise FormatError(f"{source}: 'keys' must be an object, got {obj!r:.80}; rebuild it with build_keys_index")
    n = obj.get("num_shards", 1)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_SHARDS:
        raise FormatError(f"{source}: keys.num_shards={n!r:.40} must be an int in [1, {MAX_SHARDS}]")
    sharding = obj.get("sharding", "hash" if n > 1 else "none")
    if sharding not in ("none", "hash") or (n > 1 and sharding != "hash"):
        raise FormatError(f"{source}: keys.sharding={sharding!r:.40} with {n} shards is not supported")
    return n


@dataclass(frozen=True)
class KeyTable:
    """A validated key shard: ``keys`` sorted strictly ascending, ``indices[i]`` the sample of ``keys[i]``.

    Attributes:
        keys: A pyarrow string or int64 array, sorted, unique, no nulls.
        indices: A numpy int64 array of global sample indices, same length.
    """

    keys: Any
    indices: Any

    def __len__(self) -> int:
        return len(self.indices)

    @cached_property
    def _int_keys(self) -> Any:
        return self.keys.to_numpy(zero_copy_only=False)

    def find(self, key: str | int) -> int | None:
        """The global index of ``key``, or ``None`` (binary search: O(log n) element reads)."""
        is_str = self.keys.type in (_pyarrow().string(), _pyarrow().large_string())
        if is_str != isinstance(key, str):
            return None
        if not is_str:
            import numpy as np

            values = self._int_keys
            pos = int(np.searchsorted(values, key))
            return int(self.indices[pos]) if pos < len(values) and int(values[pos]) == key else None
        assert isinstance(key, str)
        lo, hi = 0, len(self.keys)
        target = key.encode("utf-8")
        while lo < hi:
            mid = (lo + hi) // 2
            value = self.keys[mid].as_py().encode("utf-8")
            if value < target:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(self.keys) and self.keys[lo].as_py() == key:
            return int(self.indices[lo])
        return None


def _column_array(table: Any, name: str, source: str) -> Any:
    pa = _pyarrow()
    column = table.column(name).combine_chunks()
    if column.null_count:
        raise FormatError(f"{source}: column {name!r} has {column.null_count} null values")
    if pa.types.is_large_string(column.type):
        column = column.cast(pa.string())
    return column


def decode_key_table(
    data: bytes | memoryview, *, source: str, num_items: int, partial: bool = False
) -> tuple[Any, Any, Any]:
    """Parse one key Parquet file (a shard or a writer's partial) and check every value.

    Args:
        data: The whole file.
        source: Its name, for messages.
        num_items: Every ``index`` must lie in ``[0, num_items)``.
        partial: A writer's partial: rows in sample order, ``index`` must be ``0..n-1``; its ``input``
            column (if any) is returned.

    Returns:
        ``(keys, indices, inputs)``: a pyarrow string/int64 array, a numpy int64 array, the ``input``
        column as a pyarrow array (``None`` when absent or not ``partial``).

    Raises:
        FormatError: not Parquet, a missing column or one of another type, nulls, an index out of range.
    """
    pa = _pyarrow()
    try:
        parquet = pa.parquet.ParquetFile(pa.BufferReader(bytes(data)))
        rows = parquet.metadata.num_rows
        if not partial and rows > num_items:  # bound the allocation before decoding anything
            raise FormatError(f"{source} lists {rows} keys for a dataset of {num_items} samples; rebuild it")
        table = parquet.read()
    except (pa.ArrowException, OSError, ValueError) as exc:
        if isinstance(exc, FormatError):
            raise
        raise FormatError(f"{source} is not a readable Parquet file ({exc}); rebuild it with build_keys_index") from exc
    for name in ("key", "index"):
        if name not in table.column_names:
            raise FormatError(f"{source} has no {name!r} column (columns: {table.column_names}); not a key sidecar")
    keys = _column_array(table, "key", source)
    if not (pa.types.is_string(keys.type) or pa.types.is_integer(keys.type)):
        raise FormatError(f"{source}: column 'key' has type {keys.type}; expected string or int64")
    if pa.types.is_integer(keys.type):
        keys = keys.cast(pa.int64())
    index = _column_array(table, "index", source)
    if not pa.types.is_integer(index.type):
        raise FormatError(f"{source}: column 'index' has type {index.type}; expected int64")
    indices = index.cast(pa.int64()).to_numpy()
    if len(indices) and (int(indices.min()) < 0 or int(indices.max()) >= num_items):
        raise FormatError(
            f"{source}: sample index {int(indices.min())}..{int(indices.max())} is outside the dataset's "
            f"{num_items} items; the sidecar does not belong to this index.json — rebuild it with build_keys_index"
        )
    inputs = None
    if partial:
        import numpy as np

        if not np.array_equal(indices, np.arange(len(indices))):
            raise FormatError(f"{source}: a writer's key file must list indices 0..{len(indices) - 1} in order")
        if "input" in table.column_names:
            inputs = table.column("input").combine_chunks()
    return keys, indices, inputs


class Labels:
    """Names of concatenated rows (which input made each sample), built only when a message needs one."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._parts: list[Callable[[int], str]] = []
        self._count = 0

    def add(self, count: int, name: Callable[[int], str]) -> None:
        """Append ``count`` rows; row ``j`` of them is called ``name(j)``."""
        self._starts.append(self._count)
        self._parts.append(name)
        self._count += count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, position: int) -> str:
        part = bisect.bisect_right(self._starts, position) - 1
        return self._parts[part](position - self._starts[part])


def sorted_table(keys: Any, indices: Any, *, source: str, inputs: Sequence[str] | Labels | None = None) -> KeyTable:
    """Sort ``(keys, indices)`` by key and refuse duplicates.

    Raises:
        DuplicateKeyError: a key appears twice; names it, and the two inputs when ``inputs`` is given
            (else the two sample indices).
    """
    pa = _pyarrow()
    pc = pa.compute
    order = pc.sort_indices(keys)
    keys = keys.take(order)
    order_np = order.to_numpy()
    indices = indices[order_np]
    if len(keys) > 1:
        same = pc.equal(keys.slice(1), keys.slice(0, len(keys) - 1))
        if pc.any(same).as_py():
            at = int(pc.index(same, True).as_py())
            first, second = int(order_np[at]), int(order_np[at + 1])
            if inputs is not None:
                first_name, second_name = sorted((inputs[first], inputs[second]))
                where = f"{first_name} and {second_name}"
            else:
                where = f"samples {int(indices[at])} and {int(indices[at + 1])}"
            raise DuplicateKeyError(
                f"duplicate key {keys[at].as_py()!r} in {source}: produced by {where}; key_fn must give "
                "every sample its own key"
            )
    return KeyTable(keys=keys, indices=indices)


def table_from_values(
    keys: Sequence[str | int], *, source: str, inputs: Sequence[str] | None = None
) -> tuple[Any, Any]:
    """Arrays ``(keys, indices 0..n-1)`` from Python keys, checking that they are of one type."""
    import numpy as np

    pa = _pyarrow()
    kinds = {type(k) for k in keys}
    if len(kinds) > 1:
        first_str = next(i for i, k in enumerate(keys) if isinstance(k, str))
        first_int = next(i for i, k in enumerate(keys) if isinstance(k, int))
        names = inputs or [f"sample {i}" for i in range(len(keys))]
        raise FormatError(
            f"{source}: key_fn returned str keys ({names[first_str]}: {keys[first_str]!r}) and int keys "
            f"({names[first_int]}: {keys[first_int]!r}); every key of a dataset must have one type"
        )
    array = pa.array(list(keys), type=pa.int64() if kinds == {int} else pa.string())
    return array, np.arange(len(keys), dtype=np.int64)


def encode_key_table(
    keys: Any,
    indices: Any,
    *,
    chunk_starts: Sequence[int] | None = None,
    inputs: Sequence[str] | None = None,
) -> bytes:
    """A Parquet file (zstd) of ``key``/``index`` (+ ``chunk_index``/``chunk_offset`` from ``chunk_starts``,
    the first global index of every chunk; + ``input``) — the bytes LitData reads."""
    import numpy as np

    pa = _pyarrow()
    columns: dict[str, Any] = {"key": keys, "index": pa.array(indices, type=pa.int64())}
    if chunk_starts is not None:
        starts = np.asarray(chunk_starts, dtype=np.int64)
        chunk_index = np.searchsorted(starts, np.asarray(indices, dtype=np.int64), side="right") - 1
        columns["chunk_index"] = pa.array(chunk_index.astype(np.int32), type=pa.int32())
        columns["chunk_offset"] = pa.array(np.asarray(indices, dtype=np.int64).astype(np.int32), type=pa.int32())
    if inputs is not None:
        columns["input"] = pa.array(list(inputs), type=pa.string())
    sink = pa.BufferOutputStream()
    pa.parquet.write_table(pa.table(columns), sink, compression="zstd")
    return bytes(sink.getvalue().to_pybytes())


def shard_split(table: KeyTable, num_shards: int) -> list[KeyTable]:
    """Split a sorted table into ``num_shards`` sorted tables by :func:`key_shard`."""
    import numpy as np

    if num_shards == 1:
        return [table]
    shards = np.array([key_shard(k, num_shards) for k in table.keys.to_pylist()], dtype=np.int64)
    out = []
    for s in range(num_shards):
        mask = shards == s
        out.append(KeyTable(keys=table.keys.filter(_pyarrow().array(mask)), indices=table.indices[mask]))
    return out


def section_of(extra: Mapping[str, Any], *, source: str = "index.json") -> int | None:
    """Shard count from an :class:`~litstream.format._index.Index`'s ``extra`` (``None``: no sidecar recorded)."""
    return parse_keys_config(extra.get(KEYS_SECTION), source=source)
