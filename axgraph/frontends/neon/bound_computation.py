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
    """A transformer computation called with a dict of named inputs; returns named outputs.

    Nervana Graph v0.4's way of running a model: the training and evaluation
    computations of its examples are built by ``make_bound_computation`` and
    fed the batches of an ArrayIterator directly, since a batch is a dict of
    arrays under the same names. Keys of the batch that are not inputs are
    ignored.

    Parameters
    ----------
    transformer : Transformer
        The transformer that compiles and runs the computation.
    named_outputs : mapping of str to Op
        What a call returns, by name. An op without a value (an optimizer's
        update op) is allowed and comes back as None.
    named_inputs : mapping of str to Op
        The placeholders a call feeds, by the key of the value that feeds each.

    Attributes
    ----------
    input_keys, output_keys : tuple of str
        The names, in the order given.
    output_axes : dict of str to Axes
        The axes of each output (``loop_eval`` finds the batch axis there).

    Examples
    --------
    >>> import numpy as np, axgraph as ng
    >>> N = ng.make_axis(3, name="N")
    >>> x, y = ng.placeholder([N]), ng.placeholder([N])
    >>> with ng.NumPyTransformer() as t:
    ...     dot = make_bound_computation(t, dict(total=ng.sum(x * y, out_axes=())),
    ...                                  dict(x=x, y=y))
    ...     print(dot({"x": np.arange(3.0), "y": np.ones(3), "label": None}))
    {'total': array(3., dtype=float32)}
    """

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
        """Run the computation once on the values of `named_buffers`.

        Parameters
        ----------
        named_buffers : mapping of str to array_like
            A value for every key of ``input_keys`` (others are ignored).

        Returns
        -------
        dict of str to numpy.ndarray or None
            Each output's value by its name; None for an output without a value.

        Raises
        ------
        axgraph.FeedError
            When an input has no value, or a value does not fit its placeholder.
        axgraph.TransformerClosedError
            When the transformer has been closed.
        """
        missing = [key for key in self.input_keys if key not in named_buffers]
        if missing:
            raise FeedError(f"bound computation: no value for inputs {missing}; given "
                            f"{sorted(named_buffers)}", user_location())
        results = self.comp_func(*[named_buffers[key] for key in self.input_keys])
        return dict(zip(self.output_keys, results))


def make_bound_computation(transformer, named_outputs: Mapping[str, Op],
                           named_inputs: Mapping[str, Op]) -> BoundComputation:
    """A BoundComputation of `named_outputs` with parameters `named_inputs` (v0.4's spelling).

    Parameters
    ----------
    transformer : Transformer
        The transformer that compiles and runs the computation.
    named_outputs : mapping of str to Op
        What each call returns, by name (an op without a value comes back as None).
    named_inputs : mapping of str to Op
        The placeholders each call feeds, by the key of the value that feeds each.

    Returns
    -------
    BoundComputation
        Called with a dict of arrays, it returns a dict of results.

    Examples
    --------
    >>> import numpy as np, axgraph as ng
    >>> N = ng.make_axis(2, name="N")
    >>> x = ng.placeholder([N])
    >>> with ng.NumPyTransformer() as t:
    ...     double = make_bound_computation(t, dict(y=2 * x), dict(x=x))
    ...     print(double({"x": np.array([1.0, 2.0])})["y"])
    [2. 4.]
    """
    return BoundComputation(transformer, named_outputs, named_inputs)


__all__ = ["BoundComputation", "make_bound_computation"]
