"""A convolution layer in Axon over images of any size: the output sizes come out as
floor expressions of H and W, with the smallest image that fits as a check.

    python -m examples.axon.conv [--backend cpu]

The sizes N, H and W stay symbolic in the graph, so one graph (and one compiled
computation) serves images of every size; an image too small for the layer is refused
when it is fed, naming the size it lacks.
"""
from __future__ import annotations

import argparse
import sys
from typing import Dict

import numpy as np

import axgraph as ng
from axgraph.frontends import axon

SOURCE = """
fun layer x f = pool 2 2 (relu (conv2d 1 1 x f))
val images = input : f32[N, 1, H, W]
val features = layer (layer images (param : f32[8, 1, 3, 3])) (param : f32[16, 8, 3, 3])
val scores = mean (-1) (mean (-1) features)
"""


def run(sizes=((28, 28), (16, 12)), backend: str = "cpu", verbose: bool = True) -> Dict:
    """Infer the layer's shapes symbolically, then run its one graph on images of each
    size (a batch of 4)."""
    inference = axon.infer(SOURCE)
    if verbose:
        print(inference)
    graph = axon.compile(SOURCE).graph()
    names = ["features", "scores"]
    outputs = {}
    with ng.make_transformer(backend) as transformer:
        layer = transformer.computation([graph.values[n] for n in names], graph.inputs["images"])
        for height, width in sizes:
            images = np.random.default_rng(height).random((4, 1, height, width), dtype=np.float32)
            outputs[(height, width)] = dict(zip(names, layer(images)))
            if verbose:
                print(f"{height}x{width} images: features "
                      f"{outputs[(height, width)]['features'].shape}")
    return {"types": {name: str(t) for name, t in inference.items()},
            "checks": [r.text for r in inference.residuals], "graph": graph,
            "outputs": outputs}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cpu", choices=ng.transformer_choices())
    run(backend=parser.parse_args(argv).backend)
    return 0


if __name__ == "__main__":
    sys.exit(main())
