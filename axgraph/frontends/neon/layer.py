"""Layers of the neon frontend: callables that turn an op into an op.

A layer builds its variables the first time it is called, from the axes of
what it is given ("axis inference"): an Affine layer called on an input with
feature axes (C, H, W) gets a weight with axes (Out, C - 1, H - 1, W - 1), so
`ng.dot` contracts each input axis with its dual and the input's axes may come
in any order. Later calls reuse the same variables (weight sharing, and the
separate inference graph built under `inference_mode_on()`).

Conventions
-----------
* Feature axes are an input's axes that are neither batch nor recurrent, as the
  axes' flags say (``make_axis(..., batch=True)`` / ``recurrent=True``; unflagged,
  an axis named `N` is the batch and one named `REC` recurrent, v0.4's
  convention). Batch and sequence axes pass through every layer untouched: flag a
  sequence axis (`T`) ``recurrent=True``, or give Affine ``input_axes=``.
* New axes are named after the layer: ``<layer>_out`` (Affine),
  ``<layer>_hidden`` (recurrent layers), ``<layer>_vocab`` / ``<layer>_embed``
  (LookupTable). Layer names default to ``<Class>_<n>``.
* Variables take the input's floating type (float64 graphs give float64
  weights, which is what gradient checks need), else float32.
* Initializers (``weight_init``, ``init``, ...) are what `ng.variable` accepts
  as ``initial_value``: a number, an array in the variable's axes order, or a
  callable of the variable's Axes returning such an array.

Training and inference
----------------------
Dropout and BatchNorm behave differently when training. The switch is a
graph-construction flag, as in ngraph-neon: calls made inside
``with inference_mode_on():`` (also ``Layer.inference_mode_on()``) build the
inference graph, everything else builds the training graph. Nervana Graph
v0.4's protocol says the same per call: ``layer.train_outputs(x)`` and
``layer.inference_outputs(x)`` (Sequential passes the mode down). Both graphs share
the layers' variables, so one transformer can run either. Nothing is decided
at run time, so neither graph pays for the other.

BatchNorm keeps running averages of the batch statistics in persistent
tensors. The assigns that update them are built by each training-mode call
inside ``ng.Op.saved_user_deps()`` (so reading a value never updates them) and
are exposed as ``layer.updates``; a training step runs them by naming them::

    step = transformer.computation([loss] + model.updates + optimizer_updates, x, y)
"""
from __future__ import annotations

import abc

import contextlib
import itertools
import threading
from typing import (Callable, ClassVar, Dict, Iterator, List, Optional, Sequence, Set, Tuple,
                    Union)

import numpy as np

from ...axes import Axes, AxesLike, Axis, SlicedAxis, make_axis
from ...debug_info import user_location
from ...dtypes import DEFAULT_DTYPE, kind_of
from ...errors import AmbiguousAxesError, AxgraphError, AxisLengthError, IncompatibleAxesError
from ...op_graph import control, lookup, nn, random
from ...op_graph import convolution as conv
from ...op_graph import pooling as pooling_ops
from ...op_graph import dot as dot_ops
from ...op_graph import elementwise as ew
from ...op_graph import shape_ops as so
from ...op_graph.op import Op
from ...op_graph.tensors import as_op
from ...op_graph.tensors import InitialValue, persistent_tensor, variable
from .axis import ar as conv_roles
from .activation import ActivationLike, Logistic, Tanh, get_activation

__all__ = [
    "LayerError", "LayerAxesError", "Layer", "Affine", "Linear", "Bias", "Dropout", "BatchNorm",
    "LookupTable", "Convolution", "Conv2D", "Pooling", "Pool2D", "Preprocess", "Recurrent", "LSTM",
    "GRU", "BiRNN", "Sequential", "Residual", "Embedding", "inference_mode_on",
    "is_inference_mode", "feature_axes",
]


# -- errors ---------------------------------------------------------------------------

class LayerError(AxgraphError, ValueError):
    """A layer configured with settings that cannot work (keep=0, nout=-1, ...)."""


class LayerAxesError(IncompatibleAxesError):
    """An input whose axes a layer cannot use (no feature axis, no REC axis, ...)."""


# -- training / inference switch -------------------------------------------------------

class _Mode(threading.local):
    def __init__(self):
        self.inference = False


_mode = _Mode()


class _Gathering(threading.local):
    """The layers whose sub-layers' variables (or updates) are being gathered, per thread."""

    def __init__(self):
        self.ids: Set[int] = set()


_gathering = _Gathering()


@contextlib.contextmanager
def _graph_mode(inference: bool) -> Iterator[None]:
    previous, _mode.inference = _mode.inference, inference
    try:
        yield
    finally:
        _mode.inference = previous


def inference_mode_on() -> contextlib.AbstractContextManager:
    """Layers called inside build their inference graph (no dropout, running BN stats).

    A graph-construction switch, as in ngraph-neon: it decides which graph a
    layer *builds* when called, not how a computation runs. The inference
    graph reuses the layers' variables, so one transformer can run both.
    Nervana Graph v0.4 said the same per call with ``layer.inference_outputs(x)``.
    Also available as ``Layer.inference_mode_on()``. The switch is per thread
    and nests; leaving the block restores the previous mode.

    Returns
    -------
    contextlib.AbstractContextManager
        Use it in a ``with`` statement.

    Examples
    --------
    >>> import axgraph as ng
    >>> F, N = ng.make_axis(4, name="F"), ng.make_axis(8, name="N")
    >>> x = ng.placeholder([F, N])
    >>> dropout = Dropout(keep=0.5)
    >>> with inference_mode_on():
    ...     print(is_inference_mode(), dropout(x) is x)      # the identity
    True True
    >>> is_inference_mode()
    False
    """
    return _graph_mode(True)


def is_inference_mode() -> bool:
    """Whether layers called now build the inference graph.

    Returns
    -------
    bool
        True inside ``with inference_mode_on():`` (or a call of
        ``layer.inference_outputs``) in this thread, False otherwise.
    """
    return _mode.inference


# -- axes helpers ----------------------------------------------------------------------

def feature_axes(axes: AxesLike) -> Axes:
    """The axes of one example at one time step: neither batch nor recurrent (`Axes.feature_axes`).

    Parameters
    ----------
    axes : Axes, Axis or iterable of Axis
        The axes to choose from.

    Returns
    -------
    Axes
        Those of `axes` that are neither batch nor recurrent, in order.
    """
    return Axes(axes).feature_axes()


def _float_dtype(x: Op) -> np.dtype:
    return x.dtype if kind_of(x.dtype) == "f" else np.dtype(DEFAULT_DTYPE)


def channel_axis(axes: AxesLike) -> Optional[Axis]:
    """The one feature axis with role Channel or Channelout (a feature map's C), or None."""
    found = [a for a in feature_axes(axes) if conv.role_names(a) & {"channel", "channelout"}]
    return found[0] if len(found) == 1 else None


def _weight_axes(in_axes: Axes, out_axes: Axes) -> Axes:
    """out_axes + the duals of in_axes: ng.dot pairs each input axis with its dual, which
    takes precedence over a shared axis, so a recurrent weight (H, H - 1) maps a state
    with axis H to a new one."""
    return out_axes + Axes(a - 1 for a in in_axes)


def _new_axes(layer: "Layer", nout: Optional[int], axes: AxesLike, axis_name: str) -> Axes:
    """The output axes a layer was given, or one new axis `axis_name` of length nout.

    Batch and recurrent axes among `axes` are dropped (the input's pass
    through), as v0.4 did; lengths may be set later, until the first call.
    """
    if axes is not None:
        axes = feature_axes(axes)
        if not axes:
            raise layer._fail(LayerError, "output axes must include a feature axis (one that is "
                                          "neither batch nor recurrent)")
        return axes
    if nout is None or isinstance(nout, bool) or int(nout) != nout or nout <= 0:
        raise layer._fail(LayerError, f"needs nout (a positive int) or axes, got nout={nout!r}")
    return Axes(layer._new_axis(int(nout), axis_name))


# -- base class ------------------------------------------------------------------------

