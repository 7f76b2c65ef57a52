"""Computations whose inputs and outputs are named (Nervana Graph v0.4's make_bound_computation).

    train = make_bound_computation(transformer, dict(batch_cost=cost, updates=step),
                                   dict(image=x, label=y))
    train({"image": images, "label": labels})    # -> {"batch_cost": ..., "updates": None}

A batch from ArrayIterator is such a dict of named arrays, so it feeds a
bound computation as it is.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Tuple

from ...axes import Axes
from ...debug_info import user_location
from ...errors import FeedError
from ...op_graph.op import Op
from ...op_graph.tensors import as_op


class BoundComputation:
    """A transformer computation called with a dict of named inputs; returns named outputs."""

    def __init__(self, transformer, named_outputs: Mapping[str, Op],
                 named_inputs: Mapping[str, Op]):
        self.input_keys: Tuple[str, ...] = tuple(named_inputs)
        self.output_keys: Tuple[str, ...] = tuple(named_outputs)
        outputs = [as_op(named_outputs[key]) for key in self.output_keys]
        #: The axes of each output (loop_eval finds the batch axis there).
        self.output_axes: Dict[str, Axes] = {k: op.axes for k, op in zip(self.output_keys, outputs)}
        self.num_outputs = len(outputs)
        self.comp_func = transformer.computation(
            outputs, *[named_inputs[key] for key in self.input_keys])

    def __call__(self, named_buffers: Mapping[str, Any]) -> Dict[str, Any]:
        missing = [key for key in self.input_keys if key not in named_buffers]
        if missing:
            raise FeedError(f"bound computation: no value for inputs {missing}; given "
                            f"{sorted(named_buffers)}", user_location())
        results = self.comp_func(*[named_buffers[key] for key in self.input_keys])
        return dict(zip(self.output_keys, results))


def make_bound_computation(transformer, named_outputs: Mapping[str, Op],
                           named_inputs: Mapping[str, Op]) -> BoundComputation:
    """A BoundComputation of `named_outputs` with parameters `named_inputs`."""
    return BoundComputation(transformer, named_outputs, named_inputs)


__all__ = ["BoundComputation", "make_bound_computation"]
