"""LitData's Arrow chunks: chunks whose samples are stored as one Arrow IPC payload (read side).

LitData (since 0.2.7x) stores a chunk of dict samples whose every field is JSON-like (``str``,
``int``, ``float``, ``bool``, ``bytes``, ``None``, lists, nested dicts; ``config.types`` records the
fused schema) as an Arrow IPC *file* appended after the usual chunk header. All integers are uint32
little-endian::

    offset 0        N                       items in the chunk
    offset 4        offsets[0..N]           all equal to 4 + 4 * (N + 1): every item is empty
    offsets[N]      Arrow IPC file          "ARROW1" ... "ARROW1"; record batches of 256 rows
                                            (the last may be shorter), one column per field;
                                            buffers zstd/lz4-compressed when ``config.ipc_compression``
    end - 12        uint32 L                length of the IPC file in bytes
    end - 8         b"LDARW01\\0"            footer magic

A LitData writer may also keep the pytree items (real offsets) and append the same footer; the IPC
payload then starts at ``offsets[N]``, right after the last item, and is what LitData reads. Older
LitData writers used the Arrow IPC *stream* format for the payload; both are read here. Item ``i``
is row ``i`` as a ``dict`` of field name → Python value, exactly what Arrow's ``to_pylist()`` gives
(rows lacking a field hold ``None`` there), which is what LitData returns.

Pure and synchronous: bytes in, values out. Needs ``pyarrow`` (the ``arrow`` extra); importing this
module does not import it, decoding does. Every byte of the payload is untrusted: a malformed one
raises :class:`~litstream.FormatError`, never a pyarrow exception; a record batch is fully
validated (``validate(full=True)``) before any value is read from it; and before anything is
decompressed, the decoded size announced by the message headers is bounded by the payload's size
(at most ``MAX_INFLATION`` = 128 times it, or 1 GiB, whichever is larger), so a decompression bomb
is refused instead of allocated. The payload itself lies inside the chunk, whose length the reader
checks against the index's ``chunk_bytes``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from ..._core._errors import FormatError, LitstreamError
from .._batch_decode import _MAX_DISPLAY_KEYS, _dict_rows
from .._chunk import ChunkView, header_length
from ._ipc import IPC_FILE_MAGIC, decoded_bytes

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "ARROW_BATCH_ROWS",
    "ARROW_FOOTER_MAGIC",
    "ARROW_TRAILER",
    "ArrowChunk",
    "ArrowRowsOnly",
    "arrow_payload_span",
    "pyarrow_module",
    "read_chunk_view",
]

ARROW_FOOTER_MAGIC = b"LDARW01\0"
"""The last 8 bytes of a chunk carrying an Arrow payload."""
ARROW_TRAILER = 12
"""Bytes after the payload: its uint32 LE length, then :data:`ARROW_FOOTER_MAGIC`."""
ARROW_BATCH_ROWS = 256
"""Rows per record batch LitData writes (the last batch of a chunk may be shorter)."""
MAX_INFLATION = 128
"""A payload may decode to at most ``max(MAX_DECODED_FLOOR, MAX_INFLATION * its size)`` bytes."""
MAX_DECODED_FLOOR = 2**30


def pyarrow_module() -> Any:
    """``pyarrow`` with its ``ipc`` module loaded.

    Raises:
        ModuleNotFoundError: pyarrow is not installed; the message names the extra to install.
    """
    try:
        import pyarrow as pa
        import pyarrow.ipc
    except ModuleNotFoundError as exc:  # pragma: no cover - pyarrow is in the dev install
        raise ModuleNotFoundError(
            "this dataset stores samples as Arrow chunks (LitData's default for dict samples); reading or writing "
            'them needs pyarrow: pip install "litstream[arrow]"'
        ) from exc
    return pa


def arrow_payload_span(data: bytes | bytearray | memoryview | Any, num_items: int) -> tuple[int, int] | None:
    """``(begin, end)`` of the Arrow IPC payload of a chunk of ``num_items`` items, or ``None``.

    ``None`` means a plain chunk: no footer magic, or the items end exactly where the chunk ends.

    Raises:
        FormatError: the chunk ends with the footer magic but its length field does not place the
            payload right after the last item (a truncated or forged chunk).
    """
    size = len(data)
    head = header_length(num_items)
    if size < head + ARROW_TRAILER or bytes(data[size - 8 : size]) != ARROW_FOOTER_MAGIC:
        return None
    items_end = int.from_bytes(data[head - 4 : head], "little")  # offsets[N]
    if items_end == size:
        return None  # a plain chunk whose last item happens to end with the magic bytes
    length = int.from_bytes(data[size - ARROW_TRAILER : size - 8], "little")
    begin = size - ARROW_TRAILER - length
    if length == 0 or begin != items_end:
        raise FormatError(
            f"a chunk of {size} bytes ends with an Arrow footer of {length} bytes that does not start where its "
            f"{num_items} items end (byte {items_end}); the chunk is corrupt — re-run optimize"
        )
    return begin, size - ARROW_TRAILER


def read_chunk_view(data: Any, *, decoded_floor: int = MAX_DECODED_FLOOR) -> ChunkView:
    """A :class:`ChunkView` of ``data``, or an :class:`ArrowChunk` when it carries an Arrow payload.

    Args:
        data: The whole chunk.
        decoded_floor: Bytes an Arrow payload may always decode to, whatever its size (see
            :class:`ArrowChunk`); default :data:`MAX_DECODED_FLOOR`, 1 GiB.

    Raises:
        FormatError: the header or the Arrow payload is malformed.
    """
    view = ChunkView(data)
    span = arrow_payload_span(data, view.num_items)
    return view if span is None else ArrowChunk(data, span=span, decoded_floor=decoded_floor)


def _arrow_errors(pa: Any) -> tuple[type[BaseException], ...]:
    return (pa.ArrowException, OSError, ValueError, TypeError, IndexError, KeyError, OverflowError, MemoryError)


def _rows_of(batch: Any) -> list[dict[str, Any]]:
    """The rows of a record batch or table as dicts, the values of ``batch.to_pylist()``: Arrow converts each
    column in C++ (``to_pylist``) and a dict display zips them into rows (``_batch_decode``'s, about 1.5x
    faster than ``to_pylist()`` of the whole batch, which builds every row with a comprehension)."""
    names = batch.schema.names
    if not names:
        return [{} for _ in range(batch.num_rows)]
    if len(names) > _MAX_DISPLAY_KEYS or len(set(names)) != len(names):  # as to_pylist() does
        rows: list[dict[str, Any]] = batch.to_pylist()
        return rows
    columns = [column.to_pylist() for column in batch.columns]
    return _dict_rows(len(names))(columns, *names)


class _Relayout(Exception):
    """Internal: a record batch was not where LitData's 256-row layout puts it (the ends are now known)."""


