"""A small dataset with every kind of leaf ``litstream view`` renders, and a server for the app in a thread."""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import TYPE_CHECKING, Any

import numpy as np

import litstream

if TYPE_CHECKING:
    from collections.abc import Iterator

N = 24
CHUNK = 6
HOSTILE = '<img src=x onerror="window.__pwned = 1"><script>window.__pwned = 2</script>'
"""Text stored in every sample: markup that would run if the page did not escape it."""


def image_of(i: int) -> Any:
    from PIL import Image

    pixels = np.zeros((20 + i, 30, 3), dtype=np.uint8)
    pixels[:, :, 0] = 10 * i % 256
    return Image.fromarray(pixels)


def sample(i: int) -> dict[str, Any]:
    """Sample ``i``: its id, hostile text, a PIL image, a waveform, an array and raw bytes."""
    t = np.arange(800, dtype=np.float32) / 8000
    return {
        "id": f"k{i}",
        "text": f"caption {i} {HOSTILE}",
        "image": image_of(i),
        "audio": litstream.Audio(array=0.5 * np.sin(2 * np.pi * 440 * t), sampling_rate=8000),
        "array": np.arange(5, dtype=np.float32) * i,
        "blob": bytes([i]) * 40,
    }


def key_of(item: dict[str, Any]) -> str:
    return str(item["id"])


def write(output_dir: str, **kwargs: Any) -> str:
    """Write the :data:`N`-sample dataset with a ``keys/`` sidecar to ``output_dir`` (a path or URL)."""
    litstream.optimize(
        sample, list(range(N)), output_dir, chunk_size=CHUNK, num_workers=1, key_fn=key_of, verbose=False, **kwargs
    )
    return output_dir


@contextlib.contextmanager
def uvicorn_thread(app: Any) -> Iterator[str]:
    """Serve ``app`` with uvicorn in a thread on a port of 127.0.0.1 bound (and listening) before it starts, so a
    client can connect at once; yields the base URL and stops the server on exit."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="view-uvicorn", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()
