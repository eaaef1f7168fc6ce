"""Arrow IPC message headers, read without decoding anything: how many bytes a payload's record
batches decode to, so that a decompression bomb is refused before any allocation (``format/arrow/_chunk.py``).

An IPC file is ``"ARROW1"`` + 2 padding bytes, then a stream of messages (schema, record batches),
then its footer; a stream is the messages alone. Each message is a flatbuffer ``Message`` whose
``header`` (field 2) is a ``RecordBatch`` table: ``buffers`` (field 2) lists ``{offset, length}``
(int64 each) in the message body, and ``compression`` (field 3) is present when every buffer is
compressed — such a buffer starts with its decoded length as an int64 (``-1``: stored as is).
pyarrow's ``read_message`` verifies the flatbuffers; every position read here is checked again.
Pure: bytes in, a number out.
"""

from __future__ import annotations

from typing import Any

from ..._core._errors import FormatError

__all__ = ["IPC_FILE_MAGIC", "decoded_bytes"]

IPC_FILE_MAGIC = b"ARROW1"


def _u32(buf: bytes, at: int) -> int:
    if not 0 <= at <= len(buf) - 4:
        raise FormatError("an Arrow message header points outside itself")
    return int.from_bytes(buf[at : at + 4], "little")


def _field(buf: bytes, table: int, field: int) -> int | None:
    """Position of field ``field`` of the flatbuffer table at ``table``, or ``None`` when absent."""
    if not 0 <= table <= len(buf) - 4:
        raise FormatError("an Arrow message header points outside itself")
    vtable = table - int.from_bytes(buf[table : table + 4], "little", signed=True)
    if not 0 <= vtable <= len(buf) - 4:
        raise FormatError("an Arrow message header points outside itself")
    size = int.from_bytes(buf[vtable : vtable + 2], "little")
    slot = vtable + 4 + 2 * field
    if slot + 2 > vtable + size or slot + 2 > len(buf):
        return None
    offset = int.from_bytes(buf[slot : slot + 2], "little")
    return table + offset if offset else None


def _batch_decoded_bytes(metadata: bytes, body: memoryview) -> int:
    """Bytes the buffers of one record-batch message decode to (the IPC ``Message``/``RecordBatch``
    flatbuffers: a compressed buffer starts with its int64 decoded length, ``-1`` when stored as is)."""
    message = _u32(metadata, 0)
    header = _field(metadata, message, 2)  # Message.header
    if header is None:
        return 0
    batch = header + _u32(metadata, header)
    compressed = _field(metadata, batch, 3) is not None  # RecordBatch.compression
    buffers_at = _field(metadata, batch, 2)  # RecordBatch.buffers: [struct {offset: long, length: long}]
    if buffers_at is None:
        return 0
    vector = buffers_at + _u32(metadata, buffers_at)
    count = _u32(metadata, vector)
    if vector + 4 + 16 * count > len(metadata):
        raise FormatError("an Arrow message header lists more buffers than it holds")
    total = 0
    for k in range(count):
        at = vector + 4 + 16 * k
        offset = int.from_bytes(metadata[at : at + 8], "little", signed=True)
        length = int.from_bytes(metadata[at + 8 : at + 16], "little", signed=True)
        if offset < 0 or length < 0 or offset + length > len(body):
            raise FormatError("an Arrow record batch lists a buffer outside its body")
        if compressed and length >= 8:
            decoded = int.from_bytes(body[offset : offset + 8], "little", signed=True)
            total += length - 8 if decoded == -1 else max(decoded, 0)
        else:
            total += length
    return total


def decoded_bytes(pa: Any, payload: memoryview) -> int:
    """Bytes every record batch of an IPC file or stream decodes to, read from the message headers
    without decompressing anything (so a decompression bomb is refused before any allocation)."""
    reader = pa.BufferReader(pa.py_buffer(payload))
    if bytes(payload[:6]) == IPC_FILE_MAGIC:
        reader.seek(8)  # "ARROW1" and 2 bytes of padding, then the stream of messages
    total = 0
    while True:
        try:
            message = pa.ipc.read_message(reader)
        except EOFError:
            return total
        if message is None:  # pragma: no cover - end of stream in older pyarrow
            return total
        if message.type == "record batch":
            body = memoryview(message.body) if message.body is not None else memoryview(b"")
            total += _batch_decoded_bytes(message.metadata.to_pybytes(), body)
