"""zstd compression of chunks with LitData's names and its three granularities (LitData >= 0.2.76).

``compression`` names the codec and level: ``"zstd"`` (level 4) or ``"zstd:1"`` … ``"zstd:22"``.
``compression_level`` says what one zstd frame holds (the byte layouts live in :mod:`._framed`):

    ``"chunk"``   the whole chunk file is one frame; the file name gains the ``.{compression}`` infix
                  (``chunk-0-3.zstd.bin``) and ``index.json``'s ``chunk_bytes`` is the length BEFORE
                  compression. The only layout of LitData <= 0.2.75; ``index.json`` then records no
                  ``compression_level`` (a missing or null key means ``"chunk"``).
    ``"batch"``   ``chunk-0-3.bin`` holds a small uncompressed directory and one frame per
                  ``compression_batch_size`` items (default 256); ``chunk_bytes`` is the file length.
                  LitData 0.2.76's default when ``compression`` is given without a level.
    ``"sample"``  the classic chunk header, each item its own frame; ``chunk_bytes`` is the file length.

Decompression is bounded: a frame may not produce more bytes than ``index.json`` (or the framed
directory, checked against its offsets) records for it, and a frame that does not record its size is
inflated in steps and stopped at the bound. A frame that claims or expands past its bound raises
:class:`~litstream.FormatError` before the memory is taken.
Uses the ``zstandard`` package (install ``litstream[zstd]``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._core._errors import ConfigurationError, FormatError
from .._core._optional import optional_module

if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import ModuleType

__all__ = [
    "COMPRESSION_LEVELS",
    "DEFAULT_BATCH_SIZE",
    "MAX_FRAME_BYTES",
    "SUPPORTED_COMPRESSIONS",
    "Compression",
    "compress",
    "compression_from_config",
    "decompress",
    "inflate",
    "resolve_compression",
    "validate_compression",
]

_DEFAULT_LEVEL = 4
SUPPORTED_COMPRESSIONS: tuple[str, ...] = ("zstd", *(f"zstd:{level}" for level in range(1, 23)))
COMPRESSION_LEVELS: tuple[str, ...] = ("chunk", "batch", "sample")
DEFAULT_BATCH_SIZE = 256
#: Bound for a frame whose size nothing records (per-sample items): 1 GiB. Larger items need "chunk" or "batch".
MAX_FRAME_BYTES = 1 << 30
_STEP = 1 << 20


def _zstandard() -> ModuleType:
    return optional_module("zstandard", "compression='zstd' needs the zstandard package: pip install 'litstream[zstd]'")


def validate_compression(compression: str | None) -> int | None:
    """Return the zstd level for ``compression`` (``None`` for no compression).

    Raises:
        ConfigurationError: an unknown name; the message lists the supported ones.
    """
    if compression is None:
        return None
    if compression not in SUPPORTED_COMPRESSIONS:
        raise ConfigurationError(
            f"compression={compression!r} is not supported; use None, 'zstd' (level {_DEFAULT_LEVEL}) or "
            "'zstd:N' with N in 1..22"
        )
    _zstandard()
    return _DEFAULT_LEVEL if compression == "zstd" else int(compression.split(":")[1])


@dataclass(frozen=True)
class Compression:
    """How a dataset's chunks are compressed.

    Attributes:
        name: ``"zstd"`` or ``"zstd:N"`` (``index.json``'s ``compression``).
        level: ``"chunk"``, ``"batch"`` or ``"sample"`` (``compression_level``; see the module docstring).
        batch_size: Items per frame for ``"batch"`` (``compression_batch_size``), else ``None``.
    """

    name: str
    level: str = "chunk"
    batch_size: int | None = None

    @property
    def whole_file(self) -> bool:
        """True when the chunk file is one frame (``"chunk"``): ``.{name}`` infix, decompress before use."""
        return self.level == "chunk"

    def config_keys(self) -> dict[str, Any]:
        """``compression``, ``compression_level`` and ``compression_batch_size`` as LitData 0.2.76 records them."""
        return {
            "compression": self.name,
            "compression_level": None if self.level == "chunk" else self.level,
            "compression_batch_size": self.batch_size if self.level == "batch" else None,
        }


def resolve_compression(
    compression: str | None,
    compression_level: str | None = None,
    compression_batch_size: int | None = None,
    *,
    default_level: str = "batch",
) -> Compression | None:
    """Validate the write arguments (LitData's names and rules) and return what to write.

    Args:
        compression: ``None``, ``"zstd"`` or ``"zstd:N"``.
        compression_level: ``"chunk"``, ``"batch"`` or ``"sample"``; ``None`` means ``default_level``
            (``"batch"``, as in LitData 0.2.76).
        compression_batch_size: Items per frame for ``"batch"`` (default 256).
        default_level: The level when none is given (TokensLoader datasets pass ``"chunk"``).

    Raises:
        ConfigurationError: an unknown name or level, a batch size that is not a positive int, or a
            level or batch size without ``compression``.
    """
    if compression_batch_size is not None and (
        isinstance(compression_batch_size, bool)
        or not isinstance(compression_batch_size, int)
        or compression_batch_size < 1
    ):
        raise ConfigurationError(
            f"compression_batch_size must be a positive int (items per zstd frame), got {compression_batch_size!r}"
        )
    if compression is None:
        if compression_level is not None or compression_batch_size is not None:
            raise ConfigurationError(
                f"compression_level={compression_level!r} and compression_batch_size={compression_batch_size!r} "
                "need compression='zstd' (or 'zstd:N'); pass compression too or drop them"
            )
        return None
    validate_compression(compression)
    level = default_level if compression_level is None else compression_level
    if level not in COMPRESSION_LEVELS:
        raise ConfigurationError(
            f"compression_level={compression_level!r} is not supported; use 'chunk', 'batch' or 'sample' "
            "(the zstd level goes in compression='zstd:N')"
        )
    if compression_batch_size is not None and level != "batch":
        raise ConfigurationError(
            f"compression_batch_size={compression_batch_size} only applies to compression_level='batch', not {level!r}"
        )
    batch = (compression_batch_size or DEFAULT_BATCH_SIZE) if level == "batch" else None
    return Compression(compression, level, batch)


def compression_from_config(config: Mapping[str, Any]) -> Compression | None:
    """What ``index.json``'s config says about compression (``None``: chunks are not compressed).

    A missing or null ``compression_level`` means ``"chunk"`` (every index written before LitData 0.2.76).

    Raises:
        FormatError: an unknown codec or level, or an invalid batch size.
    """
    name = config.get("compression")
    if name is None:
        return None
    level = config.get("compression_level") or "chunk"
    batch = config.get("compression_batch_size")
    if name not in SUPPORTED_COMPRESSIONS:
        raise FormatError(f"index.json config has compression={name!r}, which litstream cannot read; "
                          f"it reads {', '.join(SUPPORTED_COMPRESSIONS[:2])}, ... 'zstd:22'")  # fmt: skip
    if level not in COMPRESSION_LEVELS:
        raise FormatError(
            f"index.json config has compression_level={level!r}, which litstream cannot read; it reads "
            f"{', '.join(map(repr, COMPRESSION_LEVELS))}"
        )
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        raise FormatError(f"index.json config has compression_batch_size={batch!r}; expected a positive int")
    return Compression(name, level, batch if level == "batch" else None)


def compress(data: bytes | memoryview, compression: str) -> bytes:
    """Compress bytes into one zstd frame that records its content size."""
    level = validate_compression(compression)
    return bytes(_zstandard().ZstdCompressor(level=level).compress(data))


def inflate(data: bytes | memoryview, *, limit: int, expected: int | None = None, what: str = "chunk") -> bytes:
    """Decompress zstd frame(s) into at most ``limit`` bytes (exactly ``expected`` when given).

    The size a frame header claims is checked before any output is allocated; a frame that records no
    size is inflated in 1 MiB steps and stopped at ``limit + 1`` bytes.

    Args:
        data: One or more concatenated zstd frames.
        limit: The most bytes the output may hold.
        expected: The exact output length, when the index records it.
        what: Names the data in error messages (``"chunk-0-3.zstd.bin"``, ``"item 5 of ..."``).

    Raises:
        FormatError: not zstd, corrupt, or the output would exceed ``limit`` or differ from ``expected``.
    """
    zstandard = _zstandard()
    if expected is not None and expected > limit:
        raise FormatError(f"{what}: the index records {expected} bytes, more than the {limit} bytes allowed")
    bound = limit if expected is None else expected
    try:
        declared = zstandard.get_frame_parameters(data).content_size
    except zstandard.ZstdError as exc:
        raise FormatError(f"{what} is not a valid zstd frame: {exc}") from exc
    known = declared != zstandard.CONTENTSIZE_UNKNOWN
    if known and declared > bound:
        raise FormatError(
            f"{what}: its zstd frame claims {declared} bytes, more than the {bound} bytes the index allows; "
            "the file is corrupt or not from this dataset"
        )
    reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
    try:
        # A claimed size (checked above) is read at once; after it, or without one, output grows in
        # steps that stop one byte past the bound, so memory follows what the data really holds.
        out = reader.read(declared) if known and declared > 0 else b""
        extra = reader.read(1)
        if extra:
            parts = bytearray(out) + extra
            while len(parts) <= bound:
                piece = reader.read(min(_STEP, bound + 1 - len(parts)))
                if not piece:
                    break
                parts += piece
            out = bytes(parts)
    except zstandard.ZstdError as exc:
        raise FormatError(f"{what} is not a valid zstd frame: {exc}") from exc
    if len(out) > bound:
        raise FormatError(
            f"{what}: zstd data expands past the {bound} bytes the index allows; the file is corrupt or not "
            "from this dataset"
        )
    if expected is not None and len(out) != expected:
        raise FormatError(f"{what}: zstd data expands to {len(out)} bytes but the index records {expected}")
    return out


def decompress(
    data: bytes | memoryview, compression: str, *, limit: int = 2**32 - 1, expected: int | None = None
) -> bytes:
    """Decompress a whole-file (``"chunk"`` level) chunk written by LitData or litstream.

    Args:
        data: The file's bytes.
        compression: The config's ``compression`` name.
        limit: The most bytes the chunk may hold (default: the format's 4 GiB offset limit).
        expected: ``index.json``'s ``chunk_bytes`` for this chunk, when known.

    Raises:
        FormatError: see :func:`inflate`. ConfigurationError: unknown ``compression``.
    """
    validate_compression(compression)
    return inflate(data, limit=limit, expected=expected, what=f"chunk ({compression})")