@dataclass(frozen=True)
class ArrowChunk(ChunkView):
    """A chunk whose items are the rows of an Arrow IPC payload (layout in the module docstring).

    Record batches are decompressed and validated on first use and kept (as Arrow memory) while the
    view lives; Python values are built anew on every request, so callers never share a sample.
    ``item(i)`` returns the decoded row (a ``dict``), as :class:`~litstream.format.arrow._parquet.ParquetChunk`
    does; :meth:`rows` decodes many at once.

    Args:
        data: The whole chunk.
        span: ``(begin, end)`` of the IPC payload, from :func:`arrow_payload_span`.
        decoded_floor: The payload may decode to ``max(decoded_floor, MAX_INFLATION * its size)`` bytes
            (a decompression bomb is refused before decoding); default :data:`MAX_DECODED_FLOOR`, 1 GiB.

    Raises:
        FormatError: the payload is not a readable Arrow IPC file or stream, or its row count differs
            from the chunk header's ``N``, or it would decode to more than allowed.
    """

    span: tuple[int, int] = (0, 0)
    decoded_floor: int = MAX_DECODED_FLOOR

    def __post_init__(self) -> None:
        super().__post_init__()
        begin, end = self.span
        if not 0 < begin < end <= len(self.data):
            raise FormatError(f"Arrow payload span {self.span} is outside the chunk of {len(self.data)} bytes")
        self._reader  # noqa: B018  (open now: a malformed payload fails when the chunk is read)

    @cached_property
    def _pa(self) -> Any:
        return pyarrow_module()

    @cached_property
    def _lock(self) -> threading.Lock:
        return threading.Lock()

    @cached_property
    def _reader(self) -> Any:
        pa = self._pa
        begin, end = self.span
        payload = memoryview(self.data)[begin:end]
        try:
            decoded = decoded_bytes(pa, payload)
            limit = max(self.decoded_floor, MAX_INFLATION * len(payload))
            if decoded > limit:
                raise FormatError(
                    f"the Arrow payload of a chunk ({len(payload)} bytes) would decode to {decoded} bytes, more than "
                    f"the {limit} allowed ({MAX_INFLATION}x its size); the chunk is corrupt or hostile"
                )
            if bytes(payload[:6]) == IPC_FILE_MAGIC:
                return pa.ipc.open_file(pa.py_buffer(payload))
            return pa.ipc.open_stream(pa.py_buffer(payload))
        except _arrow_errors(pa) as exc:
            raise FormatError(f"the Arrow payload of a chunk is not a readable Arrow IPC file: {exc}") from exc

    @cached_property
    def _batches(self) -> dict[int, Any]:
        return {}

    @cached_property
    def _ends(self) -> np.ndarray[Any, Any]:
        """Cumulative row count after each record batch (int64)."""
        n = self.num_items
        reader = self._reader
        if isinstance(reader, self._pa.ipc.RecordBatchFileReader):
            count = reader.num_record_batches
            if count == -(-n // ARROW_BATCH_ROWS):  # LitData's layout: 256 rows a batch, checked on decode
                uniform: np.ndarray[Any, Any] = np.arange(1, count + 1, dtype=np.int64) * ARROW_BATCH_ROWS
                uniform[-1] = n
                return uniform
        return self._decode_all()

    def _decode_all(self) -> np.ndarray[Any, Any]:
        """Decode every record batch (a payload not in LitData's layout) and return the true ends."""
        reader, pa = self._reader, self._pa
        batches: list[Any] = []
        try:
            if isinstance(reader, pa.ipc.RecordBatchFileReader):
                batches = [reader.get_batch(b) for b in range(reader.num_record_batches)]
            else:
                batches = list(reader)
            for batch in batches:
                batch.validate(full=True)
        except _arrow_errors(pa) as exc:
            raise FormatError(f"the Arrow payload of a chunk is corrupt: {exc}") from exc
        ends = np.cumsum(np.fromiter((b.num_rows for b in batches), dtype=np.int64, count=len(batches)))
        total = int(ends[-1]) if len(ends) else 0
        if total != self.num_items:
            raise FormatError(
                f"the Arrow payload of a chunk holds {total} rows but the chunk header announces {self.num_items}"
            )
        self._batches.update(enumerate(batches))
        ends_array: np.ndarray[Any, Any] = ends
        return ends_array

    def _batch(self, b: int) -> Any:
        batch = self._batches.get(b)
        if batch is not None:
            return batch
        pa = self._pa
        ends = self._ends
        with self._lock:
            batch = self._batches.get(b)
            if batch is not None:
                return batch
            try:
                batch = self._reader.get_batch(b)
                batch.validate(full=True)
            except _arrow_errors(pa) as exc:
                raise FormatError(f"record batch {b} of a chunk's Arrow payload is corrupt: {exc}") from exc
            expected = int(ends[b]) - (int(ends[b - 1]) if b else 0)
            if batch.num_rows != expected:  # not LitData's 256-row layout: learn the real one
                self.__dict__["_ends"] = self._decode_all()
                raise _Relayout
            self._batches[b] = batch
            return batch

    def rows(self, items: Sequence[int] | np.ndarray[Any, Any]) -> list[dict[str, Any]]:
        """Rows ``items`` (chunk-local ids, any order, repeats allowed) as new dicts, in that order.

        Only the record batches holding them are decompressed; Arrow converts them to Python values
        a batch (or a slice of one) at a time.

        Raises:
            FormatError: an id is outside ``[0, num_items)`` or a needed batch is corrupt.
        """
        ids = np.asarray(items, dtype=np.int64)
        if ids.size == 0:
            return []
        n = self.num_items
        if int(ids.min()) < 0 or int(ids.max()) >= n:
            bad = int(ids[(ids < 0) | (ids >= n)][0])
            raise FormatError(f"item {bad} is outside this chunk of {n} items")
        try:
            return self._rows(ids)
        except _Relayout:  # the batches were cut elsewhere than every 256 rows; now they are all known
            return self._rows(ids)

    def _rows(self, ids: np.ndarray[Any, Any]) -> list[dict[str, Any]]:
        ends = self._ends
        which = np.searchsorted(ends, ids, side="right")
        needed = np.unique(which).tolist()
        batches = [self._batch(b) for b in needed]
        pa = self._pa
        run = bool((np.diff(ids) == 1).all())  # ascending consecutive rows: a zero-copy slice
        try:
            if len(needed) == 1:
                b = needed[0]
                local = ids - (int(ends[b - 1]) if b else 0)
                if run:
                    return _rows_of(batches[0].slice(int(local[0]), len(local)))
                return _rows_of(batches[0].take(pa.array(local)))
            starts = np.concatenate(([0], ends[:-1]))
            if run:  # the needed batches are consecutive too
                table = pa.Table.from_batches(batches)
                return _rows_of(table.slice(int(ids[0]) - int(starts[needed[0]]), len(ids)))
            sizes = np.array([batch.num_rows for batch in batches], dtype=np.int64)
            placed = np.zeros(len(ends), dtype=np.int64)
            placed[needed] = np.concatenate(([0], np.cumsum(sizes)[:-1]))
            table = pa.Table.from_batches(batches)
            return _rows_of(table.take(pa.array(ids - starts[which] + placed[which])))
        except _arrow_errors(pa) as exc:
            raise FormatError(f"the Arrow payload of a chunk cannot be decoded: {exc}") from exc

    def item(self, i: int) -> Any:
        """Row ``i`` (0-based, chunk-local) as a new ``dict``.

        Raises:
            FormatError: ``i`` is outside ``[0, num_items)`` or its batch is corrupt.
        """
        if not 0 <= i < self.num_items:
            raise FormatError(f"item {i} is outside this chunk of {self.num_items} items")
        return self.rows([i])[0]


class ArrowRowsOnly:
    """The decoder of a dataset whose pytree ``data_format`` cannot be set up here (e.g. a serializer
    litstream lacks) but whose ``config.types`` says LitData stored its samples as Arrow rows.

    Arrow chunks never use the pytree decoder, so they read; an item of a plain chunk raises the
    error that setting the decoder up raised.

    Args:
        error: That error.
    """

    def __init__(self, error: LitstreamError) -> None:
        self.error = error

    def decode(self, item: bytes | memoryview) -> Any:
        """Raise (a new copy of) the set-up error: this dataset has a plain (non-Arrow) chunk that
        litstream cannot decode.

        Raises:
            LitstreamError: always, of the set-up error's type (e.g. ``FormatError``).
        """
        raise type(self.error)(str(self.error))
