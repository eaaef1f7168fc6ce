"""Retry settings from ``storage_options``, and the errors users see when a remote store keeps failing.

Every remote store (obstore's S3/GCS/Azure clients and :class:`~litstream.storage._http.HTTPStore`) retries
by one :class:`~litstream.storage._base.TransferConfig`: exponential backoff with jitter, at most
``max_retries`` retries, none started after the ``retry_timeout`` deadline. These ``storage_options`` keys
change it, for every scheme (``s3://``, ``gs://``, ``azure://``, ``http(s)://``, ``hf://``):

========================  =====================================================  ========
key                       meaning                                                default
========================  =====================================================  ========
``retry_timeout``         deadline in seconds (or a ``timedelta``) after the     60
                          first try; no retry starts after it
``max_retries``           retries of one request at most (0: none)               100
``backoff_initial``       seconds before the first retry                         0.2
``backoff_max``           longest wait between two tries, in seconds             4
``backoff_base``          growth of the wait per retry (> 1)                     3
========================  =====================================================  ========

For S3 a botocore ``config=Config(retries={"max_attempts": n})`` (what LitData users pass) sets
``max_retries = n - 1``; obstore's own ``retry_config={...}`` is applied last, key by key.

Once the budget is spent the error is a :class:`~litstream.RetriesExhaustedError` that names the URL, the
attempts and the seconds spent. An S3 request that fails because no credentials were given says so (and how
to give them) instead of reporting the instance-metadata address obstore fell back to; the original error is
kept as ``__cause__``.
"""

from __future__ import annotations

import dataclasses
import re
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from .._core._environ import environ
from .._core._errors import ConfigurationError, ObjectNotFoundError, RetriesExhaustedError, StorageError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ._base import TransferConfig

__all__ = ["RETRY_KEYS", "explain_failure", "obstore_retry_config", "retries_exhausted", "transfer_with_options"]

RETRY_KEYS = ("retry_timeout", "max_retries", "backoff_initial", "backoff_max", "backoff_base")
"""The ``storage_options`` keys that set the retry policy of any remote store."""

_RETRIES = re.compile(r"after (\d+) retries")
_S3_CREDENTIALS = frozenset(
    {
        "access_key_id",
        "skip_signature",
        "web_identity_token_file",
        "container_credentials_relative_uri",
        "container_credentials_full_uri",
    }
)


def _seconds(key: str, value: Any, where: str) -> float:
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ConfigurationError(
            f"storage_options[{key!r}]={value!r} for {where}: use a number of seconds >= 0 (or a timedelta)"
        )
    return float(value)


def transfer_with_options(transfer: TransferConfig, options: dict[str, Any], where: str) -> TransferConfig:
    """``transfer`` with the retry keys of ``options`` applied; those keys are removed from ``options``.

    Args:
        transfer: The settings to start from.
        options: ``storage_options`` (a copy the caller owns; the retry keys are popped from it).
        where: The URL, for messages.

    Raises:
        ConfigurationError: a retry key has a value that cannot be used (the message names key and value).
    """
    changes: dict[str, Any] = {}
    for key in RETRY_KEYS:
        if key not in options:
            continue
        value = options.pop(key)
        if key == "max_retries":
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(f"storage_options['max_retries']={value!r} for {where}: use an int >= 0")
            changes[key] = value
        elif key == "backoff_base":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 1:
                raise ConfigurationError(f"storage_options['backoff_base']={value!r} for {where}: use a number > 1")
            changes[key] = float(value)
        else:
            changes[key] = _seconds(key, value, where)
    return dataclasses.replace(transfer, **changes) if changes else transfer


def obstore_retry_config(transfer: TransferConfig, override: Mapping[str, Any]) -> dict[str, Any]:
    """obstore's ``RetryConfig`` for ``transfer``, with the user's ``retry_config`` applied key by key.

    obstore draws each wait uniformly between ``init_backoff`` and ``base`` times the previous wait (capped
    at ``max_backoff``); with its defaults (0.1 s, 2, 10 retries) the budget is spent in about 2 s, so both
    the backoff and the deadline are always set explicitly.
    """
    config: dict[str, Any] = {
        "max_retries": transfer.max_retries,
        "retry_timeout": timedelta(seconds=transfer.retry_timeout),
        "backoff": {
            "init_backoff": timedelta(seconds=transfer.backoff_initial),
            "max_backoff": timedelta(seconds=transfer.backoff_max),
            "base": transfer.backoff_base,
        },
    }
    for key, value in override.items():
        if key == "backoff" and isinstance(value, dict):
            config["backoff"] = {**config["backoff"], **value}
        else:
            config[key] = value
    return config