class Layer(abc.ABC):
    """A callable op -> op whose variables are made on the first call.

    The base of every neon layer. ``layer(x)`` builds the layer's part of
    the graph on `x`: the first call makes the variables from x's axes (see
    the module docstring), later calls reuse them, and an input whose
    feature axes do not fit them is refused. Whether a call builds the
    training or the inference graph is decided by ``inference_mode_on()``
    (or v0.4's ``train_outputs`` / ``inference_outputs``).

    Subclasses implement `_build(x)` (make variables from x's axes, once, with
    `add_variable`), `_check_input(x)` (later calls: x must fit those variables)
    and `_forward(x)` (the op graph of this call); only `_forward` is required.
    Layers held in attributes (directly, or in a list, tuple or dict) are
    sub-layers: `variables()` and `updates` include theirs.

    Parameters
    ----------
    name : str, optional
        Names the layer's variables (``<name>_W``) and new axes; without one, the layer
        is numbered in creation order (``Affine_0``), and `automatic_name` is True.
    """

    _counters: ClassVar[Dict[str, Iterator[int]]] = {}
    #: The names made up for layers without one (`Affine_0`, ...).
    _automatic_names: ClassVar[Set[str]] = set()
    inference_mode_on = staticmethod(inference_mode_on)

    def __init__(self, name: Optional[str] = None):
        kind = type(self).__name__
        if name is None:
            name = f"{kind}_{next(Layer._counters.setdefault(kind, itertools.count()))}"
            Layer._automatic_names.add(name)
        self.name = name
        #: Whether the name was made up, here or for the layer this one is a part of
        #: (`Affine_0_bn`): a model built again numbers it anew.
        self.automatic_name = name in Layer._automatic_names or any(
            name.startswith(made + "_") for made in Layer._automatic_names)
        self._variables: Dict[str, Op] = {}
        self._updates: List[Op] = []
        self._built = False

    def _new_axis(self, length: int, name: str, roles=()) -> Axis:
        """An axis this layer makes, named after it. Named after a made-up layer name, the
        axis's name counts as made up too (`serialization` then pairs it by position and
        length, not by a name the next build numbers differently)."""
        axis = make_axis(length=length, name=name, roles=roles)
        axis._auto_named = self.automatic_name
        return axis

    def __call__(self, in_obj) -> Op:
        """This layer's graph on `in_obj`, training or inference by the current mode.

        Parameters
        ----------
        in_obj : Op or array_like
            The input; an array or number becomes a constant.

        Returns
        -------
        Op
            The output (BiRNN without sum_out or concat_out: a pair of them).

        Raises
        ------
        LayerAxesError
            When the input's axes do not fit the layer (see each layer).
        axgraph.AxisLengthError
            When a variable made on the first call needs an axis length that
            is unset.
        """
        x = as_op(in_obj)
        if not self._built:
            self._build(x)
            self._built = True
        else:
            self._check_input(x)
        return self._forward(x)

    # -- for subclasses ----------------------------------------------------------
    def _build(self, x: Op) -> None:  # noqa: B027 - a hook: layers without variables skip it
        """Make this layer's variables for inputs like x (first call only)."""

    def _check_input(self, x: Op) -> None:  # noqa: B027 - a hook, as _build
        """Raise if x does not fit the variables made by the first call."""

    @abc.abstractmethod
    def _forward(self, x: Op) -> Op:
        """The op graph of one call on x (variables already made)."""

    def add_variable(self, name: str, axes: AxesLike, init: InitialValue, dtype=None,
                     trainable: bool = True) -> Op:
        """Make a variable of this layer, seen by `variables()`, optimizers and checkpoints.

        The way a layer of your own makes its weights, usually in `_build(x)` from
        the input's axes (or in ``__init__`` when the axes are known then).

        Parameters
        ----------
        name : str
            The variable's key in this layer; the op is named ``<layer>_<name>``.
        axes : Axes, Axis or iterable of Axis
            Its axes; each needs a length.
        init : number, array, callable or Op
            Its initial value (``ng.variable``'s ``initial_value``): an initializer
            such as GlorotUniform(), a number, or an array in `axes` order.
        dtype : numpy dtype or None, default None
            Its element type; None is float32.
        trainable : bool, default True
            False makes a persistent tensor instead (state such as running
            averages): not among `variables()`, so no optimizer trains it.

        Returns
        -------
        Op
            The variable (keep it, e.g. as ``self.W``).

        Raises
        ------
        LayerError
            When `init` is None, or the layer already has a variable `name`.
        axgraph.AxisLengthError
            When an axis has no length, or an array `init` does not have the
            variable's shape.

        Examples
        --------
        >>> import numpy as np, axgraph as ng
        >>> class Scale(Layer):
        ...     "y = s * x with one learned scale s per feature."
        ...     def _build(self, x):
        ...         self.s = self.add_variable("s", x.axes.feature_axes(), init=2.0)
        ...     def _forward(self, x):
        ...         return self.s * x
        >>> F, N = ng.make_axis(3, name="F"), ng.make_axis(2, name="N")
        >>> scale = Scale(name="scale")
        >>> y = scale(ng.placeholder([F, N]))
        >>> scale.variables()[0].name, scale.s.axes
        ('scale_s', Axes(F: 3))
        """
        if not isinstance(name, str) or not name:
            raise self._fail(LayerError, f"a variable's name must be a non-empty str, "
                                         f"not {name!r}")
        if name in self._variables:
            raise self._fail(LayerError, f"already has a variable {name} "
                                         f"({self._variables[name].name})")
        return self._variable(name, axes, init, np.dtype(dtype or DEFAULT_DTYPE), trainable)

    def _variable(self, key: str, axes: AxesLike, init: InitialValue, dtype,
                  trainable: bool = True) -> Op:
        """`add_variable` without its argument checks: the built-in layers' way."""
        if init is None:
            raise self._fail(LayerError, f"no initializer given for its variable {key}")
        unset = [a.name for a in Axes(axes) if a.length is None]
        if unset:
            raise self._fail(AxisLengthError, f"its variable {key} needs the lengths of axes "
                                              f"{', '.join(unset)}; set them before the first call")
        make = variable if trainable else persistent_tensor
        op = make(axes, dtype=dtype, initial_value=init, name=f"{self.name}_{key}")
        if trainable:
            self._variables[key] = op
        return op

    def _fail(self, error_class, message: str) -> AxgraphError:
        return error_class(f"{type(self).__name__} {self.name}: {message}", user_location())

    def _check_features(self, x: Op, expected: Axes) -> None:
        found = feature_axes(x.axes)
        if not found.is_equal_set(expected):
            raise self._fail(LayerAxesError,
                             f"was built for inputs with feature axes {expected}, but {x.name} "
                             f"has {found} (all axes {x.axes})")

    # -- public ------------------------------------------------------------------
    def train_outputs(self, in_obj) -> Op:
        """The training graph of this layer on `in_obj` (Nervana Graph v0.4's protocol).

        ``layer(in_obj)`` outside ``inference_mode_on()``, whatever the mode now.

        Parameters
        ----------
        in_obj : Op or array_like
            The input.

        Returns
        -------
        Op
            The output: dropout active, batch statistics in BatchNorm.
        """
        with _graph_mode(False):
            return self(in_obj)

    def inference_outputs(self, in_obj) -> Op:
        """The inference graph of this layer on `in_obj` (v0.4's protocol).

        ``layer(in_obj)`` inside ``inference_mode_on()``; the variables are
        the training graph's.

        Parameters
        ----------
        in_obj : Op or array_like
            The input.

        Returns
        -------
        Op
            The output: no dropout, BatchNorm's running averages.
        """
        with _graph_mode(True):
            return self(in_obj)

    def variables(self) -> List[Op]:
        """This layer's trainable variables (empty until the first call).

        What an optimizer trains and ``save_variables`` saves; persistent
        state such as BatchNorm's running averages is not among them.

        Returns
        -------
        list of Op
            The variables the layer made (in that order), then its sub-layers'
            (in the order the attributes holding them were set), each once.
        """
        found = {id(op): op for op in self._variables.values()}
        for op in self._from_sublayers(lambda layer: layer.variables()):
            found.setdefault(id(op), op)
        return list(found.values())

    def _from_sublayers(self, get: Callable[["Layer"], List[Op]]) -> List[Op]:
        """get(layer) for each sub-layer, concatenated; a layer reached again while its own
        are being gathered (a part holding its parent) gives nothing the second time."""
        if id(self) in _gathering.ids:
            return []
        _gathering.ids.add(id(self))
        try:
            return [op for layer in self.sublayers() for op in get(layer)]
        finally:
            _gathering.ids.discard(id(self))

    def sublayers(self) -> List["Layer"]:
        """The layers this one holds in its attributes (a block's parts).

        Returns
        -------
        list of Layer
            Layers stored directly in an attribute, or in a list, tuple or dict
            attribute, in the order the attributes were set, each once.
        """
        found: Dict[int, Layer] = {}
        for value in vars(self).values():
            if isinstance(value, dict):
                value = list(value.values())
            for item in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(item, Layer) and item is not self:
                    found.setdefault(id(item), item)
        return list(found.values())

    @property
    def updates(self) -> List[Op]:
        """Assigns a training step must run (BatchNorm running averages).

        Empty for layers without such state; include them in the training
        computation: ``transformer.computation([step] + model.updates, ...)``.
        A layer's own come first, then its sub-layers'.
        """
        return list(self._updates) + self._from_sublayers(lambda layer: layer.updates)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


# -- dense layers --------------------------------------------------------------------------

class Preprocess(Layer):
    """Applies `functor` (any callable op -> op), e.g. ``Preprocess(functor=lambda x: x / 255.)``.

    Nervana Graph v0.4's way to put a fixed transformation (scaling pixels,
    a cast) into a Sequential. It has no variables; its output has whatever
    axes `functor` gives.

    Parameters
    ----------
    functor : callable
        Called with the input op on every call; returns the output op.
    name : str or None, default None
        The layer's name, which prefixes its variables and new axes; None
        gives ``Preprocess_<n>``.

    Raises
    ------
    LayerError
        When `functor` is not callable.
    """

    def __init__(self, functor: Callable[[Op], Op], name: Optional[str] = None):
        super().__init__(name)
        if not callable(functor):
            raise self._fail(LayerError, f"functor {functor!r} is not callable")
        self.functor = functor

    def _forward(self, x: Op) -> Op:
        return self.functor(x)


class Linear(Layer):
    """y = W x: maps the input's feature axes to `axes` (or a new axis of length nout).

    The input needs at least one feature axis (an axis that is neither batch
    nor recurrent). The weight W has axes (out..., in - 1...): the output
    axes, then the duals of the input's feature axes, so ``ng.dot`` pairs
    them whatever their order. The output has the output axes, then the
    input's batch and recurrent axes. Arguments come in Nervana Graph v0.4's
    order: ``Linear(init, nout, axes)``.

    Parameters
    ----------
    init : number, array, callable or Op
        The weight's initial value (``ng.variable``'s ``initial_value``):
        typically an initializer such as GlorotUniform(). Required.
    nout : int or None, default None
        Length of the new output axis ``<name>_out``; needed unless `axes` is given.
    axes : Axes, sequence of Axis or None, default None
        The output feature axes, in place of a new axis; batch and recurrent
        axes among them are dropped (the input's pass through).
    name : str or None, default None
        The layer's name, which prefixes its variables and new axes; None
        gives ``Linear_<n>``.
    input_axes : Axes, sequence of Axis or None, default None
        The input axes to map (contract); the input's other axes pass through
        to the output, like the batch axis. None: all the input's feature axes.

    Raises
    ------
    LayerError
        When `init` is missing, `nout` is not a positive int (without
        `axes`), `axes` has no feature axis, or `input_axes` is empty.
    LayerAxesError
        When called on an input without feature axes (or without one of
        `input_axes`), or (after the first call) on one whose feature axes
        differ from the first input's.
    axgraph.AxisLengthError
        On the first call, when an axis of W has no length, or an array
        `init` does not have W's shape.

    Examples
    --------
    >>> import axgraph as ng
    >>> F, N = ng.make_axis(4, name="F"), ng.make_axis(8, name="N")
    >>> linear = Linear(init=GlorotUniform(), nout=3, name="proj")
    >>> linear(ng.placeholder([F, N])).axes, linear.W.axes
    (Axes(proj_out: 3, N: 8), Axes(proj_out: 3, F-1: 4))
    """

    def __init__(self, init: InitialValue = None, nout: Optional[int] = None,
                 axes: AxesLike = None, name: Optional[str] = None, *,
                 input_axes: AxesLike = None):
        super().__init__(name)
        self.axes = _new_axes(self, nout, axes, f"{self.name}_out")
        self.init = init
        if init is None:
            raise self._fail(LayerError, "needs init= (the weight initializer)")
        self.input_axes = None if input_axes is None else Axes(input_axes)
        if self.input_axes is not None and not self.input_axes:
            raise self._fail(LayerError, "input_axes is empty: name the input axes to map, or "
                                         "leave it None to map all the input's feature axes")

    def _mapped_axes(self, x: Op) -> Axes:
        if self.input_axes is None:
            return feature_axes(x.axes)
        missing = self.input_axes - x.axes
        if missing:
            raise self._fail(LayerAxesError, f"input_axes {missing} are not axes of input "
                                             f"{x.name} {x.axes}")
        return self.input_axes

    def _build(self, x: Op) -> None:
        features = self._mapped_axes(x)
        if not features:
            raise self._fail(LayerAxesError, f"input {x.name} {x.axes} has no feature axes to map")
        self.in_axes = features
        self.W = self._variable("W", _weight_axes(features, self.axes), self.init,
                                _float_dtype(x))

    def _check_input(self, x: Op) -> None:
        if self.input_axes is None:
            self._check_features(x, self.in_axes)
        else:
            self._mapped_axes(x)

    def _forward(self, x: Op) -> Op:
        return dot_ops.dot(self.W, x)


