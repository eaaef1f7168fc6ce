"""NUMA affinity plans for data-loading processes: LitData 0.2.76's ``NumaAffinity`` and its two helpers.

A plan names a NUMA node and the CPUs of it this process may use. ``bind()`` pins the calling thread
(and the threads and processes it starts later) to those CPUs and, by default, binds its future memory
allocations to the node (``set_mempolicy(MPOL_BIND)`` through ``libnuma.so.1``). The plan is picklable
and callable with a worker id, so it can be a DataLoader's ``worker_init_fn``. Linux only; topology
comes from ``/sys/devices/system/node`` and, for a GPU, from its PCI device's ``numa_node``.
"""

from __future__ import annotations

import ctypes
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = ["NumaAffinity", "get_gpu_affinity", "get_numa_affinity"]

_NODES = Path("/sys/devices/system/node")
_PCI = Path("/sys/bus/pci/devices")
_MPOL_BIND = 2
_WORD_BITS = ctypes.sizeof(ctypes.c_ulong) * 8


def _linux_only() -> None:
    if sys.platform != "linux" or not hasattr(os, "sched_setaffinity"):
        raise RuntimeError("NUMA affinity needs Linux (os.sched_setaffinity); this platform has none")


def parse_id_list(text: str) -> set[int]:
    """The ids of a kernel list such as ``"0-3,8,10-11"`` (cpulist, Mems_allowed_list).

    Raises:
        ValueError: a part is not ``N`` or ``N-M`` with ``0 <= N <= M``.
    """
    ids: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        low, sep, high = part.partition("-")
        try:
            start, end = int(low), int(high if sep else low)
        except ValueError:
            raise ValueError(f"invalid CPU or NUMA node list entry {part!r} in {text.strip()!r}") from None
        if start < 0 or end < start or "-" in high:
            raise ValueError(f"invalid CPU or NUMA node list entry {part!r} in {text.strip()!r}")
        ids.update(range(start, end + 1))
    return ids


def _node_cpus(node: int) -> set[int]:
    if isinstance(node, bool) or not isinstance(node, int) or node < 0:
        raise ValueError(f"numa_node must be an int >= 0, got {node!r}")
    try:
        return parse_id_list((_NODES / f"node{node}" / "cpulist").read_text())
    except OSError as exc:
        raise RuntimeError(f"NUMA node {node} has no CPU list in {_NODES} ({exc})") from None


def _allowed_memory_nodes() -> set[int]:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("Mems_allowed_list:"):
            return parse_id_list(line.partition(":")[2])
    raise RuntimeError("/proc/self/status has no Mems_allowed_list: cannot check the NUMA memory nodes")


def _libnuma() -> Any:
    try:
        lib = ctypes.CDLL("libnuma.so.1", use_errno=True)
    except OSError:
        raise RuntimeError(
            "binding memory to a NUMA node needs libnuma.so.1 (Debian/Ubuntu package libnuma1); "
            "install it or pass bind_memory=False"
        ) from None
    mask_ptr = ctypes.POINTER(ctypes.c_ulong)
    mode_ptr = ctypes.POINTER(ctypes.c_int)
    lib.get_mempolicy.argtypes = [mode_ptr, mask_ptr, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong]
    lib.get_mempolicy.restype = ctypes.c_int
    lib.set_mempolicy.argtypes = [ctypes.c_int, mask_ptr, ctypes.c_ulong]
    lib.set_mempolicy.restype = ctypes.c_int
    return lib


