"""``litstream view DATASET`` and ``litstream simulate serve -c CONFIG.yaml``: start the local web app.

Both read what they need first (the index; for ``serve`` also the simulation's dataset), so a dataset that
cannot be read fails here with the usual error and exit code 1, before anything listens. Nothing heavy is
imported until a command runs.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from .._core._errors import ConfigurationError

if TYPE_CHECKING:
    import argparse

    from starlette.applications import Starlette

__all__ = ["add_server_arguments", "add_view_command", "run_serve", "run_view", "storage_options_arg"]


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """``--host``, ``--port`` and ``--backend``."""
    parser.add_argument("--port", type=int, default=8000, help="TCP port to listen on (default 8000)")
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)"
    )
    parser.add_argument(
        "--backend",
        choices=("asyncio", "trio"),
        default="asyncio",
        help="asyncio (uvicorn, default) or trio (Hypercorn)",
    )


def add_view_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``litstream view`` to the ``litstream`` parser."""
    p = commands.add_parser("view", help="look at a dataset in the browser (index, chunks, samples, keys)")
    p.add_argument("dataset", help="dataset directory or URL (as StreamingDataset takes it)")
    p.add_argument("--storage-options", default=None, help="credentials and client options as a JSON object")
    p.add_argument("--block-size", type=int, default=256, help="tokens per sample shown of a token dataset")
    add_server_arguments(p)


# Alike in shape to _cli/_simulate_files.load_config (parse, then check for a mapping), but that reads a YAML file
# with its own messages; the two share no code.
def storage_options_arg(text: str | None, command: str) -> dict[str, Any] | None:
    """A ``--storage-options`` value (``None`` when not given) as the JSON object it must be.

    Raises:
        ConfigurationError: ``text`` is not JSON, or not an object; the message starts with ``command``.
    """
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"{command}: --storage-options {text!r} is not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ConfigurationError(f"{command}: --storage-options {text!r}: pass a JSON object")
    return value


def _check_address(host: str, port: int) -> list[str] | None:
    """The ``Host`` names to answer (loopback only when serving on loopback); warns when not on loopback."""
    from ._app import LOOPBACK_NAMES, is_loopback

    if not 1 <= port <= 65535:
        raise ConfigurationError(f"--port {port} is not usable; use a TCP port from 1 to 65535")
    if is_loopback(host):
        return [*LOOPBACK_NAMES, host]
    print(
        f"litstream: serving on {host}, not loopback: anyone who can reach this machine can use the app and read "
        "the dataset through it",
        file=sys.stderr,
    )
    return None


def _start(app: Starlette, args: argparse.Namespace, what: str) -> int:
    from ._app import serve

    shown = f"[{args.host}]" if ":" in args.host else args.host
    print(f"{what} on http://{shown}:{args.port}/ ({args.backend}); Ctrl+C stops it", flush=True)
    serve(app, args.host, args.port, args.backend)
    return 0


def run_view(args: argparse.Namespace) -> int:
    """Run ``litstream view``: read the index, then serve until interrupted."""
    from .._core._bridge import run_sync
    from ._app import create_app
    from ._dataset import DatasetView

    hosts = _check_address(args.host, args.port)
    view = run_sync(DatasetView.open, args.dataset, storage_options_arg(args.storage_options, "view"), args.block_size)
    return _start(create_app(view=view, allowed_hosts=hosts), args, f"viewing {args.dataset}")


def run_serve(args: argparse.Namespace, raw: dict[str, Any]) -> int:
    """Run ``litstream simulate serve`` for the YAML config ``raw``: prepare the dataset, then serve."""
    from .._core._bridge import run_sync
    from .._sim._dataset import prepare_dataset
    from ..simulate import config_from_mapping
    from ._app import create_app
    from ._dataset import DEFAULT_BLOCK, DatasetView
    from ._playground import Playground

    hosts = _check_address(args.host, args.port)
    config = config_from_mapping(raw)
    nav = [("/", "playground"), ("/data", "dataset")]
    playground = Playground(
        config,
        run_sync(prepare_dataset, config),
        max_samples=args.max_samples,
        max_sessions=args.max_sessions,
        nav=nav,
    )
    block = config.read.block_size or DEFAULT_BLOCK
    view = run_sync(DatasetView.open, config.dataset, config.storage_options or None, block)
    view.nav = nav
    return _start(create_app(playground=playground, view=view, allowed_hosts=hosts), args, "playground")
