"""Train a two-layer perceptron on scikit-learn's 8x8 digits with axgraph.

    python -m examples.digits_mlp [--epochs 30] [--hidden 64] [--backend numpy]

The data set ships inside scikit-learn (no download). The network, its
gradient (ng.deriv) and the SGD-with-momentum update (ng.assign) are one
graph, so one call of the training computation is one training step.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Dict

import numpy as np

import axgraph as ng


def load_digits_split(seed: int = 0, test_fraction: float = 0.25):
    """Digits scaled to [0, 1], split into train and test by a fixed seed."""
    from sklearn.datasets import load_digits

    data = load_digits()
    images = (data.data / 16.0).astype(np.float32)
    labels = data.target.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(labels))
    n_test = int(len(labels) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return (images[train], labels[train]), (images[test], labels[test])


def build(hidden: int, batch: int, learning_rate: float, momentum: float, seed: int):
    """The graph: placeholders, inference output, loss and the update step."""
    F = ng.make_axis(64, name="F")  # input features (8 x 8 pixels)
    Hd = ng.make_axis(hidden, name="Hidden")
    Y = ng.make_axis(10, name="Y")
    N = ng.make_axis(batch, name="N")  # named N: the batch axis

    x = ng.placeholder([F, N], name="images")
    labels = ng.placeholder([N], dtype=np.int32, name="labels")

    rng = np.random.default_rng(seed)

    def glorot(fan_in, fan_out, shape):
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-limit, limit, shape)

    w1 = ng.variable([Hd, F - 1], initial_value=glorot(64, hidden, (hidden, 64)), name="w1")
    b1 = ng.variable([Hd], initial_value=0.0, name="b1")
    w2 = ng.variable([Y, Hd - 1], initial_value=glorot(hidden, 10, (10, hidden)), name="w2")
    b2 = ng.variable([Y], initial_value=0.0, name="b2")

    hidden_layer = ng.tanh(ng.dot(w1, x) + b1)
    probabilities = ng.softmax(ng.dot(w2, hidden_layer) + b2)
    targets = ng.one_hot(labels, axis=Y)
    loss = ng.mean(ng.cross_entropy_multi(probabilities, targets), out_axes=())

    updates = []
    with ng.Op.saved_user_deps():
        for variable, gradient in zip(loss.variables(), ng.autodiff.deriv_many(loss, loss.variables())):
            velocity = ng.persistent_tensor(variable.axes, initial_value=0.0,
                                            name=f"velocity_{variable.name}")
            new_velocity = momentum * velocity - learning_rate * gradient
            updates.append(ng.assign(velocity, new_velocity))
            updates.append(ng.assign(variable, variable + velocity))
    step = ng.sequential(updates + [loss])
    prediction = ng.argmax(probabilities, reduction_axes=[Y])
    return x, labels, step, prediction


def batches(images: np.ndarray, labels: np.ndarray, batch: int, rng: np.random.Generator):
    """Shuffled full minibatches, features first (the [F, N] layout)."""
    order = rng.permutation(len(labels))
    for start in range(0, len(order) - batch + 1, batch):
        chosen = order[start:start + batch]
        yield images[chosen].T, labels[chosen]


def accuracy(predict, images: np.ndarray, labels: np.ndarray, batch: int) -> float:
    """Fraction classified right; the tail that does not fill a batch is padded."""
    correct = 0
    for start in range(0, len(labels), batch):
        chunk = images[start:start + batch]
        count = len(chunk)
        padded = np.zeros((batch, chunk.shape[1]), dtype=chunk.dtype)
        padded[:count] = chunk
        predicted = predict(padded.T)[:count]
        correct += int(np.sum(predicted == labels[start:start + count]))
    return correct / len(labels)


def train(epochs: int = 30, hidden: int = 64, batch: int = 32, learning_rate: float = 0.1,
          momentum: float = 0.9, seed: int = 0, backend: str = "numpy",
          verbose: bool = True) -> Dict[str, float]:
    """Train and return the history: losses per epoch, test accuracy, seconds."""
    (train_x, train_y), (test_x, test_y) = load_digits_split(seed)
    x, labels, step, prediction = build(hidden, batch, learning_rate, momentum, seed)
    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    losses = []
    with ng.make_transformer(backend) as transformer:
        train_step = transformer.computation(step, x, labels)
        predict = transformer.computation(prediction, x)
        for epoch in range(epochs):
            epoch_losses = [float(train_step(images, targets))
                            for images, targets in batches(train_x, train_y, batch, rng)]
            losses.append(float(np.mean(epoch_losses)))
            if verbose:
                test_accuracy = accuracy(predict, test_x, test_y, batch)
                print(f"epoch {epoch + 1:3d}/{epochs}  loss {losses[-1]:.4f}  "
                      f"test accuracy {test_accuracy:.2%}", flush=True)
        test_accuracy = accuracy(predict, test_x, test_y, batch)
    seconds = time.perf_counter() - started
    return {"losses": losses, "test_accuracy": test_accuracy, "seconds": seconds}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", default="numpy", choices=ng.transformer_choices())
    args = parser.parse_args(argv)
    history = train(args.epochs, args.hidden, args.batch, args.learning_rate, seed=args.seed,
                    backend=args.backend)
    print(f"final test accuracy {history['test_accuracy']:.2%} after {args.epochs} epochs "
          f"in {history['seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