def _empty_mask() -> Any:
    possible = parse_id_list((_NODES / "possible").read_text())
    bits = max(1024, max(possible, default=0) + 1)
    return (ctypes.c_ulong * ((bits + _WORD_BITS - 1) // _WORD_BITS))()


def _get_policy(lib: Any) -> tuple[int, tuple[int, ...]]:
    mask = _empty_mask()
    mode = ctypes.c_int()
    if lib.get_mempolicy(ctypes.byref(mode), mask, ctypes.sizeof(mask) * 8, None, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"get_mempolicy failed: {os.strerror(err)}")
    return mode.value, tuple(mask)


def _set_policy(lib: Any, policy: tuple[int, tuple[int, ...]]) -> None:
    mode, words = policy
    mask = (ctypes.c_ulong * len(words))(*words)
    if lib.set_mempolicy(mode, mask if any(words) else None, ctypes.sizeof(mask) * 8) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"set_mempolicy failed: {os.strerror(err)}")


@dataclass(frozen=True)
class NumaAffinity:
    """A CPU (and optional memory) binding to one NUMA node; picklable, usable as ``worker_init_fn``.

    Build it with :func:`get_numa_affinity` or :func:`get_gpu_affinity` in the rank process, call
    :meth:`bind` there before starting workers, and pass the object as a DataLoader's
    ``worker_init_fn`` to bind each worker too. Only the calling thread and what it starts afterwards
    are affected; threads already running and memory already allocated stay where they are.

    Attributes:
        numa_node: The node (``>= 0``).
        cpus: CPU ids on that node, sorted.
        bind_memory: Also bind future allocations to the node (default ``True``; needs libnuma.so.1).
    """

    numa_node: int
    cpus: tuple[int, ...]
    bind_memory: bool = True

    def bind(self) -> None:
        """Apply the binding and check the kernel applied it; on failure the previous binding is restored.

        Raises:
            RuntimeError: not Linux, no topology, the node outside the allowed memory nodes, no
                libnuma.so.1 (with ``bind_memory``), or the kernel applied a different mask.
            ValueError: ``cpus`` empty, not ints, or not all on ``numa_node``.
            OSError: the kernel refused the memory policy.
        """
        _linux_only()
        node_cpus = _node_cpus(self.numa_node)
        if not self.cpus or any(isinstance(c, bool) or not isinstance(c, int) for c in self.cpus):
            raise ValueError(f"cpus must be a non-empty tuple of int CPU ids, got {self.cpus!r}")
        if not set(self.cpus) <= node_cpus:
            raise ValueError(f"cpus {sorted(set(self.cpus) - node_cpus)} are not on NUMA node {self.numa_node}")
        saved_cpus = os.sched_getaffinity(0)
        lib: Any = None
        saved_policy: tuple[int, tuple[int, ...]] | None = None
        wanted: tuple[int, tuple[int, ...]] | None = None
        if self.bind_memory:
            if self.numa_node not in _allowed_memory_nodes():
                raise RuntimeError(f"NUMA node {self.numa_node} is not among this process's allowed memory nodes")
            lib = _libnuma()
            saved_policy = _get_policy(lib)
            mask = _empty_mask()
            mask[self.numa_node // _WORD_BITS] |= 1 << (self.numa_node % _WORD_BITS)
            wanted = (_MPOL_BIND, tuple(mask))
        try:
            os.sched_setaffinity(0, self.cpus)
            if os.sched_getaffinity(0) != set(self.cpus):
                raise RuntimeError(f"the kernel did not apply the CPU mask {list(self.cpus)}")
            if lib is not None and wanted is not None:
                _set_policy(lib, wanted)
                if _get_policy(lib) != wanted:
                    raise RuntimeError(f"the kernel did not apply the memory binding to node {self.numa_node}")
        except BaseException:
            try:
                if lib is not None and saved_policy is not None:
                    _set_policy(lib, saved_policy)
            finally:
                os.sched_setaffinity(0, saved_cpus)
            raise

    def __call__(self, worker_id: int) -> None:
        """``worker_init_fn`` form: :meth:`bind` (``worker_id`` unused; CUDA is not touched)."""
        self.bind()


def get_numa_affinity(numa_node: int, *, bind_memory: bool = True) -> NumaAffinity:
    """A plan for ``numa_node``: its CPUs that this thread may currently use. Binds nothing.

    Raises:
        RuntimeError: not Linux, no topology for the node, or none of its CPUs is usable here.
        ValueError: ``numa_node`` is not an int ``>= 0``.
    """
    _linux_only()
    cpus = _node_cpus(numa_node) & os.sched_getaffinity(0)
    if not cpus:
        raise RuntimeError(f"none of NUMA node {numa_node}'s CPUs is in this process's CPU affinity")
    return NumaAffinity(numa_node, tuple(sorted(cpus)), bind_memory)


def get_gpu_affinity(device: torch.device | str | int | None = None, *, bind_memory: bool = True) -> NumaAffinity:
    """A plan for the NUMA node closest to CUDA ``device`` (its PCI device's ``numa_node``). Binds nothing.

    Call it in the rank process (it initialises CUDA and honours ``CUDA_VISIBLE_DEVICES``), not in a
    DataLoader worker, and hand the plan to the workers.

    Raises:
        RuntimeError: called in a DataLoader worker, not Linux, a PyTorch without PCI ids in its CUDA
            device properties (use :func:`get_numa_affinity`), or no NUMA node exposed for the GPU.
    """
    _linux_only()
    import torch

    if torch.utils.data.get_worker_info() is not None:
        raise RuntimeError("call get_gpu_affinity in the rank process and pass the plan to the DataLoader workers")
    props: Any = torch.cuda.get_device_properties(device)
    try:
        pci = f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    except AttributeError:
        raise RuntimeError(
            "this PyTorch does not expose the GPU's PCI ids; call get_numa_affinity(numa_node) instead"
        ) from None
    try:
        node = int((_PCI / pci / "numa_node").read_text())
    except OSError as exc:
        raise RuntimeError(f"no NUMA topology for GPU PCI device {pci} ({exc})") from None
    if node < 0:
        raise RuntimeError(f"the kernel exposes no NUMA node for GPU PCI device {pci}")
    return get_numa_affinity(node, bind_memory=bind_memory)