class Bias(Layer):
    """y = x + b with b over the input's feature axes (Nervana Graph v0.4's Bias).

    With `shared` (the default) a feature map gets one bias per channel: b
    has only the input's channel axis (found by role Channel or Channelout).
    Inputs without a channel axis get a bias per feature. ``init=None`` means
    no bias: the layer passes its input through. The output has the input's axes.

    Parameters
    ----------
    init : number, array, callable, Op or None, default 0.0
        The bias's initial value; None for no bias.
    shared : bool, default True
        One bias per channel of a feature map (False: one per feature).
    name : str or None, default None
        The layer's name, which prefixes its variables and new axes; None
        gives ``Bias_<n>``.
    axes : Axes, sequence of Axis or None, default None
        The axes b spans, in place of the ones chosen from the input (Affine
        gives its output axes, so axes passed through get no bias of their own).

    Raises
    ------
    LayerAxesError
        When the input lacks one of `axes`, or after the first call, when an
        input's feature axes differ from the first input's.
    axgraph.AxisLengthError
        On the first call, when an axis of b has no length or an array
        `init` does not have b's shape.
    """

    def __init__(self, init: InitialValue = 0.0, shared: bool = True,
                 name: Optional[str] = None, *, axes: AxesLike = None):
        super().__init__(name)
        self.init, self.shared = init, bool(shared)
        self.axes = None if axes is None else Axes(axes)

    def _bias_axes(self, x: Op) -> Axes:
        if self.axes is not None:
            missing = self.axes - x.axes
            if missing:
                raise self._fail(LayerAxesError, f"its bias axes {missing} are not axes of "
                                                 f"input {x.name} {x.axes}")
            return self.axes
        channel = channel_axis(x.axes) if self.shared else None
        return Axes(channel) if channel is not None else feature_axes(x.axes)

    def _build(self, x: Op) -> None:
        if self.init is None:
            return
        self.in_axes = feature_axes(x.axes)
        self.b = self._variable("b", self._bias_axes(x), self.init, _float_dtype(x))

    def _check_input(self, x: Op) -> None:
        if self.init is None:
            return
        if self.axes is None:
            self._check_features(x, self.in_axes)
        else:
            self._bias_axes(x)

    def _forward(self, x: Op) -> Op:
        return x if self.init is None else x + self.b


class Affine(Layer):
    """activation(batch_norm(W x + b)): a fully connected layer.

    The input needs at least one feature axis; all its feature axes are
    mapped (W has axes (out..., in - 1...), as Linear's), or only
    `input_axes` when given. The output has `axes` (or one new axis
    ``<name>_out`` of length nout), then the input's other axes (batch,
    recurrent, and those left out of `input_axes`). With batch_norm the bias is left out
    (BatchNorm's beta plays its part) and `updates` holds the running-average
    assigns. Arguments come in Nervana Graph v0.4's order:
    ``Affine(weight_init, nout, bias_init, activation, batch_norm, axes)``.

    Parameters
    ----------
    weight_init : number, array, callable or Op
        The weight's initial value (``ng.variable``'s ``initial_value``):
        typically an initializer such as GlorotUniform(). Required.
    nout : int or None, default None
        Length of the new output axis ``<name>_out``; needed unless `axes` is given.
    bias_init : number, array, callable, Op or None, default None
        The bias's initial value (the bias has the output axes); None for no bias.
    activation : Activation, str, callable or None, default None
        Applied last: an activation object, a name ("relu", "tanh",
        "softmax", ...) or any callable op -> op; None is the identity.
    batch_norm : bool, default False
        Normalize W x with a BatchNorm layer ``<name>_bn`` before the activation.
    axes : Axes, sequence of Axis or None, default None
        The output feature axes, in place of a new axis; batch and recurrent
        axes among them are dropped (the input's pass through).
    name : str or None, default None
        The layer's name, which prefixes its variables and new axes; None
        gives ``Affine_<n>``.
    input_axes : Axes, sequence of Axis or None, default None
        The input axes to contract; the input's other axes pass through like
        the batch axis (a sequence axis ``T`` not flagged ``recurrent=True``,
        say). None: every axis that is neither batch nor recurrent, which
        flattens a feature map (C, H, W) as v0.4 did.

    Raises
    ------
    LayerError
        When `weight_init` is missing, `nout` is not a positive int (without
        `axes`), `axes` has no feature axis, or `input_axes` is empty.
    ActivationError
        When `activation` is an unknown name.
    LayerAxesError
        When called on an input without feature axes, or (after the first
        call) on one whose feature axes differ from the first input's.
    axgraph.AxisLengthError
        On the first call, when an axis of W has no length, or an array
        initial value does not have its variable's shape.

    Examples
    --------
    >>> import axgraph as ng
    >>> C, H = ng.make_axis(3, name="C"), ng.make_axis(5, name="H")
    >>> N = ng.make_axis(8, name="N")
    >>> hidden = Affine(GlorotUniform(), nout=10, bias_init=0.0, activation=Rectlin(),
    ...                 name="hidden")
    >>> hidden(ng.placeholder([C, H, N])).axes
    Axes(hidden_out: 10, N: 8)
    >>> hidden.W.axes, hidden.b.axes
    (Axes(hidden_out: 10, C-1: 3, H-1: 5), Axes(hidden_out: 10))
    >>> D, T = ng.make_axis(4, name="D"), ng.make_axis(6, name="T")   # T: not flagged
    >>> per_step = Affine(GlorotUniform(), nout=2, input_axes=[D], name="per_step")
    >>> per_step(ng.placeholder([D, T, N])).axes
    Axes(per_step_out: 2, T: 6, N: 8)
    """

    def __init__(self, weight_init: InitialValue = None, nout: Optional[int] = None,
                 bias_init: InitialValue = None, activation: ActivationLike = None,
                 batch_norm: bool = False, axes: AxesLike = None, name: Optional[str] = None,
                 *, input_axes: AxesLike = None):
        super().__init__(name)
        if weight_init is None:
            raise self._fail(LayerError, "needs weight_init=")
        self.axes = _new_axes(self, nout, axes, f"{self.name}_out")
        # The parts share the Affine's name, so its variables read <name>_W, <name>_b.
        self.linear = Linear(init=weight_init, axes=self.axes, name=self.name,
                             input_axes=input_axes)
        use_bias = bias_init is not None and not batch_norm
        self.bias = (Bias(bias_init, shared=False, name=self.name, axes=self.axes)
                     if use_bias else None)
        self.batch_norm = BatchNorm(name=f"{self.name}_bn") if batch_norm else None
        self.activation = get_activation(activation)
        self._parts = [p for p in (self.linear, self.bias, self.batch_norm) if p is not None]

    def _forward(self, x: Op) -> Op:
        for part in self._parts:
            x = part(x)
        return self.activation(x)

    def variables(self) -> List[Op]:
        return [v for part in self._parts for v in part.variables()]

    @property
    def updates(self) -> List[Op]:
        return self.batch_norm.updates if self.batch_norm is not None else []

    @property
    def W(self) -> Op:
        """The weight (after the first call): axes (out..., in - 1...)."""
        return self.linear.W

    @property
    def b(self) -> Optional[Op]:
        """The bias over the output axes, or None."""
        return self.bias.b if self.bias is not None else None


# -- regularization and normalization -----------------------------------------------------

class Dropout(Layer):
    """Inverted dropout: keep each value with probability `keep`, scaled by 1/keep.

    Scaling when training keeps the expected value unchanged, so inference
    (calls inside `inference_mode_on()`) is the identity. A fresh mask is drawn
    on every call of a computation; `seed` makes the draws reproducible.
    The output has the input's axes; one mask element per input element.

    Parameters
    ----------
    keep : float, default 0.5
        Probability of keeping each element, in (0, 1]; 1 makes the layer
        the identity. (v0.4's Dropout took the same `keep`.)
    seed : int or None, default None
        Seed of the mask's random stream; None draws unseeded.
    name : str or None, default None
        The layer's name, which prefixes its variables and new axes; None
        gives ``Dropout_<n>``.

    Raises
    ------
    LayerError
        When `keep` is not in (0, 1].
    """

    def __init__(self, keep: float = 0.5, seed: Optional[int] = None, name: Optional[str] = None):
        super().__init__(name)
        if not 0.0 < keep <= 1.0:
            raise self._fail(LayerError, f"keep must lie in (0, 1], not {keep!r}")
        self.keep, self.seed = float(keep), seed

    def _forward(self, x: Op) -> Op:
        if is_inference_mode() or self.keep == 1.0:
            return x
        draws = random.uniform(x.axes, seed=self.seed, dtype=_float_dtype(x))
        mask = ew.less(draws, self.keep)
        return x * mask * (1.0 / self.keep)


class BatchNorm(Layer):
    """gamma * (x - mean) / sqrt(var + eps) + beta per feature (Ioffe & Szegedy 2015).

    Training uses the statistics of the batch (population variance). A
    feature map, an input with a channel axis (role Channel or Channelout),
    gets per-channel statistics, over every other axis, as Nervana Graph v0.4
    took them; ``spatial=False`` asks for statistics per (C, H, W) instead.
    Other inputs are normalized per feature, over the batch axis and the
    recurrent axis if present. Training builds the assigns that update the
    running averages gmean and gvar (by ``rho``) as `updates`, replacing
    those of the previous training call; a training step must run them.
    Inference uses gmean and gvar, persistent tensors that both start at 1, where
    Nervana Graph v0.4's BatchNorm started them. The
    output has the input's axes; gamma and beta have the normalized axes
    (the channel axis of a feature map).

    Parameters
    ----------
    rho : float, default 0.9
        Weight of the old running average in each update, in [0, 1].
    eps : float, default 1e-3
        Added to the variance before the square root (>= 0).
    init_gamma : number, array, callable or Op, default 1.0
        Initial value of the scale gamma.
    init_beta : number, array, callable or Op, default 0.0
        Initial value of the shift beta.
    spatial : bool or None, default None
        False: statistics per (channel, spatial position) even for a feature
        map. None or True: per channel when the input has a channel axis.
    name : str or None, default None
        The layer's name, which prefixes its variables and new axes; None
        gives ``BatchNorm_<n>``.

    Raises
    ------
    LayerError
        When `rho` is outside [0, 1] or `eps` is negative.
    LayerAxesError
        When a training-mode call gets an input without a batch axis, or a
        later call an input whose normalized axes differ from the first's.

    Examples
    --------
    >>> import axgraph as ng
    >>> C = ng.make_axis(3, name="C", roles=[ar.Channel])
    >>> H = ng.make_axis(4, name="H", roles=[ar.Height])
    >>> W = ng.make_axis(4, name="W", roles=[ar.Width])
    >>> N = ng.make_axis(8, name="N")
    >>> norm = BatchNorm(name="norm")
    >>> norm(ng.placeholder([C, H, W, N])).axes, norm.gamma.axes, len(norm.updates)
    (Axes(C: 3, H: 4, W: 4, N: 8), Axes(C: 3), 2)
    """

    def __init__(self, rho: float = 0.9, eps: float = 1e-3, init_gamma: InitialValue = 1.0,
                 init_beta: InitialValue = 0.0, spatial: Optional[bool] = None,
                 name: Optional[str] = None):
        super().__init__(name)
        if not 0.0 <= rho <= 1.0 or eps < 0:
            raise self._fail(LayerError,
                             f"needs 0 <= rho <= 1 and eps >= 0, got rho={rho}, eps={eps}")
        self.rho, self.eps = float(rho), float(eps)
        self.init_gamma, self.init_beta = init_gamma, init_beta
        self.spatial = spatial

    def _stat_axes(self, x: Op) -> Axes:
        channel = channel_axis(x.axes) if self.spatial is not False else None
        if channel is not None:
            return x.axes - Axes(channel)
        return Axes(a for a in x.axes if a.is_batch or a.is_recurrent)

    def _build(self, x: Op) -> None:
        self.in_axes = x.axes - self._stat_axes(x)
        dtype = _float_dtype(x)
        self.gamma = self._variable("gamma", self.in_axes, self.init_gamma, dtype)
        self.beta = self._variable("beta", self.in_axes, self.init_beta, dtype)
        self.gmean = persistent_tensor(self.in_axes, dtype=dtype, initial_value=1.0,
                                       name=f"{self.name}_gmean")
        self.gvar = persistent_tensor(self.in_axes, dtype=dtype, initial_value=1.0,
                                      name=f"{self.name}_gvar")

    def _check_input(self, x: Op) -> None:
        found = x.axes - self._stat_axes(x)
        if not found.is_equal_set(self.in_axes):
            raise self._fail(LayerAxesError, f"was built to normalize axes {self.in_axes}, but "
                                             f"{x.name} {x.axes} has {found}")

    def _forward(self, x: Op) -> Op:
        if is_inference_mode():
            mean, var = self.gmean, self.gvar
        else:
            stat_axes = self._stat_axes(x)
            if not stat_axes:
                raise self._fail(LayerAxesError, f"input {x.name} {x.axes} has no batch axis to "
                                                 f"take training statistics over")
            mean, var = nn.moments(x, reduction_axes=stat_axes)
            rho, rest = self.rho, 1.0 - self.rho
            with Op.saved_user_deps():
                self._updates = [
                    control.assign(self.gmean, self.gmean * rho + mean * rest),
                    control.assign(self.gvar, self.gvar * rho + var * rest),
                ]
        inv_std = ew.reciprocal(ew.sqrt(var + self.eps))
        return (x - mean) * inv_std * self.gamma + self.beta


