"""``OrderedFetcher``: what the ``Downloader`` and the ``MemoryFetcher`` share: ordered, bounded ranged GETs.

Both fetch an object in pieces (:func:`spans`: ranged GETs of ``piece_size`` bytes, a short first one when a
reader decodes while the object arrives) through one :class:`~litstream.storage._ordered.OrderedGate` per event
loop: at most ``max_concurrency`` requests and ``max_bytes_in_flight`` bytes in flight, requests served in
ticket order, so the object needed first arrives first. Every request of one object is queued before any of them
waits (no later object slips in between); a piece holds its slot until its response is in memory (or streamed
into place) and its bytes until they are in place. Where the bytes land is a :class:`PieceSink`: the
``Downloader``'s temporary cache file (``_transfer.py``) or the ``MemoryFetcher``'s buffer (``_memory_fetch.py``).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, TypeVar

import anyio
import anyio.lowlevel

from .._core._errors import StorageError
from ._base import MiB
from ._ordered import OrderedGate, Request
from ._upload import _positive, _single_errors

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ._base import Store
    from ._progress import Progress

__all__ = ["Once", "OrderedFetcher", "PieceSink", "spans"]

T = TypeVar("T")


def spans(size: int, piece: int, first_piece: int | None) -> list[tuple[int, int]]:
    """``(start, length)`` of the ranged GETs of an object of ``size`` bytes (one span for a small one).

    Every span but the last ends on a multiple of ``piece``: after a short first span (``first_piece``
    bytes, for an object read while it downloads; ``None``: a whole piece), the
    second one is shorter rather than every later one being shifted. A server that stores objects in
    blocks (SeaweedFS: of a few MiB) then serves each range from as few blocks as a whole-piece GET: with
    ranges shifted by 1 MiB it spent ~15 % more CPU for the same bytes (measured, bench/remote_cpu.py).
    """
    if size <= piece:
        return [(0, size)]
    first = min(first_piece, piece) if first_piece is not None else piece
    starts = [0, *([first] if first < piece else []), *range(piece, size, piece)]
    return [(start, end - start) for start, end in zip(starts, [*starts[1:], size], strict=True)]


class Once:
    """Calls ``callback`` (if any) the first time it is called; later calls do nothing."""

    def __init__(self, callback: Callable[[], object] | None) -> None:
        self._callback = callback

    def __call__(self) -> None:
        callback, self._callback = self._callback, None
        if callback is not None:
            callback()


class PieceSink:
    """Where the pieces of one object land; :meth:`stream` and :meth:`write` are the subclass's."""

    async def prepare(self, start: int, length: int) -> None:
        """Get bytes ``[start, start + length)`` ready to be written, once the piece's request holds its slot.
        Default: nothing."""

    async def stream(self, store: Store, name: str, start: int, length: int | None) -> int | None:
        """Stream the piece at ``start`` (``length`` bytes; ``None``: the whole object) from ``store`` straight
        into place and return how many bytes came, or ``None`` if ``store`` cannot: the piece is then fetched
        in one buffer and given to :meth:`write`."""
        raise NotImplementedError

    async def write(self, data: bytes | memoryview, start: int) -> None:
        """Put ``data`` (the piece, of the expected length) in place at offset ``start``."""
        raise NotImplementedError


