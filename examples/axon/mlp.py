"""A two-layer perceptron in Axon: shapes inferred from the annotations, then run.

    python -m examples.axon.mlp [--backend cpu]

`dense` is polymorphic in the rank of its input (`*b`) and in its sizes; `mlp` is
generalized over everything; `y` is one program value whose batch size B is symbolic,
so one graph runs every batch size.
"""
from __future__ import annotations

import argparse
import sys
from typing import Dict

import numpy as np

import axgraph as ng
from axgraph.frontends import axon

SOURCE = """
fun dense (x : f32[*b, k]) (w : f32[k, n]) = relu (x @ w)
fun mlp x w1 w2 = softmax (dense x w1 @ w2)
val y = mlp (input : f32[B, 784]) (param : f32[784, 512]) (param : f32[512, 10])
"""


def run(batches=(32, 64), backend: str = "cpu", verbose: bool = True) -> Dict:
    """Infer, compile once, and run one computation on each batch size."""
    inference = axon.infer(SOURCE)
    if verbose:
        print(inference)
    graph = axon.compile(SOURCE).graph()
    outputs = {}
    with ng.make_transformer(backend) as transformer:
        predict = transformer.computation(graph.values["y"], graph.inputs["y.input0"])
        for batch in batches:
            images = np.random.default_rng(batch).random((batch, 784), dtype=np.float32)
            outputs[batch] = predict(images)
            if verbose:
                print(f"batch {batch}: output {outputs[batch].shape}, rows sum to "
                      f"{outputs[batch].sum(axis=1).mean():.3f}")
    return {"types": {name: str(t) for name, t in inference.items()}, "outputs": outputs}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cpu", choices=ng.transformer_choices())
    run(backend=parser.parse_args(argv).backend)
    return 0


if __name__ == "__main__":
    sys.exit(main())
