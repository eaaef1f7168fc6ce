"""Which layout a :class:`~litstream.write._writer.ChunkWriter` gives each sample: an Arrow row or a pytree item.

``chunk_format="arrow"`` makes every sample an Arrow row (one that cannot be one raises), ``"pytree"`` none.
The default (``None``) follows LitData 0.2.76's writer: a sample is stored as an Arrow row while the first
sample was a non-empty ``dict`` and every sample so far fits one Arrow table with the fused types
(:class:`~litstream.format.arrow._write.ArrowEncoder`'s checks), and pyarrow can be imported; from the
first sample that does not fit, every sample is a pytree item (LitData's fused type then holds a ``"json"``
field and its writer switches to pytree chunks for good). The writer turns the rows of the open chunk
into pytree items at that point (:meth:`Layout.pytree_item`), with the pytree format fixed by the first
sample, exactly as a pytree-only run would have fixed it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from .._core._errors import FormatError
from ..format.arrow._write import ArrowEncoder, pyarrow_available, snapshot

if TYPE_CHECKING:
    import threading

    from ..format._loaders import SampleEncoder
    from ..format._tokens import TokenEncoder

__all__ = ["EncodedSample", "Layout"]


class EncodedSample(NamedTuple):
    """One sample as :meth:`ChunkWriter.encode` made it: a pytree ``item`` (bytes) and its token ``dim``,
    or, for Arrow chunks, the row's estimated ``size`` and a ``row`` snapshot."""

    item: bytes
    dim: int | None
    size: int | None
    row: Any


class Layout:
    """The encode side of the Arrow-or-pytree choice (module docstring); thread-safe through ``lock``.

    Args:
        layout: ``"arrow"``, ``"pytree"`` or ``None`` (LitData's rule).
        eligible: Whether the writer's settings allow Arrow rows under ``None`` at all.
        encoder: The writer's pytree encoder.
        lock: The writer's encode lock (held by the caller of :meth:`row`).

    Attributes:
        schema: The Arrow rows' encoder (their fused types; kept after a fallback), or ``None``.
    """

    def __init__(
        self, layout: str | None, *, eligible: bool, encoder: SampleEncoder | TokenEncoder, lock: threading.Lock
    ) -> None:
        self._auto = layout is None
        self._arrow = ArrowEncoder() if layout == "arrow" or (self._auto and eligible) else None
        self.schema = self._arrow
        self._encoder = encoder
        self._lock = lock
        self._first: Any = None  # the first sample's row (auto), to fix the pytree format on a fallback
        self._primed = False

    @property
    def starts_with_rows(self) -> bool:
        """Whether the first samples may be Arrow rows."""
        return self.schema is not None

    def row(self, sample: Any) -> EncodedSample | None:
        """``sample`` as an Arrow row, or ``None`` when it is a pytree item; call with ``lock`` held.

        Raises:
            FormatError: ``chunk_format="arrow"`` and the sample cannot be an Arrow row.
        """
        if self._arrow is None:
            return None
        if not self._auto:
            return EncodedSample(b"", None, self._arrow.add(sample), snapshot(sample))
        if self._first is None and not (isinstance(sample, dict) and sample and pyarrow_available()):
            self._arrow = None
            return None
        try:
            size = self._arrow.add(sample)
        except FormatError:  # LitData's "json" type: not an Arrow column; pytree from here on
            self._arrow = None
            self._prime()
            return None
        row = snapshot(sample)
        if self._first is None:
            self._first = row
        return EncodedSample(b"", None, size, row)

    def pytree_item(self, row: Any) -> tuple[bytes, int | None]:
        """An Arrow row of the open chunk encoded as a pytree item after a fallback (takes ``lock``).

        Raises:
            FormatError: the row does not fit the pytree format of the first sample (a pytree-only run
                would have refused the same sample).
        """
        with self._lock:
            self._prime()
            item, dim = self._encoder.encode_item(row)
        return bytes(item), dim or None

    def _prime(self) -> None:
        """Let the pytree encoder see the first sample first: it fixes data_format as a pytree-only run."""
        if not self._primed:
            self._primed = True
            if self._first is not None:
                self._encoder.encode_item(self._first)