# -- embeddings -----------------------------------------------------------------------------

class LookupTable(Layer):
    """Embeds integer indices: row x of a (vocab, embed) table for every index x.

    The input holds integer indices with any axes (typically (REC, N)); the
    output has the embedding axis ``<name>_embed`` in front of them. It is
    ``ng.lookuptable`` (a gather whose gradient is a scatter-add, so only the
    rows used are touched). With `pad_idx`, that index embeds to zeros, its row
    starts at zero and it receives no gradient. With ``update=False`` the
    table is a persistent tensor rather than a variable, so no optimizer
    trains it (v0.4's argument, in v0.4's position). The table W has axes
    (``<name>_vocab``, ``<name>_embed``).

    Parameters
    ----------
    vocab_size : int
        Number of rows: indices lie in [0, vocab_size).
    embed_dim : int
        Length of each embedding: the output axis ``<name>_embed``.
    init : number, array, callable or Op
        The table's initial value (an array in (vocab, embed) order, or an
        initializer). Required.
    update : bool, default True
        Train the table; False makes it a persistent tensor no optimizer trains.
    pad_idx : int or None, default None
        An index that embeds to zeros and is never trained.
    dtype : numpy dtype or None, default None
        The table's element type; None is float32.
    name : str or None, default None
        The layer's name, which prefixes its variables and new axes; None
        gives ``LookupTable_<n>``.

    Raises
    ------
    LayerError
        When `vocab_size` or `embed_dim` is not a positive int, `pad_idx` is
        outside [0, vocab_size), or (first call) `init` is None.
    LayerAxesError
        When called on indices that are not integers or that have the
        table's own axes.
    axgraph.ExecutionError
        When a computation runs with an index outside [0, vocab_size).

    Examples
    --------
    >>> import numpy as np, axgraph as ng
    >>> N = ng.make_axis(2, name="N")
    >>> words = ng.placeholder([N], dtype=np.int32)
    >>> embed = LookupTable(4, 3, Constant(1.0), pad_idx=0, name="embed")
    >>> vectors = embed(words)
    >>> vectors.axes
    Axes(embed_embed: 3, N: 2)
    >>> with ng.NumPyTransformer() as t:
    ...     print(t.computation(vectors, words)(np.array([0, 2])))   # index 0 is padding
    [[0. 1.]
     [0. 1.]
     [0. 1.]]
    """

    def __init__(self, vocab_size: int, embed_dim: int, init: InitialValue, update: bool = True,
                 pad_idx: Optional[int] = None, dtype=None, name: Optional[str] = None):
        super().__init__(name)
        for what, value in (("vocab_size", vocab_size), ("embed_dim", embed_dim)):
            if isinstance(value, bool) or int(value) != value or value <= 0:
                raise self._fail(LayerError, f"{what} must be a positive int, not {value!r}")
        if pad_idx is not None and not 0 <= pad_idx < vocab_size:
            raise self._fail(LayerError, f"pad_idx {pad_idx} is outside [0, {vocab_size})")
        self.vocab_axis = self._new_axis(int(vocab_size), f"{self.name}_vocab")
        self.embed_axis = self._new_axis(int(embed_dim), f"{self.name}_embed")
        self.axes = Axes(self.embed_axis)
        self.init, self.pad_idx, self.update = init, pad_idx, bool(update)
        self.dtype = np.dtype(dtype or DEFAULT_DTYPE)

    def _initial_table(self, axes: Axes) -> np.ndarray:
        value = self.init(axes) if callable(self.init) else self.init
        table = np.array(np.broadcast_to(np.asarray(value, dtype=self.dtype), axes.lengths))
        table[self.pad_idx] = 0
        return table

    def _build(self, x: Op) -> None:
        init = self.init if self.pad_idx is None else self._initial_table
        self.W = self._variable("W", [self.vocab_axis, self.embed_axis], init, self.dtype,
                                trainable=self.update)

    def _forward(self, x: Op) -> Op:
        taken = Axes(a for a in (self.vocab_axis, self.embed_axis) if a in x.axes)
        if taken or x.dtype.kind not in "iu":
            raise self._fail(LayerAxesError, f"needs integer indices without axes "
                                             f"{self.vocab_axis.name}/{self.embed_axis.name}; got "
                                             f"{x.name} {x.axes} of {x.dtype}")
        return lookup.lookuptable(self.W, x, vocab_axis=self.vocab_axis, pad_idx=self.pad_idx)


class Embedding(LookupTable):
    """Token embeddings, plus learned position embeddings along a sequence axis.

    A LookupTable (row x of the table W for every index x) to which, with
    `positions`, a learned table P with axes (positions, ``<name>_embed``) is
    added: the vector of token x at position t is W[x] + P[t], as in GPT-style
    models. The position axis is a sequence axis (flagged ``recurrent=True``),
    so softmax, reductions and Affine leave it alone afterwards. Indices over
    a slice of it (``tokens[t:t + 1]`` when generating) get those positions'
    rows. Without `positions` this is exactly LookupTable.

    Parameters
    ----------
    vocab_size : int
        Number of rows of W: indices lie in [0, vocab_size).
    embed_dim : int
        Length of each embedding: the output axis ``<name>_embed``.
    init : number, array, callable or Op
        W's initial value (an array in (vocab, embed) order, or an initializer).
    positions : Axis, int or None, default None
        The sequence axis of the indices that gets learned positions (it must be
        flagged ``recurrent=True``: ``ng.make_axis(64, name="T", recurrent=True)``),
        or a length, for which the layer makes the axis ``<name>_position``
        (`position_axis`; make the indices' placeholder with it). None: no positions.
    position_init : number, array, callable, Op or None, default None
        P's initial value (an array in (position, embed) order); None uses `init`
        (which then must not be an array).
    update : bool, default True
        Train W and P; False makes them persistent tensors no optimizer trains.
    pad_idx : int or None, default None
        An index whose token vector is zeros and never trained (its position
        vector is still added).
    dtype : numpy dtype or None, default None
        The tables' element type; None is float32.
    name : str or None, default None
        The layer's name, which prefixes its variables and new axes; None
        gives ``Embedding_<n>``.

    Raises
    ------
    LayerError
        As LookupTable, and when `positions` is an axis that is not flagged
        recurrent or has no length, or not a positive int.
    LayerAxesError
        As LookupTable, and when the indices lack the position axis (and a
        slice of it).

    Examples
    --------
    >>> import numpy as np, axgraph as ng
    >>> T = ng.make_axis(3, name="T", recurrent=True)
    >>> N = ng.make_axis(2, name="N")
    >>> tokens = ng.placeholder([T, N], dtype=np.int32)
    >>> embed = Embedding(5, 4, init=Constant(0.0), positions=T,
    ...                   position_init=lambda axes: np.arange(12.0).reshape(3, 4), name="emb")
    >>> vectors = embed(tokens)
    >>> vectors.axes, embed.P.axes
    (Axes(emb_embed: 4, T: 3, N: 2), Axes(T: 3, emb_embed: 4))
    >>> with ng.NumPyTransformer() as t:
    ...     print(t.computation(vectors, tokens)(np.zeros((3, 2), np.int32))[:, :, 0])
    [[ 0.  4.  8.]
     [ 1.  5.  9.]
     [ 2.  6. 10.]
     [ 3.  7. 11.]]
    """

    def __init__(self, vocab_size: int, embed_dim: int, init: InitialValue, *,
                 positions: Union[Axis, int, None] = None, position_init: InitialValue = None,
                 update: bool = True, pad_idx: Optional[int] = None, dtype=None,
                 name: Optional[str] = None):
        super().__init__(vocab_size, embed_dim, init, update=update, pad_idx=pad_idx,
                         dtype=dtype, name=name)
        self.position_axis = self._position_axis(positions)
        self.position_init = init if position_init is None else position_init
        self.P: Optional[Op] = None

    def _position_axis(self, positions: Union[Axis, int, None]) -> Optional[Axis]:
        if positions is None:
            return None
        if isinstance(positions, Axis):
            if not positions.is_recurrent:
                raise self._fail(LayerError, f"positions axis {positions.name} is not flagged as "
                                             f"a sequence axis, so later defaults (softmax, "
                                             f"reductions, Affine) would treat it as a feature: "
                                             f"make it with ng.make_axis(..., recurrent=True)")
            if positions.length is None:
                raise self._fail(LayerError, f"positions axis {positions.name} needs a length "
                                             f"(the number of positions learned)")
            return positions
        if isinstance(positions, bool) or not isinstance(positions, (int, np.integer)) \
                or positions <= 0:
            raise self._fail(LayerError, f"positions must be a sequence Axis or a positive int, "
                                         f"not {positions!r}")
        axis = make_axis(length=int(positions), name=f"{self.name}_position", recurrent=True)
        axis._auto_named = self.automatic_name
        return axis

    def _build(self, x: Op) -> None:
        super()._build(x)
        if self.position_axis is not None:
            self.P = self._variable("positions", [self.position_axis, self.embed_axis],
                                    self.position_init, self.dtype, trainable=self.update)

    def _forward(self, x: Op) -> Op:
        tokens = super()._forward(x)
        if self.position_axis is None:
            return tokens
        assert self.P is not None  # made by _build
        if self.position_axis in x.axes:
            return tokens + self.P
        for axis in x.axes:
            if isinstance(axis, SlicedAxis) and axis.parent is self.position_axis:
                return tokens + self.P[axis.slice]       # the same positions, the same axis
        raise self._fail(LayerAxesError, f"was made with positions along "
                                         f"{self.position_axis.name}, but the indices "
                                         f"{x.name} {x.axes} lack that axis (and any slice "
                                         f"of it)")


