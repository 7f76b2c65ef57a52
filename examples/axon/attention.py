"""Self-attention in Axon over a symbolic sequence length T: one graph, any length.

    python -m examples.axon.attention [--backend cpu]

`attend` works on one sequence; `map` applies it to each sequence of the batch. Nothing
needs T to be known: the graph keeps it symbolic and the same computation runs
sequences of every length.
"""
from __future__ import annotations

import argparse
import sys
from typing import Dict

import numpy as np

import axgraph as ng
from axgraph.frontends import axon

SOURCE = """
fun attend (q : f32[t, d]) (k : f32[t, d]) (v : f32[t, e]) =
  softmax (q @ transpose k / 4.0) @ v
val tokens = input : f32[B, T, 16]
val wq = param : f32[16, 16]
val wk = param : f32[16, 16]
val wv = param : f32[16, 8]
val mixed = map (fn x => attend (x @ wq) (x @ wk) (x @ wv)) tokens
"""


def run(lengths=(3, 10), backend: str = "cpu", verbose: bool = True) -> Dict:
    """Infer, compile once, and run one computation on sequences of each length."""
    inference = axon.infer(SOURCE)
    if verbose:
        print(inference)
    graph = axon.compile(SOURCE).graph()
    outputs = {}
    with ng.make_transformer(backend) as transformer:
        attend = transformer.computation(graph.values["mixed"], graph.inputs["tokens"])
        for length in lengths:
            tokens = np.random.default_rng(length).standard_normal((2, length, 16))
            outputs[length] = attend(tokens.astype(np.float32))
            if verbose:
                print(f"T = {length}: mixed {outputs[length].shape}")
    return {"types": {name: str(t) for name, t in inference.items()}, "outputs": outputs,
            "graph": graph}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cpu", choices=ng.transformer_choices())
    run(backend=parser.parse_args(argv).backend)
    return 0


if __name__ == "__main__":
    sys.exit(main())
