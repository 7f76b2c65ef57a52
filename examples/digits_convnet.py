"""Train a small convolutional network on scikit-learn's 8x8 digits.

    python -m examples.digits_convnet [--epochs 15] [--quick] [--backend cpu]
                                      [--checkpoint run.npz] [--resume run.npz]

Two 3x3 convolutions (16 and 32 channels, ReLU, 2x2 max pooling) and a
softmax layer. Convolution finds the channel and spatial axes by their roles.
"""
from __future__ import annotations

import argparse
import sys
from typing import Dict, Optional

import axgraph as ng
from axgraph.frontends.neon import (Affine, ArrayIterator, Convolution, GlorotUniform,
                                    GradientDescentMomentum, Kaiming, Pooling, Rectlin, Sequential,
                                    Softmax, ar, inference_mode_on)

from .command_line import add_run_options, run_checkpoint, run_options
from .digits_data import load_digits_split, train_and_test


def build_model(seed: int, classes) -> Sequential:
    """conv 3x3x16 - pool - conv 3x3x32 - pool - softmax over `classes`."""
    return Sequential([
        Convolution((3, 3, 16), filter_init=Kaiming(seed=seed), padding=1, bias_init=0.0,
                    activation=Rectlin()),
        Pooling(2),
        Convolution((3, 3, 32), filter_init=Kaiming(seed=seed + 1), padding=1, bias_init=0.0,
                    activation=Rectlin()),
        Pooling(2),
        Affine(axes=classes, weight_init=GlorotUniform(seed=seed + 2), bias_init=0.0,
               activation=Softmax()),
    ])


def train(epochs: int = 15, batch: int = 32, learning_rate: float = 0.05, momentum: float = 0.9,
          seed: int = 0, backend: str = "cpu", verbose: bool = True,
          checkpoint: Optional[str] = None, resume: Optional[str] = None) -> Dict:
    """Train; returns the loss per epoch, the final test accuracy and the seconds taken.

    `checkpoint` saves the run after every epoch; `resume` continues one saved by a run
    with the same arguments."""
    (train_x, train_y), (test_x, test_y) = load_digits_split(seed)
    train_x, test_x = train_x[:, None], test_x[:, None]  # a channel dim: (examples, 1, 8, 8)
    C = ng.make_axis(1, name="C", roles=[ar.Channel])
    H = ng.make_axis(8, name="H", roles=[ar.Height])
    W = ng.make_axis(8, name="W", roles=[ar.Width])
    Y = ng.make_axis(10, name="Y")

    train_set = ArrayIterator({"image": train_x, "label": train_y}, batch, shuffle=True, seed=seed)
    inputs = train_set.make_placeholders(axes={"image": [C, H, W]})
    model = build_model(seed, Y)
    loss = ng.cross_entropy_multi(model(inputs["image"]), ng.one_hot(inputs["label"], axis=Y))
    optimizer = GradientDescentMomentum(learning_rate, momentum_coef=momentum)
    step = ng.sequential([optimizer(loss), ng.mean(loss, out_axes=())])

    test_images = ng.placeholder([ng.make_axis(len(test_x), name="N"), C, H, W])
    with inference_mode_on():
        prediction = ng.argmax(model(test_images), reduction_axes=[Y])

    run = run_checkpoint(model, optimizer, train_set)
    return train_and_test(step, inputs, prediction, test_images, train_set, test_x, test_y,
                          epochs, backend, verbose, run, checkpoint, resume)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_options(parser, epochs=15, quick_epochs=1)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    result = run_options(parser, args, lambda: train(
        args.epochs, args.batch, args.learning_rate, seed=args.seed, backend=args.backend,
        checkpoint=args.checkpoint, resume=args.resume))
    print(f"final test accuracy {result['test_accuracy']:.2%} after {args.epochs} epochs "
          f"in {result['seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
