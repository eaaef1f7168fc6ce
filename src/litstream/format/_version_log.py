"""The version log's records: what a committed version of a dataset is, named and parsed (pure, no I/O).

A dataset is a sequence of committed versions (``docs/versions.md``). Each version keeps two small objects
under ``.litstream/versions/`` next to the data, numbered from 1:

* ``{n:010d}.index.json``: the exact bytes of that version's ``index.json`` (LitData's format);
* ``{n:010d}.json``: its :class:`VersionRecord` (when, by whom, how much), written once the version was
  committed, so a record exists only for a committed version.

``index.json`` at the root is always the latest committed version, byte for byte what LitData 0.2.76 reads;
litstream tells which version it is by the digest of its bytes (:func:`index_digest`), which every record
carries. The retention setting (:class:`Retention`) is kept beside the log in ``.litstream/retention.json``.

Every file here is a stranger's: the parsers accept only what they produced (types, ranges, sizes) and say
``None`` (or raise :class:`~litstream.FormatError`, naming the file) for anything else.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING

import xxhash

from .._core._errors import ConfigurationError, FormatError

if TYPE_CHECKING:
    import builtins

__all__ = [
    "DEFAULT_GRACE",
    "DEFAULT_KEEP",
    "LOG_DIR",
    "MAX_RECORD_BYTES",
    "RETENTION_KEY",
    "VERSIONS_DIR",
    "Retention",
    "VersionRecord",
    "index_digest",
    "index_key",
    "parse_log_name",
    "record_key",
]

LOG_DIR = ".litstream"
VERSIONS_DIR = f"{LOG_DIR}/versions"
RETENTION_KEY = f"{LOG_DIR}/retention.json"
MAX_RECORD_BYTES = 64 * 1024
"""A record or retention file larger than this is not one of ours (refused before it is parsed)."""

DEFAULT_KEEP = 1
"""Versions kept however old (the newest ones): the latest committed version is never removed."""
DEFAULT_GRACE = 24 * 3600.0
"""Seconds a superseded version stays readable after the commit that superseded it (a reader that opened it
finishes its epoch if the epoch ends within this time)."""

_NAME = re.compile(r"^(\d{10})\.(json|index\.json)$")


def record_key(number: int) -> str:
    """``.litstream/versions/{number:010d}.json``: the key of version ``number``'s record."""
    return f"{VERSIONS_DIR}/{number:010d}.json"


def index_key(number: int) -> str:
    """``.litstream/versions/{number:010d}.index.json``: the key of version ``number``'s ``index.json`` copy."""
    return f"{VERSIONS_DIR}/{number:010d}.index.json"


def parse_log_name(key: str) -> tuple[int, str] | None:
    """``(number, "record" | "index")`` of a key under :data:`VERSIONS_DIR`, ``None`` for any other key."""
    if not key.startswith(VERSIONS_DIR + "/"):
        return None
    match = _NAME.match(key[len(VERSIONS_DIR) + 1 :])
    if match is None or int(match.group(1)) < 1:
        return None
    return int(match.group(1)), "record" if match.group(2) == "json" else "index"


def index_digest(data: bytes | bytearray | memoryview) -> str:
    """``"xxh3_128:<32 hex>"``: the identity of an ``index.json``'s exact bytes (about 20 GB/s on one core)."""
    return "xxh3_128:" + xxhash.xxh3_128_hexdigest(data)


_DIGEST = re.compile(r"^xxh3_128:[0-9a-f]{32}$")


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63


def _text(value: object, limit: int = 256) -> bool:
    return isinstance(value, str) and len(value) <= limit and value.isprintable()


