"""The ``litstream`` command line (the console script is ``litstream._cli:main``)."""

from ._main import main as main
