"""Turn what users pass as ``input_dir`` / ``output_dir`` into a :class:`Dir` and a :class:`~litstream.Store`.

* ``/data/ds``, a ``Path``, ``file:///data/ds``, ``local:/data/ds`` → ``Dir(path="/data/ds")``, a
  :class:`LocalFileStore` (a path string's ``{%Y%m%d}`` time template is resolved and ``/teamspace/...``
  paths follow LitData's rules, see ``storage/_lightning_paths.py``).
* ``s3://bucket/prefix`` (and ``r2://…`` given an ``endpoint_url``) → ``Dir(url=…)``, an S3 :class:`ObstoreStore`.
* ``gs://bucket/prefix`` → a GCS :class:`ObstoreStore`.
* ``azure://container/prefix``, ``az://…``, ``abfs[s]://container@account.dfs.core.windows.net/prefix`` →
  an Azure :class:`ObstoreStore`.
* ``hf://datasets/{org}/{name}[@revision]/path`` → an :class:`HTTPStore` over the Hub's
  ``{endpoint}/datasets/{org}/{name}/resolve/{revision}/{path}`` URLs, listing through the Hub's tree API.
* ``http(s)://host/path`` → a read-only :class:`HTTPStore` that cannot list.
* a ``Store`` instance → itself.

``storage_options`` are mapped by :func:`~litstream.storage._options.obstore_options` for object stores.
For ``hf://`` they may hold ``endpoint`` (else ``HF_ENDPOINT``, else ``https://huggingface.co``),
``token`` (else ``HF_TOKEN`` or huggingface_hub's token file; ``False`` sends none), ``revision`` and
``headers``; for ``http(s)://``, ``headers``. Environment variables come from ``_environ.environ``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote, unquote

from .._core._environ import environ
from .._core._errors import ConfigurationError
from ._base import Store, TransferConfig
from ._faults import RETRY_KEYS, transfer_with_options
from ._http import HTTPStore, HubTreeLister
from ._lightning_paths import check_teamspace, resolve_time_template
from ._local import LocalFileStore
from ._obstore import ObstoreStore
from ._obstore_spec import ObstoreSpec
from ._options import obstore_options

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .._core._environ import Environ

__all__ = ["Dir", "resolve_dir", "store_for"]

_OBJECT_SCHEMES: dict[str, Literal["s3", "gcs", "azure"]] = {
    "s3": "s3",
    "r2": "s3",
    "gs": "gcs",
    "gcs": "gcs",
    "azure": "azure",
    "az": "azure",
    "abfs": "azure",
    "abfss": "azure",
}
_REMOTE_SCHEMES = frozenset({*_OBJECT_SCHEMES, "hf", "http", "https"})
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_HUB = "https://huggingface.co"


@dataclass(frozen=True)
class Dir:
    """A dataset location, as in LitData: a local ``path``, a remote ``url``, or both.

    ``data_connection_id`` is LitData's id of a Lightning AI data connection; it is kept (and compared)
    as given, and has no effect outside Lightning AI, as in LitData.
    """

    path: str | None = None
    url: str | None = None
    data_connection_id: str | None = None


def _scheme(text: str) -> str | None:
    match = _SCHEME.match(text)
    return match.group(1).lower() if match else None


def resolve_dir(value: str | os.PathLike[str] | Dir | None, *, argument: str = "input_dir") -> Dir:
    """Normalise ``value`` to a :class:`Dir`: an absolute local ``path``, or a remote ``url``.

    Raises:
        ConfigurationError: ``value`` is ``None``/empty, or a URL whose scheme litstream does not know.
    """
    if isinstance(value, Dir):
        if value.url is not None and value.path is None:
            resolved = resolve_dir(value.url, argument=argument)
            return Dir(path=resolved.path, url=resolved.url, data_connection_id=value.data_connection_id)
        path = str(Path(value.path).absolute()) if value.path else None
        return Dir(path=path, url=value.url, data_connection_id=value.data_connection_id)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ConfigurationError(f"{argument} is required: pass a local directory or a URL (s3://, gs://, ...)")
    text = os.fspath(value)
    scheme = _scheme(text)
    if scheme in _REMOTE_SCHEMES:
        return Dir(url=text)
    if scheme == "file":
        rest = text[len("file://") :]
        host, slash, path = rest.partition("/")
        if host not in ("", "localhost"):
            raise ConfigurationError(
                f"{argument}={text!r}: file:// URLs must name this machine (file:///path or file://localhost/path)"
            )
        text = unquote(slash + path)
    elif scheme is not None:
        known = ", ".join(f"{s}://" for s in sorted(_REMOTE_SCHEMES | {"file"}))
        raise ConfigurationError(
            f"{argument}={text!r}: unknown URL scheme {scheme!r}; use a local path or one of {known}"
        )
    elif text.startswith("local:"):
        text = text[len("local:") :]
    elif isinstance(value, str):  # LitData's conventions for a local path string (storage/_lightning_paths.py)
        text = resolve_time_template(text)
    path = str(Path(text).expanduser().absolute())
    check_teamspace(path, argument=argument)
    return Dir(path=path)


def store_for(
    value: str | os.PathLike[str] | Dir | Store,
    storage_options: Mapping[str, Any] | None = None,
    *,
    argument: str = "input_dir",
    transfer: TransferConfig | None = None,
) -> Store:
    """The :class:`~litstream.Store` for a location (a Store instance is returned as is).

    Args:
        value: A local path, a URL (see the module's table), a :class:`Dir`, or a Store.
        storage_options: Provider options and credentials (see :mod:`~litstream.storage._options`);
            ignored for local paths, as in LitData.
        argument: The argument's name, for messages.
        transfer: Timeouts, retries and multipart sizes for remote stores. Default ``TransferConfig()``.

    Raises:
        ConfigurationError: an unknown scheme or option, a malformed URL, or ``storage_options`` given
            with a ready Store.
    """
    if isinstance(value, Store) and not isinstance(value, (str, os.PathLike, Dir)):
        if storage_options:
            raise ConfigurationError(
                f"storage_options cannot be applied to a ready store ({value.url}); configure the store itself"
            )
        return value
    resolved = resolve_dir(value, argument=argument)
    if resolved.url is not None:
        return _remote_store(resolved.url, dict(storage_options or {}), transfer or TransferConfig(), argument)
    if resolved.path is None:
        raise ConfigurationError(f"{argument}={value!r} names no local path and no URL")
    return LocalFileStore(resolved.path)


def _split(url: str, scheme_len: int, argument: str, what: str) -> tuple[str, str]:
    rest = url[scheme_len:]
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise ConfigurationError(f"{argument}={url!r}: the URL names no {what}; use {url[:scheme_len]}<{what}>/<path>")
    return bucket, prefix.strip("/")


def _remote_store(url: str, options: dict[str, Any], transfer: TransferConfig, argument: str) -> Store:
    scheme = _scheme(url) or ""
    head = len(scheme) + 3
    transfer = transfer_with_options(transfer, options, url)
    if scheme in ("http", "https"):
        headers = options.pop("headers", None) or {}
        _no_more(options, url, ["headers", *RETRY_KEYS])
        return HTTPStore(url, headers=headers, transfer=transfer, url=url.rstrip("/"))
    if scheme == "hf":
        return _hub_store(url, options, transfer, argument)
    kind = _OBJECT_SCHEMES[scheme]
    bucket, prefix = _split(url, head, argument, "container" if kind == "azure" else "bucket")
    env = environ()
    if kind == "azure" and "@" in bucket:  # abfs[s]://container@account.dfs.core.windows.net/path
        bucket, _, host = bucket.partition("@")
        options.setdefault("account_name", host.split(".", 1)[0])
    config, client, retry = obstore_options(kind, options, where=url)
    if scheme == "r2" and "endpoint" not in config and not (env.aws_endpoint_url or env.aws_endpoint):
        raise ConfigurationError(
            f"{argument}={url!r}: r2:// needs storage_options={{'endpoint_url': "
            "'https://<account id>.r2.cloudflarestorage.com', 'aws_access_key_id': ..., 'aws_secret_access_key': ...}"
        )
    if kind == "gcs" and "base_url" not in config and env.storage_emulator_host is not None:
        # google-cloud-storage's switch for emulators. Emulators ignore auth; a static bearer token keeps
        # obstore from asking a cloud metadata server for one.
        emulator = env.storage_emulator_host
        config["base_url"] = emulator if "://" in emulator else f"http://{emulator}"
        if not config.keys() & {"service_account", "service_account_key", "application_credentials", "skip_signature"}:
            config.setdefault("bearer_token", "emulator")
        if config["base_url"].startswith("http://"):
            client.setdefault("allow_http", True)
    spec = ObstoreSpec(kind, bucket, prefix, config, client, retry, transfer)
    return ObstoreStore(spec=spec, url=url.rstrip("/"))


def _no_more(options: Mapping[str, Any], url: str, allowed: list[str]) -> None:
    if options:
        raise ConfigurationError(
            f"storage_options {sorted(options)} are not used for {url}; allowed keys: {', '.join(allowed)}"
        )


def _hub_token(options: dict[str, Any], env: Environ) -> str | None:
    token = options.pop("token", None)
    if token is False:
        return None
    if isinstance(token, str):
        return token
    if token is not None and token is not True:
        raise ConfigurationError(f"storage_options['token'] must be a string or False, got {type(token).__name__}")
    found = env.hf_token or env.hugging_face_hub_token
    if found:
        return found
    home = env.hf_home or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    path = Path(env.hf_token_path or os.path.join(home, "token"))
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def _hub_store(url: str, options: dict[str, Any], transfer: TransferConfig, argument: str) -> Store:
    rest = url[len("hf://") :]
    if not rest.startswith("datasets/"):
        raise ConfigurationError(
            f"{argument}={url!r}: only Hub datasets can be read; use hf://datasets/<org>/<name>/<path>"
        )
    parts = rest[len("datasets/") :].split("/")
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise ConfigurationError(f"{argument}={url!r}: use hf://datasets/<org>/<name>[@revision]/<path>")
    org, name_rev, path = parts[0], parts[1], "/".join(p for p in parts[2:] if p)
    name, at, revision = name_rev.partition("@")
    option_revision = options.pop("revision", None)
    revision = unquote(revision) if at else (option_revision or "main")
    env = environ()
    endpoint = str(options.pop("endpoint", None) or env.hf_endpoint or _HUB).rstrip("/")
    headers = dict(options.pop("headers", None) or {})
    token = _hub_token(options, env)
    if token:
        headers.setdefault("Authorization", f"Bearer {token}")
    _no_more(options, url, ["endpoint", "token", "revision", "headers", *RETRY_KEYS])
    repo = f"{org}/{name}"
    base = f"{endpoint}/datasets/{repo}/resolve/{quote(revision, safe='')}"
    if path:
        base = f"{base}/{quote(path)}"
    lister = HubTreeLister(endpoint, repo, revision, path)
    return HTTPStore(base, headers=headers, transfer=transfer, lister=lister, url=url.rstrip("/"))