# -- convolution and pooling ------------------------------------------------------------------

#: Filter axis names for the input's spatial roles, in depth, height, width order.
FILTER_AXIS_NAMES = {"depth": "T", "height": "R", "width": "S"}


class _FeatureMapLayer(Layer):
    """Shared by Convolution and Pooling: role-based layout and stable output axes.

    ng.convolution / ng.pooling make new output spatial axes (M, P, Q) on
    every call. The layer remembers the ones made for each input's spatial
    axes and passes them back on later calls, so the training and inference
    graphs (and any layer after this one) see the same axes.
    """

    def __init__(self, name: Optional[str] = None):
        super().__init__(name)
        self._out_spatial: Dict[Tuple[int, ...], Tuple[Axis, ...]] = {}

    def _layout(self, x: Op) -> conv.FeatureLayout:
        try:
            return conv.feature_layout(x, type(self).__name__)
        except AxgraphError as error:
            raise self._fail(LayerAxesError, error.message) from None

    def _known_axes(self, layout: conv.FeatureLayout, channel: Axis) -> Optional[Axes]:
        known = self._out_spatial.get(tuple(id(a) for a in layout.spatial))
        return None if known is None else Axes((channel,) + known + (layout.batch,))

    def _remember(self, layout: conv.FeatureLayout, y: Op) -> Op:
        assert isinstance(y, (conv.ConvFamilyOp, pooling_ops.PoolingOp))  # they know y_layout
        self._out_spatial.setdefault(tuple(id(a) for a in layout.spatial), y.y_layout.spatial)
        return y


def _is_planar(filter_shape: Tuple[int, ...], roles: Sequence[str]) -> bool:
    """Whether `filter_shape` is v0.4's 2-d (R, S, K) or (R=S, K) meant for an input with
    a depth axis: one value short of (T, R, S, K), or (R, K)."""
    return (len(roles) == 3 and roles[0] == "depth"
            and len(filter_shape) in (2, 3))


def _per_dim(value, what: str, layer: Layer, roles: Sequence[str], planar: bool = False,
             depth_default: int = 0) -> Union[int, Tuple[int, ...]]:
    """An int, or one value per spatial dim: a sequence, or a dict keyed by role letter
    (d/T, h/R, w/S) or by ngraph's names (str_h, pad_w, dil_d, ...).

    With `planar` (a 2-d window on an input with depth, as v0.4's Conv2D and Pool2D
    took it), an int, or a dict without a depth entry, is for height and width only;
    depth gets `depth_default`.
    """
    if planar and isinstance(value, int) and roles and roles[0] == "depth":
        return (depth_default,) + (value,) * (len(roles) - 1)
    if isinstance(value, dict):
        letters = {"depth": ("d", "T"), "height": ("h", "R"), "width": ("w", "S")}
        picked = []
        for role in roles:
            found = [v for k, v in value.items()
                     if k in letters[role] or k.endswith("_" + letters[role][0])]
            if not found and planar and role == "depth":
                found = [depth_default]
            if not found:
                raise layer._fail(LayerError, f"{what} {value} gives nothing for the {role} axis")
            picked.append(found[0])
        return tuple(int(v) for v in picked)
    if isinstance(value, int):
        return value
    value = tuple(int(v) for v in value)
    if len(value) != len(roles):
        raise layer._fail(LayerError, f"{what} {value} has {len(value)} values for the spatial "
                                      f"axes {roles}")
    return value


class Convolution(_FeatureMapLayer):
    """activation(batch_norm(conv(x, filters) + b)) over a feature map found by role.

    The input needs a channel axis (role Channel or Channelout), spatial axes
    (roles Depth/Height/Width) and a batch axis, in any order, and no other
    axes: (C, H, W, N) for images, (C, D, H, W, N) for volumes.
    The filter has axes (K, C - 1, T/R/S - 1...):
    the output channels ``<name>_K`` (role Channelout), then the duals of the
    input's channel axis and of new spatial axes ``<name>_R`` ... (with the
    input's roles), in the (out, in - 1) convention of Affine's weight, so
    initializers see fan_in = C * R * S and fan_out = K. The output has axes
    (``<name>_K``, new spatial axes with the input's roles, the batch axis);
    its spatial axes stay the same on every call with the same input axes.
    The bias is per output channel; batch_norm uses per-channel statistics.

    The arguments come in Nervana Graph v0.4's order: ``Convolution(fshape,
    filter_init, strides, padding, bias_init, activation, batch_norm)``;
    `dilation` follows. On an input with a depth axis (v0.4's 5-d images
    (C, D, H, W, N)), an int stride, padding or dilation, or a dict without a
    depth entry, applies to height and width only (depth 1, 0 and 1), as
    v0.4's Conv2D read them.

    Parameters
    ----------
    filter_shape : tuple of int or dict
        The filter's spatial lengths, then K, the number of output feature
        maps: (T, R, S, K) for an input with depth, height and width axes;
        v0.4's 3-value (R, S, K) for an image (C, H, W, N), or for a 5-d input
        (C, D, H, W, N) a filter of depth T = 1, as in v0.4; (R, K) for a
        square R x R filter on an image (v0.4's 2-value form); (L, K), L the
        filter's length, for an input with one spatial axis. A dict gives the
        lengths by key: "K" and one of "T", "R", "S" for each spatial axis of
        the input.
    filter_init : number, array, callable or Op
        The filter's initial value, in (K, C, T/R/S...) order for an array;
        typically an initializer. Required.
    strides : int, tuple of int or dict, default 1
        Step of the filter along each spatial axis: one int for all, one per
        spatial axis (depth, height, width order), or a dict keyed by axis
        letter (T/R/S or d/h/w) or by ngraph's names (str_d, str_h, str_w).
    padding : int, tuple of int or dict, default 0
        Zeros added at both ends of each spatial axis, given like `strides`
        (pad_h, pad_w, ...).
    bias_init : number, array, callable, Op or None, default None
        The per-channel bias's initial value; None (or batch_norm) for no bias.
    activation : Activation, str, callable or None, default None
        Applied last: an activation object, a name ("relu", "tanh",
        "softmax", ...) or any callable op -> op; None is the identity.
    batch_norm : bool, default False
        Normalize per output channel with a BatchNorm layer ``<name>_bn``
        before the activation (the bias is then left out).
    dilation : int, tuple of int or dict, default 1
        Spacing between filter taps along each spatial axis, given like
        `strides` (dil_h, dil_w, ...).
    name : str or None, default None
        The layer's name, which prefixes its variables and new axes; None
        gives ``Convolution_<n>``.

    Raises
    ------
    LayerError
        When `filter_init` is missing; at the first call, when
        `filter_shape` does not fit the input's spatial axes, or `strides`,
        `padding` or `dilation` give the wrong number of values or miss an axis.
    ActivationError
        When `activation` is an unknown name.
    LayerAxesError
        When the input's batch, channel and spatial axes cannot be told by
        their roles, it has other axes, or a later input has another channel
        axis or other spatial roles than the first.
    axgraph.IncompatibleAxesError
        When the filter does not fit the (padded) input, or a stride or
        dilation is below 1 or a padding negative.

    Examples
    --------
    >>> import axgraph as ng
    >>> C = ng.make_axis(3, name="C", roles=[ar.Channel])
    >>> H = ng.make_axis(8, name="H", roles=[ar.Height])
    >>> W = ng.make_axis(8, name="W", roles=[ar.Width])
    >>> N = ng.make_axis(4, name="N")
    >>> conv = Convolution((3, 3, 16), GlorotUniform(), strides=1, padding=1,
    ...                    activation=Rectlin(), name="conv1")
    >>> conv(ng.placeholder([C, H, W, N])).axes
    Axes(conv1_K: 16, P: 8, Q: 8, N: 4)
    >>> conv.W.axes
    Axes(conv1_K: 16, C-1: 3, conv1_R-1: 3, conv1_S-1: 3)
    """

    def __init__(self, filter_shape, filter_init: InitialValue, strides=1, padding=0,
                 bias_init: InitialValue = None, activation: ActivationLike = None,
                 batch_norm: bool = False, dilation=1, name: Optional[str] = None):
        super().__init__(name)
        if filter_init is None:
            raise self._fail(LayerError, "needs filter_init=")
        self.filter_shape, self.filter_init = filter_shape, filter_init
        self.strides, self.padding, self.dilation = strides, padding, dilation
        self.bias_init = None if batch_norm else bias_init
        self.activation = get_activation(activation)
        self.batch_norm = BatchNorm(spatial=True, name=f"{self.name}_bn") if batch_norm else None

    def _shape(self, roles: Sequence[str]) -> Tuple[Tuple[int, ...], int]:
        letters = [FILTER_AXIS_NAMES[role] for role in roles]
        shape = self.filter_shape
        if isinstance(shape, dict):
            missing = [k for k in letters + ["K"] if k not in shape]
            absent = {k: v for k, v in shape.items() if k not in letters + ["K"] and v != 1}
            if missing or absent:
                raise self._fail(LayerError, f"filter_shape {shape} lacks {missing} or sizes "
                                             f"dims {absent} that an input with spatial roles "
                                             f"{tuple(roles)} does not have")
            return tuple(int(shape[k]) for k in letters), int(shape["K"])
        shape = tuple(int(n) for n in shape)
        planar = _is_planar(shape, roles)  # v0.4's 2-d filter on (C, D, H, W, N)
        if len(shape) == 2 and (planar or len(letters) == 2):  # v0.4's (R = S, K)
            shape = (shape[0],) + shape
        if planar:
            shape = (1,) + shape  # depth T = 1
        if len(shape) != len(letters) + 1:
            raise self._fail(LayerError, f"filter_shape {shape} needs {len(letters) + 1} values "
                                         f"({', '.join(letters)}, K) for an input with spatial "
                                         f"roles {tuple(roles)}")
        return shape[:-1], shape[-1]

    def _build(self, x: Op) -> None:
        layout = self._layout(x)
        roles = layout.spatial_roles
        spatial, nout = self._shape(roles)
        self.in_channel = layout.channel
        self.in_roles = roles
        self.out_channel = self._new_axis(nout, f"{self.name}_K", [conv_roles.Channelout])
        self.axes = Axes(self.out_channel)
        filter_spatial = [self._new_axis(n, f"{self.name}_{FILTER_AXIS_NAMES[role]}", axis.roles)
                          for n, role, axis in zip(spatial, roles, layout.spatial)]
        dtype = _float_dtype(x)
        # (K, C - 1, R - 1, S - 1): out axes, then the dual "in" axes, as for Affine's
        # weight, so that initializers see fan_in = C * R * S and fan_out = K.
        w_axes = [self.out_channel, layout.channel - 1] + [a - 1 for a in filter_spatial]
        self.W = self._variable("W", w_axes, self.filter_init, dtype)
        if self.bias_init is not None:
            self.b = self._variable("b", [self.out_channel], self.bias_init, dtype)

    def _check_input(self, x: Op) -> None:
        layout = self._layout(x)
        if layout.channel is not self.in_channel or layout.spatial_roles != self.in_roles:
            raise self._fail(LayerAxesError, f"was built for channel axis {self.in_channel.name} "
                                             f"and spatial roles {self.in_roles}; {x.name} has "
                                             f"{layout.channel.name} and {layout.spatial_roles}")

    def _forward(self, x: Op) -> Op:
        layout = self._layout(x)
        roles = layout.spatial_roles
        planar = not isinstance(self.filter_shape, dict) and _is_planar(
            tuple(self.filter_shape), roles)
        y = conv.convolution(None, x, self.W, axes=self._known_axes(layout, self.out_channel),
                             strides=_per_dim(self.strides, "strides", self, roles, planar, 1),
                             padding=_per_dim(self.padding, "padding", self, roles, planar, 0),
                             dilation=_per_dim(self.dilation, "dilation", self, roles, planar,
                                               1))
        y = self._remember(layout, y)
        if "b" in self._variables:
            y = y + self.b
        if self.batch_norm is not None:
            y = self.batch_norm(y)
        return self.activation(y)

    def variables(self) -> List[Op]:
        extra = self.batch_norm.variables() if self.batch_norm is not None else []
        return super().variables() + extra

    @property
    def updates(self) -> List[Op]:
        return self.batch_norm.updates if self.batch_norm is not None else []


