"""The server fixtures fail loudly, naming the install script, when a server is not installed."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import pytest

import servers

if TYPE_CHECKING:
    from pathlib import Path


def test_missing_seaweedfs_names_the_install_script(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(servers.ServerMissing, match=r"run scripts/install_servers\.sh"), servers.seaweedfs(tmp_path):
        pass


def test_missing_azurite_names_the_install_script(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(servers, "REPO", tmp_path)
    with pytest.raises(servers.ServerMissing, match=r"run scripts/install_servers\.sh"), servers.azurite(tmp_path):
        pass