def retries_exhausted(
    operation: str, where: str, attempts: int, elapsed: float, detail: str, *, hint: str = ""
) -> RetriesExhaustedError:
    """The error for an operation whose retries are spent (``attempts`` counts the first try)."""
    return RetriesExhaustedError(
        f"{operation} failed for {where} after {attempts} attempts in {elapsed:.1f} s{hint}: {detail}; the "
        "retry budget is spent: to ride out longer outages raise storage_options={'retry_timeout': <seconds>, "
        "'max_retries': <n>}"
    )


def _missing_s3_settings(config: Mapping[str, Any]) -> tuple[bool, bool]:
    """(no credentials, no endpoint) for an S3 store, from its configuration and the environment."""
    env = environ()
    env_credentials = (
        env.aws_access_key_id,
        env.aws_skip_signature,
        env.aws_web_identity_token_file,
        env.aws_container_credentials_relative_uri,
        env.aws_container_credentials_full_uri,
    )
    no_credentials = not (_S3_CREDENTIALS & set(config)) and not any(env_credentials)
    no_endpoint = "endpoint" not in config and not (env.aws_endpoint_url_s3 or env.aws_endpoint_url or env.aws_endpoint)
    return no_credentials, no_endpoint


_ENDPOINT_HINT = "for a server other than AWS S3 add 'endpoint_url': 'http://host:port' (or set AWS_ENDPOINT_URL)"


def explain_failure(
    error: StorageError, *, kind: str, config: Mapping[str, Any], operation: str, where: str, elapsed: float
) -> StorageError | None:
    """A clearer error for a failed obstore call, or ``None`` to keep ``error`` as it is.

    * S3 without credentials (none in ``storage_options``, none in ``AWS_*`` variables): obstore asked the
      cloud's instance-metadata service for some; say what is missing and how to pass it.
    * A failure after obstore retried: :class:`~litstream.RetriesExhaustedError` with the attempts and the
      seconds (``elapsed``, measured by the caller); for S3 without an endpoint it adds that requests went to AWS.

    Args:
        error: What :func:`~litstream.storage._base.mapped_errors` raised (its ``__cause__`` is obstore's).
        kind: ``"s3"``, ``"gcs"`` or ``"azure"``.
        config: The store's obstore configuration (keys such as ``access_key_id``, ``endpoint``).
        operation: The operation's name, for the message.
        where: The URL, for the message.
        elapsed: Seconds from the first try until the failure.
    """
    if isinstance(error, ObjectNotFoundError):
        return None
    cause = error.__cause__ if error.__cause__ is not None else error
    text = str(cause).split("\n\nDebug source:", 1)[0].strip()
    no_credentials, no_endpoint = _missing_s3_settings(config) if kind == "s3" else (False, False)
    metadata = str(config.get("metadata_endpoint") or environ().aws_metadata_endpoint or "169.254.169.254")
    if no_credentials and (metadata in text or "169.254.169.254" in text or "credential" in text.lower()):
        extra = f"; {_ENDPOINT_HINT}" if no_endpoint else ""
        return StorageError(
            f"{operation} failed for {where}: no S3 credentials were given (nothing in storage_options, no "
            "AWS_ACCESS_KEY_ID in the environment), and none could be fetched from a cloud instance-metadata "
            "service. Pass storage_options={'aws_access_key_id': ..., 'aws_secret_access_key': ...} (or "
            "{'anon': True} for a public bucket), or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
            f"{extra}. The underlying error is this error's __cause__"
        )
    match = _RETRIES.search(text)
    if match is None or int(match.group(1)) == 0:
        return None
    hint = ""
    if no_endpoint and "amazonaws.com" in text:
        hint = f" (no endpoint was given, so the requests went to AWS S3; {_ENDPOINT_HINT})"
    return retries_exhausted(operation, where, int(match.group(1)) + 1, elapsed, text, hint=hint)
