"""The storage tests' fixtures, defined in ``storage_fixtures.py`` (a module name of its own, so that mypy
checks it: every conftest is a module named ``conftest``)."""

from __future__ import annotations

from storage_fixtures import azure_server, backend, gcs_server, hub_server, writable

__all__ = ["azure_server", "backend", "gcs_server", "hub_server", "writable"]
