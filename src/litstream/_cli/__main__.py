"""``python -m litstream._cli._main``: the ``litstream`` command."""

from __future__ import annotations

import sys

from ._main import main

if __name__ == "__main__":
    sys.exit(main())
