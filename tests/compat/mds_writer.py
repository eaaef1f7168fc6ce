"""Writes an MDS dataset with mosaicml-streaming's own ``MDSWriter``, in a child process.

``mosaicml-streaming`` is installed as a test peer with ``--no-deps`` (see requirements/dev.txt):
its top-level ``streaming/__init__.py`` imports ``transformers`` and ``torchvision`` (for its
dataset classes), which are not installed. The writer itself needs neither, so this script
registers the ``streaming`` and ``streaming.base`` packages without running their ``__init__``
files and imports mosaic's real ``MDSWriter`` module; it runs in a child process so that the test
session's ``sys.modules`` stays untouched.

stdin: a pickle of ``{"out", "columns", "compression", "size_limit", "samples"}``.
stdout: a pickle of the samples as mosaic's own decoder returns them (``mds_decode`` of
``mds_encode`` for every column), the values a reader must reproduce.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import sys
import types


def _import_writer() -> tuple[object, object, object]:
    spec = importlib.util.find_spec("streaming")
    if spec is None or spec.origin is None:
        raise SystemExit("mosaicml-streaming is not installed")
    root = os.path.dirname(spec.origin)
    for name, path in (("streaming", root), ("streaming.base", os.path.join(root, "base"))):
        package = types.ModuleType(name)
        package.__path__ = [path]
        sys.modules[name] = package
    from streaming.base.format.mds.encodings import mds_decode, mds_encode
    from streaming.base.format.mds.writer import MDSWriter

    return MDSWriter, mds_encode, mds_decode


def main() -> None:
    job = pickle.load(sys.stdin.buffer)
    writer_cls, encode, decode = _import_writer()
    columns = job["columns"]
    with writer_cls(  # type: ignore[operator]
        out=job["out"], columns=columns, compression=job["compression"], size_limit=job["size_limit"]
    ) as writer:
        for sample in job["samples"]:
            writer.write(sample)
    expected = [{k: decode(columns[k], encode(columns[k], v)) for k, v in s.items()} for s in job["samples"]]  # type: ignore[operator]
    for sample in expected:
        for value in sample.values():
            if hasattr(value, "load"):
                value.load()  # PIL images: decode now, so they pickle with their pixels
    sys.stdout.buffer.write(pickle.dumps(expected))


if __name__ == "__main__":
    main()
