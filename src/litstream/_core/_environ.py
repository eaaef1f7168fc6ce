"""Every environment variable litstream reads, read in one function.

:func:`environ` reads them all and returns a frozen :class:`Environ`; no other module of litstream
touches ``os.environ`` (a test checks it), and ``docs/environment.md`` lists exactly these variables (a
test checks that too). It reads the environment on every call, so a value exported after import (a
launcher, a test's ``monkeypatch``) is seen by the next read; each call costs a few microseconds.

Values are the raw strings, ``None`` when a variable is unset or empty. Each user parses and validates
its own values and names the variable in its error (``write/run/_env.py``, ``read/_trust.py``,
``_core/_distributed.py``), so this module holds no policy. The cloud SDK variables that obstore reads itself
(credentials, regions) are not read here: only those litstream must see (an endpoint, to allow plain
HTTP; whether any credential is set, to explain a failure; the HTTP client options obstore would drop).

Writes go through :func:`export` and :func:`exported` (``DATA_OPTIMIZER_GLOBAL_RANK`` and
``DATA_OPTIMIZER_NUM_WORKERS`` in optimize workers, as LitData does).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping

__all__ = [
    "CLIENT_KEYS",
    "CLIENT_OPTION_PREFIXES",
    "Environ",
    "environ",
    "export",
    "exported",
    "litdata_variables_set",
    "replace_all",
    "snapshot",
    "unexport",
    "variables",
]

CLIENT_KEYS = frozenset(
    "allow_http allow_invalid_certificates connect_timeout default_content_type default_headers http1_only "
    "http2_keep_alive_interval http2_keep_alive_timeout http2_keep_alive_while_idle http2_only pool_idle_timeout "
    "pool_max_idle_per_host proxy_url proxy_ca_certificate proxy_excludes root_certificate randomize_addresses "
    "read_timeout timeout user_agent".split()
)
"""obstore's HTTP client option names (its ``ClientConfig`` keys), shared by every remote store kind; defined
here, below ``storage/``, because the environment reads them too (``storage._options`` maps them)."""

CLIENT_OPTION_PREFIXES = {"s3": "AWS_", "gcs": "GOOGLE_", "azure": "AZURE_"}
"""obstore's HTTP client options in the environment: this prefix + an option name in capitals
(``AWS_ALLOW_HTTP``, ``AZURE_PROXY_URL``); the names are :data:`CLIENT_KEYS`."""


@dataclass(frozen=True)
class Environ:
    """The environment as litstream sees it; each field is the variable of its name in capitals.

    ``docs/environment.md`` gives each variable's meaning and default.
    """

    # ranks (``_core/_distributed.py``)
    world_size: str | None = None
    global_rank: str | None = None
    rank: str | None = None
    nnodes: str | None = None
    # the chunk cache (``read/cache/_cache.py``)
    litstream_cache_dir: str | None = None
    litdata_cache_dir: str | None = None
    xdg_cache_home: str | None = None
    # chunk downloads (``read/cache/_source_cache.py``)
    litstream_download_piece_size: str | None = None
    litstream_download_concurrency: str | None = None
    # LitData's in-chunk shuffle block size (``read/_item_window.py``)
    litdata_item_shuffle_window: str | None = None
    # pickled leaves (``read/_trust.py``)
    litstream_allow_pickle: str | None = None
    # the readers' memory budget (``read/engine/_memory.py``)
    litstream_max_memory: str | None = None
    # tracing in child processes (``_core/_trace.py``)
    litstream_trace: str | None = None
    litstream_trace_file: str | None = None
    # the Hugging Face Hub (``storage/_resolver.py``)
    hf_endpoint: str | None = None
    hf_token: str | None = None
    hugging_face_hub_token: str | None = None
    hf_token_path: str | None = None
    hf_home: str | None = None
    # object stores (``storage/_resolver.py``, ``_obstore_spec.py``, ``_faults.py``)
    storage_emulator_host: str | None = None
    aws_endpoint_url_s3: str | None = None
    aws_endpoint_url: str | None = None
    aws_endpoint: str | None = None
    aws_access_key_id: str | None = None
    aws_skip_signature: str | None = None
    aws_web_identity_token_file: str | None = None
    aws_container_credentials_relative_uri: str | None = None
    aws_container_credentials_full_uri: str | None = None
    aws_metadata_endpoint: str | None = None
    # optimize on several machines (``write/run/_env.py``)
    data_optimizer_num_nodes: str | None = None
    data_optimizer_node_rank: str | None = None
    data_optimizer_timeout: str | None = None
    # the crash tests' hook (``_core/_crash.py``)
    litstream_test_crash_at: str | None = None
    client_options: tuple[tuple[str, str], ...] = field(default=())
    """``(variable, value)`` of every set ``<prefix><OPTION>`` variable (see :data:`CLIENT_OPTION_PREFIXES`)."""

    def client_options_for(self, kind: str) -> dict[str, str]:
        """obstore's client options for store ``kind`` (``"s3"``, ``"gcs"``, ``"azure"``) from the environment:
        ``AWS_ALLOW_HTTP=true`` gives ``{"allow_http": "true"}``."""
        prefix = CLIENT_OPTION_PREFIXES[kind]
        return {name[len(prefix) :].lower(): value for name, value in self.client_options if name.startswith(prefix)}


_NAMES = tuple(f.name.upper() for f in fields(Environ) if f.name != "client_options")


def _client_option_names() -> tuple[str, ...]:
    return tuple(prefix + key.upper() for prefix in CLIENT_OPTION_PREFIXES.values() for key in sorted(CLIENT_KEYS))


def variables() -> tuple[str, ...]:
    """The name of every variable :func:`environ` reads, in its order (the one-name fields, then the
    client options)."""
    return _NAMES + _client_option_names()


def environ() -> Environ:
    """Read every variable litstream honours (see the module docstring); unset or empty gives ``None``."""
    values: dict[str, Any] = {name.lower(): os.environ.get(name) or None for name in _NAMES}
    values["client_options"] = tuple((n, os.environ[n]) for n in _client_option_names() if os.environ.get(n))
    return Environ(**values)


def litdata_variables_set() -> tuple[tuple[str, str], ...]:
    """``(name, value)`` of the ``LITDATA_*`` variables that are set and not empty, sorted by name; for the
    warning that litstream ignores those it does not read (``_core/_litdata_env.py``)."""
    return tuple(sorted((n, v) for n, v in os.environ.items() if n.startswith("LITDATA_") and v))


def export(values: Mapping[str, str]) -> None:
    """Set environment variables (for code that runs after, in this process and its children)."""
    os.environ.update(values)


def snapshot() -> dict[str, str]:
    """Every environment variable of this process (for a child that does not inherit them: see :func:`replace_all`)."""
    return dict(os.environ)


def replace_all(values: Mapping[str, str]) -> None:
    """Make this process's environment exactly ``values`` (a forkserver's child takes its parent's :func:`snapshot`,
    not the fork server's environment)."""
    os.environ.clear()
    os.environ.update(values)


def unexport(names: Iterable[str]) -> None:
    """Unset environment variables (those not set are skipped)."""
    for name in names:
        os.environ.pop(name, None)


@contextlib.contextmanager
def exported(values: Mapping[str, str]) -> Iterator[None]:
    """Set ``values`` for the duration of the block, then restore each variable (unset if it was)."""
    saved = {name: os.environ.get(name) for name in values}
    export(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