class Conv2D(Convolution):
    """Nervana Graph v0.4's Conv2D: a Convolution taking ``(fshape, init, strides,
    padding, activation)`` in that order, without a bias unless `bias_init` is given.

    Everything else (the axes it expects and makes, the errors) is Convolution's.

    Parameters
    ----------
    fshape : tuple of int or dict
        The filter shape, as Convolution's `filter_shape`: (R, S, K), (R, K)
        for a square filter, (T, R, S, K), or a dict.
    init : number, array, callable or Op
        The filter's initial value. Required.
    strides : int, tuple of int or dict, default 1
        Step along each spatial axis (as Convolution's).
    padding : int, tuple of int or dict, default 0
        Zeros added at both ends of each spatial axis (as Convolution's).
    activation : Activation, str, callable or None, default None
        Applied last: an activation object, a name ("relu", "tanh",
        "softmax", ...) or any callable op -> op; None is the identity.
    dilation : int, tuple of int or dict, default 1
        Spacing between filter taps (as Convolution's).
    bias_init : number, array, callable, Op or None, default None
        The per-channel bias's initial value; None for no bias.
    batch_norm : bool, default False
        Normalize per output channel before the activation.
    name : str or None, default None
        The layer's name, which prefixes its variables and new axes; None
        gives ``Conv2D_<n>``.

    Raises
    ------
    LayerError, ActivationError, LayerAxesError, axgraph.IncompatibleAxesError
        As Convolution.

    Examples
    --------
    >>> import axgraph as ng
    >>> C = ng.make_axis(1, name="C", roles=[ar.Channel])
    >>> H = ng.make_axis(28, name="H", roles=[ar.Height])
    >>> W = ng.make_axis(28, name="W", roles=[ar.Width])
    >>> N = ng.make_axis(16, name="N")
    >>> conv = Conv2D((5, 5, 8), GaussianInit(var=0.1), strides=2, name="c1")
    >>> conv(ng.placeholder([C, H, W, N])).axes
    Axes(c1_K: 8, P: 12, Q: 12, N: 16)
    """

    def __init__(self, fshape, init: InitialValue, strides=1, padding=0,
                 activation: ActivationLike = None, dilation=1, bias_init: InitialValue = None,
                 batch_norm: bool = False, name: Optional[str] = None):
        super().__init__(fshape, init, strides, padding, bias_init, activation, batch_norm,
                         dilation, name)


class Pooling(_FeatureMapLayer):
    """Max or average pooling over the spatial axes of a feature map (no variables).

    The input is a feature map as Convolution's: channel, spatial and batch
    axes found by their roles. Each channel is pooled on its own; the output
    has axes (the input's channel axis, new spatial axes with the input's
    roles, the batch axis), the same ones on every call with the same input axes.
    A dict sizing a dim the input does not have (other than 1) is refused.

    Parameters
    ----------
    pool_shape : int, tuple of int or dict
        The window: one int for every spatial axis, one value per spatial
        axis (depth, height, width order), or a dict keyed by axis letter
        (T/R/S or d/h/w).
    strides : int, tuple of int, dict or None, default None
        Step of the window, given like `pool_shape` (or str_h, str_w, ...);
        None means the window's size, so windows tile the input without overlap.
    padding : int, tuple of int or dict, default 0
        Padding at both ends of each spatial axis (pad_h, pad_w, ...);
        smaller than the window.
    pool_type : str, default "max"
        "max" or "avg".
    name : str or None, default None
        The layer's name, which prefixes its variables and new axes; None
        gives ``Pooling_<n>``.

    Raises
    ------
    LayerError
        When `pool_type` is neither "max" nor "avg"; when called, when a
        size gives the wrong number of values or a dict misses an axis.
    LayerAxesError
        When the input's batch, channel and spatial axes cannot be told by
        their roles, or it has other axes.
    axgraph.IncompatibleAxesError
        When the window does not fit the (padded) input, the padding is not
        smaller than the window, or a stride is below 1.

    Examples
    --------
    >>> import axgraph as ng
    >>> C = ng.make_axis(16, name="C", roles=[ar.Channel])
    >>> H = ng.make_axis(8, name="H", roles=[ar.Height])
    >>> W = ng.make_axis(8, name="W", roles=[ar.Width])
    >>> N = ng.make_axis(4, name="N")
    >>> Pooling(2, name="pool")(ng.placeholder([C, H, W, N])).axes
    Axes(C: 16, P: 4, Q: 4, N: 4)
    """

    def __init__(self, pool_shape, strides=None, padding=0, pool_type: str = "max",
                 name: Optional[str] = None):
        super().__init__(name)
        if pool_type not in pooling_ops.POOL_KINDS:
            raise self._fail(LayerError, f"pool_type must be one of {pooling_ops.POOL_KINDS}, "
                                         f"not {pool_type!r}")
        self.pool_shape, self.strides, self.padding = pool_shape, strides, padding
        self.pool_type = pool_type

    def _window(self, roles: Sequence[str]) -> Union[int, Tuple[int, ...]]:
        shape = self.pool_shape
        if isinstance(shape, dict):
            letters = [FILTER_AXIS_NAMES[role] for role in roles]
            absent = {k: v for k, v in shape.items() if k not in letters and v != 1}
            if absent:
                raise self._fail(LayerError, f"pool shape {shape} sizes dims {absent} that an "
                                             f"input with spatial roles {tuple(roles)} does "
                                             f"not have")
        return _per_dim(shape, "pool_shape", self, roles)

    def _forward(self, x: Op) -> Op:
        layout = self._layout(x)
        roles = layout.spatial_roles
        strides = None if self.strides is None else _per_dim(self.strides, "strides", self, roles)
        y = pooling_ops.pooling(None, x, axes=self._known_axes(layout, layout.channel),
                                window=self._window(roles), strides=strides,
                                padding=_per_dim(self.padding, "padding", self, roles),
                                pool_type=self.pool_type)
        return self._remember(layout, y)


#: Pool2D's 4-value fshape: channels (crossmap), depth, height, width.
POOL2D_DIMS = ("J", "T", "R", "S")


class Pool2D(Pooling):
    """Nervana Graph v0.4's Pool2D(fshape, strides=1, padding=0, op='max').

    A Pooling layer with v0.4's arguments: the axes it expects and makes are
    Pooling's. Unlike Pooling, strides default to 1 (overlapping windows), as
    in v0.4. As in v0.4, an int stride or padding is for height and width
    (depth 1 and 0). Pooling across channels (J, str_c, pad_c) is refused, as
    ``ng.pooling`` does.

    Parameters
    ----------
    fshape : int, tuple of int or dict
        The window, as v0.4 took it: an int for a square R x S window, or a
        tuple of window sizes, (R, S) or (J, T, R, S); or a dict with keys
        among J, T, R, S. As in v0.4, a window without a depth size T pools
        each depth slice of a 5-d input (C, D, H, W, N) on its own (T = 1).
        J, pooling across channels, must be 1.
    strides : int, tuple of int or dict, default 1
        Step of the window: an int for every spatial axis, one per spatial
        axis, or a dict by ngraph's names (str_d, str_h, str_w).
    padding : int, tuple of int or dict, default 0
        Padding at both ends of each spatial axis, given like `strides`
        (pad_h, pad_w, ...).
    op : str, default "max"
        "max" or "avg".
    name : str or None, default None
        The layer's name, which prefixes its variables and new axes; None
        gives ``Pool2D_<n>``.

    Raises
    ------
    LayerError
        When `fshape` cannot be read as a window, or `op` is neither "max"
        nor "avg"; when called, as Pooling.
    axgraph.IncompatibleAxesError
        When asked to pool across channels (J, str_c or pad_c other than 1,
        1, 0); when called, as Pooling.
    LayerAxesError
        When called, as Pooling.

    Examples
    --------
    >>> import axgraph as ng
    >>> C = ng.make_axis(16, name="C", roles=[ar.Channel])
    >>> H = ng.make_axis(8, name="H", roles=[ar.Height])
    >>> W = ng.make_axis(8, name="W", roles=[ar.Width])
    >>> N = ng.make_axis(4, name="N")
    >>> Pool2D(3, strides=2, name="pool")(ng.placeholder([C, H, W, N])).axes
    Axes(C: 16, P: 3, Q: 3, N: 4)
    """

    def __init__(self, fshape, strides=1, padding=0, op: str = "max",
                 name: Optional[str] = None):
        if isinstance(fshape, int):
            fshape = (fshape, fshape)
        if not isinstance(fshape, dict):
            fshape = tuple(fshape)
            if len(fshape) not in (2, len(POOL2D_DIMS)):
                raise LayerError(f"Pool2D: fshape {fshape} must be an int, (R, S), (J, T, R, S) "
                                 f"or a dict", user_location())
            fshape = dict(zip(POOL2D_DIMS, (1, 1)[:len(POOL2D_DIMS) - len(fshape)] + fshape))
        if isinstance(strides, int):
            strides = {"str_d": 1, "str_h": strides, "str_w": strides}
        if isinstance(padding, int):
            padding = {"pad_d": 0, "pad_h": padding, "pad_w": padding}
        crossmap = {"J": fshape.get("J", 1)}
        for key, given in (("str_c", strides), ("pad_c", padding)):
            if isinstance(given, dict) and key in given:
                crossmap[key] = given[key]
        pooling_ops.refuse_crossmap(crossmap)
        super().__init__({k: v for k, v in fshape.items() if k != "J"}, strides, padding, op,
                         name)


# -- recurrent layers ------------------------------------------------------------------------

State = Union[Op, Tuple[Op, ...], None]


