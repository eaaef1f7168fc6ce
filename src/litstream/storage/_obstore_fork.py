"""obstore across fork: which copy of obstore's native module this process may use.

obstore runs every call on a tokio runtime that lives in its native module (``obstore._obstore``) and
is started by the first call. ``fork`` copies only the calling thread, so in a child forked after that
first call the runtime's threads are gone: every obstore call there hangs, on the parent's stores and on
stores made fresh in the child alike (checked with obstore 0.12.1).

A forked child of a process that used obstore therefore loads a private copy of the native module
(:func:`native`): the same shared library, loaded again from a copy of the file (an anonymous
``memfd`` where Linux has one, else a temporary file deleted once loaded), so it has its own statics and
starts its own runtime in the child. Stores made from a copy work only with that copy's functions, so
:class:`~litstream.storage.ObstoreStore` builds its client and makes its calls through the module
:func:`native` gives. Spawned and forkserver children, and children of a process that never used
obstore, use the ordinary module.

Loading a second copy depends on how obstore builds its native module, which no obstore release promises.
It is done only for the releases it was verified with (:data:`VERIFIED_OBSTORE`, tested by
``tests/storage/test_fork.py``, which also fails when another release is installed); with any other release a
forked child's obstore call raises ``StorageError`` naming the fix instead of risking a hang.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._core._errors import StorageError

if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import ModuleType

    from ._obstore_spec import ObstoreSpec

__all__ = [
    "VERIFIED_OBSTORE",
    "ProcessClient",
    "check_verified",
    "build_lock",
    "fork_error",
    "forked_from_user",
    "native",
    "note_used",
    "obstore_used",
]

VERIFIED_OBSTORE = ("0.12.",)
"""The obstore releases (version prefixes) whose native module a forked child may load a private copy of."""

_ORIGINAL_USED_IN: set[int] = set()
"""The processes whose ordinary obstore module has started its runtime (inherited by forked children)."""
_PRIVATE: dict[int, ModuleType] = {}
"""The private copy of the native module each process loaded (a child finds its ancestors' entries too)."""
_LOCK = threading.Lock()


def _reset_lock() -> None:
    global _LOCK  # the parent's lock may have been held by a thread that does not exist in the child
    _LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_lock)


def _original() -> ModuleType:
    return importlib.import_module("obstore._obstore")


def check_verified(version: str) -> None:
    """Refuse to load a private copy of obstore ``version``'s native module unless it is a verified release.

    Raises:
        ImportError: ``version`` does not start with one of :data:`VERIFIED_OBSTORE`.
    """
    if not version.startswith(VERIFIED_OBSTORE):
        raise ImportError(
            f"obstore {version} is installed; litstream's use of obstore in forked processes is verified with "
            f"obstore {', '.join(v + 'x' for v in VERIFIED_OBSTORE)} only (pip install 'obstore>=0.12,<0.13')"
        )


def build_lock() -> threading.Lock:
    """This process's lock for building obstore clients (a fresh one after fork)."""
    return _LOCK


def native() -> ModuleType:
    """The obstore native module (``obstore._obstore``) that works in this process.

    The ordinary one, unless an ancestor this process was forked from had started its runtime; then a
    private copy loaded in this process (once).

    Raises:
        StorageError: the private copy could not be loaded.
    """
    pid = os.getpid()
    private = _PRIVATE.get(pid)
    if private is not None:
        return private
    ancestor = forked_from_user()
    if ancestor is None:
        return _original()
    with _LOCK:
        private = _PRIVATE.get(pid)
        if private is None:
            try:
                check_verified(importlib.metadata.version("obstore"))
                private = _load_private_copy(_original())
            except (OSError, ImportError) as exc:
                raise fork_error(
                    "obstore", ancestor, f"loading a private copy of obstore's native module failed: {exc}"
                ) from exc
            _PRIVATE[pid] = private
    return private


def note_used(module: ModuleType) -> None:
    """Record that ``module`` (what :func:`native` gave) makes calls in this process."""
    if module is _original():
        _ORIGINAL_USED_IN.add(os.getpid())


def obstore_used() -> bool:
    """True once this process has started an obstore runtime (a forked child then needs a private copy)."""
    pid = os.getpid()
    return pid in _ORIGINAL_USED_IN or pid in _PRIVATE


