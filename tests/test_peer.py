"""The LitData peer helper: a missing peer fails CI and skips, with a reason, elsewhere."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from peer import in_ci, require_dev, require_installed, require_peer

TESTS = Path(__file__).resolve().parent


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


@pytest.mark.parametrize("require", [require_dev, require_installed])
def test_a_missing_dev_dependency_fails_in_ci_and_skips_elsewhere(
    monkeypatch: pytest.MonkeyPatch, require: object
) -> None:
    assert callable(require)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"dev_dependency_not_here.*CI requires it"):
        require("dev_dependency_not_here")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match=r"dev_dependency_not_here.*install requirements/dev.txt"):
        require("dev_dependency_not_here")


def test_an_installed_dev_dependency_is_returned() -> None:
    assert require_dev("numpy").__name__ == "numpy"
    require_installed("numpy")  # neither fails nor skips


# Modules that a supported Python may lack (tomllib is new in 3.11): the only ones a test may importorskip.
MAY_BE_SKIPPED = {"tomllib"}


def test_no_test_skips_a_pinned_dependency_silently() -> None:
    """``pytest.importorskip`` and ``skipif(find_spec(...) is None)`` turn a broken CI install into green
    skips; the tests use :func:`require_dev` / :func:`require_installed` (fail in CI) instead."""
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        if "data" in path.relative_to(TESTS).parts[:1]:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            first = node.args[0] if node.args else None
            module = first.value if isinstance(first, ast.Constant) else None
            if name == "importorskip" and module not in MAY_BE_SKIPPED:
                found.append(f"{path.relative_to(TESTS)}:{node.lineno}: importorskip({module!r})")
            if name == "skipif" and "find_spec" in ast.unparse(node):
                found.append(f"{path.relative_to(TESTS)}:{node.lineno}: skipif(find_spec(...))")
    assert found == []
