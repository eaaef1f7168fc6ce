"""Make PyTorch Geometric unimportable for one test, even after another test imported it."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest


def block_torch_geometric(monkeypatch: pytest.MonkeyPatch) -> None:
    """``import torch_geometric`` and ``from torch_geometric.data import ...`` raise ImportError until
    the test ends. Submodules are blocked too: Python returns a cached ``torch_geometric.data`` from
    ``sys.modules`` without looking at its parent, so blocking the package alone is not enough."""
    for name in [m for m in sys.modules if m == "torch_geometric" or m.startswith("torch_geometric.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "torch_geometric", None)
    monkeypatch.setitem(sys.modules, "torch_geometric.data", None)
