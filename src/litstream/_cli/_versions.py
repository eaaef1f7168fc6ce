"""``litstream versions PATH`` and ``litstream gc PATH``: a dataset's versions, and removing what retention
no longer keeps (see :mod:`litstream.write._retention` and ``docs/versions.md``)."""

from __future__ import annotations

import datetime
import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

__all__ = ["add_version_commands", "run_gc", "run_versions"]


def add_version_commands(commands: Any) -> None:
    """Add ``versions`` and ``gc`` to the ``litstream`` sub-commands."""
    versions = commands.add_parser("versions", help="list a dataset's committed versions (time, writer, samples)")
    versions.add_argument("path", help="dataset directory or URL")
    versions.add_argument("--json", action="store_true", help="print the versions as JSON")
    gc = commands.add_parser("gc", help="remove versions retention no longer keeps, and files of crashed runs")
    gc.add_argument("path", help="dataset directory or URL")
    gc.add_argument("--keep", type=int, default=None, help="newest versions kept however old (default: setting, 1)")
    gc.add_argument(
        "--grace",
        type=float,
        default=None,
        help="seconds a superseded version stays readable (default: setting, 1 day)",
    )
    gc.add_argument("--save", action="store_true", help="store --keep/--grace as the dataset's retention setting")
    gc.add_argument("--dry-run", action="store_true", help="print what would be removed, remove nothing")


def _when(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def run_versions(args: argparse.Namespace) -> int:
    """``litstream versions``: one line per kept version, the latest marked."""
    from ..write._retention import list_versions

    found = list_versions(args.path)
    if args.json:
        print(json.dumps([asdict(v) for v in found], indent=2, sort_keys=True))
        return 0
    print(f"{'version':>8}  {'committed (UTC)':<20}  {'writer':<28}  {'samples':>10}  {'chunks':>7}  {'bytes':>14}")
    for v in found:
        number = "-" if v.number is None else str(v.number)
        writer = v.operation + (f" {v.run_id}" if v.run_id else "") + (f"@{v.host}" if v.host else "")
        mark = "  latest" if v.latest else (f"  expires {_when(v.expires_at)}" if v.expires_at is not None else "")
        print(
            f"{number:>8}  {_when(v.committed_at):<20}  {writer[:28]:<28}  {v.samples:>10,}  {v.chunks:>7,}  "
            f"{v.bytes:>14,}{mark}"
        )
    return 0


def run_gc(args: argparse.Namespace) -> int:
    """``litstream gc``: expire versions, remove leftovers, print what went (or would go)."""
    from ..write._retention import collect_garbage

    report = collect_garbage(args.path, keep=args.keep, grace=args.grace, save=args.save, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    expired = ", ".join(map(str, report.expired)) or "none"
    print(f"versions expired: {expired}; kept: {', '.join(map(str, report.kept)) or 'none'}")
    print(f"{verb} {len(report.removed)} files")
    for name in report.removed:
        print(f"  {name}")
    return 0
