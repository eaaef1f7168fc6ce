"""``litstream optimize``: run :func:`litstream.optimize` from the shell.

LitData 0.2.76 has a ``litdata optimize --dataset PATH`` command that only prints a message. This
one does the work, with the arguments of ``optimize()`` spelled as options::

    litstream optimize --fn my_module:to_sample --inputs 'range(1000)' --output-dir data \\
        --chunk-bytes 64MB --num-workers 4 --compression zstd

``--fn`` names the function: ``package.module:function`` (imported with the current directory on
``sys.path``, as ``python -m`` would) or ``path/to/script.py:function`` (loaded from the file and sent
to the workers by value). ``--inputs`` is one of:

* an existing directory: every regular file below it (recursively), as sorted absolute paths;
* an existing file: a ``.json`` file holding a JSON array, any other file one input per line
  (the line without its line break; empty lines skipped);
* a Python literal: a list or tuple (``'[1, 2, 3]'``, ``'["a.jpg", "b.jpg"]'``) or
  ``range(stop)`` / ``range(start, stop[, step])`` with int literals. Nothing else is evaluated.

``--dataset DIR`` is LitData's spelling and means ``--inputs DIR``. The command prints what was
written (``--json``: the :class:`~litstream.RunSummary` as JSON) and exits 0, or prints the error and
exits 1. Nothing heavy is imported until the command runs, so ``litstream --help`` stays fast.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._core._errors import ConfigurationError, OutputNotEmptyError

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from ..write._summary import RunSummary

__all__ = ["add_optimize_command", "load_fn", "parse_inputs", "run_optimize"]


def add_optimize_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``optimize`` to the ``litstream`` parser (options named after ``optimize()``'s arguments)."""
    p = commands.add_parser(
        "optimize",
        help="apply a function to inputs and write the samples as a dataset (litstream.optimize)",
        description="Apply --fn to every input and write the samples as a LitData-format dataset.",
    )
    p.add_argument("--fn", required=True, metavar="MODULE:FUNCTION", help="module:function or script.py:function")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--inputs", metavar="SPEC", help="a directory, a file of inputs, or a list/range literal")
    source.add_argument("--dataset", metavar="DIR", help="LitData's spelling of --inputs DIR")
    p.add_argument("--output-dir", default="optimized_data", help="local directory or URL (default: optimized_data)")
    p.add_argument("--input-dir", default=None, help="directory of the files the inputs name (balances workers)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--chunk-size", type=int, default=None, metavar="N", help="items per chunk")
    size.add_argument(
        "--chunk-bytes",
        default=None,
        metavar="BYTES",
        help="bytes per chunk: 67108864 or 64MB (default 64MB without --chunk-size)",
    )
    p.add_argument("--compression", default=None, help="zstd or zstd:LEVEL (default: none)")
    p.add_argument("--num-workers", type=int, default=None, metavar="N", help="worker processes (default: CPUs)")
    p.add_argument("--batch-size", type=int, default=None, metavar="N", help="pass inputs to --fn in lists of N")
    p.add_argument(
        "--fast-dev-run", type=int, nargs="?", const=10, default=0, metavar="N", help="only N inputs per worker (10)"
    )
    p.add_argument("--mode", choices=["overwrite", "append"], default=None, help="when the output is not empty")
    p.add_argument("--use-checkpoint", action="store_true", help="make a killed run resumable by re-running")
    p.add_argument("--item-loader", choices=["pytree", "tokens"], default="pytree", help="tokens: 1-D token arrays")
    p.add_argument(
        "--chunk-format",
        choices=["arrow", "pytree"],
        default=None,
        help="force Arrow chunks (needs pyarrow) or the pytree layout (default: LitData's choice per sample)",
    )
    p.add_argument(
        "--checksum",
        choices=["xxh3", "sha256", "blake2b", "none"],
        default="xxh3",
        help="the chunk digest recorded in index.json (default xxh3; none records none)",
    )
    p.add_argument("--start-method", default=None, help="multiprocessing start method (fork, spawn, forkserver)")
    p.add_argument("--storage-options", default=None, metavar="JSON", help="credentials for a URL output, as JSON")
    p.add_argument("--no-reorder-files", action="store_true", help="keep the input order with --input-dir")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the run summary as JSON")


