"""LitData's path conventions: ``{%strftime}`` time templates and ``/teamspace/...`` paths (LitData as peer)."""

from __future__ import annotations

import datetime
import os
from typing import TYPE_CHECKING

import pytest

import litstream
from litstream import ConfigurationError
from litstream.storage._lightning_paths import resolve_time_template
from litstream.storage._resolver import Dir, resolve_dir
from peer import require_peer

if TYPE_CHECKING:
    from pathlib import Path

resolver = require_peer("litdata.streaming.resolver")

pytestmark = pytest.mark.litdata


def _sample(i: int) -> dict[str, int]:
    return {"x": i}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("/data/out_{%Y%m%d}", "/data/out_20261204"),
        ("/logs/log_{%Y-%m-%d}_{%H}.txt", "/logs/log_2026-12-04_{%H}.txt"),  # the first placeholder only
        ("/data/{%H%M}/x", "/data/0709/x"),
        ("/data/plain", "/data/plain"),
        ("/data/{name}", "/data/{name}"),  # not a strftime placeholder
    ],
)
def test_time_template_at_a_given_time(template: str, expected: str) -> None:
    assert resolve_time_template(template, datetime.datetime(2026, 12, 4, 7, 9)) == expected


@pytest.mark.parametrize("template", ["out_{%Y%m%d}", "runs/{%Y}/data"])
def test_time_template_resolves_as_litdata(tmp_path: Path, template: str) -> None:
    path = str(tmp_path / template)
    theirs = {resolver._resolve_dir(path).path for _ in range(2)}
    ours = resolve_dir(path).path
    assert "{" not in (ours or "")
    assert ours in theirs or resolve_dir(path).path in theirs  # a date that turned between the calls


def test_optimize_writes_into_the_resolved_folder(tmp_path: Path) -> None:
    before = datetime.datetime.now().strftime("%Y%m%d")
    litstream.optimize(fn=_sample, inputs=list(range(5)), output_dir=str(tmp_path / "out_{%Y%m%d}"), chunk_size=2,
                       num_workers=1)  # fmt: skip
    after = datetime.datetime.now().strftime("%Y%m%d")
    written = [p.name for p in tmp_path.iterdir()]
    assert len(written) == 1
    assert written[0] in {f"out_{before}", f"out_{after}"}
    assert [s["x"] for s in litstream.StreamingDataset(str(tmp_path / written[0]))] == list(range(5))


def test_a_path_object_or_url_keeps_its_braces(tmp_path: Path) -> None:
    assert resolve_dir(tmp_path / "out_{%Y}").path == str(tmp_path / "out_{%Y}")  # LitData: strings only
    assert resolve_dir("s3://bucket/out_{%Y}").url == "s3://bucket/out_{%Y}"
    assert resolver._resolve_dir("s3://bucket/out_{%Y}").url == "s3://bucket/out_{%Y}"


def test_this_studio_is_a_local_path() -> None:
    path = "/teamspace/studios/this_studio/data/ds"
    assert resolve_dir(path) == Dir(path=path)
    assert resolver._resolve_dir(path).path == path


@pytest.mark.parametrize("kind", ["s3_connections", "gcs_connections", "s3_folders", "lightning_storage", "datasets"])
def test_a_data_connection_path_without_its_mount_is_refused(kind: str) -> None:
    path = f"/teamspace/{kind}/my-data/train"
    assert not os.path.exists(f"/teamspace/{kind}/my-data")
    with pytest.raises(ConfigurationError, match=rf"input_dir='{path}' is a Lightning AI {kind} path.*s3://"):
        resolve_dir(path)
    with pytest.raises(ConfigurationError, match=rf"output_dir='{path}'"):
        litstream.optimize(fn=_sample, inputs=[1], output_dir=path, chunk_size=1)
    # LitData cannot resolve it here either: it needs Lightning's cloud API and its environment.
    with pytest.raises((ModuleNotFoundError, RuntimeError, ValueError)):
        resolver._resolve_dir(path)
