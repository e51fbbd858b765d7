"""``python -m ptojax``: the ``ptojax`` command line (:mod:`ptojax.cli`)."""
import sys

from .cli import main

sys.exit(main())