def load_fn(spec: str) -> Callable[[Any], Any]:
    """Import ``module:function`` or ``path/to/script.py:function``.

    Raises:
        ConfigurationError: a malformed spec, a module or file that cannot be loaded (its error
            chained), or a missing or non-callable attribute.
    """
    target, sep, name = spec.rpartition(":")
    if not sep or not target or not name.isidentifier():
        raise ConfigurationError(
            f"--fn {spec!r}: expected MODULE:FUNCTION (e.g. my_pkg.prep:to_sample) or SCRIPT.py:FUNCTION"
        )
    if target.endswith(".py"):
        path = Path(target).resolve()
        if not path.is_file():
            raise ConfigurationError(f"--fn {spec!r}: no such file {str(path)!r}")
        module_name = f"_litstream_cli_{path.stem}"
        loader_spec = importlib.util.spec_from_file_location(module_name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise ConfigurationError(f"--fn {spec!r}: {str(path)!r} cannot be loaded as a Python module")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[module_name] = module
        try:
            loader_spec.loader.exec_module(module)
        except Exception as exc:
            raise ConfigurationError(f"--fn {spec!r}: running {str(path)!r} failed: {exc!r}") from exc
        import cloudpickle  # a dependency of litstream; sends this module's functions by value

        cloudpickle.register_pickle_by_value(module)
    else:
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(target)
        except Exception as exc:
            raise ConfigurationError(
                f"--fn {spec!r}: cannot import {target!r} ({exc!r}); run from the folder that holds it, "
                "set PYTHONPATH, or name the file: --fn path/to/script.py:function"
            ) from exc
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ConfigurationError(f"--fn {spec!r}: {target!r} has no function {name!r}")
    return fn  # type: ignore[no-any-return]


def _constant(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


def _literal(spec: str) -> list[Any]:
    try:
        tree = ast.parse(spec.strip(), mode="eval").body
    except SyntaxError:
        tree = None
    if isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and tree.func.id == "range" and not tree.keywords:
        raw = [_constant(a) for a in tree.args]
        args = [a for a in raw if isinstance(a, int) and not isinstance(a, bool)]
        if 1 <= len(args) == len(raw) <= 3 and (len(args) < 3 or args[2] != 0):
            return list(range(*args))
    elif tree is not None:
        value = _constant(tree)
        if isinstance(value, (list, tuple)):
            return list(value)
    raise ConfigurationError(
        f"--inputs {spec!r} is not an existing directory or file, nor a list, tuple or range(...) literal; "
        "e.g. --inputs 'range(100)', --inputs '[\"a.jpg\", \"b.jpg\"]', --inputs inputs.txt or --inputs images/"
    )


def parse_inputs(spec: str) -> list[Any]:
    """The inputs that ``--inputs SPEC`` names (see the module docstring).

    Raises:
        ConfigurationError: ``SPEC`` is none of the accepted forms, a ``.json`` file is not a JSON
            array, or the inputs are empty.
    """
    path = Path(spec)
    if path.is_dir():
        inputs: list[Any] = sorted(str(p.resolve()) for p in path.rglob("*") if p.is_file())
    elif path.is_file():
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json":
            try:
                inputs = json.loads(text)
            except ValueError as exc:
                raise ConfigurationError(f"--inputs {spec!r}: not valid JSON ({exc})") from exc
            if not isinstance(inputs, list):
                raise ConfigurationError(f"--inputs {spec!r}: expected a JSON array, got {type(inputs).__name__}")
        else:
            inputs = [line for line in text.splitlines() if line]
    else:
        inputs = _literal(spec)
    if not inputs:
        raise ConfigurationError(f"--inputs {spec!r} names no inputs; optimize needs at least one")
    return inputs


def run_optimize(args: argparse.Namespace) -> int:
    """Run ``litstream optimize`` with parsed ``args``; print the summary and return the exit code.

    Raises:
        OutputNotEmptyError: the output is not empty and no ``--mode`` was given (the message names the flags).
    """
    fn = load_fn(args.fn)
    inputs = parse_inputs(args.inputs if args.inputs is not None else args.dataset)
    chunk_bytes: int | str | None = args.chunk_bytes
    if isinstance(chunk_bytes, str) and chunk_bytes.isdigit():
        chunk_bytes = int(chunk_bytes)
    if args.chunk_size is None and chunk_bytes is None:
        chunk_bytes = "64MB"  # LitData's default when neither is given
    options = None
    if args.storage_options is not None:
        try:
            options = json.loads(args.storage_options)
        except ValueError as exc:
            raise ConfigurationError(f"--storage-options is not valid JSON ({exc})") from exc
        if not isinstance(options, dict):
            raise ConfigurationError('--storage-options must be a JSON object, e.g. \'{"endpoint_url": "..."}\'')
    try:
        summary = _optimize(args, fn, inputs, chunk_bytes, options)
    except OutputNotEmptyError as exc:
        raise OutputNotEmptyError(_as_flags(str(exc))) from exc
    if args.json:
        print(json.dumps(dataclasses.asdict(summary), indent=2, sort_keys=True))
    else:
        print(
            f"wrote {summary.samples} samples from {summary.inputs} inputs in {summary.chunks} chunks "
            f"({summary.bytes} bytes) to {summary.output} in {summary.seconds:.1f} s"
        )
    return 0


# The keyword arguments an OutputNotEmptyError names as the fix, spelled as this command's flags.
_FLAGS = {
    "mode='overwrite'": "--mode overwrite",
    "mode='append'": "--mode append",
    "use_checkpoint=True": "--use-checkpoint",
}


def _as_flags(message: str) -> str:
    """``message`` with the ``optimize()`` arguments it suggests rewritten as ``litstream optimize`` flags."""
    for argument, flag in _FLAGS.items():
        message = message.replace(argument, flag)
    return message


def _optimize(
    args: argparse.Namespace,
    fn: Callable[[Any], Any],
    inputs: list[Any],
    chunk_bytes: int | str | None,
    options: dict[str, Any] | None,
) -> RunSummary:
    """Call :func:`litstream.optimize` with the parsed options."""
    from ..format._loaders import PyTreeLoader, TokensLoader
    from ..write._optimize import optimize

    return optimize(
        fn=fn,
        inputs=inputs,
        output_dir=args.output_dir,
        input_dir=args.input_dir,
        chunk_size=args.chunk_size,
        chunk_bytes=chunk_bytes,
        compression=args.compression,
        num_workers=args.num_workers,
        fast_dev_run=args.fast_dev_run or False,
        reorder_files=not args.no_reorder_files,
        batch_size=args.batch_size,
        mode=args.mode,
        use_checkpoint=args.use_checkpoint,
        item_loader=TokensLoader() if args.item_loader == "tokens" else PyTreeLoader(),
        start_method=args.start_method,
        storage_options=options,
        verbose=not args.quiet and not args.json,
        checksum=None if args.checksum == "none" else args.checksum,
        chunk_format=args.chunk_format,
    )
