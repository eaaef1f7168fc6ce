"""A dataset's version log, as readers see it: which versions are committed, and the index of each.

The log's files and records are defined in :mod:`litstream.format._version_log`; writers add to it in
:mod:`litstream.write._commit`. A reader opens either the latest version (``index.json``) or one it names:
a number, a time (the version that was the latest then) or the digest a reader pinned when it first opened
the dataset (:class:`VersionRef`), so that every process of a reader serves the same version however many
commits happen meanwhile.

The calls are synchronous (small objects, a few requests): async code runs them in a worker thread.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from ..._core._errors import ConfigurationError, FormatError, VersionNotFoundError
from ...format._index import INDEX_FILENAME
from ...format._version_log import (
    MAX_RECORD_BYTES,
    RETENTION_KEY,
    VERSIONS_DIR,
    Retention,
    VersionRecord,
    index_digest,
    index_key,
    parse_log_name,
    record_key,
)
from ...storage._versioned import ObjectTooLargeError, versioned

if TYPE_CHECKING:
    from ...storage._store import Store
    from ...storage._versioned import VersionedObjects

__all__ = ["PARTIAL", "VERSION_KEY", "VersionLog", "VersionRef", "check_version", "check_version_digest"]

PARTIAL = "partial"
"""``version="partial"``: serve an interrupted run's partial indexes, merged (an explicit opt-in)."""


@dataclass(frozen=True)
class VersionRef:
    """Which version a reader serves: exactly one of the fields is set (none: the latest).

    Attributes:
        number: A version number (``version=N``).
        at: A time in Unix seconds: the version that was the latest then (``version=datetime``).
        digest: The :func:`~litstream.format._version_log.index_digest` of the version a reader opened first.
        partial: Serve an interrupted run's partial indexes (``version="partial"``).
    """

    number: int | None = None
    at: float | None = None
    digest: str | None = None
    partial: bool = False

    def describe(self) -> str:
        """Words for messages: ``version 3``, ``the version of 2026-12-07T10:00:00Z``, ..."""
        if self.number is not None:
            return f"version {self.number}"
        if self.at is not None:
            return f"the version that was the latest at {_iso(self.at)}"
        if self.digest is not None:
            return f"the version this reader or checkpoint pinned (index digest {self.digest})"
        return "the partial indexes" if self.partial else "the latest version"


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def check_version(version: object) -> VersionRef | None:
    """Check a reader's ``version`` argument and turn it into a :class:`VersionRef` (``None``: the latest).

    Accepted: ``None``; an ``int >= 1``; a timezone-aware ``datetime``; ``"partial"``.

    Raises:
        ConfigurationError: anything else, naming the value and the accepted forms.
    """
    if version is None:
        return None
    if isinstance(version, VersionRef):
        return version
    if isinstance(version, int) and not isinstance(version, bool) and version >= 1:
        return VersionRef(number=version)
    if isinstance(version, datetime):
        if version.tzinfo is None:
            raise ConfigurationError(
                f"version={version!r} has no time zone; give an aware datetime, e.g. datetime(..., tzinfo=timezone.utc)"
            )
        at = version.timestamp()
        if math.isfinite(at):
            return VersionRef(at=at)
    if version == PARTIAL:
        return VersionRef(partial=True)
    raise ConfigurationError(
        f"version={version!r} is not a version: pass None (the latest), a version number >= 1 (see "
        "`litstream versions PATH`), an aware datetime (the version that was the latest then), or 'partial' "
        "(an interrupted run's partial indexes, never a committed version)"
    )


VERSION_KEY = "dataset_version"
"""The key of a checkpoint recording the version (index digest) it was saved on."""

_DIGEST_TEXT = re.compile(r"^xxh3_128:[0-9a-f]{32}$")


def check_version_digest(value: object, what: str) -> VersionRef:
    """A checkpoint's recorded version as a :class:`VersionRef`.

    Raises:
        ConfigurationError: not a digest litstream records (names ``what`` and the value).
    """
    if not isinstance(value, str) or _DIGEST_TEXT.match(value) is None:
        raise ConfigurationError(
            f"checkpoint has {what}={value!r:.80}, which is not a dataset version litstream records "
            "('xxh3_128:<32 hex digits>'); pass the state_dict() litstream saved, unchanged"
        )
    return VersionRef(digest=value)


