"""Reusable shared-memory slots that carry a worker's batch tensors to the main process.

torch sends each tensor of a batch from a DataLoader worker in shared memory of its own: the worker
creates (``posix_fallocate``), fills and later frees fresh pages for every batch, and the main
process receives every tensor's file descriptor over a socket (a connection and an HMAC handshake
with the worker's ``resource_sharer`` thread, per tensor). With ``num_workers > 0`` that, not
decoding, is most of an epoch's time for batches of small arrays.

Instead each worker keeps a ring of ``slots`` slots in one shared-memory block, allocated on its
first batch (sized for that batch, with headroom) and sent to the main process once (again, larger,
if a later batch does not fit). The worker
copies a batch's tensors into a free slot and sends a :class:`SlotBatch` (the batch with each
tensor replaced by its place in the slot); the main process copies the tensors out into tensors of
its own and frees the slot. So no user-visible tensor ever shares memory with a slot, and a slot is
reused only after its copy is done.

Free slots are counted by one ``multiprocessing`` semaphore per worker, created by the loader before
the workers start (so it exists in fork, spawn and forkserver workers alike). The worker takes a
slot without waiting: when none is free (the main process holds them all, or stopped), or the batch
holds no tensor, the batch goes by torch's own path unchanged. A worker's
batches reach the main process in the order it built them, so its slots are used and freed in ring
order. The block is torch shared memory (``file_descriptor`` strategy): its name is unlinked as
soon as it is created, so nothing is left in ``/dev/shm`` whatever way the epoch ends.
"""

from __future__ import annotations

import itertools
import sys
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

if TYPE_CHECKING:
    from collections.abc import Callable
    from multiprocessing.synchronize import Semaphore

__all__ = ["ScratchPool", "SlotAlloc", "SlotBatch", "SlotExchange", "SlotPacker", "SlotStatistics"]

_ALIGN = 64  # every tensor starts on a cache line (and is aligned for any dtype)
_HEADROOM = 1.25  # a slot holds the bytes of the batch it was sized for times this
_PAGE = 4096

_ids = itertools.count(1)
_lock = threading.Lock()
_EXCHANGES: dict[int, SlotExchange] = {}  # main process: the loader iterations that are running
_PACKER: list[tuple[SlotPacker, int] | None] = [None]  # a worker: its packer and id, once it packed a batch


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


@dataclass(frozen=True)
class SlotStatistics:
    """What the slots of a loader carried (``StreamingDataLoader.slot_statistics()``), over its iterations.

    Attributes:
        batches: Batches copied out of a slot in this process (the others came by torch's own path).
        semaphores: The ``/dev/shm`` file names (``sem.<name>``) of the free-slot semaphores created: spawn
            and forkserver semaphores are named until freed; fork's are unnamed and not listed.
    """

    batches: int = 0
    semaphores: tuple[str, ...] = ()

    def __add__(self, other: SlotStatistics) -> SlotStatistics:
        return SlotStatistics(self.batches + other.batches, self.semaphores + other.semaphores)


@dataclass
class SlotExchange:
    """The main process's side of one loader iteration: each worker's free-slot semaphore and block.

    Created by the loader before its workers start (the semaphores travel to the workers inside the
    collate function); :meth:`close` forgets the blocks (their memory is freed with the last tensor
    view) when the iteration ends.
    """

    free: list[Semaphore]
    slots: int
    id: int = field(default_factory=lambda: next(_ids))
    blocks: dict[int, torch.UntypedStorage] = field(default_factory=dict)
    unpacked: int = 0  # batches copied out of a slot

    def statistics(self) -> SlotStatistics:
        """The batches unpacked so far and the semaphores' ``/dev/shm`` names (see :class:`SlotStatistics`)."""
        names = (getattr(getattr(s, "_semlock", None), "name", None) for s in self.free)
        return SlotStatistics(self.unpacked, tuple("sem." + name.lstrip("/") for name in names if name))

    def open(self) -> None:
        with _lock:
            _EXCHANGES[self.id] = self

    def close(self) -> None:
        with _lock:
            _EXCHANGES.pop(self.id, None)
        self.blocks.clear()


@dataclass
class _Leaf:
    """Where one tensor of a batch lies in a slot."""

    offset: int
    dtype: torch.dtype
    shape: tuple[int, ...]


