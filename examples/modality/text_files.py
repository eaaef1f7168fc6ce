"""Text and files: the sources of three standard-library packages, as ``Text`` and ``File`` leaves.

1. Collect the ``.py`` files of the standard library's ``json``, ``email`` and ``urllib`` packages
   (files every Python installation has) with their package as the label.
2. ``litstream.optimize`` writes ``{"source": Text(path=...), "raw": File(path=...), "package": str,
   "name": str}``: ``Text`` streams back as ``str`` (UTF-8), ``File`` as the file's ``bytes``
   (``data_format`` ``"file:py"``), and the plain ``name`` string stays a string.
3. Streaming checks each text and each byte string equals the file on disk and counts lines per
   package. Prints ``files matching: k/n`` and one line per package; exits 1 unless all match.

Run: ``python examples/modality/text_files.py [--data-dir D]``.
"""

from __future__ import annotations

import email
import json
import sys
import urllib
from collections import Counter
from pathlib import Path
from typing import Any

from _common import data_dir_from_args, fresh

import litstream

PACKAGES = {"json": json, "email": email, "urllib": urllib}


def sources() -> list[tuple[str, str]]:
    found = []
    for name, package in PACKAGES.items():
        folder = Path(package.__file__ or "").parent
        found.extend((name, str(path)) for path in sorted(folder.glob("*.py")))
    return found


def to_sample(item: tuple[str, str]) -> dict[str, Any]:
    package, path = item
    return {
        "source": litstream.Text(path=path),
        "raw": litstream.File(path=path),
        "package": package,
        "name": Path(path).name,
    }


def main(argv: list[str] | None = None) -> int:
    root = data_dir_from_args("text_files", __doc__ or "", argv)
    out = fresh(root) / "optimized"
    items = sources()
    litstream.optimize(to_sample, items, out, chunk_bytes="1MB", num_workers=1, verbose=False)
    matching, lines = 0, Counter[str]()
    for (package, path), sample in zip(items, litstream.StreamingDataset(out), strict=True):
        on_disk = Path(path).read_bytes()
        same = sample["raw"] == on_disk and sample["source"] == on_disk.decode("utf-8") and sample["package"] == package
        matching += same
        lines[package] += sample["source"].count("\n")
    for package, count in lines.items():
        print(f"{package}: {count} lines")
    print(f"files matching: {matching}/{len(items)}")
    return 0 if matching == len(items) else 1


if __name__ == "__main__":
    sys.exit(main())
