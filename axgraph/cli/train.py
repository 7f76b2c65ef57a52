"""``axgraph train EXAMPLE``: train one of the example models, with a progress bar and the
final metrics.

The examples are the programs of the checkout's ``examples/`` (see `source_tree`):
``axgraph train digits-mlp --epochs 5`` runs what ``python -m examples.digits_mlp
--epochs 5`` runs, through the example's own ``main``, so both take the same options.
"""
from __future__ import annotations

import argparse
import sys
from typing import Dict, List

from ..transformers import transformer_choices
from .failures import CommandError
from .source_tree import import_module

#: The examples by the name the command line gives them -> their module in examples/.
EXAMPLES: Dict[str, str] = {
    "digits-mlp": "digits_mlp",
    "digits-convnet": "digits_convnet",
    "char-lstm": "char_lstm",
    "char-transformer": "char_transformer",
}


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Declare ``train``'s options on the command line's `subparsers`.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        What ``add_subparsers`` returned for the ``axgraph`` parser.

    Returns
    -------
    argparse.ArgumentParser
        The subcommand's parser; its ``run`` default is this module's `run`.
    """
    parser = subparsers.add_parser(
        "train", help="train an example model",
        description="Train one of the example models (the programs of the source checkout's "
                    "examples/: python -m examples.NAME runs the same), with a progress bar "
                    "and the final metrics.")
    parser.add_argument("example", choices=list(EXAMPLES), metavar="EXAMPLE",
                        help=f"one of {', '.join(EXAMPLES)}")
    parser.add_argument("--transformer", choices=transformer_choices(),
                        help="the transformer to run on (default cpu)")
    parser.add_argument("--epochs", type=int, metavar="N", help="epochs to train")
    parser.add_argument("--checkpoint", metavar="PATH",
                        help="save the whole run (.npz) after every epoch")
    parser.add_argument("--resume", metavar="PATH",
                        help="continue the run saved in PATH (with the same options)")
    parser.add_argument("--quick", action="store_true", help="a short run of the same model")
    parser.set_defaults(run=run)
    return parser


def example_argv(args: argparse.Namespace) -> List[str]:
    """The example's own command line for the options given.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed ``axgraph train`` options.

    Returns
    -------
    list of str
        Arguments for the example's ``main``.
    """
    argv: List[str] = []
    for option in ("transformer", "epochs", "checkpoint", "resume"):
        value = getattr(args, option)
        if value is not None:
            argv += [f"--{option}", str(value)]
    return argv + (["--quick"] if args.quick else [])


def run(args: argparse.Namespace) -> int:
    """Run the example's ``main``; its exit status.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed ``axgraph train`` options.

    Returns
    -------
    int
        The exit status.

    Raises
    ------
    CommandError
        No checkout with examples/, or a module the example needs is missing.
    """
    module = import_module("examples", EXAMPLES[args.example])
    saved = sys.argv[:]
    sys.argv[0] = f"axgraph train {args.example}"  # the example's parser names itself so
    try:
        return int(module.main(example_argv(args)) or 0)
    except ModuleNotFoundError as error:
        raise CommandError(f"the {args.example} example needs the module {error.name}: "
                           f"pip install -e '.[examples]'") from None
    finally:
        sys.argv[:] = saved


__all__ = ["EXAMPLES", "add_parser", "example_argv", "run"]