def forked_from_user() -> int | None:
    """The pid of an ancestor this process was forked from after it had used obstore, if any."""
    others = _ORIGINAL_USED_IN - {os.getpid()}
    return min(others) if others else None


def fork_error(url: str, where: int, reason: str) -> StorageError:
    """The error for an obstore store that cannot be used in this process, forked from ``where``."""
    return StorageError(
        f"{url}: obstore was used in process {where} and this process ({os.getpid()}) was forked from it; "
        f"{reason}: create stores inside the worker, or use multiprocessing_context='spawn' or 'forkserver'"
    )


class ProcessClient:
    """An ``ObstoreStore``'s obstore client in the process that uses it: built from ``spec`` once in each
    process (through :func:`native`'s module), or the ready ``store`` it wraps, which works only in the
    process that made it. Pickles as configuration (a wrapped store unpickled is a new client, made there).

    Args:
        store: A ready obstore store (``None`` with ``spec``).
        spec: The configuration to build a client from (``None`` with ``store``).
        url: The store's description, for messages.
    """

    def __init__(self, store: Any, spec: ObstoreSpec | None, url: str) -> None:
        self.store, self.spec, self.url = store, spec, url
        self.made_in: int | None = os.getpid() if store is not None else None  # where a wrapped store was made
        self.held: tuple[int, ModuleType, Any] | None = None  # (pid, obstore native module, client) in use

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "held": None, "made_in": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.store is not None:
            self.made_in = os.getpid()

    def get(self) -> tuple[ModuleType, Any]:
        """This process's obstore native module and client, built on first use in each process.

        Raises:
            StorageError: a wrapped obstore store is used in a process forked after it was made, or after
                the parent used obstore (it cannot be rebuilt there).
        """
        pid = os.getpid()
        held = self.held
        if held is not None and held[0] == pid:
            return held[1], held[2]
        if self.spec is None:
            if self.made_in != pid:
                raise StorageError(
                    f"{self.url}: this store was created in process {self.made_in} and used in forked process "
                    f"{pid}; obstore cannot be used across fork: create stores inside the worker, or use "
                    "multiprocessing_context='spawn' or 'forkserver' (or pass a URL, whose store is rebuilt)"
                )
            ancestor = forked_from_user()
            if ancestor is not None:
                raise fork_error(self.url, ancestor, "an obstore store made in this process does not work here")
            module = native()
            self.held = (pid, module, self.store)
            return module, self.store
        module = native()  # outside the lock: loading a private copy takes it
        with build_lock():
            held = self.held
            if held is None or held[0] != pid:
                held = (pid, module, self.spec.build(module))
                self.held = held
        return held[1], held[2]


def _load_private_copy(original: ModuleType) -> ModuleType:
    """Load the shared library of ``original`` again, from a copy, as a module of its own."""
    import importlib.machinery
    import importlib.util

    source = original.__file__
    if source is None:  # pragma: no cover - an extension module always has a file
        raise ImportError("obstore's native module has no file to copy")
    data = Path(source).read_bytes()
    name = original.__name__  # the init function is found by the last part of the name: keep it
    saved = {key: mod for key, mod in sys.modules.items() if key.startswith("obstore")}
    try:
        with _copy_of(data, Path(source).name) as path:
            loader = importlib.machinery.ExtensionFileLoader(name, path)
            spec = importlib.util.spec_from_file_location(name, path, loader=loader)
            if spec is None:  # pragma: no cover
                raise ImportError(f"cannot load {path}")
            module = importlib.util.module_from_spec(spec)
            loader.exec_module(module)
    finally:  # the copy registers its submodules (obstore.exceptions, ...): the ordinary ones stay registered
        for key in [key for key in sys.modules if key.startswith("obstore")]:
            if key not in saved:
                del sys.modules[key]
        sys.modules.update(saved)
    return module


@contextlib.contextmanager
def _copy_of(data: bytes, name: str) -> Iterator[str]:
    """A path to a fresh copy of ``data`` that the dynamic loader sees as a file of its own."""
    fd = -1
    if hasattr(os, "memfd_create") and Path("/proc/self/fd").is_dir():
        with contextlib.suppress(OSError):
            fd = os.memfd_create(f"litstream-{name}")
    if fd >= 0:
        try:
            _write_all(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    fd, path = tempfile.mkstemp(prefix="litstream-obstore-", suffix=f"-{name}")
    try:
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
        yield path
    finally:
        os.unlink(path)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
