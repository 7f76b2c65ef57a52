"""A recurrent network in Axon, written as a fold over the time dim with the hidden
state as the carried value.

    python -m examples.axon.rnn [--backend cpu]

The carry's type must come out of the step function unchanged, so the hidden size is
inferred from `u`, and the step's output is checked against it. Loops are unrolled
when the graph is built, so `Program.run` builds one graph per sequence length.
"""
from __future__ import annotations

import argparse
import sys
from typing import Dict

import numpy as np

import axgraph as ng
from axgraph.frontends import axon

SOURCE = """
fun step w u (h, x) = tanh (x @ w + h @ u)
val xs = input : f32[T, B, 8]
val w = param : f32[8, 16]
val u = param : f32[16, 16]
val h0 = zeros [B, 16]
val last = fold (step w u) h0 xs
val (_, states) = scan (fn (h, x) => let val h' = step w u (h, x) in (h', h') end) h0 xs
"""


def run(lengths=(5, 9), backend: str = "cpu", verbose: bool = True) -> Dict:
    """Infer the RNN's shapes, then run it on sequences of each length."""
    inference = axon.infer(SOURCE)
    if verbose:
        print(inference)
    program = axon.compile(SOURCE)
    outputs = {}
    for length in lengths:
        xs = np.random.default_rng(length).standard_normal((length, 3, 8)).astype(np.float32)
        result = program.run({"xs": xs}, backend)
        outputs[length] = result
        if verbose:
            print(f"T = {length}: last state {result['last'].shape}, states {result['states'].shape}")
    return {"types": {name: str(t) for name, t in inference.items()}, "outputs": outputs}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cpu", choices=ng.transformer_choices())
    run(backend=parser.parse_args(argv).backend)
    return 0


if __name__ == "__main__":
    sys.exit(main())
