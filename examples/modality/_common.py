"""Shared bits of the modality recipes: the data folder argument and a fresh output folder."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

__all__ = ["data_dir_from_args", "fresh"]

DEFAULT_ROOT = Path(__file__).resolve().parent / "data"


def data_dir_from_args(name: str, description: str, argv: list[str] | None) -> Path:
    """Parse ``--data-dir`` (default ``examples/modality/data/<name>``, git-ignored)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_ROOT / name)
    return Path(parser.parse_args(argv).data_dir)


def fresh(path: Path) -> Path:
    """``path`` as a new, empty folder (recipes can be rerun)."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path
