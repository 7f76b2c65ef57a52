"""The ``axgraph`` command line: train the examples, check, show and export graphs, benchmark.

    axgraph train digits-mlp --epochs 5
    axgraph check model.py          # shapes and axes without data; exit status 1 on an error
    axgraph show model.py --format svg -o model.svg
    axgraph export model.py --onnx model.onnx
    axgraph bench --list

``python -m axgraph`` is the same program. One module per subcommand, each declaring
its options (`add_parser`) and what it does (`run`); `main` puts them together.
Exit status: 0 when all went well, 1 when the command found an error or failed, 2 for
a usage error (an unknown option, a missing argument).
"""
from .main import main

__all__ = ["main"]