@dataclass(frozen=True)
class VersionRecord:
    """One committed version (the JSON object of ``{n:010d}.json``).

    Attributes:
        number: The version, from 1, one more than the version it replaced.
        committed_at: When ``index.json`` was replaced by it (Unix seconds, UTC).
        digest: :func:`index_digest` of its ``index.json`` bytes.
        operation: The writer (``"optimize"``, ``"map"``, ``"AsyncUploader"``, ``"merge_datasets"``, ...), or
            ``"adopted"`` for a version recorded after the fact (an ``index.json`` written by LitData, by an
            older litstream, or by a run killed between its commit and its record).
        run_id: The writer run's id (its writer lease), ``""`` when adopted.
        host: The writer's host name, ``""`` when adopted.
        pid: The writer's process id, 0 when adopted.
        samples: Items in the version (sum of its chunks' ``chunk_size``).
        chunks: Chunk files it references.
        bytes: Sum of its chunks' ``chunk_bytes`` (bytes before compression).
    """

    number: int
    committed_at: float
    digest: str
    operation: str
    run_id: str = ""
    host: str = ""
    pid: int = 0
    samples: int = 0
    chunks: int = 0
    bytes: int = 0

    def to_json(self) -> builtins.bytes:
        """The record's JSON bytes (sorted keys)."""
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: builtins.bytes, source: str) -> VersionRecord:
        """Parse a record, checking every field.

        Raises:
            FormatError: not a record litstream wrote (names ``source``).
        """
        bad = FormatError(f"{source} is not a litstream version record; remove it, or restore the file it replaced")
        if len(data) > MAX_RECORD_BYTES:
            raise bad
        try:
            raw = json.loads(data.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise bad from None
        if not isinstance(raw, dict):
            raise bad
        known = {f.name for f in fields(cls)}
        try:
            record = cls(**{k: v for k, v in raw.items() if k in known})
        except TypeError:
            raise bad from None
        ok = (
            _count(record.number)
            and record.number >= 1
            and _finite(record.committed_at)
            and isinstance(record.digest, str)
            and _DIGEST.match(record.digest) is not None
            and all(_text(v) for v in (record.operation, record.run_id, record.host))
            and all(_count(v) for v in (record.pid, record.samples, record.chunks, record.bytes))
        )
        if not ok:
            raise bad
        return record


@dataclass(frozen=True)
class Retention:
    """Which superseded versions a dataset keeps (``.litstream/retention.json``; see ``docs/versions.md``).

    A version is kept while it is among the newest ``keep`` versions, or while fewer than ``grace`` seconds
    have passed since the commit that superseded it. Files that no kept version references are removed by
    the next commit (or ``litstream gc``).

    Attributes:
        keep: Newest versions kept however old, ``>= 1`` (default :data:`DEFAULT_KEEP`).
        grace: Seconds a superseded version stays readable, ``>= 0`` (default :data:`DEFAULT_GRACE`, one day).
    """

    keep: int = DEFAULT_KEEP
    grace: float = DEFAULT_GRACE

    def __post_init__(self) -> None:
        if not (isinstance(self.keep, int) and not isinstance(self.keep, bool) and 1 <= self.keep < 2**31):
            raise ConfigurationError(f"keep={self.keep!r}: keep at least the latest version (an int >= 1)")
        if not (_finite(self.grace) and self.grace < 1e10):
            raise ConfigurationError(
                f"grace={self.grace!r}: give the seconds a superseded version stays readable (a number >= 0)"
            )

    def to_json(self) -> bytes:
        """The setting's JSON bytes."""
        return json.dumps({"grace": self.grace, "keep": self.keep}, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes, source: str) -> Retention:
        """Parse a retention setting.

        Raises:
            FormatError: not a setting litstream wrote (names ``source``).
        """
        bad = f"{source} is not a litstream retention setting; set it again with `litstream gc PATH --keep K --save`"
        if len(data) > MAX_RECORD_BYTES:
            raise FormatError(bad)
        try:
            raw = json.loads(data.decode("utf-8"))
            if not isinstance(raw, dict) or set(raw) != {"grace", "keep"}:
                raise FormatError(bad)
            return cls(keep=raw["keep"], grace=raw["grace"])
        except (ValueError, UnicodeDecodeError, ConfigurationError):
            raise FormatError(bad) from None
