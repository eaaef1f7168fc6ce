"""What ``litstream migrate`` reports about a LitData call: the arguments litstream treats differently.

This table is the one source of truth: ``docs/migrating-from-litdata.md`` shows it under "Arguments
that `litstream migrate` reports", and ``tests/test_migrate.py`` checks that the page and this table
agree row for row and that every function and argument named here exists in litstream's signature.

Pure data, no imports beyond the standard library: the codemod (:mod:`litstream._cli._migrate`) reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ARGUMENT_RULES", "ArgumentRule"]


@dataclass(frozen=True)
class ArgumentRule:
    """One argument of one public function or class that behaves differently from LitData's.

    Attributes:
        function: the public name (``"optimize"``, ``"StreamingDataset"``, ...).
        argument: the keyword argument.
        when: ``"given"``: reported when the call passes the argument by keyword; ``"missing"``: reported
            when it does not (a default whose meaning differs); ``"called"``: reported on every call (the
            argument is usually passed by position).
        note: what litstream does instead, and what to do; one sentence, shown to the user.
    """

    function: str
    argument: str
    when: Literal["given", "missing", "called"]
    note: str


_NO_EFFECT = "accepted without effect (litstream schedules its own I/O)"
_DEFAULT_ONLY = "only the default is accepted; another value raises ConfigurationError"


def _write_rules(function: str) -> tuple[ArgumentRule, ...]:
    """The rows of the LitData-only arguments ``optimize`` and ``map`` share (``write/_params.start_write``
    checks them for both), for ``function``."""
    return (
        ArgumentRule(function, "num_downloaders", "given", _NO_EFFECT),
        ArgumentRule(function, "num_uploaders", "given", _NO_EFFECT),
        ArgumentRule(function, "optimize_dns", "given", _NO_EFFECT),
        ArgumentRule(function, "keep_data_ordered", "given", "accepted without effect (input order is always kept)"),
        ArgumentRule(function, "num_nodes", "given", _DEFAULT_ONLY + " (use DATA_OPTIMIZER_NUM_NODES / _NODE_RANK)"),
        ArgumentRule(function, "machine", "given", _DEFAULT_ONLY),
        ArgumentRule(function, "broadcast_paths", "given", _DEFAULT_ONLY),
    )


ARGUMENT_RULES: tuple[ArgumentRule, ...] = (
    ArgumentRule(
        "optimize",
        "mode",
        "missing",
        "without mode, a non-empty output_dir raises OutputNotEmptyError (LitData deletes stale files); "
        "pass mode='overwrite' or mode='append'",
    ),
    *_write_rules("optimize"),
    ArgumentRule(
        "optimize",
        "fast_dev_run",
        "given",
        "fast_dev_run=True keeps 10 inputs as documented (LitData keeps 1 per worker)",
    ),
    *_write_rules("map"),
    ArgumentRule(
        "StreamingDataset",
        "session_options",
        "given",
        "only None or {} is accepted; give credentials and the profile in storage_options",
    ),
    ArgumentRule("StreamingDataset", "batch_decode", "given", _NO_EFFECT),
    ArgumentRule("StreamingDataset", "window_direct_io", "given", _NO_EFFECT),
    ArgumentRule(
        "StreamingDataset",
        "item_shuffle_window",
        "given",
        "a negative int or an unknown string raises ConfigurationError (LitData falls back to 256)",
    ),
    ArgumentRule(
        "StreamingDataset",
        "subsample",
        "given",
        "an int works too; LitData requires a float (the items chosen are LitData's)",
    ),
    ArgumentRule(
        "ParquetLoader",
        "low_memory",
        "given",
        "rows are decoded one row group at a time with pyarrow whatever the value (bounded memory)",
    ),
    ArgumentRule(
        "merge_datasets",
        "output_dir",
        "called",
        "the output must be empty, and data_spec, item_loader and encryption are checked too",
    ),
)
