"""Multi-head attention on named axes, with a key/value cache for generation.

Axes, for a (D, T, N) input with H heads of size E (`head_size`)::

    q = Wq x            (H, E, T, N)      Wq: (H, E, D - 1)
    k = Wk c, T -> K    (H, E, K, N)      c: the context (x itself for self-attention)
    v = Wv c, T -> K    (H, E, K, N)
    scores = q . k / sqrt(E), over E     (H, T, N, K)    masked where key > query if causal
    weights = softmax over K
    attended = weights . v, over K       (H, T, N, E)
    y = Wo attended, over H and E        (D, T, N)

The keys need a sequence axis of their own, K, or scores could not hold a
query position and a key position at once: the layer renames the context's
sequence axis to a key axis it makes (``ng.rename``, by identity). The
sequence axis of an input is found without looking at names: it is the one
axis that is neither among the layer's feature axes nor a batch axis.

Generation. `MultiHeadAttention.new_cache` makes a `KeyValueCache`: keys and
values of positions already seen, held in persistent tensors of a fixed
capacity, and the number written so far. A call with ``cache=`` takes only
the new tokens (one, or a few), writes their keys and values at the next
positions and attends over the cache, so a step costs O(capacity), not the
O(T^2) of running the whole sequence again; its assigns are the cache's
`updates`, which the step computation runs.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Union

import numpy as np

from ...axes import Axes, AxesLike, Axis
from ...op_graph import control, nn
from ...op_graph import dot as dot_ops
from ...op_graph import elementwise as ew
from ...op_graph import reductions as red
from ...op_graph import shape_ops as so
from ...op_graph.op import Op
from ...op_graph.tensors import InitialValue, as_op, constant, persistent_tensor
from .layer import Layer, LayerAxesError, LayerError, _float_dtype, _weight_axes

__all__ = ["MultiHeadAttention", "KeyValueCache"]


def _axis_or_new(layer: Layer, value: Union[int, Axis], what: str, name: str) -> Axis:
    """`value` if it is an Axis (with a length), else a new axis `name` of that length."""
    if isinstance(value, Axis):
        if not isinstance(value.length, int):
            raise layer._fail(LayerError, f"{what} {value} needs a known length")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise layer._fail(LayerError, f"{what} must be a positive int or an Axis, not {value!r}")
    return layer._new_axis(int(value), name)


class KeyValueCache:
    """The keys and values of positions already seen by one MultiHeadAttention layer.

    Made by `MultiHeadAttention.new_cache`. It holds `capacity` positions in
    persistent tensors `keys` and `values` (axes (heads, head_size, position,
    batch...), made by the first call that uses the cache) and `length`, the
    number of positions written (an int32 scalar). Each call of the layer with
    ``cache=`` builds assigns that append the new keys and values and advance
    `length`; they are `updates`, which the step computation must name.

    Parameters
    ----------
    layer : MultiHeadAttention
        The layer whose keys and values it holds.
    position_axis : Axis
        The axis of cached positions; its length is the capacity.

    Raises
    ------
    LayerError
        When `position_axis` has no length.
    """

    def __init__(self, layer: "MultiHeadAttention", position_axis: Axis):
        if not isinstance(position_axis.length, int):
            raise layer._fail(LayerError, f"the cache's position axis {position_axis} needs a "
                                          f"known length")
        self.layer = layer
        self.position_axis = position_axis
        #: Positions written so far: the next call writes at this position.
        self.length = persistent_tensor((), dtype=np.int32, initial_value=0,
                                        name=f"{layer.name}_cache_length")
        self.keys: Optional[Op] = None
        self.values: Optional[Op] = None
        self._updates: List[Op] = []

    @property
    def capacity(self) -> int:
        """How many positions the cache holds."""
        return int(self.position_axis.length)

    @property
    def updates(self) -> List[Op]:
        """The assigns of the latest call that used this cache (append, advance `length`).

        A step computation names them beside its outputs:
        ``t.computation([y] + cache.updates, x_new)``.
        """
        return list(self._updates)

    def reset(self) -> Op:
        """An assign that empties the cache (sets `length` to 0), to run before a new sequence.

        Returns
        -------
        Op
            The assign; ``t.computation(cache.reset())()`` runs it. Positions
            past `length` are never read, so the stored keys need no clearing.
        """
        with Op.saved_user_deps():
            return control.assign(self.length, 0)

    def _tensors(self, x: Op, batch: Axes) -> None:
        """Make `keys` and `values` on first use; later uses need the same batch axes."""
        layer = self.layer
        if self.keys is None:
            axes = Axes([layer.head_axis, layer.head_size_axis, self.position_axis]) + batch
            dtype = _float_dtype(x)
            self.keys = persistent_tensor(axes, dtype=dtype, initial_value=0.0,
                                          name=f"{layer.name}_cache_keys")
            self.values = persistent_tensor(axes, dtype=dtype, initial_value=0.0,
                                            name=f"{layer.name}_cache_values")
            self._batch = batch
        elif not batch.is_equal_set(self._batch):
            raise layer._fail(LayerAxesError, f"its cache holds batch axes {self._batch}, but "
                                              f"{x.name} {x.axes} has {batch}")

    def __repr__(self) -> str:
        return f"<KeyValueCache of {self.layer.name}: {self.capacity} positions>"


class MultiHeadAttention(Layer):
    """Scaled dot-product attention with several heads on named axes (Vaswani et al. 2017).

    Called on x (features, sequence, batch...) it is self-attention; with
    ``context=`` the keys and values come from the context (cross-attention),
    whose sequence axis may differ from x's. The queries, keys and values are
    projections of the inputs onto a head axis H and a head-size axis E, the
    scores are their contraction over E scaled by 1/sqrt(E), the softmax is
    over the keys' axis, and an output projection maps (H, E) back to the
    feature axes. The output has x's axes. The sequence axis of each input is
    its one axis that is neither a feature axis nor a batch axis; the keys'
    copy of it is a key axis this layer makes (``<name>_keys``), one per
    sequence axis, the same on every call. Weights follow Linear's (out,
    in - 1) convention: Wq, Wk and Wv have axes (H, E, features - 1) and Wo
    (features, H - 1, E - 1). Training and inference build the same graph.

    With ``causal=True`` position t attends to keys 0..t only
    (``ng.causal_mask``), as a language model needs. With ``cache=`` (see
    `new_cache`) x holds only new tokens: their keys and values are appended
    to the cache and they attend over everything cached, so generating a
    token costs O(capacity) instead of recomputing the whole prefix.

    Parameters
    ----------
    axes : Axes, Axis or sequence of Axis
        The feature axes of the input (the model dimension D): projected
        into the heads, and the output's feature axes.
    num_heads : int or Axis
        The number of heads, or the head axis itself (a new axis
        ``<name>_heads`` is made from an int).
    head_size : int or Axis
        The length of each head's queries, keys and values, or that axis (a
        new axis ``<name>_head_size`` is made from an int).
    weight_init : number, array, callable or Op
        Initial value of the four projection weights, typically an
        initializer such as GlorotUniform(). Required.
    bias_init : number, array, callable, Op or None, default None
        Initial value of the biases of the four projections (over (H, E) and
        the feature axes); None for no biases.
    causal : bool, default False
        Mask every key after the query's position.
    context_axes : Axes, Axis, sequence of Axis or None, default None
        The feature axes of a cross-attention context (for Wk and Wv); None:
        the same as `axes`.
    name : str or None, default None
        The layer's name, which prefixes its variables (``<name>_Wq``, ...)
        and new axes; None gives ``MultiHeadAttention_<n>``.

    Raises
    ------
    LayerError
        When `weight_init` is missing, `axes` is empty, or `num_heads` or
        `head_size` is not a positive int or an Axis with a length.
    LayerAxesError
        When an input lacks a feature axis, has other than one sequence axis
        (an axis neither feature nor batch), has the layer's head axes, or
        its batch axes differ from the context's.

    Examples
    --------
    >>> import axgraph as ng
    >>> D, T, N = ng.make_axis(8, name="D"), ng.make_axis(5, name="T"), ng.make_axis(2, name="N")
    >>> attention = MultiHeadAttention(D, num_heads=2, head_size=4, weight_init=GlorotUniform(),
    ...                                causal=True, name="attn")
    >>> y = attention(ng.placeholder([D, T, N]))
    >>> y.axes
    Axes(D: 8, T: 5, N: 2)
    >>> attention.Wq.axes, attention.Wo.axes
    (Axes(attn_heads: 2, attn_head_size: 4, D-1: 8), Axes(D: 8, attn_heads-1: 2, attn_head_size-1: 4))
    """

    def __init__(self, axes: AxesLike, num_heads: Union[int, Axis], head_size: Union[int, Axis],
                 weight_init: InitialValue = None, bias_init: InitialValue = None,
                 causal: bool = False, context_axes: AxesLike = None, name: Optional[str] = None):
        super().__init__(name)
        self.axes = Axes(axes)
        self.context_axes = Axes(context_axes) if context_axes is not None else self.axes
        if not self.axes or not self.context_axes:
            raise self._fail(LayerError, "needs feature axes (the model dimension) to project")
        if weight_init is None:
            raise self._fail(LayerError, "needs weight_init=")
        self.head_axis = _axis_or_new(self, num_heads, "num_heads", f"{self.name}_heads")
        self.head_size_axis = _axis_or_new(self, head_size, "head_size",
                                           f"{self.name}_head_size")
        self.weight_init, self.bias_init = weight_init, bias_init
        self.causal = bool(causal)
        self._key_axes: Dict[int, Axis] = {}

    # -- calls ---------------------------------------------------------------------
    def __call__(self, in_obj, context=None, cache: Optional[KeyValueCache] = None) -> Op:
        """Attention of the queries from `in_obj` over keys from `context` (or itself).

        Parameters
        ----------
        in_obj : Op or array_like
            The queries' source, with the feature axes, one sequence axis and
            any batch axes.
        context : Op, array_like or None, default None
            The keys' and values' source for cross-attention (with
            `context_axes`, one sequence axis and x's batch axes); None:
            self-attention.
        cache : KeyValueCache or None, default None
            A cache from `new_cache`: `in_obj` holds the next tokens only (its
            sequence axis as long as the number of new tokens), appended to
            the cache before attending; `cache.updates` then holds the assigns.

        Returns
        -------
        Op
            The attended values projected back: `in_obj`'s axes.

        Raises
        ------
        LayerAxesError
            When an input's axes do not fit (see the class), or it brings more
            new tokens than `cache` holds.
        LayerError
            When `cache` is another layer's or is given with a `context`.
        axgraph.AxisLengthError
            On the first call, when an axis of a weight has no length.
        axgraph.ExecutionError
            When a cached step runs past the cache's capacity.
        """
        x = as_op(in_obj)
        source = x if context is None else as_op(context)
        if cache is not None:
            if cache.layer is not self:
                raise self._fail(LayerError, f"was given {cache!r}, another layer's cache")
            if context is not None:
                raise self._fail(LayerError, "caches the keys of self-attention; cross-"
                                             "attention takes its keys from the context instead")
        if not self._built:
            self._build(x)
            self._built = True
        query_seq = self._sequence_axis(x, self.axes, "input")
        key_seq = self._sequence_axis(source, self.context_axes, "context")
        batch = self._batch_axes(x)
        if not self._batch_axes(source).is_equal_set(batch):
            raise self._fail(LayerAxesError, f"the context {source.name} {source.axes} has batch "
                                             f"axes other than those of {x.name} {x.axes}")
        queries = self._project(x, "q") * (1.0 / math.sqrt(self.head_size_axis.length))
        if cache is not None:
            return self._cached(x, queries, query_seq, batch, cache)
        key_axis = self._key_axis(key_seq)
        keys = so.rename(self._project(source, "k"), {key_seq: key_axis})
        values = so.rename(self._project(source, "v"), {key_seq: key_axis})
        visible = nn.causal_mask(query_seq, key_axis) if self.causal else None
        return self._attend(queries, keys, values, key_axis, visible, x.axes)

    def _forward(self, x: Op) -> Op:  # Layer's hook; __call__ above does the work
        return self(x)

    def new_cache(self, capacity: Union[int, Axis]) -> KeyValueCache:
        """An empty key/value cache for generating with this layer one step at a time.

        Parameters
        ----------
        capacity : int or Axis
            The most positions the cache holds (the longest sequence
            generated), or the axis of cached positions itself (a new axis
            ``<name>_cache`` is made from an int).

        Returns
        -------
        KeyValueCache
            Pass it as ``cache=`` to calls on the new tokens; its `updates`
            must run in the step computation.

        Raises
        ------
        LayerError
            When `capacity` is not a positive int or an Axis with a length.

        Examples
        --------
        >>> import numpy as np, axgraph as ng
        >>> D, N = ng.make_axis(4, name="D"), ng.make_axis(1, name="N")
        >>> T, Step = ng.make_axis(3, name="T"), ng.make_axis(1, name="Step")
        >>> attention = MultiHeadAttention(D, 2, 2, weight_init=GlorotUniform(), causal=True)
        >>> x = ng.placeholder([D, T, N], dtype=np.float64)
        >>> token = ng.placeholder([D, Step, N], dtype=np.float64)
        >>> full = attention(x)
        >>> cache = attention.new_cache(T.length)
        >>> step = attention(token, cache=cache)
        >>> xv = np.random.default_rng(0).normal(size=(4, 3, 1))
        >>> with ng.make_transformer("numpy") as t:
        ...     whole = t.computation(full, x)(xv)
        ...     run_step = t.computation([step] + cache.updates, token)
        ...     steps = [run_step(xv[:, i:i + 1])[0] for i in range(3)]
        >>> np.allclose(np.concatenate(steps, axis=1), whole)
        True
        """
        position_axis = _axis_or_new(self, capacity, "capacity", f"{self.name}_cache")
        return KeyValueCache(self, position_axis)

    # -- parts -----------------------------------------------------------------------
    def _build(self, x: Op) -> None:
        dtype = _float_dtype(x)
        heads = Axes([self.head_axis, self.head_size_axis])
        for key, features in (("q", self.axes), ("k", self.context_axes),
                              ("v", self.context_axes)):
            self._variable(f"W{key}", _weight_axes(features, heads), self.weight_init, dtype)
            if self.bias_init is not None:
                self._variable(f"b{key}", heads, self.bias_init, dtype)
        self._variable("Wo", _weight_axes(heads, self.axes), self.weight_init, dtype)
        if self.bias_init is not None:
            self._variable("bo", self.axes, self.bias_init, dtype)

    def _sequence_axis(self, x: Op, features: Axes, role: str) -> Axis:
        missing = Axes(a for a in features if a not in x.axes)
        if missing:
            raise self._fail(LayerAxesError, f"projects feature axes {features}, but the {role} "
                                             f"{x.name} {x.axes} lacks {missing}")
        taken = Axes(a for a in (self.head_axis, self.head_size_axis) if a in x.axes)
        if taken:
            raise self._fail(LayerAxesError, f"the {role} {x.name} {x.axes} already has the "
                                             f"layer's head axes {taken}")
        rest = Axes(a for a in x.axes if a not in features and not a.is_batch)
        if len(rest) != 1:
            raise self._fail(LayerAxesError,
                             f"needs one sequence axis in the {role} {x.name} {x.axes} (an axis "
                             f"neither among the features {features} nor batch), found "
                             f"{rest or 'none'}")
        return rest[0]

    @staticmethod
    def _batch_axes(x: Op) -> Axes:
        return Axes(a for a in x.axes if a.is_batch)

    def _key_axis(self, sequence: Axis) -> Axis:
        """The keys' axis for inputs with this sequence axis: made once, kept for later calls."""
        key = id(sequence)
        if key not in self._key_axes:
            self._key_axes[key] = self._new_axis(sequence.length, f"{self.name}_keys")
        return self._key_axes[key]

    def _project(self, x: Op, which: str) -> Op:
        """W{which} x (+ b{which}): (H, E, sequence, batch...); ng.dot pairs each feature
        axis with its dual in the weight, the only axes the two have in common."""
        projected = dot_ops.dot(self._variables[f"W{which}"], x)
        bias = self._variables.get(f"b{which}")
        return projected if bias is None else projected + bias

    def _attend(self, queries: Op, keys: Op, values: Op, key_axis: Axis,
                visible: Optional[Op], out_axes: Axes) -> Op:
        """softmax(q . k over E, masked) . v over the keys, projected back by Wo.

        The batched dots put the heads and batch axes first; the result is put
        back in `out_axes`' order (the input's), which callers may rely on.
        """
        scores = dot_ops.dot(queries, keys, reduction_axes=[self.head_size_axis])
        if visible is not None:
            scores = ew.where(visible, scores, -np.inf)
        weights = nn.softmax(scores, key_axis)
        attended = dot_ops.dot(weights, values, reduction_axes=[key_axis])
        return so.axes_with_order(self._project(attended, "o"), out_axes)

    def _cached(self, x: Op, queries: Op, new_axis: Axis, batch: Axes,
                cache: KeyValueCache) -> Op:
        """Attention of the new tokens over the cache, their keys and values written in.

        The new tokens go to positions length .. length + n - 1: a one-hot placement
        (n, capacity) puts their keys in (ng.dot over the new-token axis, the only one
        the two share) and the old keys stay elsewhere. The scores read these written
        tensors; the assigns store them for the next step.
        """
        if new_axis.length > cache.capacity:
            raise self._fail(LayerAxesError, f"{x.name} brings {new_axis.length} new tokens "
                                             f"({new_axis}), more than {cache!r} holds")
        cache._tensors(x, batch)
        assert cache.keys is not None and cache.values is not None
        slots = cache.position_axis
        offsets = constant(np.arange(new_axis.length), axes=[new_axis], dtype=np.int32)
        positions = cache.length + offsets
        placement = nn.one_hot(positions, slots, dtype=_float_dtype(x),
                               name=f"{self.name}_cache_position")
        kept = 1.0 - red.sum(placement, reduction_axes=new_axis)
        written = {}
        for which, stored in (("k", cache.keys), ("v", cache.values)):
            written[which] = stored * kept + dot_ops.dot(self._project(x, which), placement)
        slot_index = constant(np.arange(slots.length), axes=[slots], dtype=np.int32)
        if self.causal:
            visible = ew.less_equal(slot_index, positions)
        else:
            visible = ew.less(slot_index, cache.length + new_axis.length)
        y = self._attend(queries, written["k"], written["v"], slots, visible, x.axes)
        with Op.saved_user_deps():
            cache._updates = [control.assign(cache.keys, written["k"]),
                              control.assign(cache.values, written["v"]),
                              control.assign(cache.length, cache.length + new_axis.length)]
        return y

    @property
    def Wq(self) -> Op:
        """The query projection (after the first call): axes (H, E, features - 1)."""
        return self._variables["Wq"]

    @property
    def Wk(self) -> Op:
        """The key projection (after the first call): axes (H, E, context features - 1)."""
        return self._variables["Wk"]

    @property
    def Wv(self) -> Op:
        """The value projection (after the first call): axes (H, E, context features - 1)."""
        return self._variables["Wv"]

    @property
    def Wo(self) -> Op:
        """The output projection (after the first call): axes (features, H - 1, E - 1)."""
        return self._variables["Wo"]
