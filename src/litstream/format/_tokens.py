"""LitData's token layout (``TokensLoader``): 1-D token arrays in, fixed ``block_size`` windows out.

Written items are the raw bytes of one 1-D array each, **without** the per-leaf size header of the
default loader; ``chunks[].dim`` in ``index.json`` records the chunk's total token count and
``chunks[].chunk_size`` the number of arrays. A chunk of N arrays holding T tokens of ``itemsize``
bytes each::

    0                   N, offsets[0..N]          the standard chunk header, (N + 2) * 4 bytes
    (N + 2) * 4         token 0 | token 1 | ... | token T-1     array boundaries are ignored on read

Reading with ``block_size = B`` sees chunk k as ``dim_k // B`` items ("blocks"); block ``i`` is the
``B`` tokens starting at byte ``(N + 2) * 4 + i * B * itemsize``. The tail of every chunk
(``dim_k % B`` tokens) is never served, so windows never cross chunks (LitData's rule, spec
read.md §6.3, format-and-write.md §6.1). ``block_size`` is a read-time choice, not stored.

Everything here is pure: the read engine gives chunks and item ids in blocks instead of arrays,
and the sharding, shuffling and resume logic above it stays unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from .._core._errors import ConfigurationError, FormatError
from . import _dtypes as dt
from ._chunk import ChunkView, header_length
from ._loaders import SampleEncoder, TokensLoader, _registry
from ._serializers import NoHeaderNumpySerializer, NoHeaderTensorSerializer, serializer_for_format

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ._index import ChunkInfo, DatasetConfig
    from ._serializers import Serializer

__all__ = ["TokenBlocks", "TokenEncoder", "TokenLayout", "check_item_loader"]

_NO_HEADER = ("no_header_numpy", "no_header_tensor")


def _itemsize(data_format: str) -> int:
    kind, _, _ = data_format.partition(":")
    index = dt.parse_dtype_suffix(data_format)
    if kind == "no_header_numpy":
        return dt.numpy_dtype_from_index(index).itemsize
    return dt.torch_dtype_itemsize(index)


class TokenEncoder:
    """Turns 1-D token arrays into TokensLoader items: ``(raw bytes, token count)``.

    The first sample fixes the dtype (``data_format`` is ``["no_header_numpy:<i>"]`` for NumPy
    arrays, ``["no_header_tensor:<i>"]`` for torch tensors); later samples must match it.

    Args:
        serializers: Extra serializers by registry key, tried before the built-ins.
    """

    def __init__(self, serializers: Mapping[str, Serializer] | None = None) -> None:
        self._inner = SampleEncoder(serializers)
        self._itemsize = 0

    @property
    def data_format(self) -> tuple[str, ...]:
        return self._inner.data_format

    @property
    def data_spec(self) -> str | None:
        return self._inner.data_spec

    @property
    def types(self) -> Any:
        """``config.types`` of the samples so far (LitData 0.2.76 records it for token datasets too)."""
        return self._inner.types

    def encode_item(self, sample: Any) -> tuple[bytes, int]:
        """Encode one token array.

        Returns:
            ``(item bytes, number of tokens)``; the count is what ``chunk_size`` budgets.

        Raises:
            FormatError: ``sample`` is not a single 1-D NumPy array or torch tensor, or its dtype
                differs from the first sample's.
        """
        first = not self._itemsize
        item = self._inner.encode(sample)
        if first:
            formats = self._inner.data_format
            if len(formats) != 1 or formats[0].partition(":")[0] not in _NO_HEADER:
                raise FormatError(
                    f"TokensLoader samples must be one 1-D NumPy array or torch tensor of tokens, got a "
                    f"{type(sample).__name__} stored as {list(formats)}; yield e.g. np.asarray(ids, dtype=np.int32)"
                )
            self._itemsize = _itemsize(formats[0])
        payload = item[4:]  # the single leaf's bytes, without the default loader's size header
        return payload, len(payload) // self._itemsize


@dataclass(frozen=True)
class TokenBlocks(ChunkView):
    """A decompressed token chunk seen as ``num_items = dim // block_size`` blocks.

    ``item(i)`` is block ``i``'s bytes (zero-copy); ``num_arrays`` is the stored array count N.

    Args:
        data: The chunk bytes.
        block_bytes: ``block_size * itemsize``.
        num_blocks: Blocks served from this chunk (``dim // block_size``).
    """

    block_bytes: int = 1
    num_blocks: int = 0

    def __post_init__(self) -> None:
        if len(self.data) < 4:
            raise FormatError(f"a chunk must hold at least 4 bytes, got {len(self.data)}")
        end = header_length(self.num_arrays) + self.num_blocks * self.block_bytes
        if len(self.data) < end:
            raise FormatError(
                f"token chunk of {len(self.data)} bytes is shorter than its {self.num_blocks} blocks need ({end})"
            )

    @property
    def num_arrays(self) -> int:
        """N, the number of token arrays stored in the chunk (its header count)."""
        return int(np.frombuffer(self.data, dtype="<u4", count=1)[0])

    @property
    def num_items(self) -> int:
        return self.num_blocks

    @property
    def offsets(self) -> np.ndarray:
        """The ``N + 1`` stored array offsets (array boundaries, which reading ignores)."""
        return np.frombuffer(self.data, dtype="<u4", count=self.num_arrays + 1, offset=4)

    @cached_property
    def _start(self) -> int:
        return header_length(self.num_arrays)

    def item(self, i: int) -> memoryview:
        """Block ``i`` (0-based, chunk-local) as a zero-copy view of ``block_bytes`` bytes.

        Raises:
            FormatError: ``i`` is outside ``[0, num_blocks)``.
        """
        if not 0 <= i < self.num_blocks:
            raise FormatError(f"block {i} is outside this chunk of {self.num_blocks} blocks")
        begin = self._start + i * self.block_bytes
        return self._memory[begin : begin + self.block_bytes]


@dataclass(frozen=True)
class TokenLayout:
    """How a token dataset is read with one ``block_size``.

    Attributes:
        block_size: Tokens per served item.
        itemsize: Bytes per token.
        blocks: Items (blocks) per chunk, ``dim // block_size``.
        arrays: Token arrays per chunk (``chunk_size`` of the index), for the header length.
        decoder: Turns a block's bytes into a 1-D tensor (``no_header_tensor``) or NumPy array
            (``no_header_numpy``) of ``block_size`` tokens, an owned copy — as LitData returns it.
    """

    block_size: int
    itemsize: int
    blocks: tuple[int, ...]
    arrays: tuple[int, ...]
    decoder: Serializer

    @property
    def block_bytes(self) -> int:
        return self.block_size * self.itemsize

    def decode(self, item: bytes | memoryview) -> Any:
        """One block's bytes as a tensor or array (the read engine calls this for every item)."""
        return self.decoder.deserialize(item)

    def decode_blocks(self, view: TokenBlocks, items: Sequence[int]) -> list[Any]:
        """Blocks ``items`` of ``view``, as :meth:`decode` gives each, decoded together.

        Consecutive ascending blocks (the common case: a sequential read) are copied out of the chunk
        at once into ONE new tensor / array ``(n, block_size)``, and each block is a writable row of
        it (no per-block allocation); other orders, and a user-registered serializer, go block by
        block through :meth:`decode`.

        Raises:
            FormatError: a block is outside the chunk.
        """
        n = len(items)
        decode_one = type(self.decoder).deserialize  # the built-in decoders (subclasses may add writers)
        tensors = decode_one is NoHeaderTensorSerializer.deserialize
        if n < 2 or not (tensors or decode_one is NoHeaderNumpySerializer.deserialize):
            return [self.decode(view.item(i)) for i in items]
        first, last = int(items[0]), int(items[-1])
        if last - first != n - 1 or not (isinstance(items, range) and items.step == 1):
            ids = np.asarray(items, dtype=np.int64)
            if last - first != n - 1 or not bool((np.diff(ids) == 1).all()):
                return [self.decode(view.item(i)) for i in items]
        view.item(first), view.item(last)  # bounds, with the per-block error
        begin = view._start + first * self.block_bytes
        data = bytearray(view._memory[begin : begin + n * self.block_bytes])  # the one copy; writable
        dtype = self.decoder.dtype  # type: ignore[attr-defined]  # set up from the data format
        if dtype is None:
            return [self.decode(view.item(i)) for i in items]  # the decoder's own error
        if tensors:
            import torch

            return list(torch.frombuffer(data, dtype=dtype).view(n, self.block_size))
        return list(np.frombuffer(data, dtype=dtype).reshape(n, self.block_size))

    def view(self, chunk_index: int, chunk: ChunkView) -> TokenBlocks:
        """``chunk`` (chunk ``chunk_index``, header already checked) seen as blocks."""
        return TokenBlocks(chunk.data, block_bytes=self.block_bytes, num_blocks=self.blocks[chunk_index])

    def block_span(self, chunk_index: int, block: int) -> tuple[int, int]:
        """``(byte offset, length)`` of ``block`` inside the uncompressed chunk file.

        Raises:
            FormatError: ``block`` is outside the chunk.
        """
        if not 0 <= block < self.blocks[chunk_index]:
            raise FormatError(f"block {block} is outside chunk {chunk_index} ({self.blocks[chunk_index]} blocks)")
        return header_length(self.arrays[chunk_index]) + block * self.block_bytes, self.block_bytes


def check_item_loader(
    where: str,
    config: DatasetConfig,
    chunks: Sequence[ChunkInfo],
    item_loader: object,
    serializers: Mapping[str, Serializer] | None = None,
) -> TokenLayout | None:
    """Check that ``item_loader`` can read a dataset, and return its token layout if it is a token one.

    Matches LitData's rules: the loader's class name must equal ``config.item_loader``; without
    that key, a single ``no_header_tensor`` leaf means the data was written for TokensLoader.

    Args:
        where: The dataset's URL, for messages.
        config: Its ``index.json`` config.
        chunks: Its ``index.json`` chunk entries.
        item_loader: ``PyTreeLoader()``, ``TokensLoader(block_size)`` or ``None`` (PyTreeLoader).
        serializers: Extra serializers by registry key.

    Returns:
        ``None`` for a PyTreeLoader dataset, else the :class:`TokenLayout` for the block size.

    Raises:
        ConfigurationError: the loader does not match the dataset, or TokensLoader has no block size.
        FormatError: a token dataset whose format or ``dim`` entries cannot be read.
    """
    wanted = "TokensLoader" if isinstance(item_loader, TokensLoader) else "PyTreeLoader"
    written = config.item_loader
    if written is None:
        tensor_tokens = len(config.data_format) == 1 and config.data_format[0].startswith("no_header_tensor")
        written = "TokensLoader" if tensor_tokens else "PyTreeLoader"
    if written not in ("PyTreeLoader", "TokensLoader"):
        raise FormatError(
            f"{where} was written with item_loader={written!r}; litstream reads PyTreeLoader and TokensLoader datasets"
        )
    if written != wanted:
        fix = "item_loader=TokensLoader(block_size=...)" if written == "TokensLoader" else "item_loader=PyTreeLoader()"
        raise ConfigurationError(
            f"{where} was written with item_loader={written!r} but is read with {wanted}; pass {fix}"
        )
    if not isinstance(item_loader, TokensLoader):
        return None
    block_size = item_loader.block_size
    if block_size is None:
        raise ConfigurationError(
            f"TokensLoader() needs block_size to read {where}: pass TokensLoader(block_size=N), N tokens per item"
        )
    formats = config.data_format
    if len(formats) != 1 or formats[0].partition(":")[0] not in _NO_HEADER:
        raise FormatError(
            f"{where} has data_format {list(formats)}; TokensLoader reads a single no_header_numpy or "
            "no_header_tensor leaf"
        )
    missing = [c.filename for c in chunks if c.dim is None]
    if missing:
        raise FormatError(
            f"{where}: index.json gives no token count (dim) for {missing[:3]}; re-run optimize with "
            "item_loader=TokensLoader()"
        )
    return TokenLayout(
        block_size=block_size,
        itemsize=_itemsize(formats[0]),
        blocks=tuple(int(c.dim or 0) // block_size for c in chunks),
        arrays=tuple(c.chunk_size for c in chunks),
        decoder=serializer_for_format(formats[0], _registry(serializers)),
    )