class _RecurrentLayer(Layer):
    """Unrolls a cell over the input's REC axis.

    Every gate g has an input weight W_g (hidden, features - 1), a recurrent
    weight U_g (hidden, hidden - 1) and a bias b_g (hidden). The input
    projections W_g x + b_g are computed for all steps at once, then each
    step is sliced out (ng.slice_along_axis), the cell is applied, and the
    outputs are stacked back along the same REC axis (ng.stack). The initial
    state is zero; a zero state's terms (U h_0, f * c_0) are simply left out.

    Arguments come in Nervana Graph v0.4's order, `reset_cells` included; v0.4
    learned an initial state when it was False, axgraph always starts from zero.
    """

    #: Names of the gates; each has its own W, U and b.
    gates: ClassVar[Tuple[str, ...]] = ()

    def __init__(self, nout: int, init: InitialValue, init_inner: InitialValue = None,
                 activation: ActivationLike = None, reset_cells: bool = False,
                 return_sequence: bool = True, backward: bool = False,
                 bias_init: InitialValue = 0.0, axis_name: Optional[str] = None,
                 name: Optional[str] = None):
        super().__init__(name)
        self.reset_cells = bool(reset_cells)
        if init is None:
            raise self._fail(LayerError, "needs init= (the input weight initializer)")
        self.axes = _new_axes(self, nout, None, axis_name or f"{self.name}_hidden")
        self.init = init
        self.init_inner = init if init_inner is None else init_inner
        self.bias_init = bias_init
        self.activation = get_activation(activation, Tanh())
        self.return_sequence, self.backward = return_sequence, backward
        self.W: Dict[str, Op] = {}
        self.U: Dict[str, Op] = {}
        self.b: Dict[str, Op] = {}

    @property
    def hidden_axis(self) -> Axis:
        """The axis of the hidden state (``<name>_hidden``)."""
        return self.axes[0]

    def _time_axis(self, x: Op) -> Axis:
        found = x.axes.recurrent_axes()
        if len(found) > 1:
            raise self._fail(AmbiguousAxesError, f"input {x.name} {x.axes} has several recurrent "
                                                 f"(sequence) axes {found}: it can unroll over "
                                                 f"one only; fold the others into the batch")
        rec = found[0] if found else None
        if rec is None:
            raise self._fail(LayerAxesError, f"input {x.name} {x.axes} has no recurrent (REC) "
                                             f"axis to unroll over")
        if rec.length is None:
            raise self._fail(AxisLengthError, f"the recurrent axis {rec.name} of {x.name} needs a "
                                              f"length to unroll; set {rec.name}.length")
        return rec

    def _build(self, x: Op) -> None:
        self._time_axis(x)
        self.in_axes = feature_axes(x.axes)
        if not self.in_axes:
            raise self._fail(LayerAxesError, f"input {x.name} {x.axes} has no feature axes")
        dtype = _float_dtype(x)
        for gate in self.gates:
            suffix = f"_{gate}" if gate else ""
            self.W[gate] = self._variable(f"W{suffix}", _weight_axes(self.in_axes, self.axes), self.init,
                                          dtype)
            self.U[gate] = self._variable(f"U{suffix}", _weight_axes(self.axes, self.axes), self.init_inner,
                                          dtype)
            self.b[gate] = self._variable(f"b{suffix}", self.axes, self.bias_init, dtype)

    def _check_input(self, x: Op) -> None:
        self._check_features(x, self.in_axes)

    def _recurrent(self, gate: str, pre: Op, h: Optional[Op]) -> Op:
        """pre + U_gate h, or pre alone for the zero initial state."""
        return pre if h is None else pre + dot_ops.dot(self.U[gate], h)

    @abc.abstractmethod
    def _step(self, pre: Dict[str, Op], state: State) -> Tuple[Op, State]:
        """(output, new state) from this step's input projections and the last state."""

    def _forward(self, x: Op) -> Op:
        rec = self._time_axis(x)
        projected = {g: dot_ops.dot(self.W[g], x) + self.b[g] for g in self.gates}
        steps = range(rec.length)
        outputs: Dict[int, Op] = {}
        state: State = None
        for t in (reversed(steps) if self.backward else steps):
            pre = {g: so.slice_along_axis(projected[g], rec, t) for g in self.gates}
            outputs[t], state = self._step(pre, state)
        if not self.return_sequence:
            return outputs[t]
        passed = x.axes - self.in_axes  # batch and time, in the input's order
        step_axes = self.axes + (passed - Axes(rec))
        sequence = [so.axes_with_order(outputs[t], step_axes) for t in steps]
        return so.stack(sequence, rec, pos=len(self.axes) + list(passed).index(rec))


class Recurrent(_RecurrentLayer):
    """Simple RNN (Elman 1990): h_t = activation(W x_t + U h_{t-1} + b), h_0 = 0.

    neon's Recurrent, unrolled over the input's REC axis at graph
    construction (one slice per step, then stacked back).
    The input needs a recurrent axis REC with a length (the steps to unroll)
    and at least one feature axis; its feature axes are read at every step.
    The output has axes (``<name>_hidden``, the input's batch and REC axes,
    in the input's order), or without REC when `return_sequence` is False.

    Parameters
    ----------
    nout : int
        Length of the hidden state: the new axis ``<name>_hidden`` (or `axis_name`).
    init : number, array, callable or Op
        Initial value of the input weights W (hidden, features - 1). Required.
    init_inner : number, array, callable, Op or None, default None
        Initial value of the recurrent weights U (hidden, hidden - 1); None uses `init`.
    activation : Activation, str, callable or None, default None
        The state's activation; None is Tanh().
    reset_cells : bool, default False
        Accepted in v0.4's position; the state always starts at zero (v0.4
        learned an initial state when this was False).
    return_sequence : bool, default True
        Return the output of every step, stacked along the REC axis; False
        returns only the last step's (no REC axis).
    backward : bool, default False
        Read the sequence from its last step to its first (the outputs keep
        their time positions).
    bias_init : number, array, callable or Op, default 0.0
        Initial value of the biases b (hidden).
    axis_name : str or None, default None
        Name of the hidden axis; None is ``<name>_hidden``.
    name : str or None, default None
        The layer's name, which prefixes its variables and new axes; None
        gives ``Recurrent_<n>``.

    Raises
    ------
    LayerError
        When `init` is missing or `nout` is not a positive int.
    ActivationError
        When an activation is an unknown name.
    LayerAxesError
        When the input has no REC axis or no feature axis, or a later input
        has other feature axes than the first.
    axgraph.AxisLengthError
        When the REC axis (or a feature axis) has no length.

    Examples
    --------
    >>> import axgraph as ng
    >>> F, REC, N = (ng.make_axis(4, name="F"), ng.make_axis(5, name="REC"),
    ...              ng.make_axis(8, name="N"))
    >>> x = ng.placeholder([F, REC, N])
    >>> Recurrent(7, GlorotUniform(), name="rnn")(x).axes
    Axes(rnn_hidden: 7, REC: 5, N: 8)
    >>> Recurrent(7, GlorotUniform(), return_sequence=False, name="last")(x).axes
    Axes(last_hidden: 7, N: 8)
    """

    gates = ("",)

    def _step(self, pre, state):
        h = self.activation(self._recurrent("", pre[""], state))
        return h, h


class _GatedLayer(_RecurrentLayer):
    """A recurrent layer whose gates squash with `gate_activation` (logistic by default)."""

    def __init__(self, nout: int, init: InitialValue, init_inner: InitialValue = None,
                 activation: ActivationLike = None, gate_activation: ActivationLike = None,
                 reset_cells: bool = False, return_sequence: bool = True,
                 backward: bool = False, bias_init: InitialValue = 0.0,
                 axis_name: Optional[str] = None, name: Optional[str] = None):
        super().__init__(nout, init, init_inner, activation, reset_cells, return_sequence,
                         backward, bias_init, axis_name, name)
        self.gate_activation = get_activation(gate_activation, Logistic())


class GRU(_GatedLayer):
    """Gated recurrent unit (Cho et al. 2014), h_0 = 0, sigma = gate_activation:

        r_t = sigma(W_r x_t + U_r h_{t-1} + b_r)            reset gate
        z_t = sigma(W_z x_t + U_z h_{t-1} + b_z)            update gate
        c_t = activation(W_h x_t + U_h (r_t * h_{t-1}) + b_h)  candidate
        h_t = z_t * h_{t-1} + (1 - z_t) * c_t

    Each gate has its own W, U and b (variables ``<name>_W_r``, ...).
    The input needs a recurrent axis REC with a length (the steps to unroll)
    and at least one feature axis; its feature axes are read at every step.
    The output has axes (``<name>_hidden``, the input's batch and REC axes,
    in the input's order), or without REC when `return_sequence` is False.

    Parameters
    ----------
    nout : int
        Length of the hidden state: the new axis ``<name>_hidden`` (or `axis_name`).
    init : number, array, callable or Op
        Initial value of the input weights W (hidden, features - 1). Required.
    init_inner : number, array, callable, Op or None, default None
        Initial value of the recurrent weights U (hidden, hidden - 1); None uses `init`.
    activation : Activation, str, callable or None, default None
        The state's activation; None is Tanh().
    gate_activation : Activation, str, callable or None, default None
        The gates' squashing function; None is Logistic().
    reset_cells : bool, default False
        Accepted in v0.4's position; the state always starts at zero (v0.4
        learned an initial state when this was False).
    return_sequence : bool, default True
        Return the output of every step, stacked along the REC axis; False
        returns only the last step's (no REC axis).
    backward : bool, default False
        Read the sequence from its last step to its first (the outputs keep
        their time positions).
    bias_init : number, array, callable or Op, default 0.0
        Initial value of the biases b (hidden).
    axis_name : str or None, default None
        Name of the hidden axis; None is ``<name>_hidden``.
    name : str or None, default None
        The layer's name, which prefixes its variables and new axes; None
        gives ``GRU_<n>``.

    Raises
    ------
    LayerError
        When `init` is missing or `nout` is not a positive int.
    ActivationError
        When an activation is an unknown name.
    LayerAxesError
        When the input has no REC axis or no feature axis, or a later input
        has other feature axes than the first.
    axgraph.AxisLengthError
        When the REC axis (or a feature axis) has no length.
    """

    gates = ("r", "z", "h")

    def _step(self, pre, h):
        sigma = self.gate_activation
        z = sigma(self._recurrent("z", pre["z"], h))
        if h is None:
            candidate = self.activation(pre["h"])
            h = (1.0 - z) * candidate
        else:
            r = sigma(self._recurrent("r", pre["r"], h))
            candidate = self.activation(self._recurrent("h", pre["h"], r * h))
            h = z * h + (1.0 - z) * candidate
        return h, h