@dataclass
class SlotBatch:
    """A batch whose tensors are in slot ``slot`` of worker ``worker``'s block (picklable, small).

    ``block`` is the worker's whole block on the first batch it sends (torch shares it once), else
    ``None``. :meth:`unpack` (or ``pin_memory``, which torch's pin-memory thread calls) returns the
    batch with tensors of this process and frees the slot.
    """

    exchange: int
    worker: int
    slot: int
    skeleton: Any  # the batch, each tensor replaced by a _Leaf
    block: torch.UntypedStorage | None = field(default=None, repr=False)

    def unpack(self, pinned: bool = False) -> Any:
        """The batch, its tensors copied out of the slot; frees the slot (call once)."""
        with _lock:
            exchange = _EXCHANGES.get(self.exchange)
            if exchange is not None:
                exchange.unpacked += 1
        if exchange is None:  # the iteration already ended: nothing to free, nobody to hand it to
            raise RuntimeError("a batch of a finished DataLoader iteration was unpacked")
        if self.block is not None:
            exchange.blocks[self.worker] = self.block
        block = exchange.blocks[self.worker]
        try:
            raw = torch.empty(0, dtype=torch.uint8).set_(block)
            return _map(self.skeleton, _Leaf, lambda leaf: _copy_out(raw, leaf, pinned))
        finally:
            exchange.free[self.worker].release()

    def pin_memory(self, device: Any = None) -> Any:
        """The batch in pinned memory (torch's pin-memory thread calls this)."""
        return self.unpack(pinned=True)


def _copy_out(raw: torch.Tensor, leaf: _Leaf, pinned: bool) -> torch.Tensor:
    out = torch.empty(leaf.shape, dtype=leaf.dtype, pin_memory=pinned)
    nbytes = out.nbytes
    if nbytes:
        # numpy's copy: one thread (torch's would wake its intra-op pool, which spins on the workers' cores)
        np.copyto(_bytes(out), raw[leaf.offset : leaf.offset + nbytes].numpy())
    return out


def _bytes(tensor: torch.Tensor) -> np.ndarray[Any, Any]:
    """The bytes of a contiguous tensor, as a numpy array over its memory (any dtype, even bfloat16)."""
    return tensor.reshape(-1).view(torch.uint8).numpy()


def _map(batch: Any, kind: type[Any], fn: Callable[[Any], Any]) -> Any:
    """``batch`` with ``fn`` applied to its ``kind`` leaves at the top of a flat dict / list / tuple
    (or to ``batch`` itself when it is one)."""
    form = type(batch)
    if form is dict:
        return {key: fn(value) if isinstance(value, kind) else value for key, value in batch.items()}
    if form is list or form is tuple:
        return form(fn(value) if isinstance(value, kind) else value for value in batch)
    return fn(batch) if isinstance(batch, kind) else batch


def _tensors(batch: Any) -> list[torch.Tensor]:
    kind = type(batch)
    values = batch.values() if kind is dict else batch if kind is list or kind is tuple else (batch,)
    return [value for value in values if isinstance(value, torch.Tensor)]


def _fits(tensor: torch.Tensor) -> bool:
    return (
        type(tensor) is torch.Tensor
        and tensor.device.type == "cpu"
        and tensor.layout == torch.strided
        and not tensor.requires_grad
        and not tensor.is_quantized
        and not tensor.is_conj()
        and not tensor.is_neg()
    )


class SlotPacker:
    """The worker's side: packs batches into its ring of slots (picklable before the worker starts)."""

    def __init__(self, exchange: SlotExchange) -> None:
        self.exchange = exchange.id
        self.free = exchange.free
        self.slots = exchange.slots
        self._reset()

    def _reset(self) -> None:
        self._block: torch.UntypedStorage | None = None
        self._slot_bytes = 0
        self._next = 0
        self._sent = False
        self._off = False
        self._reserved = False  # the next slot is taken (its semaphore acquired) by reserve()

    def reserve(self, worker: int, nbytes: int) -> np.ndarray[Any, Any] | None:
        """The first ``nbytes`` of this worker's next slot, taken now for the next :meth:`pack` (which then
        finds a tensor decoded there in place and does not copy it); ``None`` when no slot is free, one is
        already taken, or the slot is too small."""
        if self._off or self._reserved or self._block is None or nbytes > self._slot_bytes:
            return None
        if not self.free[worker].acquire(block=False):
            return None
        self._reserved = True
        base = self._next * self._slot_bytes
        return torch.empty(0, dtype=torch.uint8).set_(self._block)[base : base + nbytes].numpy()

    def __getstate__(self) -> dict[str, Any]:
        return {"exchange": self.exchange, "free": self.free, "slots": self.slots}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._reset()

    def pack(self, worker: int, batch: Any) -> Any:
        """A :class:`SlotBatch` of ``batch`` in this worker's next slot, or ``batch`` itself (torch's
        path) when it holds no tensor or no slot is free right now."""
        _PACKER[0] = (self, worker)
        reserved, self._reserved = self._reserved, False
        tensors = _tensors(batch)
        if self._off or not tensors or not all(_fits(t) for t in tensors):
            if reserved:
                self.free[worker].release()
            return batch
        if reserved and self._block is not None:  # a block decoded into the slot (reserve) stays at its start
            at = self._block.data_ptr() + self._next * self._slot_bytes
            tensors.sort(key=lambda t: t.data_ptr() != at)  # stable: the others follow in batch order
        offsets: list[int] = []
        total = 0
        for tensor in tensors:
            offsets.append(total)
            total += _round_up(tensor.nbytes, _ALIGN)
        if self._block is None and torch.multiprocessing.get_sharing_strategy() != "file_descriptor":  # type: ignore[no-untyped-call]
            # "file_system" memory is a named file that outlives a crash: keep torch's own path
            self._off = True
            return batch
        if not reserved and not self.free[worker].acquire(block=False):
            return batch
        if self._block is None or total > self._slot_bytes:
            # The first batch, or one larger than a slot: a new block, sent with this batch. The main
            # process has copied out every earlier batch of this worker when it receives this one
            # (a worker's batches arrive in order), so it then drops the old block.
            self._slot_bytes = _round_up(max(int(total * _HEADROOM), _PAGE), _PAGE)
            self._block = torch.UntypedStorage._new_shared(self._slot_bytes * self.slots)  # type: ignore[no-untyped-call]
            self._next = 0
            self._sent = False
        slot = self._next
        try:
            leaves = self._fill(slot * self._slot_bytes, tensors, offsets)
        except BaseException:
            self.free[worker].release()  # the slot was not used: the ring order is unchanged
            raise
        self._next = (slot + 1) % self.slots
        skeleton = _map(batch, torch.Tensor, lambda t: leaves[id(t)])
        block = None if self._sent else self._block
        self._sent = True
        return SlotBatch(self.exchange, worker, slot, skeleton, block)

    def _fill(self, base: int, tensors: list[torch.Tensor], offsets: list[int]) -> dict[int, _Leaf]:
        """Copy ``tensors`` to their ``offsets`` in the slot at byte ``base``; their leaves by ``id``."""
        assert self._block is not None
        raw = torch.empty(0, dtype=torch.uint8).set_(self._block)
        leaves: dict[int, _Leaf] = {}
        for tensor, offset in zip(tensors, offsets, strict=True):
            start = base + offset
            nbytes = tensor.nbytes
            if nbytes and tensor.is_contiguous() and tensor.data_ptr() == raw.data_ptr() + start:
                pass  # decoded in place (reserve)
            elif nbytes and tensor.is_contiguous():
                np.copyto(raw[start : start + nbytes].numpy(), _bytes(tensor))
            elif nbytes:
                raw[start : start + nbytes].view(tensor.dtype).view(tensor.shape).copy_(tensor)
            leaves[id(tensor)] = _Leaf(start, tensor.dtype, tuple(tensor.shape))
        return leaves


