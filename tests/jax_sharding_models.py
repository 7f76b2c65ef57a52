"""The digits MLP training step that the sharding tests run on every mesh and on "numpy".

Shared by tests/test_jax_sharding.py (which computes the NumPy reference) and
tests/jax_sharding_worker.py (which runs it sharded, in processes with forced
host devices): both build the same graph from the same seeds, so their weights
after the same steps on the same batch agree.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Tuple

import numpy as np

import axgraph as ng
from axgraph.frontends.neon import ArrayIterator
from axgraph.op_graph.execution_order import schedule
from axgraph.serialization import get_values
from examples.digits_data import load_digits_split
from examples.digits_mlp import build

#: Steps of every training run the tests compare.
STEPS = 10


@dataclass
class DigitsStep:
    """The graph of one training step, with the axes a mapping names."""

    image: object   # placeholder (F, N)
    label: object   # placeholder (N,)
    step: object    # the update, then the mean loss
    N: object       # the batch axis
    H: object       # the hidden axis
    batch: Dict[str, np.ndarray]  # the fixed batch every step trains on


def digits_step(hidden: int = 48, batch: int = 32) -> DigitsStep:
    """examples/digits_mlp.py's model and step, and its first batch of `batch` images."""
    (train_x, train_y), _ = load_digits_split(0)
    train_x = train_x.reshape(len(train_x), -1)[:batch]
    train_set = ArrayIterator({"image": train_x, "label": train_y[:batch]}, batch)
    inputs, step, _, _ = build(train_set, 16, hidden=hidden)
    hidden_bias = next(op for op in schedule([step])
                       if re.fullmatch(r"Affine_\d+_b", op.name) and op.axes.lengths == (hidden,))
    (H,) = hidden_bias.axes
    return DigitsStep(inputs["image"], inputs["label"], step, inputs["label"].axes[0], H,
                      next(iter(train_set)))


def train(transformer, model: DigitsStep, steps: int = STEPS, local_batch=None
          ) -> Tuple[List[float], Dict[str, np.ndarray]]:
    """`steps` training steps on the fixed batch; the losses and the stored tensors after.

    `local_batch`: this process's (image, label) slices, fed with process_local=True.
    """
    computation = transformer.computation(model.step, model.image, model.label)
    losses = []
    for _ in range(steps):
        if local_batch is None:
            loss = computation(model.batch["image"], model.batch["label"])
        else:
            loss = computation(*local_batch, process_local=True)
        losses.append(float(loss))
    stored = [t for t in computation.persistent_tensors if not t.constant]
    values = get_values(transformer, stored)
    return losses, {canonical_name(t.name, stored): values[t] for t in stored}


def canonical_name(name: str, tensors) -> str:
    """`name` with its layer numbered as in a fresh process (Affine_0, Affine_1): each model
    built in one process gets new layer numbers."""
    layers = []
    for tensor in tensors:
        match = re.match(r"Affine_(\d+)_", tensor.name)
        if match and match[1] not in layers:
            layers.append(match[1])
    return re.sub(r"Affine_(\d+)_", lambda m: f"Affine_{layers.index(m[1])}_", name, count=1)


def reference(hidden: int = 48, batch: int = 32, steps: int = STEPS):
    """The losses and stored tensors after `steps` on the NumPy reference transformer."""
    model = digits_step(hidden, batch)
    with ng.make_transformer("numpy") as transformer:
        return train(transformer, model, steps)
