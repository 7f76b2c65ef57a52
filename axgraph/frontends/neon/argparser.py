"""The command line of Nervana Graph v0.4's example programs (NgraphArgparser).

    parser = NgraphArgparser(description="Train a simple MLP on MNIST")
    parser.add_argument("--use_batch_norm", action="store_true")
    args = parser.parse_args()        # args.batch_size, args.num_iterations, ...

The options are v0.4's: -w/--data_dir, -o/--output_file, -z/--batch_size,
-b/--backend, -t/--num_iterations, --iter_interval, -r/--rng_seed,
--no_progress_bar (read back as ``args.progress_bar``), -v/--verbose and
-c/--config, a file of ``option = value`` lines read before the command line.
Two defaults differ from v0.4's: the backend is axgraph's reference "numpy"
(v0.4: "cpu"), and --output_file is unset, so the history stays in memory
unless a file is asked for (v0.4 wrote output.hdf5 to the working directory).
"""
from __future__ import annotations

import argparse
import os
from typing import Dict, List, Optional, Sequence

from ... import transformers

#: Where v0.4 kept downloaded data sets.
WORK_DIR = os.path.join(os.path.expanduser("~"), "nervana")


class NgraphArgparser(argparse.ArgumentParser):
    """argparse with v0.4's standard options; `default_overrides` changes their defaults.

    Nervana Graph v0.4's example programs all start with this parser, so the
    options (listed in the module docstring) and their spellings are v0.4's; a
    program adds its own with ``add_argument`` as usual. Defaults: verbose 1,
    data_dir ``~/nervana/data``, output_file None, batch_size 128, backend
    "numpy", num_iterations 2000, iter_interval 200, rng_seed None.

    Parameters
    ----------
    *args
        Passed to ``argparse.ArgumentParser`` (prog, usage, description, ...).
    default_overrides : dict or None, default None
        New defaults for standard options, by destination name: any of
        "verbose", "output_file", "batch_size", "backend", "num_iterations",
        "iter_interval" and "rng_seed" (others are ignored).
    **kwargs
        Passed to ``argparse.ArgumentParser``; `formatter_class` defaults to
        ``argparse.ArgumentDefaultsHelpFormatter``, so ``--help`` shows the defaults.

    Examples
    --------
    >>> parser = NgraphArgparser(description="demo", default_overrides={"batch_size": 32})
    >>> args = parser.parse_args(["-t", "100", "--no_progress_bar"])
    >>> args.batch_size, args.num_iterations, args.backend, args.progress_bar
    (32, 100, 'numpy', False)
    """

    def __init__(self, *args, default_overrides: Optional[Dict] = None, **kwargs):
        kwargs.setdefault("formatter_class", argparse.ArgumentDefaultsHelpFormatter)
        super().__init__(*args, **kwargs)
        self.defaults = dict(default_overrides or {})
        self.work_dir = WORK_DIR
        self._add_standard_arguments()

    def _add_standard_arguments(self) -> None:
        add, defaults = self.add_argument, self.defaults
        add("-c", "--config", help="file of 'option = value' lines, read before the command line")
        add("-v", "--verbose", action="count", default=defaults.get("verbose", 1),
            help="verbosity level; repeat to raise it")
        add("--no_progress_bar", action="store_true",
            help="suppress the running display of the progress bar")
        add("-w", "--data_dir", default=os.path.join(self.work_dir, "data"),
            help="directory of the data sets")
        add("-o", "--output_file", default=defaults.get("output_file"),
            help="HDF5 file for the metrics computed during the run (needs h5py)")
        add("-z", "--batch_size", type=int, default=defaults.get("batch_size", 128))
        add("-b", "--backend", choices=transformers.transformer_choices(),
            default=defaults.get("backend", "numpy"), help="transformer to run on")
        add("-t", "--num_iterations", type=int, default=defaults.get("num_iterations", 2000))
        add("--iter_interval", type=int, default=defaults.get("iter_interval", 200))
        add("-r", "--rng_seed", type=int, default=defaults.get("rng_seed"), metavar="SEED",
            help="random number generator seed")

    def parse_args(self, args: Optional[Sequence[str]] = None,  # type: ignore[override]
                   namespace=None):
        """Parse (the config file's options first), then set ``progress_bar``.

        With ``-c FILE`` the file's ``option = value`` lines are read as if
        they came before the command line, so the command line wins. As in
        v0.4, parsing also makes the chosen backend the transformer that
        ``ngt.make_transformer()`` returns from then on.

        Parameters
        ----------
        args : sequence of str or None, default None
            The arguments; None reads ``sys.argv[1:]``.
        namespace : argparse.Namespace or None, default None
            An object to set the attributes on, as for argparse.

        Returns
        -------
        argparse.Namespace
            One attribute per option (``args.batch_size``, ...), plus
            ``progress_bar``: the opposite of ``--no_progress_bar``.

        Raises
        ------
        SystemExit
            For an unknown option or a bad value (argparse prints the usage first).
        OSError
            When the ``-c`` file cannot be read.
        """
        args = list(args) if args is not None else None
        first, _ = super().parse_known_args(args)
        if first.config:
            args = _config_arguments(first.config) + (args if args is not None else _argv())
        parsed = super().parse_args(args, namespace)
        parsed.progress_bar = not parsed.no_progress_bar
        # As v0.4 did: `ngt.make_transformer()` now makes the chosen backend.
        transformers.set_transformer_factory(transformers.make_transformer_factory(parsed.backend))
        return parsed


def _argv() -> List[str]:
    import sys
    return sys.argv[1:]


def _config_arguments(path: str) -> List[str]:
    """``--option value`` pairs from lines ``option = value`` (``#`` starts a comment);
    a switch is on with ``= true`` (or no value) and off with ``= false``."""
    arguments: List[str] = []
    with open(os.path.expanduser(path)) as config:
        for line in config:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            option, _, value = (part.strip() for part in line.partition("="))
            if value.lower() == "false":  # a switch left off
                continue
            arguments.append("--" + option.lstrip("-"))
            if value and value.lower() != "true":
                arguments.append(value)
    return arguments


__all__ = ["NgraphArgparser"]
