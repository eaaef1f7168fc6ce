"""Local compressed datasets that LitData has read: its chunks decompressed in place.

LitData 0.2.76 reads a local compressed dataset from the dataset folder itself (its cache is that
folder): each whole-file compressed chunk ``chunk-0-0.zstd.bin`` is decompressed next to it, as
``chunk-0-0.bin`` (the index's name without ``.<compression>``, published with an atomic rename), and
the compressed file is then removed. ``index.json`` keeps naming the compressed file. Afterwards the
folder holds the decompressed file, or both for a moment. litstream reads the decompressed file when it
is there (as LitData does), and the compressed one otherwise; the decompressed bytes get the checks of
any uncompressed chunk (length against ``chunk_bytes``, item count, offsets).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...storage._files import local_path, map_object

if TYPE_CHECKING:
    import mmap
    from pathlib import Path

__all__ = ["decompressed_in_place"]


def decompressed_in_place(store: object, filename: str, compression: str) -> tuple[bytes | mmap.mmap, Path] | None:
    """The decompressed copy LitData left next to the local chunk ``filename``, mapped; else ``None``.

    Args:
        store: The dataset's store (only a store keeping local files can hold such a copy).
        filename: The chunk's name in ``index.json`` (for example ``chunk-0-0.zstd.bin``).
        compression: The index's ``compression`` (for example ``"zstd"``).

    Raises:
        StorageError: the copy exists but cannot be opened or mapped.
    """
    plain = filename.replace(f".{compression}", "")
    if plain == filename or "/" in plain or plain.startswith("."):
        return None
    path = local_path(store, plain)
    if path is None or not path.is_file():
        return None
    return map_object(store, plain)
