"""``litstream simulate``: predict how a cluster would stream a dataset (see :mod:`litstream.simulate`).

* ``litstream simulate init DATASET -c CONFIG.yaml`` writes a YAML configuration for the dataset (the same
  strings as ``StreamingDataset``: a directory, ``s3://...``, ``hf://...``) with every setting at its default,
  after checking that the dataset's index can be read.
* ``litstream simulate run -c CONFIG.yaml -o REPORT.html`` runs the simulation and writes a self-contained HTML
  report and ``REPORT.json`` beside it.
* ``litstream simulate serve -c CONFIG.yaml [--port PORT]`` starts the playground page, whose sliders re-run the
  simulation (see :mod:`litstream._view`).
* ``litstream simulate tune -c CONFIG.yaml -o TUNE.html`` sweeps the knobs (``_cli/_simulate_tune.py``).
* ``litstream simulate calibrate -c CONFIG.yaml`` measures the CPU costs into the config (``_cli/_simulate_tune.py``).

Nothing heavy is imported until a command runs, so ``litstream --help`` stays fast.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._core._errors import ConfigurationError
from .._view._cli import add_server_arguments, storage_options_arg
from ._simulate_files import load_relative, write_text, yaml_module

if TYPE_CHECKING:
    import argparse

__all__ = ["add_simulate_command", "run_simulate"]


def add_simulate_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``simulate init``, ``simulate run`` and ``simulate serve`` to the ``litstream`` parser."""
    # argparse set-up, alike in shape to _cache.add_cache_commands; each command has its own arguments
    p = commands.add_parser("simulate", help="predict a cluster's streaming on the real engine (virtual clock)")
    sub = p.add_subparsers(dest="simulate_command", required=True)
    init = sub.add_parser("init", help="write a YAML simulation config for a dataset")
    init.add_argument("dataset", help="dataset directory or URL (as StreamingDataset takes it)")
    init.add_argument("-c", "--config", required=True, help="the YAML file to write")
    init.add_argument("--force", action="store_true", help="overwrite an existing config file")
    init.add_argument(
        "--storage-options", default=None, help='credentials and client options as a JSON object ({"key": ...})'
    )
    run = sub.add_parser("run", help="run a simulation and write REPORT.html and REPORT.json")
    run.add_argument("-c", "--config", required=True, help="the YAML config (from `litstream simulate init`)")
    run.add_argument("-o", "--output", required=True, help="the HTML report to write; the JSON goes beside it")
    serve = sub.add_parser("serve", help="a local page whose sliders re-run the simulation (needs litstream[view])")
    serve.add_argument("-c", "--config", required=True, help="the YAML config the page starts from")
    add_server_arguments(serve)
    serve.add_argument("--max-samples", type=int, default=2_000_000, help="samples x epochs one run may serve")
    serve.add_argument("--max-sessions", type=int, default=256, help="machines x GPUs x workers one run may have")
    from ._simulate_tune import add_tune_commands

    add_tune_commands(sub)


def _init(dataset: str, config_path: Path, force: bool, options: dict[str, Any]) -> int:
    yaml = yaml_module()

    from .._core._bridge import run_sync
    from ..read.source._index_load import load_index
    from ..simulate import SimulationConfig
    from ..storage._files import local_path
    from ..storage._resolver import store_for

    if config_path.exists() and not force:
        raise ConfigurationError(f"simulate init: {config_path} exists; pass --force to overwrite it")
    store = store_for(dataset, options or None)
    index = run_sync(load_index, store)  # fails here, clearly, for a dataset that cannot be read
    local = local_path(store, "index.json") is not None
    where = os.path.abspath(os.path.expanduser(dataset)) if local and "://" not in dataset else dataset
    config = SimulationConfig(where, chunks="read" if local else "synthesise", storage_options=options).to_mapping()
    header = (
        f"# litstream simulate config for {dataset} ({index.num_items} samples, {len(index.chunks)} chunks).\n"
        "# Times in seconds, sizes in bytes, bandwidths in bytes/s; see docs/simulate.md.\n"
    )
    write_text(config_path, header + yaml.safe_dump(config, sort_keys=False))
    print(f"wrote {config_path}")
    return 0


def _run(config_path: Path, output: Path) -> int:
    from .._sim._html import report_html
    from ..simulate import config_from_mapping, simulate

    if output.suffix.lower() not in (".html", ".htm"):
        raise ConfigurationError(f"simulate run: -o {output}: name an .html file (the JSON is written beside it)")
    if not output.parent.is_dir():
        raise ConfigurationError(f"simulate run: -o {output}: the folder {output.parent} does not exist")
    report = simulate(config_from_mapping(load_relative(config_path)))
    json_path = output.with_suffix(".json")
    write_text(json_path, report.to_json())
    write_text(output, report_html(report))
    print(
        f"epoch {report.epoch_seconds:.2f} s (virtual), first batch after {report.time_to_first_batch['max']:.3f} s, "
        f"stall {report.stall_fraction:.1%}, {report.throttled} throttled; wrote {output} and {json_path} "
        f"in {report.real_seconds:.1f} s"
    )
    return 0


def run_simulate(args: argparse.Namespace) -> int:
    """Run ``litstream simulate init|run|serve``; returns the exit code (errors are raised as LitstreamError)."""
    if args.simulate_command == "init":
        return _init(
            args.dataset,
            Path(args.config),
            args.force,
            storage_options_arg(args.storage_options, "simulate init") or {},
        )
    if args.simulate_command == "serve":
        from .._view._cli import run_serve

        return run_serve(args, load_relative(Path(args.config)))
    if args.simulate_command in ("tune", "calibrate"):
        from ._simulate_tune import run_tune_command

        return run_tune_command(args)
    code = _run(Path(args.config), Path(args.output))
    sys.stdout.flush()
    return code
