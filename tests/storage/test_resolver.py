"""URL forms → Dir + Store, and storage_options → obstore configuration (no network)."""

from __future__ import annotations

import pickle
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from obstore.store import MemoryStore

from litstream import ConfigurationError
from litstream.storage._resolver import Dir, resolve_dir, store_for
from litstream.storage._store import (
    HTTPStore,
    LocalFileStore,
    ObstoreSpec,
    ObstoreStore,
    Store,
    TransferConfig,
)
from peer import require_dev

if TYPE_CHECKING:
    from pathlib import Path

S3_OPTIONS = {
    "endpoint_url": "http://127.0.0.1:9000",
    "aws_access_key_id": "AKIA",
    "aws_secret_access_key": "SECRET",
    "aws_session_token": "TOKEN",
    "region_name": "eu-west-1",
}


@pytest.fixture(autouse=True)
def _no_storage_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("HF_ENDPOINT", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "STORAGE_EMULATOR_HOST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # no token file


def spec_of(store: Store) -> ObstoreSpec:
    assert isinstance(store, ObstoreStore)
    assert store.spec is not None
    return store.spec


def http_of(store: Store) -> HTTPStore:
    assert isinstance(store, HTTPStore)
    return store


def test_local_forms(tmp_path: Path) -> None:
    assert resolve_dir(str(tmp_path)) == Dir(path=str(tmp_path))
    assert resolve_dir(f"file://{tmp_path}") == Dir(path=str(tmp_path))
    assert resolve_dir(f"file://localhost{tmp_path}") == Dir(path=str(tmp_path))
    assert resolve_dir(f"file://{tmp_path}/with%20space") == Dir(path=str(tmp_path / "with space"))
    assert resolve_dir(f"local:{tmp_path}") == Dir(path=str(tmp_path))
    assert resolve_dir(tmp_path / "x") == Dir(path=str(tmp_path / "x"))
    assert resolve_dir(Dir(path=str(tmp_path), url="s3://b/p")) == Dir(path=str(tmp_path), url="s3://b/p")
    assert isinstance(store_for(tmp_path), LocalFileStore)
    assert isinstance(store_for(tmp_path, {"anything": 1}), LocalFileStore)  # ignored for local paths, as LitData
    memory = ObstoreStore(MemoryStore())
    assert store_for(memory) is memory


@pytest.mark.parametrize(
    "url",
    [
        "s3://bucket/ds",
        "r2://bucket/ds",
        "gs://b/p",
        "azure://c/p",
        "az://c/p",
        "abfss://c@acct.dfs.core.windows.net/p",
        "hf://datasets/a/b",
        "https://x/y",
        "http://x/y",
    ],
)
def test_remote_urls_resolve_to_a_url_dir(url: str) -> None:
    assert resolve_dir(url) == Dir(url=url)
    assert resolve_dir(Dir(url=url)) == Dir(url=url)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("ftp://host/x", r"input_dir='ftp://host/x': unknown URL scheme 'ftp'; use a local path or one of"),
        ("file://otherhost/x", "file:// URLs must name this machine"),
        ("", "input_dir is required"),
        (None, "input_dir is required"),
        ("s3:///no-bucket", "names no bucket; use s3://<bucket>/<path>"),
        ("hf://models/org/name", "only Hub datasets can be read"),
        ("hf://datasets/org", r"use hf://datasets/<org>/<name>\[@revision\]/<path>"),
        ("r2://bucket/p", "r2:// needs storage_options"),
    ],
)
def test_bad_locations_name_the_value_and_the_fix(value: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        store_for(value)


def test_s3_with_boto_style_options() -> None:
    store = store_for("s3://bucket/a/b/", S3_OPTIONS)
    spec = spec_of(store)
    assert (spec.kind, spec.bucket, spec.prefix, store.url) == ("s3", "bucket", "a/b", "s3://bucket/a/b")
    assert spec.config == {
        "endpoint": "http://127.0.0.1:9000",
        "access_key_id": "AKIA",
        "secret_access_key": "SECRET",
        "session_token": "TOKEN",
        "region": "eu-west-1",
        "aws_endpoint_url_s3": "http://127.0.0.1:9000",  # AWS_ENDPOINT_URL_S3 in the environment would beat it
    }
    assert spec.client_options == {"allow_http": True}  # the endpoint is plain http
    assert store_for("s3://bucket", S3_OPTIONS).url == "s3://bucket"
    assert spec_of(store_for("s3://bucket")).prefix == ""


def test_s3_with_obstore_keys_client_and_retry_options() -> None:
    options = {
        "endpoint": "https://s3.example",
        "AWS_REGION": "us-west-2",
        "skip_signature": True,
        "virtual_hosted_style_request": True,
        "timeout": "30s",
        "client_options": {"pool_max_idle_per_host": "4"},
        "retry_config": {"max_retries": 2},
    }
    spec = spec_of(store_for("s3://b/p", options))
    assert spec.config == {
        "endpoint": "https://s3.example",
        "aws_endpoint_url_s3": "https://s3.example",
        "region": "us-west-2",
        "skip_signature": True,
        "virtual_hosted_style_request": True,
    }
    assert spec.client_options == {"timeout": "30s", "pool_max_idle_per_host": "4"}
    assert spec.full_client_options()["timeout"] == "30s"  # the user's value beats TransferConfig's
    retry = spec.full_retry_config()
    assert retry["max_retries"] == 2  # the user's key wins; the deadline and backoff stay litstream's
    assert retry["retry_timeout"] == timedelta(seconds=60)
    assert retry["backoff"]["max_backoff"] == timedelta(seconds=4)


@pytest.mark.parametrize("options", [{"anon": True}, {"unsigned": True}])
def test_s3_anonymous(options: dict[str, Any]) -> None:
    assert spec_of(store_for("s3://b/p", options)).config == {"skip_signature": True}


def test_s3_botocore_config_unsigned() -> None:
    botocore = require_dev("botocore")
    from botocore.config import Config  # type: ignore[import-untyped]

    config = Config(signature_version=botocore.UNSIGNED, region_name="ap-south-1", s3={"addressing_style": "virtual"})
    spec = spec_of(store_for("s3://b/p", {"config": config}))
    assert spec.config == {"skip_signature": True, "region": "ap-south-1", "virtual_hosted_style_request": True}


def test_transfer_config_becomes_obstore_timeouts_and_retries() -> None:
    transfer = TransferConfig(timeout=7, connect_timeout=2, max_retries=3, backoff_initial=0.5, retry_timeout=9)
    spec = spec_of(store_for("s3://b/p", S3_OPTIONS, transfer=transfer))
    assert spec.full_client_options() == {
        "timeout": timedelta(seconds=7),
        "connect_timeout": timedelta(seconds=2),
        "allow_http": True,
    }
    retry = spec.full_retry_config()
    assert retry["max_retries"] == 3
    assert retry["retry_timeout"] == timedelta(seconds=9)
    assert retry["backoff"]["init_backoff"] == timedelta(seconds=0.5)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"endpointurl": "x"}, r"storage_options\['endpointurl'\] is not a known option for s3://b/p; use one of"),
        ({"data_connection_id": "x"}, "Lightning data connections are not supported"),
        ({"client_options": {"bogus": 1}}, r"has unknown keys \['bogus'\]"),
    ],
)
def test_unknown_s3_options(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        store_for("s3://b/p", options)


def test_client_options_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """obstore ignores AWS_ALLOW_HTTP etc. once client options are passed; the spec reads them instead."""
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    monkeypatch.setenv("AWS_TIMEOUT", "5s")
    options = spec_of(store_for("s3://b/p", {"timeout": "9s"})).full_client_options()
    assert (options["allow_http"], options["timeout"]) == ("true", "9s")  # explicit options win
    monkeypatch.delenv("AWS_ALLOW_HTTP")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")  # an http endpoint allows http, as in boto3
    assert spec_of(store_for("s3://b/p")).full_client_options()["allow_http"] is True


def test_r2_needs_an_endpoint_and_is_s3() -> None:
    store = store_for("r2://bucket/p", {"endpoint_url": "https://acct.r2.cloudflarestorage.com"})
    assert spec_of(store).kind == "s3"
    assert store.url == "r2://bucket/p"


def test_gcs_options(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = spec_of(store_for("gs://bucket/p", {"project": "ignored", "token": "anon"}))
    assert (spec.kind, spec.bucket, spec.prefix, spec.config) == ("gcs", "bucket", "p", {"skip_signature": True})
    spec = spec_of(store_for("gs://b", {"client_options": {"api_endpoint": "http://127.0.0.1:1"}, "token": "/sa.json"}))
    assert spec.config == {"base_url": "http://127.0.0.1:1", "service_account": "/sa.json"}
    assert spec.client_options == {"allow_http": True}
    assert spec_of(store_for("gs://b", {"google_service_account": "/x.json"})).config == {"service_account": "/x.json"}
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "127.0.0.1:4443")  # google-cloud-storage's emulator switch
    spec = spec_of(store_for("gs://b/p"))
    assert spec.config == {"base_url": "http://127.0.0.1:4443", "bearer_token": "emulator"}
    assert spec.client_options == {"allow_http": True}


def test_azure_forms_and_options() -> None:
    for url in ("azure://container/p/q", "az://container/p/q"):
        spec = spec_of(store_for(url, {"account_name": "acct", "account_key": "a2V5"}))
        assert (spec.kind, spec.bucket, spec.prefix) == ("azure", "container", "p/q")
        assert spec.config == {"account_name": "acct", "account_key": "a2V5"}
    spec = spec_of(store_for("abfss://container@acct.dfs.core.windows.net/p"))
    assert (spec.bucket, spec.prefix, spec.config) == ("container", "p", {"account_name": "acct"})
    spec = spec_of(store_for("azure://c", {"account_url": "https://acct.blob.core.windows.net", "credential": "a2V5"}))
    assert spec.config == {
        "endpoint": "https://acct.blob.core.windows.net",
        "account_key": "a2V5",
        "account_name": "acct",
    }
    spec = spec_of(store_for("azure://c", {"account_name": "acct", "credential": "?sv=1&sig=abc"}))
    assert spec.config == {"account_name": "acct", "sas_key": "sv=1&sig=abc"}
    conn = "DefaultEndpointsProtocol=http;AccountName=dev;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:1/dev;"
    spec = spec_of(store_for("azure://c", {"connection_string": conn}))
    assert spec.config == {"account_name": "dev", "account_key": "a2V5", "endpoint": "http://127.0.0.1:1/dev"}
    assert spec.client_options == {"allow_http": True}
    with pytest.raises(ConfigurationError, match="only an account key or SAS token string"):
        store_for("azure://c", {"credential": object()})


def test_hf_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    store = http_of(store_for("hf://datasets/org/name"))
    assert store.base_url == "https://huggingface.co/datasets/org/name/resolve/main"
    assert store.url == "hf://datasets/org/name"
    store = http_of(store_for("hf://datasets/org/name@v1.0/data/train"))
    assert store.base_url == "https://huggingface.co/datasets/org/name/resolve/v1.0/data/train"
    assert store.lister is not None
    assert (store.lister.repo, store.lister.revision, store.lister.root) == ("org/name", "v1.0", "data/train")
    store = http_of(store_for("hf://datasets/org/name@refs%2Fconvert%2Fparquet/x"))
    assert store.base_url.endswith("/resolve/refs%2Fconvert%2Fparquet/x")
    assert http_of(store_for("hf://datasets/o/n", {"revision": "dev"})).base_url.endswith("/resolve/dev")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:1/")
    assert http_of(store_for("hf://datasets/o/n")).base_url == "http://127.0.0.1:1/datasets/o/n/resolve/main"
    explicit = http_of(store_for("hf://datasets/o/n", {"endpoint": "http://127.0.0.1:2"}))
    assert explicit.base_url.startswith("http://127.0.0.1:2/")  # the option beats the environment
    with pytest.raises(ConfigurationError, match=r"storage_options \['repo_type'\] are not used"):
        store_for("hf://datasets/o/n", {"repo_type": "dataset"})


def test_hf_token_sources(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def auth(store: Store) -> str | None:
        return http_of(store)._headers.get("Authorization")

    assert auth(store_for("hf://datasets/o/n")) is None
    assert auth(store_for("hf://datasets/o/n", {"token": "hf_opt"})) == "Bearer hf_opt"
    (tmp_path / "hf-home").mkdir()
    (tmp_path / "hf-home" / "token").write_text("hf_file\n")
    assert auth(store_for("hf://datasets/o/n")) == "Bearer hf_file"
    monkeypatch.setenv("HF_TOKEN", "hf_env")
    assert auth(store_for("hf://datasets/o/n")) == "Bearer hf_env"
    assert auth(store_for("hf://datasets/o/n", {"token": False})) is None


def test_http_urls() -> None:
    store = http_of(store_for("https://example.org/data/ds/", {"headers": {"X-Key": "1"}}))
    assert (store.base_url, store.url, store.lister) == (
        "https://example.org/data/ds",
        "https://example.org/data/ds",
        None,
    )
    with pytest.raises(ConfigurationError, match=r"allowed keys: headers"):
        store_for("https://example.org/x", {"endpoint_url": "x"})


def test_storage_options_with_a_ready_store_is_an_error() -> None:
    with pytest.raises(ConfigurationError, match="cannot be applied to a ready store"):
        store_for(ObstoreStore(MemoryStore(), url="memory://"), {"anon": True})


def test_remote_stores_pickle_as_configuration() -> None:
    store = store_for("s3://bucket/p", S3_OPTIONS)
    copy = pickle.loads(pickle.dumps(store))
    assert isinstance(copy, ObstoreStore)
    assert (copy.spec, copy.url) == (spec_of(store), store.url)
    assert copy._clients.held is None  # no client travels: it is built where it is used
    hub = pickle.loads(pickle.dumps(store_for("hf://datasets/o/n", {"token": "t"})))
    assert http_of(hub).base_url == "https://huggingface.co/datasets/o/n/resolve/main"


def test_obstore_rejecting_a_key_is_a_configuration_error() -> None:
    store = ObstoreStore(spec=ObstoreSpec("s3", "b", config={"no_such_key": "x"}))
    with pytest.raises(ConfigurationError, match="obstore rejected the storage configuration"):
        anyio.run(store.get, "x")


def test_obstore_store_needs_a_store_or_a_spec() -> None:
    with pytest.raises(ConfigurationError, match="exactly one of"):
        ObstoreStore()
