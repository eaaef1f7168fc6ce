"""The configuration of one obstore client (S3, GCS, Azure) as plain, picklable values, and building it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

from .._core._environ import environ
from .._core._errors import ConfigurationError
from ._base import TransferConfig
from ._faults import obstore_retry_config

if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import ModuleType

    from .._core._environ import Environ

__all__ = ["ObstoreSpec"]


def _env_endpoint(env: Environ, kind: str) -> str | None:
    """The endpoint obstore would read from the environment, if any (S3 only)."""
    if kind != "s3":
        return None
    return env.aws_endpoint_url_s3 or env.aws_endpoint_url or env.aws_endpoint


@dataclass(frozen=True)
class ObstoreSpec:
    """Everything needed to build one obstore client, as plain values (picklable, comparable).

    Attributes:
        kind: ``"s3"``, ``"gcs"`` or ``"azure"``.
        bucket: The bucket (S3, GCS) or container (Azure).
        prefix: The key prefix inside the bucket, without leading or trailing ``/`` (``""`` for the root).
        config: obstore's store configuration (``S3Config``, ``GCSConfig``, ``AzureConfig`` keys).
        client_options: obstore's ``ClientConfig``; it overrides what ``transfer`` sets.
        retry_config: obstore's ``RetryConfig`` keys; they override, key by key, the one derived from ``transfer``.
        transfer: Timeouts, retries and multipart sizes.
    """

    kind: Literal["s3", "gcs", "azure"]
    bucket: str
    prefix: str = ""
    config: Mapping[str, Any] = field(default_factory=dict)
    client_options: Mapping[str, Any] = field(default_factory=dict)
    retry_config: Mapping[str, Any] = field(default_factory=dict)
    transfer: TransferConfig = field(default_factory=TransferConfig)

    @property
    def url(self) -> str:
        """The root as a URL, for messages (``"s3://bucket/prefix"``)."""
        scheme = {"s3": "s3", "gcs": "gs", "azure": "azure"}[self.kind]
        return f"{scheme}://{self.bucket}/{self.prefix}".rstrip("/")

    def full_client_options(self) -> dict[str, Any]:
        """The client options obstore gets: ``transfer``'s timeouts < the environment < ``client_options``.

        obstore drops the client options it reads from the environment (``AWS_ALLOW_HTTP``, ``AWS_TIMEOUT``,
        ``AZURE_PROXY_URL``, ...) as soon as any are passed, so they are read here, as it would. An ``http://``
        endpoint from the environment (``AWS_ENDPOINT_URL``) allows plain HTTP, as boto3 does.
        """
        options: dict[str, Any] = {
            "timeout": timedelta(seconds=self.transfer.timeout),
            "connect_timeout": timedelta(seconds=self.transfer.connect_timeout),
        }
        env = environ()
        options.update(env.client_options_for(self.kind))
        options.update(self.client_options)
        if "allow_http" not in options:
            endpoint = self.config.get("endpoint") or self.config.get("base_url") or _env_endpoint(env, self.kind)
            if isinstance(endpoint, str) and endpoint.startswith("http://"):
                options["allow_http"] = True
        return options

    def full_retry_config(self) -> dict[str, Any]:
        """obstore's ``RetryConfig``: the one ``transfer`` describes, with ``retry_config`` applied key by key."""
        return obstore_retry_config(self.transfer, self.retry_config)

    def build(self, native: ModuleType | None = None) -> Any:
        """A new obstore store for this spec (cheap; no request is made).

        Args:
            native: The obstore native module to build it with (what
                :func:`~litstream.storage._obstore_fork.native` gives; default: that one). Only that
                module's functions accept the store.

        Raises:
            ConfigurationError: obstore rejects a configuration key or value.
        """
        if native is None:
            from ._obstore_fork import native as current

            native = current()
        classes = native._store
        cls = {"s3": classes.S3Store, "gcs": classes.GCSStore, "azure": classes.AzureStore}[self.kind]
        try:
            return cls(
                self.bucket,
                prefix=self.prefix or None,
                config=dict(self.config),
                client_options=self.full_client_options(),
                retry_config=self.full_retry_config(),
            )
        except Exception as exc:
            message = str(exc).split("\n\nDebug source:", 1)[0]
            raise ConfigurationError(
                f"{self.url}: obstore rejected the storage configuration: {message}; fix storage_options"
            ) from exc