class OrderedFetcher:
    """The request gate, tickets and piece transfers of a fetcher of ``store``'s objects (see the module docstring).

    It may serve successive event loops (one portal per epoch), one at a time. Its subclasses document the
    arguments (``Downloader``, ``MemoryFetcher``).

    Raises:
        ConfigurationError: a limit that is not an int >= 1.
    """

    def __init__(
        self,
        store: Store,
        *,
        max_concurrency: int = 8,
        max_bytes_in_flight: int = 256 * MiB,
        piece_size: int = 8 * MiB,
        first_piece: int = 1 * MiB,
    ) -> None:
        self._store = store
        self._max_concurrency = _positive("max_concurrency", max_concurrency)
        self._max_bytes = _positive("max_bytes_in_flight", max_bytes_in_flight)
        self._piece_size = _positive("piece_size", piece_size)
        self._first_piece = _positive("first_piece", first_piece)
        self._gate: tuple[object, OrderedGate] | None = None
        self._tickets = itertools.count()

    def ticket(self) -> int:
        """A priority for ``fetch``: requests of a smaller ticket are sent first. Tickets count up, so
        taking them in the order the objects are needed makes the fetches finish in that order."""
        return next(self._tickets)

    def limit_bytes_in_flight(self, nbytes: int) -> None:
        """Lower ``max_bytes_in_flight`` to ``nbytes`` (a reader's memory budget, ``read/engine/_memory.py``); it
        applies from the next event loop that fetches (a reader's next epoch or portal)."""
        self._max_bytes = min(self._max_bytes, _positive("max_bytes_in_flight", nbytes))

    @property
    def piece_size(self) -> int:
        """Bytes per ranged GET of a large object."""
        return self._piece_size

    def _loop_gate(self) -> OrderedGate:
        """The request gate of the running event loop (anyio primitives are loop-bound): a new one per loop."""
        token = anyio.lowlevel.current_token()
        if self._gate is None or self._gate[0] != token:
            self._gate = (token, OrderedGate(self._max_concurrency, self._max_bytes))
        return self._gate[1]

    @staticmethod
    async def _reported(run: Callable[[Once], Awaitable[T]], queued: Callable[[], object] | None,
                        progress: Progress | None) -> T:  # fmt: skip
        """``await run(once)``, where ``once`` calls ``queued`` at most once; it is called in any case by the end,
        and ``progress`` is told of a failure."""
        notify = Once(queued)
        try:
            return await run(notify)
        except BaseException as exc:
            if progress is not None:
                progress.failed(exc)
            raise
        finally:
            notify()

    async def _head_size(self, gate: OrderedGate, name: str, ticket: int) -> int:
        """The length of object ``name`` (a HEAD request, queued before the ticket's pieces)."""
        async with gate.hold((ticket, -1), 0):
            return (await self._store.head(name)).size

    async def _fetch_pieces(self, gate: OrderedGate, name: str, size: int, ticket: int, sink: PieceSink,
                            queued: Once, progress: Progress | None) -> None:  # fmt: skip
        """Fetch object ``name`` (``size`` bytes) into ``sink``: one whole GET if it fits one piece, else its
        :func:`spans`, all queued under ``ticket`` (then ``queued()``) before any waits.

        Raises:
            ObjectNotFoundError: the object does not exist.
            StorageError: the transfer failed, or a piece came with another length than asked for.
        """
        parts = spans(size, self._piece_size, self._first_piece if progress is not None else None)
        requests = [gate.enqueue((ticket, start), length) for start, length in parts]
        queued()
        try:
            if len(parts) == 1:
                await self._piece(gate, requests[0], name, sink, 0, size, True, progress)
            else:
                with _single_errors():
                    async with anyio.create_task_group() as tg:
                        for request, (start, length) in zip(requests, parts, strict=True):
                            tg.start_soon(self._piece, gate, request, name, sink, start, length, False, progress)
        finally:
            for request in requests:  # a piece that never ran (cancelled, or a sibling failed) leaves the queue
                gate.drop(request)

    async def _piece(self, gate: OrderedGate, request: Request, name: str, sink: PieceSink, start: int, length: int,
                     whole: bool, progress: Progress | None) -> None:  # fmt: skip
        """Fetch ``length`` bytes from offset ``start`` (the whole object if ``whole``) into ``sink``: streamed
        where the store and sink can, else answered in one buffer (without a copy where the store offers
        ``get_range_buffer``) and written.

        ``request``'s slot is held until the response is in memory (streamed: in place), its bytes until
        they are in place.
        """
        try:
            await gate.wait(request)
            await sink.prepare(start, length)
            data: bytes | memoryview | None = None
            received = await sink.stream(self._store, name, start, None if whole else length)
            if received is None:
                if whole:
                    data = await self._store.get(name)
                else:
                    buffered = getattr(self._store, "get_range_buffer", None)
                    data = await (buffered or self._store.get_range)(name, start, length)
                received = len(data)
            gate.free_slot(request)
            if received != length:
                raise StorageError(
                    f"download of {self._store.url}/{name}: expected {length} bytes at offset {start}, got "
                    f"{received}; the object changed or the size given (from index.json) is wrong"
                )
            if data is not None:
                await sink.write(data, start)
            if progress is not None:
                progress.landed(start, length)
        finally:
            gate.done(request)
