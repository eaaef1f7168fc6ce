"""Packaging facts: one version, extras that match the features, pins that agree, license files."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest

import litstream

ROOT = Path(__file__).resolve().parents[1]


def _pyproject() -> dict[str, object]:
    tomllib = pytest.importorskip("tomllib")
    data: dict[str, object] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return data


def _pins(name: str) -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements" / name).read_text(encoding="utf-8").splitlines():
        match = re.match(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s#;]+)", line.strip())
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def test_the_version_is_defined_once() -> None:
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    assert "version" not in project
    assert project["dynamic"] == ["version"]
    tool = _pyproject()["tool"]
    assert isinstance(tool, dict)
    assert tool["setuptools"]["dynamic"]["version"] == {"attr": "litstream._version.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+(\.dev\d+|rc\d+)?", litstream.__version__)
    try:
        installed = metadata.version("litstream")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare source tree
        return
    assert installed == litstream.__version__


def test_extras_match_the_features() -> None:
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    extras: dict[str, list[str]] = project["optional-dependencies"]
    assert {"zstd", "image", "parquet", "arrow", "encryption", "trio", "all"} <= set(extras)
    # `video` and `graph` need torchcodec / torch-geometric builds matched to one torch: not in `all`.
    others = {req for name, reqs in extras.items() if name not in ("all", "video", "graph") for req in reqs}
    assert set(extras["all"]) == others
    assert {"torchcodec>=0.2", "torch-geometric>=2.4"}.isdisjoint(extras["all"])


def test_example_pins_agree_with_the_development_pins() -> None:
    examples, dev = _pins("examples.txt"), _pins("dev.txt")
    constraints = _pins("constraints.txt")
    assert examples["torch"] == constraints["torch"]
    for name, version in examples.items():
        if name in dev:
            assert dev[name] == version, name
    assert "-r examples.txt" in (ROOT / "requirements" / "dev.txt").read_text(encoding="utf-8")


def test_license_and_changelog_are_present() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text
    assert "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert "## [Unreleased]" in (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
