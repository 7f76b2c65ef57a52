"""A convolution layer in Axon over images of any size: the output sizes come out as
floor expressions of H and W, with the smallest image that fits as a check.

    python -m examples.axon.conv [--backend cpu]

A convolution needs its spatial lengths when the graph is built, so `Program.run` builds
one graph per image size it is given (the batch size N stays symbolic in each).
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
    """Infer the layer's shapes symbolically, then run it on images of each size."""
    inference = axon.infer(SOURCE)
    if verbose:
        print(inference)
    program = axon.compile(SOURCE)
    outputs = {}
    for height, width in sizes:
        images = np.random.default_rng(height).random((4, 1, height, width), dtype=np.float32)
        result = program.run({"images": images}, backend)
        outputs[(height, width)] = result
        if verbose:
            print(f"{height}x{width} images: features {result['features'].shape}, "
                  f"scores {result['scores'].shape}")
    return {"types": {name: str(t) for name, t in inference.items()},
            "checks": [r.text for r in inference.residuals], "outputs": outputs}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cpu", choices=ng.transformer_choices())
    run(backend=parser.parse_args(argv).backend)
    return 0


if __name__ == "__main__":
    sys.exit(main())
