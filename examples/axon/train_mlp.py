"""Train an Axon MLP on scikit-learn's 8x8 digits, with `ng.deriv` and plain assigns.

    python -m examples.axon.train_mlp [--epochs 20] [--backend cpu]

The model and its loss are Axon; the training step is axgraph: the gradient of the
compiled loss with respect to each parameter (`ng.deriv`), and SGD with momentum as
assigns. The batch size is symbolic, so the last, shorter batch of each epoch and the
whole test set run through the same graph.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Dict

import numpy as np

import axgraph as ng
from axgraph.frontends import axon

from ..digits_data import load_digits_split

SOURCE = """
fun dense (x : f32[*b, k]) (w : f32[k, n]) (b : f32[n]) = x @ w + b
val images = input : f32[B, 64]
val labels = input : f32[B, 10]
val w1 = param : f32[64, 64]
val b1 = param : f32[64]
val w2 = param : f32[64, 10]
val b2 = param : f32[10]
val logits = dense (tanh (dense images w1 b1)) w2 b2
val loss = mean 0 (~ (sum (-1) (labels * log_softmax logits)))
val predicted = softmax logits
"""


def training_step(graph: axon.Graph, learning_rate: float, momentum: float) -> ng.Op:
    """One SGD-with-momentum step on every parameter; its value is the loss before it."""
    loss = graph.values["loss"]
    params = list(graph.params.values())
    with ng.Op.saved_user_deps():  # the updates run only where the step is asked for
        gradients = [ng.deriv(loss, p) for p in params]
        updates = []
        for param, gradient in zip(params, gradients):
            velocity = ng.variable(param.axes, initial_value=0.0)
            updates.append(ng.assign(velocity, momentum * velocity - learning_rate * gradient))
            updates.append(ng.assign(param, param + velocity))
        step = ng.doall([loss, *gradients, *updates])
    return ng.sequential([step, loss])


def train(epochs: int = 20, batch: int = 32, learning_rate: float = 0.1, momentum: float = 0.9,
          seed: int = 0, backend: str = "cpu", verbose: bool = True) -> Dict:
    """Train; returns the mean loss per epoch, the test accuracy and the seconds taken."""
    (train_x, train_y), (test_x, test_y) = load_digits_split(seed)
    train_x, test_x = train_x.reshape(len(train_x), -1), test_x.reshape(len(test_x), -1)
    one_hot = np.eye(10, dtype=np.float32)[train_y]
    if verbose:
        print(axon.infer(SOURCE))
    graph = axon.compile(SOURCE).graph(seed=seed)
    step = training_step(graph, learning_rate, momentum)
    images, labels = graph.inputs["images"], graph.inputs["labels"]
    started = time.perf_counter()
    losses = []
    order_rng = np.random.default_rng(seed)
    with ng.make_transformer(backend) as transformer:
        train_step = transformer.computation(step, images, labels)
        predict = transformer.computation(graph.values["predicted"], images)
        for epoch in range(epochs):
            order = order_rng.permutation(len(train_x))
            total = 0.0
            for start in range(0, len(order), batch):  # the last batch is shorter
                chosen = order[start:start + batch]
                total += float(train_step(train_x[chosen], one_hot[chosen])) * len(chosen)
            losses.append(total / len(order))
            if verbose:
                print(f"epoch {epoch + 1}: mean loss {losses[-1]:.4f}")
        accuracy = float(np.mean(np.argmax(predict(test_x), axis=1) == test_y))
    if verbose:
        print(f"test accuracy {accuracy:.2%}")
    return {"losses": losses, "test_accuracy": accuracy, "seconds": time.perf_counter() - started}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument("--backend", default="cpu", choices=ng.transformer_choices())
    args = parser.parse_args(argv)
    result = train(args.epochs, args.batch, args.learning_rate, backend=args.backend)
    print(f"{result['seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
