"""``storage_options`` → obstore configuration, for S3, GCS and Azure.

Users of LitData pass the keyword arguments of each provider's SDK (boto3's ``endpoint_url``,
``aws_access_key_id``, ``region_name``, ``config=Config(signature_version=UNSIGNED)``; Azure's
``account_url``/``credential``/``connection_string``; ``google.cloud.storage.Client``'s ``project``);
obstore users pass obstore's own keys (``endpoint``, ``access_key_id``, ``skip_signature``, and the
``aws_``/``google_``/``azure_storage_`` prefixed forms). Both are accepted, plus obstore's HTTP client keys
(``allow_http``, ``timeout``, …) at the top level or under ``client_options``, and ``retry_config``.
Anything else is a :class:`~litstream.ConfigurationError` that names the key.

LitData / SDK keys and what they become:

* ``endpoint_url`` → ``endpoint`` (S3, Azure) or ``base_url`` (GCS); an ``http://`` endpoint turns on the
  client's ``allow_http``.
* ``aws_access_key_id``, ``aws_secret_access_key``, ``aws_session_token`` → ``access_key_id``,
  ``secret_access_key``, ``session_token``; ``region_name`` → ``region``.
* ``anon=True``, ``unsigned=True``, ``config=Config(signature_version=UNSIGNED)``, GCS ``token="anon"`` →
  ``skip_signature=True``; ``verify=False`` → the client's ``allow_invalid_certificates=True``.
* Azure ``account_url``, ``credential`` (key or SAS), ``connection_string`` → ``endpoint``,
  ``account_name``, ``account_key`` or ``sas_key``.
* GCS ``project`` → ignored (object operations do not need it).
* botocore ``Config(retries={"max_attempts": n})`` → ``retry_config["max_retries"] = n - 1``. The retry keys
  every remote store takes (``retry_timeout``, ``max_retries``, ...) are read before this mapping, by
  :mod:`~litstream.storage._faults`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._core._environ import CLIENT_KEYS
from .._core._errors import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["CLIENT_KEYS", "obstore_options"]

_KEYS = {
    "s3": frozenset(
        "access_key_id checksum_algorithm conditional_put container_credentials_relative_uri "
        "container_credentials_full_uri container_authorization_token_file copy_if_not_exists default_region "
        "disable_tagging disable_bulk_delete endpoint imdsv1_fallback metadata_endpoint region request_payer role_arn "
        "role_session_name s3_express secret_access_key server_side_encryption session_token skip_signature "
        "sse_bucket_key_enabled sse_customer_key_base64 sse_kms_key_id sts_endpoint unsigned_payload "
        "virtual_hosted_style_request web_identity_token_file aws_endpoint_url_s3".split()
    ),
    "gcs": frozenset(
        "service_account service_account_key base_url bearer_token application_credentials skip_signature".split()
    ),
    "azure": frozenset(
        "account_name account_key client_id client_secret credential_type tenant_id authority_host sas_key token "
        "use_emulator use_fabric_endpoint encryption_key endpoint msi_endpoint object_id msi_resource_id "
        "federated_token_file use_azure_cli skip_signature disable_tagging fabric_token_service_url "
        "fabric_workload_host fabric_session_token fabric_cluster_identifier".split()
    ),
}
_PREFIXES = {"s3": ("aws_",), "gcs": ("google_",), "azure": ("azure_storage_", "azure_")}
_ALIASES = {
    "s3": {
        "endpoint_url": "endpoint",
        "endpoint_url_s3": "aws_endpoint_url_s3",
        "region_name": "region",
        "token": "session_token",
        "key": "access_key_id",
        "secret": "secret_access_key",
        "requester_pays": "request_payer",
    },
    "gcs": {"endpoint_url": "base_url", "endpoint": "base_url", "service_account_path": "service_account"},
    "azure": {"endpoint_url": "endpoint", "account_url": "endpoint", "account": "account_name", "sas_token": "sas_key"},
}
_ANONYMOUS = frozenset({"anon", "anonymous", "unsigned"})
_IGNORED = {"gcs": frozenset({"project"})}
_LIGHTNING_ONLY = frozenset({"data_connection_id"})


def _normalise(kind: str, key: str) -> str:
    name = key.lower()
    for prefix in _PREFIXES[kind]:
        rest = name[len(prefix) :]
        if name.startswith(prefix) and (rest in _KEYS[kind] or rest in _ALIASES[kind] or rest in CLIENT_KEYS):
            return rest
    return name


def _botocore_config(config: Any, out: dict[str, Any], client: dict[str, Any], retry: dict[str, Any]) -> None:
    """Read what obstore can use from a ``botocore.config.Config`` (duck-typed: botocore is not needed)."""
    signature = getattr(config, "signature_version", None)
    if signature is not None and "UNSIGNED" in (type(signature).__name__, str(signature)):
        out["skip_signature"] = True
    region = getattr(config, "region_name", None)
    if region:
        out["region"] = region
    style = (getattr(config, "s3", None) or {}).get("addressing_style")
    if style in ("virtual", "path"):
        out["virtual_hosted_style_request"] = style == "virtual"
    for attr, key in (("connect_timeout", "connect_timeout"), ("read_timeout", "read_timeout")):
        value = getattr(config, attr, None)
        if isinstance(value, (int, float)):
            client[key] = f"{value}s"
    attempts = (getattr(config, "retries", None) or {}).get("max_attempts")
    if isinstance(attempts, int) and not isinstance(attempts, bool) and attempts >= 1:
        retry["max_retries"] = attempts - 1  # botocore counts the first try


def _azure_credential(credential: Any, out: dict[str, Any], where: str) -> None:
    if isinstance(credential, str):
        if credential.startswith("?") or "sig=" in credential:
            out["sas_key"] = credential.lstrip("?")
        else:
            out["account_key"] = credential
    elif isinstance(credential, dict) and {"account_name", "account_key"} >= set(credential):
        out.update(credential)
    else:
        raise ConfigurationError(
            f"storage_options['credential']={type(credential).__name__} for {where}: only an account key or SAS "
            "token string, or {'account_name': ..., 'account_key': ...}, can be used; for other identities use "
            "obstore's keys (client_id, client_secret, tenant_id, use_azure_cli, ...) or its environment variables"
        )


def _azure_connection_string(text: str, out: dict[str, Any]) -> None:
    parts = dict(p.split("=", 1) for p in text.split(";") if "=" in p)
    mapping = {"AccountName": "account_name", "AccountKey": "account_key", "BlobEndpoint": "endpoint"}
    for field_name, key in mapping.items():
        if parts.get(field_name):
            out[key] = parts[field_name]
    if parts.get("SharedAccessSignature"):
        out["sas_key"] = parts["SharedAccessSignature"].lstrip("?")
    if "endpoint" not in out and parts.get("AccountName"):
        protocol = parts.get("DefaultEndpointsProtocol", "https")
        suffix = parts.get("EndpointSuffix", "core.windows.net")
        out["endpoint"] = f"{protocol}://{parts['AccountName']}.blob.{suffix}"


def obstore_options(
    kind: str, options: Mapping[str, Any] | None, *, where: str
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Split ``storage_options`` into obstore's ``(config, client_options, retry_config)`` for one provider.

    Args:
        kind: ``"s3"``, ``"gcs"`` or ``"azure"``.
        options: What the user passed (``None``: nothing; credentials then come from the environment, as
            obstore reads ``AWS_*``, ``GOOGLE_*`` and ``AZURE_STORAGE_*`` variables).
        where: The URL, for messages.

    Raises:
        ConfigurationError: a key is unknown for this provider, or a value cannot be used.
    """
    config: dict[str, Any] = {}
    client: dict[str, Any] = {}
    retry: dict[str, Any] = {}
    for key, value in (options or {}).items():
        if not isinstance(key, str):
            raise ConfigurationError(f"storage_options keys must be strings, got {key!r} for {where}")
        name = _normalise(kind, key)
        if name in _LIGHTNING_ONLY:
            raise ConfigurationError(
                f"storage_options[{key!r}] for {where}: Lightning data connections are not supported; pass the "
                "endpoint and credentials (endpoint_url, aws_access_key_id, aws_secret_access_key) instead"
            )
        if name in _IGNORED.get(kind, ()):
            continue
        if name == "client_options" and isinstance(value, dict):
            extra = dict(value)
            if kind == "gcs" and "api_endpoint" in extra:
                config["base_url"] = extra.pop("api_endpoint")
            unknown = sorted(set(extra) - CLIENT_KEYS)
            if unknown:
                raise ConfigurationError(
                    f"storage_options['client_options'] for {where} has unknown keys {unknown}; "
                    f"use obstore ClientConfig keys: {', '.join(sorted(CLIENT_KEYS))}"
                )
            client.update(extra)
        elif name == "retry_config" and isinstance(value, dict):
            retry.update(value)
        elif name == "config" and kind == "s3":
            _botocore_config(value, config, client, retry)
        elif name == "verify":
            if value is False:
                client["allow_invalid_certificates"] = True
            elif value is not True and value is not None:
                client["root_certificate"] = str(value)
        elif name in _ANONYMOUS or (kind == "gcs" and name == "token" and value == "anon"):
            if value:
                config["skip_signature"] = True
        elif kind == "gcs" and name == "token" and isinstance(value, str):
            config["service_account"] = value
        elif kind == "azure" and name == "credential":
            _azure_credential(value, config, where)
        elif kind == "azure" and name == "connection_string":
            _azure_connection_string(str(value), config)
        elif name in CLIENT_KEYS:
            client[name] = value
        elif name in _ALIASES[kind] or name in _KEYS[kind]:
            config[_ALIASES[kind].get(name, name)] = value
        else:
            known = sorted(_KEYS[kind] | set(_ALIASES[kind]) | CLIENT_KEYS)
            raise ConfigurationError(
                f"storage_options[{key!r}] is not a known option for {where}; use one of: {', '.join(known)}"
            )
    if kind == "s3" and "endpoint" in config:
        # AWS_ENDPOINT_URL_S3 in the environment would beat an explicit endpoint (B34): pin both.
        config.setdefault("aws_endpoint_url_s3", config["endpoint"])
    endpoint = config.get("base_url" if kind == "gcs" else "endpoint")
    if isinstance(endpoint, str) and endpoint.startswith("http://"):
        client.setdefault("allow_http", True)
    if kind == "azure" and isinstance(endpoint, str) and "account_name" not in config:
        host = endpoint.split("://", 1)[-1].split("/", 1)[0]
        if ".blob." in host or ".dfs." in host:
            config["account_name"] = host.split(".", 1)[0]
    return config, client, retry
