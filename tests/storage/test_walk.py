"""walk: os.walk over a local directory and over object-store prefixes (SeaweedFS, Azurite)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import obstore
import pytest
from storage_backends import unique

from litstream import ConfigurationError, Dir, StorageError, walk
from litstream._core._bridge import run_sync
from litstream.storage._resolver import store_for

if TYPE_CHECKING:
    from pathlib import Path

    from servers import AzuriteServer, HubServer, S3Server

FILES = ["a.txt", "b/c.bin", "b/d/e.json", "b/d/f", "g/h.txt", "zz"]


def tree(top: str, join: str = "/") -> list[tuple[str, list[str], list[str]]]:
    """The expected top-down walk of FILES below ``top``."""

    def p(*parts: str) -> str:
        return join.join([top, *parts])

    return [
        (top, ["b", "g"], ["a.txt", "zz"]),
        (p("b"), ["d"], ["c.bin"]),
        (p("b", "d"), [], ["e.json", "f"]),
        (p("g"), [], ["h.txt"]),
    ]


def bottom_up(top: str, join: str = "/") -> list[tuple[str, list[str], list[str]]]:
    t = tree(top, join)
    return [t[2], t[1], t[3], t[0]]


@pytest.fixture
def local_dir(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    for name in FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(name.encode())
    return root


@pytest.fixture
def s3_url(s3_server: S3Server) -> str:
    url = f"s3://{s3_server.bucket}/{unique()}/data"
    store = store_for(url, s3_server.options())
    for name in FILES:
        run_sync(store.put, name, name.encode())
    # A sibling prefix sharing the first letters must not show up.
    run_sync(store_for(url + "2", s3_server.options()).put, "x.txt", b"x")
    return url


def test_local_walk_is_os_walk_with_sorted_names(local_dir: Path) -> None:
    (local_dir / "b" / "empty").mkdir()
    expected = tree(str(local_dir), os.sep)
    expected[1] = (expected[1][0], ["d", "empty"], ["c.bin"])
    expected.insert(3, (os.path.join(str(local_dir), "b", "empty"), [], []))
    assert list(walk(local_dir)) == expected
    assert list(walk(str(local_dir))) == expected
    assert list(walk(f"local:{local_dir}")) == expected
    assert list(walk(f"file://{local_dir}")) == expected
    assert list(walk(Dir(path=str(local_dir)))) == expected


def test_local_walk_bottom_up_and_pruning(local_dir: Path) -> None:
    assert list(walk(local_dir, topdown=False)) == bottom_up(str(local_dir), os.sep)
    seen = []
    for dirpath, dirnames, filenames in walk(local_dir):
        seen.append((dirpath, list(filenames)))
        if "b" in dirnames:
            dirnames.remove("b")
    assert seen == [(str(local_dir), ["a.txt", "zz"]), (os.path.join(str(local_dir), "g"), ["h.txt"])]


def test_local_walk_of_a_missing_directory_yields_nothing(tmp_path: Path) -> None:
    assert list(walk(tmp_path / "missing")) == []


def test_s3_walk_rebuilds_the_tree_from_keys(s3_url: str, s3_server: S3Server) -> None:
    options = s3_server.options()
    assert list(walk(s3_url, storage_options=options)) == tree(s3_url)
    assert list(walk(s3_url + "/", storage_options=options)) == tree(s3_url)
    assert list(walk(s3_url, storage_options=options, topdown=False)) == bottom_up(s3_url)
    assert list(walk(s3_url + "/b", storage_options=options)) == [
        (s3_url + "/b", ["d"], ["c.bin"]),
        (s3_url + "/b/d", [], ["e.json", "f"]),
    ]


def test_s3_walk_pruning_and_an_empty_prefix(s3_url: str, s3_server: S3Server) -> None:
    options = s3_server.options()
    seen = []
    for dirpath, dirnames, filenames in walk(s3_url, storage_options=options):
        seen.append((dirpath, filenames))
        dirnames[:] = [d for d in dirnames if d != "b"]
    assert seen == [(s3_url, ["a.txt", "zz"]), (s3_url + "/g", ["h.txt"])]
    assert list(walk(s3_url + "/nothing-here", storage_options=options)) == []


def test_directory_markers_are_directories(s3_server: S3Server) -> None:
    url = f"s3://{s3_server.bucket}/{unique()}"
    store = store_for(url, s3_server.options())
    # what consoles write for "create folder": written with obstore itself, since litstream's stores refuse
    # keys with an empty segment (a dataset never names one)
    from obstore.store import S3Store

    prefix = url.removeprefix(f"s3://{s3_server.bucket}/")
    raw = S3Store(
        s3_server.bucket,
        endpoint=s3_server.endpoint,
        access_key_id=s3_server.access_key,
        secret_access_key=s3_server.secret_key,
        region="us-east-1",
        client_options={"allow_http": True},
    )
    obstore.put(raw, f"{prefix}/folder/", b"")
    run_sync(store.put, "folder/inner/x", b"x")
    assert list(walk(url, storage_options=s3_server.options())) == [
        (url, ["folder"], []),
        (url + "/folder", ["inner"], []),
        (url + "/folder/inner", [], ["x"]),
    ]


def test_azure_walk(azure_server: AzuriteServer) -> None:
    url = f"azure://litstream-test/{unique()}"
    store = store_for(url, azure_server.options())
    for name in FILES:
        run_sync(store.put, name, name.encode())
    assert list(walk(url, storage_options=azure_server.options())) == tree(url)


def test_plain_http_cannot_be_walked(hub_server: HubServer) -> None:
    with pytest.raises(StorageError, match=r"list is not supported over plain HTTP"):
        list(walk(f"{hub_server.url}/static/x"))


def test_bad_arguments() -> None:
    with pytest.raises(ConfigurationError, match=r"max_workers must be None or an int >= 1, got 0"):
        walk("/tmp", 0)
    with pytest.raises(ConfigurationError, match=r"unknown URL scheme 'ftp'"):
        walk("ftp://host/x")
    with pytest.raises(ConfigurationError, match="storage_options"):
        walk("s3://bucket/x", storage_options={"not_an_option": 1})
