"""``python -m axgraph``: the ``axgraph`` command line (`axgraph.cli`)."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
