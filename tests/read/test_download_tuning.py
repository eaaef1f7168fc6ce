"""The chunk downloader's piece size and concurrency: the cache settings', else the environment's, else its own."""

from __future__ import annotations

import pytest

from litstream import ConfigurationError
from litstream.read.cache._source_cache import CacheSettings, download_tuning


def test_unset_leaves_the_downloaders_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LITSTREAM_DOWNLOAD_PIECE_SIZE", raising=False)
    monkeypatch.delenv("LITSTREAM_DOWNLOAD_CONCURRENCY", raising=False)
    assert download_tuning(CacheSettings()) == {}


@pytest.mark.parametrize(("piece", "bytes_"), [("65536", 65536), ("16MB", 16_000_000), (" 2kb ", 2000)])
def test_the_environment_sets_what_the_settings_leave_open(
    monkeypatch: pytest.MonkeyPatch, piece: str, bytes_: int
) -> None:
    monkeypatch.setenv("LITSTREAM_DOWNLOAD_PIECE_SIZE", piece)
    monkeypatch.setenv("LITSTREAM_DOWNLOAD_CONCURRENCY", "3")
    assert download_tuning(CacheSettings()) == {"piece_size": bytes_, "max_concurrency": 3}
    given = CacheSettings(piece_size=4096, max_concurrency=2)
    assert download_tuning(given) == {"piece_size": 4096, "max_concurrency": 2}  # the settings win


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("LITSTREAM_DOWNLOAD_PIECE_SIZE", "0"),
        ("LITSTREAM_DOWNLOAD_PIECE_SIZE", "lots"),
        ("LITSTREAM_DOWNLOAD_CONCURRENCY", "0"),
        ("LITSTREAM_DOWNLOAD_CONCURRENCY", "8MB"),
    ],
)
def test_a_bad_value_names_the_variable(monkeypatch: pytest.MonkeyPatch, variable: str, value: str) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigurationError, match=variable):
        download_tuning(CacheSettings())