class LSTM(_GatedLayer):
    """Long short-term memory without peepholes (Hochreiter & Schmidhuber 1997,
    with the forget gate of Gers et al. 2000), h_0 = c_0 = 0, sigma = gate_activation:

        i_t = sigma(W_i x_t + U_i h_{t-1} + b_i)         input gate
        f_t = sigma(W_f x_t + U_f h_{t-1} + b_f)         forget gate
        o_t = sigma(W_o x_t + U_o h_{t-1} + b_o)         output gate
        g_t = activation(W_g x_t + U_g h_{t-1} + b_g)    cell input
        c_t = f_t * c_{t-1} + i_t * g_t
        h_t = o_t * activation(c_t)

    Each gate has its own W, U and b (variables ``<name>_W_i``, ...); the
    output is h, the cell state c stays inside.
    The input needs a recurrent axis REC with a length (the steps to unroll)
    and at least one feature axis; its feature axes are read at every step.
    The output has axes (``<name>_hidden``, the input's batch and REC axes,
    in the input's order), or without REC when `return_sequence` is False.

    Parameters
    ----------
    nout : int
        Length of the hidden state: the new axis ``<name>_hidden`` (or `axis_name`).
    init : number, array, callable or Op
        Initial value of the input weights W (hidden, features - 1). Required.
    init_inner : number, array, callable, Op or None, default None
        Initial value of the recurrent weights U (hidden, hidden - 1); None uses `init`.
    activation : Activation, str, callable or None, default None
        The state's activation; None is Tanh().
    gate_activation : Activation, str, callable or None, default None
        The gates' squashing function; None is Logistic().
    reset_cells : bool, default False
        Accepted in v0.4's position; the state always starts at zero (v0.4
        learned an initial state when this was False).
    return_sequence : bool, default True
        Return the output of every step, stacked along the REC axis; False
        returns only the last step's (no REC axis).
    backward : bool, default False
        Read the sequence from its last step to its first (the outputs keep
        their time positions).
    bias_init : number, array, callable or Op, default 0.0
        Initial value of the biases b (hidden).
    axis_name : str or None, default None
        Name of the hidden axis; None is ``<name>_hidden``.
    name : str or None, default None
        The layer's name, which prefixes its variables and new axes; None
        gives ``LSTM_<n>``.

    Raises
    ------
    LayerError
        When `init` is missing or `nout` is not a positive int.
    ActivationError
        When an activation is an unknown name.
    LayerAxesError
        When the input has no REC axis or no feature axis, or a later input
        has other feature axes than the first.
    axgraph.AxisLengthError
        When the REC axis (or a feature axis) has no length.

    Examples
    --------
    >>> import numpy as np, axgraph as ng
    >>> REC, N = ng.make_axis(5, name="REC"), ng.make_axis(8, name="N")
    >>> words = ng.placeholder([REC, N], dtype=np.int32)
    >>> model = Sequential([LookupTable(100, 6, Uniform(-0.1, 0.1), name="embed"),
    ...                     LSTM(7, GlorotUniform(), name="lstm")])
    >>> model(words).axes
    Axes(lstm_hidden: 7, REC: 5, N: 8)
    """

    gates = ("i", "f", "o", "g")

    def _step(self, pre, state):
        h, c = state if state is not None else (None, None)
        sigma = self.gate_activation
        i, o = (sigma(self._recurrent(g, pre[g], h)) for g in ("i", "o"))
        g = self.activation(self._recurrent("g", pre["g"], h))
        c = i * g if c is None else sigma(self._recurrent("f", pre["f"], h)) * c + i * g
        h = o * self.activation(c)
        return h, (h, c)


class BiRNN(Layer):
    """A forward and a backward recurrent layer over the same input.

    Returns the pair (forward, backward) of outputs, or with `sum_out` their
    sum, or with `concat_out` their concatenation along the hidden axis (one
    axis ``<name>_hidden`` of twice the length). `cell` picks Recurrent, LSTM
    or GRU; extra keyword arguments go to it. With return_sequence=False the
    backward output is its state after reading the first step. The two
    layers are ``<name>_fwd`` and ``<name>_bwd``; each expects and makes the
    axes a Recurrent layer does, its hidden axis named ``<name>_hidden``.

    Parameters
    ----------
    nout : int
        Length of the hidden state: the new axis ``<name>_hidden`` (or `axis_name`).
    init : number, array, callable or Op
        Initial value of the input weights W (hidden, features - 1). Required.
    init_inner : number, array, callable, Op or None, default None
        Initial value of the recurrent weights U (hidden, hidden - 1); None uses `init`.
    activation : Activation, str, callable or None, default None
        The state's activation; None is Tanh().
    reset_cells : bool, default False
        Accepted in v0.4's position; the states always start at zero.
    return_sequence : bool, default True
        Every step's outputs (along REC), or only each direction's last state.
    sum_out : bool, default False
        Return the sum of the two outputs.
    concat_out : bool, default False
        Return the two outputs concatenated along the hidden axis.
    bias_init : number, array, callable or Op, default 0.0
        Initial value of the biases.
    cell : callable or None, default None
        The recurrent layer class (Recurrent, LSTM, GRU); None is Recurrent.
    name : str or None, default None
        The layer's name, which prefixes its variables and new axes; None
        gives ``BiRNN_<n>``.
    **cell_options
        Passed on to both cells (e.g. ``gate_activation`` for LSTM or GRU).

    Raises
    ------
    LayerError
        When both `sum_out` and `concat_out` are set, `init` is missing or
        `nout` is not a positive int.
    ActivationError, LayerAxesError, axgraph.AxisLengthError
        As Recurrent.

    Examples
    --------
    >>> import axgraph as ng
    >>> F, REC, N = (ng.make_axis(4, name="F"), ng.make_axis(5, name="REC"),
    ...              ng.make_axis(8, name="N"))
    >>> x = ng.placeholder([F, REC, N])
    >>> BiRNN(7, GlorotUniform(), concat_out=True, name="bi")(x).axes
    Axes(bi_hidden: 14, REC: 5, N: 8)
    >>> forward, backward = BiRNN(7, GlorotUniform(), cell=GRU, name="pair")(x)
    >>> forward.axes
    Axes(pair_hidden: 7, REC: 5, N: 8)
    """

    def __init__(self, nout: int, init: InitialValue, init_inner: InitialValue = None,
                 activation: ActivationLike = None, reset_cells: bool = False,
                 return_sequence: bool = True, sum_out: bool = False, concat_out: bool = False,
                 bias_init: InitialValue = 0.0, cell: Optional[Callable[..., _RecurrentLayer]] = None,
                 name: Optional[str] = None, **cell_options):
        super().__init__(name)
        if sum_out and concat_out:
            raise self._fail(LayerError, "sum_out and concat_out exclude each other")
        cell = Recurrent if cell is None else cell
        self.sum_out, self.concat_out = sum_out, concat_out
        self.fwd_rnn, self.bwd_rnn = (
            cell(nout, init, init_inner, activation=activation, reset_cells=reset_cells,
                 bias_init=bias_init, return_sequence=return_sequence, backward=backward,
                 axis_name=f"{self.name}_hidden", name=f"{self.name}_{direction}", **cell_options)
            for direction, backward in (("fwd", False), ("bwd", True))
        )

    # (neon's BiRNN gives the pair: the one layer whose call is not op -> op)
    def _forward(self, x: Op) -> Union[Op, Tuple[Op, Op]]:  # type: ignore[override]
        fwd, bwd = self.fwd_rnn(x), self.bwd_rnn(x)
        fwd_axis, bwd_axis = self.fwd_rnn.hidden_axis, self.bwd_rnn.hidden_axis
        if self.sum_out:
            return fwd + so.cast_axes(bwd, [fwd_axis if a is bwd_axis else a for a in bwd.axes])
        if self.concat_out:
            return so.concat_along_axis([fwd, bwd], fwd_axis)
        return fwd, bwd

    def variables(self) -> List[Op]:
        return self.fwd_rnn.variables() + self.bwd_rnn.variables()


# -- composition ---------------------------------------------------------------------------

class Sequential(Layer):
    """Layers (or any callables op -> op) applied one after another.

    The model container of neon: ``Sequential([...])(x)`` is the last
    layer's output; `variables()` gathers the layers' variables (each once,
    in order) and `updates` their update assigns, through nested Sequentials
    and Residual blocks. Calling it in training or
    inference mode (or v0.4's ``train_outputs`` / ``inference_outputs``)
    passes the mode to every layer.

    Parameters
    ----------
    layers : sequence of callable
        Layers, activations or any callables op -> op, in the order applied.
    name : str or None, default None
        The layer's name, which prefixes its variables and new axes; None
        gives ``Sequential_<n>``.

    Raises
    ------
    LayerError
        When an element of `layers` is not callable.

    Examples
    --------
    >>> import axgraph as ng
    >>> F, N = ng.make_axis(784, name="F"), ng.make_axis(32, name="N")
    >>> mlp = Sequential([Preprocess(functor=lambda x: x / 255.0),
    ...                   Affine(GlorotUniform(), nout=100, activation=Rectlin(), name="h"),
    ...                   Affine(GlorotUniform(), nout=10, activation=Softmax(), name="out")])
    >>> mlp(ng.placeholder([F, N])).axes, len(mlp.variables())
    (Axes(out_out: 10, N: 32), 2)
    >>> with inference_mode_on():
    ...     evaluation = mlp(ng.placeholder([F, N]))         # the same variables
    >>> len(mlp.variables())
    2
    """

    def __init__(self, layers: Sequence[Callable[[Op], Op]], name: Optional[str] = None):
        super().__init__(name)
        self.layers = list(layers)
        for layer in self.layers:
            if not callable(layer):
                raise self._fail(LayerError, f"{layer!r} is not callable")

    def _forward(self, x: Op) -> Op:
        for layer in self.layers:
            x = layer(x)
        return x

    def variables(self) -> List[Op]:
        found: Dict[int, Op] = {}
        for layer in self.layers:
            for op in getattr(layer, "variables", lambda: [])():
                found.setdefault(id(op), op)
        return list(found.values())

    @property
    def updates(self) -> List[Op]:
        return [op for layer in self.layers for op in getattr(layer, "updates", [])]


class Residual(Layer):
    """x + block(x): a residual (skip) connection around a block of layers.

    The block is a layer, any callable op -> op, or a list of them (applied in
    order, as a Sequential ``<name>_block``); its output must have exactly the
    input's axes, in any order. `variables()` and `updates` are the block's,
    so a Sequential of Residual blocks (transformer-style) trains as one model.

    Parameters
    ----------
    block : callable or sequence of callable
        The branch: a layer, a callable, or a list of them.
    name : str or None, default None
        The layer's name; None gives ``Residual_<n>``.

    Raises
    ------
    LayerError
        When `block` (or an element of it) is not callable.
    LayerAxesError
        When the block's output has other axes than its input.

    Examples
    --------
    >>> import axgraph as ng
    >>> D, N = ng.make_axis(4, name="D"), ng.make_axis(8, name="N")
    >>> block = Residual([Affine(GlorotUniform(), axes=[D], activation=Rectlin(), name="mlp"),
    ...                   Dropout(keep=0.9)])
    >>> model = Sequential([block, Residual(Affine(GlorotUniform(), axes=[D], name="mix"))])
    >>> model(ng.placeholder([D, N])).axes, [v.name for v in model.variables()]
    (Axes(D: 4, N: 8), ['mlp_W', 'mix_W'])
    """

    def __init__(self, block: Union[Callable[[Op], Op], Sequence[Callable[[Op], Op]]],
                 name: Optional[str] = None):
        super().__init__(name)
        if isinstance(block, (list, tuple)):
            block = Sequential(block, name=f"{self.name}_block")
        if not callable(block):
            raise self._fail(LayerError, f"block {block!r} is not callable")
        self.block = block

    def _forward(self, x: Op) -> Op:
        y = as_op(self.block(x))
        if not y.axes.is_equal_set(x.axes):
            raise self._fail(LayerAxesError, f"its block maps {x.name} {x.axes} to {y.name} "
                                             f"{y.axes}: a residual needs the input's axes back")
        return x + y

    def variables(self) -> List[Op]:
        found = {id(op): op for op in super().variables()}
        for op in getattr(self.block, "variables", lambda: [])():
            found.setdefault(id(op), op)
        return list(found.values())
