"""``litstream simulate tune`` and ``litstream simulate calibrate`` (wired in by ``_cli/_simulate.py``).

* ``tune -c CONFIG.yaml -o TUNE.html [--knobs a,b] [--max-runs N] [--time-budget S] [--tolerance F]`` writes
  the sweep's HTML page and ``TUNE.json`` beside it.
* ``calibrate -c CONFIG.yaml [--chunks N] [--network]`` measures the CPU costs (and with ``--network`` the
  round trip and per-connection bandwidth) from real chunks and writes them into CONFIG.yaml.
"""

from __future__ import annotations

import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from .._core._errors import ConfigurationError
from ._simulate_files import load_config, load_relative, relative_to_config, write_text, yaml_module

if TYPE_CHECKING:
    import argparse

__all__ = ["add_tune_commands", "run_tune_command"]


def add_tune_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``tune`` and ``calibrate`` to ``litstream simulate``."""
    from .._sim._tune import KNOBS

    tune = sub.add_parser("tune", help="sweep workers, prefetch, chunk size, batch, cache; recommend settings")
    tune.add_argument("-c", "--config", required=True, help="the YAML config (the starting point)")
    tune.add_argument("-o", "--output", required=True, help="the HTML page to write; TUNE.json goes beside it")
    tune.add_argument("--knobs", default=",".join(KNOBS), help=f"comma-separated knobs (default: {','.join(KNOBS)})")
    tune.add_argument("--max-runs", type=int, default=40, help="simulations at most (default 40)")
    tune.add_argument("--time-budget", type=float, default=300.0, help="real seconds at most (default 300)")
    tune.add_argument("--tolerance", type=float, default=0.02, help="least gain for a change (default 0.02)")
    cal = sub.add_parser("calibrate", help="measure decode costs on this machine into the config")
    cal.add_argument("-c", "--config", required=True, help="the YAML config to update")
    cal.add_argument("--chunks", type=int, default=3, help="real chunks to read (default 3)")
    cal.add_argument("--network", action="store_true", help="also measure the store's rtt and bandwidth")
    cal.add_argument("--startup", action="store_true", help="also measure loader and worker start-up (torch)")
    cal.add_argument("--probes", type=int, default=3, help="fresh interpreters per start-up probe (default 3)")


def _tune(args: argparse.Namespace) -> int:
    from .._sim._tune_html import tune_html
    from ..simulate import tune

    config_path, output = Path(args.config), Path(args.output)
    if output.suffix.lower() not in (".html", ".htm"):
        raise ConfigurationError(f"simulate tune: -o {output}: name an .html file (the JSON is written beside it)")
    if not output.parent.is_dir():
        raise ConfigurationError(f"simulate tune: -o {output}: the folder {output.parent} does not exist")
    knobs = tuple(k.strip() for k in args.knobs.split(",") if k.strip())
    raw = load_relative(config_path)
    report = tune(raw, knobs=knobs, max_runs=args.max_runs, time_budget=args.time_budget, tolerance=args.tolerance)
    json_path = output.with_suffix(".json")
    write_text(json_path, report.to_json())
    write_text(output, tune_html(report))
    advice = ", ".join(f"{k}={v}" for k, v in report.recommended.items()) or "keep the current settings"
    print(
        f"{advice}: predicted epoch {report.baseline.epoch_seconds:.3f} s -> {report.best.epoch_seconds:.3f} s "
        f"({report.speedup:.2f}x) from {len(report.trials)} simulations in {report.real_seconds:.1f} s; "
        f"wrote {output} and {json_path}"
    )
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    from ..simulate import calibrate

    yaml = yaml_module()
    config_path = Path(args.config)
    raw = load_config(config_path)
    measured = calibrate(
        relative_to_config(config_path, raw),
        chunks=args.chunks,
        network=args.network,
        startup=args.startup,
        probes=args.probes,
    )
    costs = dict(raw.get("costs") or {})
    costs.update(measured.costs())
    raw["costs"] = costs
    if args.network:
        network = dict(raw.get("network") or {})
        network.update(measured.network())
        raw["network"] = network
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    header = (
        f"# costs calibrated on {socket.gethostname()} at {when} from {measured.chunks} chunks "
        f"({measured.samples} samples) by `litstream simulate calibrate`.\n"
        "# Times in seconds, sizes in bytes, bandwidths in bytes/s; see docs/simulate.md.\n"
    )
    write_text(config_path, header + yaml.safe_dump(raw, sort_keys=False))
    shown = {**measured.costs(), **measured.network()}
    print(", ".join(f"{k}={v:.3g}" for k, v in shown.items()) + f"; wrote {config_path}")
    return 0


def run_tune_command(args: argparse.Namespace) -> int:
    """Run ``litstream simulate tune|calibrate``; returns the exit code (errors raise LitstreamError)."""
    return _tune(args) if args.simulate_command == "tune" else _calibrate(args)
