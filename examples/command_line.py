"""The options every training example takes, declared once: how long, where, and saving.

    --epochs N  --quick  --transformer NAME (or --backend NAME)
    --checkpoint PATH  --resume PATH

`axgraph train` passes its options through to an example's `main`, so these are
also the command line's.
"""
from __future__ import annotations

import argparse
from typing import Any, Callable, Dict

import axgraph as ng
from axgraph.frontends.neon import Checkpoint


def add_run_options(parser: argparse.ArgumentParser, epochs: int, quick_epochs: int) -> None:
    """Add the shared options; `epochs` is the default length, `quick_epochs` --quick's."""
    parser.add_argument("--epochs", type=int, default=None,
                        help=f"epochs to train (default {epochs}, --quick: {quick_epochs})")
    parser.add_argument("--quick", action="store_true", help="a short run of the same model")
    parser.add_argument("--transformer", "--backend", dest="backend", default="cpu",
                        choices=ng.transformer_choices(), help="where to run (default cpu)")
    parser.add_argument("--checkpoint", metavar="PATH",
                        help="save the whole run (.npz) after every epoch")
    parser.add_argument("--resume", metavar="PATH",
                        help="continue the run saved in PATH (by --checkpoint, with the same "
                             "options)")
    parser.set_defaults(full_epochs=epochs, quick_epochs=quick_epochs)


def run_options(parser: argparse.ArgumentParser, args: argparse.Namespace,
                train: Callable[[], Dict[str, Any]]) -> Dict[str, Any]:
    """Settle --epochs from --quick, then `train()`; a checkpoint that cannot be read or
    written ends the program with the parser's error (exit code 2)."""
    if args.epochs is None:
        args.epochs = args.quick_epochs if args.quick else args.full_epochs
    if args.epochs < 0:
        parser.error(f"--epochs must be >= 0, not {args.epochs}")
    try:
        return train()
    except ng.SerializationError as error:
        hint = " (--resume takes the options of the run that saved it)" if args.resume else ""
        parser.exit(2, f"{parser.prog}: error: {error}{hint}\n")


def run_checkpoint(model, optimizer, data) -> Checkpoint:
    """A `Checkpoint` of the whole run: the model's variables, the optimizer's state and
    the data iterator's position.

    The variables are saved by their place in the model (``variable0``, ...), not
    by their op names: unnamed layers are numbered in creation order, so a model built
    again in the same process (a notebook, a test) has other names than the one saved."""
    variables = model.variables()
    return Checkpoint({f"variable{i}": op for i, op in enumerate(variables)}, optimizer, data)