class VersionLog:
    """The version log of the dataset in ``store`` (see the module docstring).

    Args:
        store: The dataset's location.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.objects: VersionedObjects = versioned(store)
        self.url = store.url

    def numbers(self) -> list[int]:
        """The numbers of the recorded versions, oldest first (one listing of the log's folder, no record read).

        Raises:
            StorageError: the listing failed (a cut listing is retried first).
        """
        found = (parse_log_name(key) for key in self.objects.names(VERSIONS_DIR + "/"))
        return sorted(p[0] for p in found if p is not None and p[1] == "record")

    def records(self) -> list[VersionRecord]:
        """Every committed version's record, oldest first (a record that is not ours raises).

        Raises:
            FormatError: a file in the log that litstream did not write (names it).
            StorageError: the listing or a read failed (a cut listing is retried first).
        """
        out = [self.record(n) for n in self.numbers()]
        return [r for r in out if r is not None]

    def newest(self) -> VersionRecord | None:
        """The newest version's record (one listing and one read), ``None`` for an empty log."""
        for number in reversed(self.numbers()):
            record = self.record(number)
            if record is not None:
                return record
        return None

    def record(self, number: int) -> VersionRecord | None:
        """Version ``number``'s record, ``None`` when there is none.

        Raises:
            FormatError: the file is not a record litstream wrote, or names another number.
        """
        key = record_key(number)
        try:
            found = self.objects.read(key, MAX_RECORD_BYTES)
        except ObjectTooLargeError as exc:
            raise FormatError(f"{self.url}/{key} is not a litstream version record: {exc}") from None
        if found is None:
            return None
        record = VersionRecord.from_json(found[0], f"{self.url}/{key}")
        if record.number != number:
            raise FormatError(f"{self.url}/{key} is the record of version {record.number}, not of {number}")
        return record

    def index_bytes(self, record: VersionRecord) -> bytes:
        """The exact ``index.json`` bytes of a recorded version, checked against its digest.

        Raises:
            VersionNotFoundError: the copy is gone (removed by retention meanwhile).
            FormatError: the copy does not match the record's digest.
        """
        found = self.objects.read(index_key(record.number))
        if found is None:
            raise VersionNotFoundError(
                f"{self.url}: version {record.number}'s index is gone (removed by retention meanwhile?); "
                "open the latest version, or raise the retention's grace (docs/versions.md)"
            )
        if index_digest(found[0]) != record.digest:
            raise FormatError(
                f"{self.url}/{index_key(record.number)} does not match version {record.number}'s digest; the version "
                "log was changed by hand"
            )
        return found[0]

    def head(self) -> tuple[bytes, str] | None:
        """``index.json``'s bytes and store version (ETag, or a local stamp), ``None`` when there is none."""
        return self.objects.read(INDEX_FILENAME)

    def head_digest(self) -> str:
        """The digest of ``index.json``'s bytes, or ``"none"`` when there is none: the version a run builds on."""
        head = self.head()
        return "none" if head is None else index_digest(head[0])

    def retention(self) -> Retention:
        """The dataset's retention setting (``.litstream/retention.json``), else the defaults.

        Raises:
            FormatError: the file is not a setting litstream wrote.
        """
        try:
            found = self.objects.read(RETENTION_KEY, MAX_RECORD_BYTES)
        except ObjectTooLargeError as exc:
            raise FormatError(f"{self.url}/{RETENTION_KEY} is not a litstream retention setting: {exc}") from None
        return Retention() if found is None else Retention.from_json(found[0], f"{self.url}/{RETENTION_KEY}")

    def resolve(self, ref: VersionRef) -> tuple[bytes, VersionRecord]:
        """The ``index.json`` bytes of the recorded version ``ref`` names (a number, a time or a digest: the
        caller has checked the latest version, ``index.json``, for a digest first), and its record.

        Raises:
            VersionNotFoundError: no such committed version (never committed, or removed by retention); the
                message lists the versions there are.
        """
        records = self.records()
        chosen: VersionRecord | None = None
        if ref.number is not None:
            chosen = next((r for r in records if r.number == ref.number), None)
        elif ref.at is not None:
            before = [r for r in records if r.committed_at <= ref.at]
            chosen = before[-1] if before else None
        elif ref.digest is not None:
            chosen = next((r for r in reversed(records) if r.digest == ref.digest), None)
        if chosen is None:
            there = ", ".join(str(r.number) for r in records[-10:]) or "none"
            raise VersionNotFoundError(
                f"{self.url}: {ref.describe()} is not in the version log (kept versions, newest last: {there}); it was "
                "never committed or was removed by retention. Open another version (`litstream versions PATH` lists "
                "them), or keep versions longer with `litstream gc PATH --keep K --grace SECONDS --save`"
            )
        return self.index_bytes(chosen), chosen
