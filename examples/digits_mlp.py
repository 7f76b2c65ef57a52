"""Train a multilayer perceptron on scikit-learn's 8x8 digits with the neon frontend.

    python -m examples.digits_mlp [--epochs 20] [--quick] [--hidden 64] [--backend cpu]
                                  [--quiet] [--checkpoint run.npz] [--resume run.npz]
                                  [--plot curves.png]

Layers learn their input axes on first call; the optimizer turns the loss into
one update op, so one call of the training computation is one training step.
"""
from __future__ import annotations

import argparse
import sys
from typing import Dict, Optional

import axgraph as ng
from axgraph.frontends.neon import (Affine, ArrayIterator, GlorotUniform,
                                    GradientDescentMomentum, Sequential, Softmax, Tanh,
                                    inference_mode_on, plot_history)

from .command_line import add_run_options, run_checkpoint, run_options
from .digits_data import load_digits_split, train_and_test


def build(train_set: ArrayIterator, test_count: int, hidden: int = 64,
          learning_rate: float = 0.1, momentum: float = 0.9, seed: int = 0):
    """The graphs: placeholders, the training step (update + mean loss) and the prediction."""
    return build_run(train_set, test_count, hidden, learning_rate, momentum, seed)[:4]


def build_run(train_set: ArrayIterator, test_count: int, hidden: int = 64,
              learning_rate: float = 0.1, momentum: float = 0.9, seed: int = 0):
    """`build`'s graphs and a `Checkpoint` of the whole run (weights, velocities, data)."""
    F = ng.make_axis(train_set.data["image"].shape[1], name="F")  # the 64 pixels
    Y = ng.make_axis(10, name="Y")  # the classes
    inputs = train_set.make_placeholders(axes={"image": [F]})
    model = Sequential([
        Affine(nout=hidden, weight_init=GlorotUniform(seed=seed), bias_init=0.0, activation=Tanh()),
        Affine(axes=Y, weight_init=GlorotUniform(seed=seed + 1), bias_init=0.0,
               activation=Softmax()),
    ])
    loss = ng.cross_entropy_multi(model(inputs["image"]), ng.one_hot(inputs["label"], axis=Y))
    optimizer = GradientDescentMomentum(learning_rate, momentum_coef=momentum)
    step = ng.sequential([optimizer(loss), ng.mean(loss, out_axes=())])
    test_images = ng.placeholder([ng.make_axis(test_count, name="N"), F], name="test_images")
    with inference_mode_on():
        prediction = ng.argmax(model(test_images), reduction_axes=[Y])
    return inputs, step, test_images, prediction, run_checkpoint(model, optimizer, train_set)


def train(epochs: int = 20, hidden: int = 64, batch: int = 32, learning_rate: float = 0.1,
          momentum: float = 0.9, seed: int = 0, backend: str = "cpu",
          verbose: bool = True, checkpoint: Optional[str] = None,
          resume: Optional[str] = None) -> Dict:
    """Train; returns the loss per epoch, the final test accuracy and the seconds taken.

    `checkpoint` saves the run after every epoch; `resume` continues one saved by a run
    with the same arguments."""
    (train_x, train_y), (test_x, test_y) = load_digits_split(seed)
    train_x, test_x = train_x.reshape(len(train_x), -1), test_x.reshape(len(test_x), -1)
    train_set = ArrayIterator({"image": train_x, "label": train_y}, batch, shuffle=True, seed=seed)
    inputs, step, test_images, prediction, run = build_run(train_set, len(test_x), hidden,
                                                           learning_rate, momentum, seed)
    return train_and_test(step, inputs, prediction, test_images, train_set, test_x, test_y,
                          epochs, backend, verbose, run, checkpoint, resume)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_options(parser, epochs=20, quick_epochs=2)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--plot", metavar="PNG", help="write the loss/accuracy curves here "
                        "(needs matplotlib)")
    args = parser.parse_args(argv)
    result = run_options(parser, args, lambda: train(
        args.epochs, args.hidden, args.batch, args.learning_rate, seed=args.seed,
        backend=args.backend, verbose=not args.quiet, checkpoint=args.checkpoint,
        resume=args.resume))
    print(f"final test accuracy {result['test_accuracy']:.2%} after {args.epochs} epochs "
          f"in {result['seconds']:.1f} s")
    if args.plot:
        print(f"curves written to {plot_history(result['history'], args.plot)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
