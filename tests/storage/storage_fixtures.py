"""Storage test fixtures: real servers (one per session, started on first use) and one store per backend.

The S3 server fixture and the rule that runs server tests last live in ``tests/conftest.py`` (the write
tests use S3 too).

Every test gets its own key prefix inside the session's bucket/container (see ``storage_backends``). A
server that is not installed fails the tests that need it, naming the install script.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from storage_backends import READ_ONLY, WRITABLE, Backend, make_backend

from servers import ServerMissing, azurite, fake_gcs, hub_http_server

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from servers import AzuriteServer, GCSServer, HubServer


@pytest.fixture(scope="session")
def azure_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AzuriteServer]:
    """Azurite on 127.0.0.1 with the container ``litstream-test``, for the whole session."""
    try:
        with azurite(tmp_path_factory.mktemp("azure")) as server:
            server.create_container("litstream-test")
            yield server
    except ServerMissing as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def gcs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GCSServer]:
    """fake-gcs-server on 127.0.0.1 with the bucket ``litstream-test``, for the whole session."""
    try:
        with fake_gcs(tmp_path_factory.mktemp("gcs")) as server:
            server.create_bucket("litstream-test")
            yield server
    except ServerMissing as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def hub_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubServer]:
    """An HTTP server in the Hub's URL layout, for the whole session."""
    with hub_http_server(tmp_path_factory.mktemp("hub")) as server:
        yield server


@pytest.fixture(params=WRITABLE)
def writable(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """Each store that can write."""
    return make_backend(request.param, request, tmp_path)


@pytest.fixture(params=WRITABLE + READ_ONLY)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """Each store, read-only ones included."""
    return make_backend(request.param, request, tmp_path)
