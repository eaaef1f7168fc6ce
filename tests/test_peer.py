"""The LitData peer helper: a missing peer fails CI and skips, with a reason, elsewhere."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from peer import in_ci, require_peer

if TYPE_CHECKING:
    from pathlib import Path


def test_the_installed_peer_is_returned() -> None:
    module = require_peer("litdata")
    assert module.__name__ == "litdata"
    assert callable(module.optimize)


@pytest.mark.parametrize("value", ["true", "TRUE", "1"])
def test_a_missing_peer_fails_in_ci(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CI", value)
    assert in_ci()
    with pytest.raises(pytest.fail.Exception, match=r"litdata_not_here.*CI requires it"):
        require_peer("litdata_not_here")


def test_a_missing_peer_is_a_visible_skip_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert not in_ci()
    with pytest.raises(pytest.skip.Exception, match=r"cannot be imported \(litdata_not_here: ModuleNotFoundError"):
        require_peer("litdata_not_here")


def test_a_broken_peer_fails_in_ci_whatever_it_raises(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    broken = tmp_path / "litdata_broken_peer.py"
    broken.write_text("raise AttributeError('half-installed')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"AttributeError: half-installed"):
        require_peer("litdata_broken_peer")
