"""User-facing faults of remote stores: retry settings in storage_options, and what a missing setting says."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from litstream import ConfigurationError, RetriesExhaustedError, StorageError, StreamingDataset
from litstream.storage._base import TransferConfig
from litstream.storage._obstore import ObstoreStore
from litstream.storage._resolver import store_for
from servers import free_port

pytestmark = pytest.mark.usefixtures("obstore_in_process")

S3 = {"endpoint_url": "http://127.0.0.1:9", "aws_access_key_id": "k", "aws_secret_access_key": "s"}


def _retry(options: dict[str, Any]) -> dict[str, Any]:
    store = store_for("s3://b/p", options)
    assert isinstance(store, ObstoreStore)
    assert store.spec is not None
    return store.spec.full_retry_config()


def test_default_policy_outlasts_a_30_s_outage() -> None:
    retry = _retry(S3)
    assert retry["retry_timeout"] == timedelta(seconds=60)
    assert retry["max_retries"] == 100
    assert retry["backoff"] == {
        "init_backoff": timedelta(seconds=0.2),
        "max_backoff": timedelta(seconds=4),
        "base": 3.0,
    }


def test_retry_keys_in_storage_options() -> None:
    options = {**S3, "retry_timeout": 5, "max_retries": 7, "backoff_initial": 0.5, "backoff_max": 2, "backoff_base": 4}
    retry = _retry(options)
    assert retry["retry_timeout"] == timedelta(seconds=5)
    assert retry["max_retries"] == 7
    assert retry["backoff"] == {"init_backoff": timedelta(seconds=0.5), "max_backoff": timedelta(seconds=2), "base": 4}
    assert _retry({**S3, "retry_timeout": timedelta(minutes=2)})["retry_timeout"] == timedelta(seconds=120)


def test_obstore_retry_config_overrides_key_by_key() -> None:
    retry = _retry({**S3, "retry_config": {"backoff": {"base": 5}, "max_retries": 1}})
    assert retry["max_retries"] == 1
    assert retry["backoff"]["base"] == 5
    assert retry["backoff"]["max_backoff"] == timedelta(seconds=4)  # the rest of litstream's backoff stays


def test_botocore_max_attempts_counts_the_first_try() -> None:
    from botocore.config import Config  # type: ignore[import-untyped]

    assert _retry({**S3, "config": Config(retries={"max_attempts": 5, "mode": "standard"})})["max_retries"] == 4


@pytest.mark.parametrize(
    ("key", "value", "fix"),
    [
        ("retry_timeout", -1, "seconds >= 0"),
        ("retry_timeout", "60", "seconds >= 0"),
        ("max_retries", 2.5, "int >= 0"),
        ("backoff_base", 1, "number > 1"),
    ],
)
def test_bad_retry_values_name_the_key(key: str, value: object, fix: str) -> None:
    with pytest.raises(ConfigurationError, match=rf"storage_options\['{key}'\]=.* for s3://b/p: use .*{fix}"):
        store_for("s3://b/p", {**S3, key: value})


def test_retry_keys_are_accepted_by_http_stores() -> None:
    store = store_for("https://example.invalid/ds", {"retry_timeout": 3})
    assert store.url == "https://example.invalid/ds"
    with pytest.raises(ConfigurationError, match="retry_timeout"):  # the message lists the keys that work
        store_for("https://example.invalid/ds", {"bogus": 1})


def test_transfer_config_rejects_a_base_of_one() -> None:
    with pytest.raises(ConfigurationError, match=r"backoff_base=1"):
        TransferConfig(backoff_base=1)
    assert TransferConfig(backoff_initial=1, backoff_base=3, backoff_max=100).backoff(2) == 9


@pytest.mark.parametrize("metadata", ["default", "dead"])
def test_s3_without_credentials_says_what_is_missing(metadata: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """No credentials and no endpoint: the headline names the keys and variables, not 169.254.169.254."""
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT",
        "AWS_ENDPOINT_URL_S3",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_METADATA_ENDPOINT",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_PROFILE",
    ):
        monkeypatch.delenv(name, raising=False)
    if metadata == "dead":  # a machine without a metadata service
        monkeypatch.setenv("AWS_METADATA_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    options = {"retry_timeout": 1, "connect_timeout": "1s"}
    with pytest.raises(StorageError) as info:
        next(iter(StreamingDataset("s3://some-bucket/ds", storage_options=options)))
    message = str(info.value)
    assert not isinstance(info.value, RetriesExhaustedError)
    assert message.startswith("get failed for s3://some-bucket/ds/")
    assert "no S3 credentials were given" in message
    for hint in (
        "'aws_access_key_id'",
        "'aws_secret_access_key'",
        "AWS_ACCESS_KEY_ID",
        "'endpoint_url'",
        "AWS_ENDPOINT_URL",
    ):
        assert hint in message
    assert "169.254.169.254" not in message
    assert "latest/api/token" in str(info.value.__cause__)  # obstore's request to the metadata service


def test_s3_with_an_endpoint_but_no_credentials_does_not_suggest_an_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_METADATA_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    options = {"endpoint_url": f"http://127.0.0.1:{free_port()}", "retry_timeout": 1}
    with pytest.raises(StorageError, match="no S3 credentials were given") as info:
        next(iter(StreamingDataset("s3://b/ds", storage_options=options)))
    assert "'endpoint_url'" not in str(info.value)
