"""Opening a dataset's local files as a stranger may have laid them out: links and special files.

A dataset directory can come from anyone (an archive, a colleague's share), so its files are checked
where they are opened, on top of the key checks of ``storage/_keys.py``:

* **Symbolic links stay inside the dataset.** A file (or a folder on its way) that is a symbolic link is
  followed only when its target lies inside the store's root directory (after resolving every link,
  the root's own included). A link out of it — ``chunk-0-0.bin -> /etc/passwd``, ``sub -> /`` — is
  refused with a :class:`~litstream.StorageError` naming the file and the target, unless the store was
  built with ``follow_symlinks=True`` (``LocalFileStore``), the explicit opt-in for datasets laid out
  with links on purpose.
* **Only regular files are read.** A FIFO would block the reader forever, a device (``/dev/zero``)
  would never end, a socket cannot be read: the file is opened with ``O_NONBLOCK`` and ``O_NOFOLLOW``,
  and the opened descriptor is ``fstat``-ed; anything but a regular file is refused, naming the file
  and what it is, before a byte is read.

The resolution and the open are two steps; a link swapped in between for the file itself is caught by
``O_NOFOLLOW``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from .._core._errors import StorageError

__all__ = ["UnsafeFileError", "contained", "open_regular", "read_regular", "regular_size"]


class UnsafeFileError(StorageError):
    """A dataset's local file is a link out of the dataset or not a regular file. Never transient: a
    reader does not retry it (catch it as :class:`~litstream.StorageError`)."""


_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def contained(root: Path, full: Path, *, follow_symlinks: bool = False) -> Path:
    """``full`` checked to lie inside ``root`` once every symbolic link is resolved (the root's own too).

    Returns:
        ``full`` itself when no link lies between ``root`` and it, else the resolved path (so the file
        can be opened with ``O_NOFOLLOW``).

    Args:
        root: The store's directory.
        full: A path below ``root`` (``root / key`` with a checked key); it need not exist.
        follow_symlinks: Skip the containment check (the resolved path is still returned).

    Raises:
        UnsafeFileError: a link leads out of ``root``; the message names the file, the target and the opt-in.
    """
    real = Path(os.path.realpath(full))
    real_root = os.path.realpath(root)
    if real == Path(real_root, full.relative_to(root)):
        return full  # no link below the root: keep the path as the caller knows it
    if follow_symlinks:
        return real
    if str(real) != real_root and not str(real).startswith(real_root.rstrip(os.sep) + os.sep):
        raise UnsafeFileError(
            f"{full} is a symbolic link (or lies in a linked folder) to {real}, outside the dataset directory "
            f"{real_root}; litstream does not follow links out of a dataset. Replace the link by the file, or, "
            "if you trust the links, read through LocalFileStore(root, follow_symlinks=True)"
        )
    return real


def open_regular(path: str | os.PathLike[str]) -> int:
    """Open ``path`` read-only without following a final link or blocking, and check it is a regular file.

    Returns:
        The open descriptor (the caller closes it).

    Raises:
        UnsafeFileError: ``path`` is a FIFO, device, socket or directory (named in the message).
        OSError: it cannot be opened (``FileNotFoundError`` when missing, ``ELOOP`` for a final link).
    """
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:  # a socket cannot be opened (ENXIO): say what it is
        if exc.errno in (errno.ENXIO, errno.EOPNOTSUPP):
            _refuse_special(path, exc)
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
            raise UnsafeFileError(
                f"{os.fspath(path)} is {kind}, not a regular file; a dataset holds only regular files — "
                "remove it or point the reader at the real data"
            )
    except BaseException:
        os.close(fd)
        raise
    return fd


def _refuse_special(path: str | os.PathLike[str], cause: OSError) -> None:
    kind = None
    with contextlib.suppress(OSError):
        mode = os.lstat(path).st_mode
        kind = next((name for test, name in _KINDS if test(mode)), None)
    if kind is not None:
        raise UnsafeFileError(
            f"{os.fspath(path)} is {kind}, not a regular file; a dataset holds only regular files — "
            "remove it or point the reader at the real data"
        ) from cause


def read_regular(path: str | os.PathLike[str]) -> bytes:
    """The whole of the regular file ``path`` (see :func:`open_regular`), never more than it holds."""
    fd = open_regular(path)
    with os.fdopen(fd, "rb") as f:
        return f.read()


def regular_size(path: str | os.PathLike[str]) -> int:
    """The size in bytes of the regular file ``path``, checked as :func:`open_regular` does, without
    opening it (``lstat``: a FIFO is not opened, a final link is refused as not a regular file).

    Raises:
        UnsafeFileError: not a regular file. OSError: missing or not readable.
    """
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else None
        kind = kind or next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
        raise UnsafeFileError(f"{os.fspath(path)} is {kind}, not a regular file; a dataset holds only regular files")
    return st.st_size