class ScratchPool:
    """Reusable private memory for the blocks a worker decodes (its ``alloc``; see ``format._batch_decode``).

    A worker whose batches go through slots copies each batch into a slot, after which the decoded
    block is garbage: decoding the next batch into the same memory saves the page faults and zeroing
    of a new multi-megabyte array per batch. A buffer is handed out again only when nothing refers to
    it any more: every array, tensor or memoryview over its memory holds a reference to it (counted
    by ``sys.getrefcount``), so memory that a sample, a batch or a user's transform still holds is
    never reused. At most ``size`` buffers are kept; beyond that, blocks are new arrays.
    """

    def __init__(self, size: int = 2) -> None:
        self.size = size
        self._buffers: list[np.ndarray[Any, Any]] = []
        # The count of a buffer that only the list refers to, measured the way __call__ measures it
        # (what getrefcount adds for its argument varies across Python versions).
        probe = [np.empty(0, dtype=np.uint8)]
        self._alone = sys.getrefcount(probe[0])

    def __call__(self, nbytes: int) -> np.ndarray[Any, Any]:
        """A writable uint8 array of ``nbytes`` (its ``base`` is not an array: ``format._batch_decode``
        and ``_collate`` recognise the rows decoded into it)."""
        buffers = self._buffers
        chosen = -1
        for k in range(len(buffers)):
            if sys.getrefcount(buffers[k]) == self._alone:  # only this list refers to it
                chosen = k
                if buffers[k].nbytes >= nbytes:
                    break
        if chosen >= 0 and buffers[chosen].nbytes < nbytes:
            buffers[chosen] = np.empty(nbytes, dtype=np.uint8)  # a free buffer too small: grow it
        elif chosen < 0:
            buffer = np.empty(nbytes, dtype=np.uint8)
            if len(buffers) >= self.size:
                return buffer
            buffers.append(buffer)
            chosen = len(buffers) - 1
        return np.frombuffer(buffers[chosen].data[:nbytes], dtype=np.uint8)


class SlotAlloc:
    """A worker's ``alloc`` for column batches (``format._batch_decode``): a decoded block goes straight into
    the next slot (:meth:`SlotPacker.reserve`), so the batch reaches its slot without a copy; else ``fallback``.
    Only for batches that no user code sees before they are packed: the slot is overwritten once the main
    process has copied the batch out."""

    def __init__(self, fallback: Callable[[int], np.ndarray[Any, Any]]) -> None:
        self.fallback = fallback

    def __call__(self, nbytes: int) -> np.ndarray[Any, Any]:
        packer = _PACKER[0]
        block = None if packer is None else packer[0].reserve(packer[1], nbytes)
        return self.fallback(nbytes) if block is None else block
