"""Sharding by axis identity: where each tensor lives on a device mesh follows from its axes.

A model names its dimensions with axes, so one mapping from axes to the axes
of a `jax.sharding.Mesh` ({N: "data", H: "model"}) places every tensor: the
weights, the fed placeholders, the results. A tensor dimension whose axis is
mapped is split over that mesh axis, every other dimension is replicated.
Data, tensor and mixed parallelism are then a choice of mapping, never a
change to the model; XLA inserts the collectives the placements need.

A dual axis (``H - 1``, the input side of a weight) follows the mapping of
its base axis H, so both weights of a hidden layer split along it (the two
halves of a Megatron-style layer). A mesh axis splits at most one dimension
of a tensor: an axis mapped exactly comes first, a dual left over stays whole
(the recurrent weight (H, H - 1) splits only along H).

With several processes (`jax.distributed.initialize`), the mesh spans the
devices of all of them. Each process feeds the same full arrays (or, with
``process_local=True``, its own slice of the mapped axes: `process_slice`
says which) and receives the full results.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, cast

import jax
import numpy as np

from ...axes import Axis
from ...debug_info import user_location
from ...errors import AxgraphTypeError, AxgraphValueError
from ..base import _missing_feed_error


class ShardingError(AxgraphValueError):
    """A mesh and axis mapping that cannot place a tensor: a mesh axis that does not
    exist, an axis whose length the mesh axis does not divide, one mesh axis asked
    to split two dimensions of one tensor."""


class AxisSharding:
    """The placement of every tensor on `mesh`, decided by its axes through `axis_mapping`.

    Parameters
    ----------
    mesh : jax.sharding.Mesh
        The devices, arranged along named mesh axes (``("data", "model")``).
    axis_mapping : mapping of Axis to str
        For each axis to split, the mesh axis that splits it. Axes are matched by
        identity (the Axis object, never its name); axes not mapped are replicated.

    Raises
    ------
    AxgraphTypeError
        `mesh` is not a jax Mesh, `axis_mapping` is not a mapping, a key is not an
        Axis or a value is not a string.
    ShardingError
        A value names no axis of the mesh, or an axis of known length is not divisible
        by the size of its mesh axis.

    Examples
    --------
    >>> import jax, numpy as np
    >>> import axgraph as ng
    >>> from axgraph.transformers.jax.sharding import AxisSharding
    >>> N, C = ng.make_axis(8, name="N"), ng.make_axis(3, name="C")
    >>> mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("data", "model"))
    >>> sharding = AxisSharding(mesh, {N: "data"})
    >>> sharding.mesh_axes([C, N]), tuple(sharding.spec([N, C]))
    ([None, 'data'], ('data', None))
    """

    def __init__(self, mesh: "jax.sharding.Mesh", axis_mapping: Mapping[Axis, str]):
        location = user_location()
        if not isinstance(mesh, jax.sharding.Mesh):
            raise AxgraphTypeError(f"mesh= takes a jax.sharding.Mesh, not "
                                   f"{type(mesh).__name__} {mesh!r:.60}", location)
        if not isinstance(axis_mapping, Mapping):
            raise AxgraphTypeError(f"axis_mapping= takes a dict {{Axis: mesh axis name}}, not "
                                   f"{type(axis_mapping).__name__} {axis_mapping!r:.60}",
                                   location)
        self.mesh = mesh
        #: Size of each mesh axis, by name.
        self.mesh_sizes: Dict[str, int] = dict(mesh.shape)
        self.axis_mapping: Dict[Axis, str] = {}
        for axis, mesh_axis in axis_mapping.items():
            if not isinstance(axis, Axis):
                raise AxgraphTypeError(
                    f"axis_mapping keys are Axis objects (axes are matched by identity, never "
                    f"by name); {axis!r:.60} is a {type(axis).__name__}", location)
            if not isinstance(mesh_axis, str):
                raise AxgraphTypeError(f"axis_mapping[{axis.name}] is the name of a mesh axis "
                                       f"(one of {list(self.mesh_sizes)}), not {mesh_axis!r:.60}",
                                       location)
            if mesh_axis not in self.mesh_sizes:
                raise ShardingError(f"axis_mapping maps axis {axis.name} to mesh axis "
                                    f"{mesh_axis!r}, which the mesh does not have (its axes: "
                                    f"{_described_mesh(self.mesh_sizes)})", location)
            if isinstance(axis.length, int):
                self._check_divides(axis, axis.length, mesh_axis, location)
            self.axis_mapping[axis] = mesh_axis

    def __repr__(self) -> str:
        mapping = ", ".join(f"{a.name}: {m!r}" for a, m in self.axis_mapping.items())
        return f"AxisSharding(mesh {_described_mesh(self.mesh_sizes)}, {{{mapping}}})"

    # -- placements ------------------------------------------------------------------------

    def mesh_axes(self, axes: Sequence[Axis], what: str = "a tensor") -> List[Optional[str]]:
        """The mesh axis splitting each dimension of a tensor with `axes` (None: replicated).

        An axis mapped exactly takes its mesh axis first; a dual axis whose base is mapped
        takes the base's mesh axis if no other dimension of the tensor has it.

        Parameters
        ----------
        axes : sequence of Axis
            The tensor's axes, in the order of its dimensions.
        what : str, optional
            The tensor, as messages name it.

        Returns
        -------
        list of str or None
            One entry per dimension.

        Raises
        ------
        ShardingError
            Two axes of the tensor are mapped exactly to the same mesh axis.
        """
        chosen: List[Optional[str]] = [self.axis_mapping.get(a) for a in axes]
        used: Dict[str, Axis] = {}
        for axis, mesh_axis in zip(axes, chosen):
            if mesh_axis is None:
                continue
            if mesh_axis in used:
                raise ShardingError(
                    f"{what} has axes {used[mesh_axis].name} and {axis.name}, both mapped to "
                    f"mesh axis {mesh_axis!r}: a mesh axis splits one dimension of a tensor; "
                    f"map one of them to another mesh axis", user_location())
            used[mesh_axis] = axis
        for index, axis in enumerate(axes):
            if chosen[index] is None and axis.base is not axis:
                mesh_axis = self.axis_mapping.get(axis.base)
                if mesh_axis is not None and mesh_axis not in used:
                    chosen[index] = mesh_axis
                    used[mesh_axis] = axis
        return chosen

    def spec(self, axes: Sequence[Axis], what: str = "a tensor") -> "jax.sharding.PartitionSpec":
        """The PartitionSpec of a tensor with `axes` (see `mesh_axes`).

        Parameters
        ----------
        axes : sequence of Axis
            The tensor's axes, in the order of its dimensions.
        what : str, optional
            The tensor, as messages name it.

        Returns
        -------
        jax.sharding.PartitionSpec
            The mesh axis name at each split dimension, None elsewhere.
        """
        return jax.sharding.PartitionSpec(*self.mesh_axes(axes, what))

    def sharding(self, axes: Sequence[Axis], what: str = "a tensor"
                 ) -> "jax.sharding.NamedSharding":
        """The NamedSharding on this mesh of a tensor with `axes`.

        Parameters
        ----------
        axes : sequence of Axis
            The tensor's axes, in the order of its dimensions.
        what : str, optional
            The tensor, as messages name it.

        Returns
        -------
        jax.sharding.NamedSharding
            Its placement.
        """
        return jax.sharding.NamedSharding(self.mesh, self.spec(axes, what))

    def check_shape(self, axes: Sequence[Axis], shape: Sequence[int],
                    what: str = "a tensor") -> None:
        """Refuse a shape whose split dimensions the mesh axes do not divide.

        Parameters
        ----------
        axes : sequence of Axis
            The tensor's axes, in the order of its dimensions.
        shape : sequence of int
            Its lengths (bound from fed data where the axes have none).
        what : str, optional
            The tensor, as messages name it.

        Raises
        ------
        ShardingError
            A mapped axis whose length is not a multiple of its mesh axis's size.
        """
        for axis, length, mesh_axis in zip(axes, shape, self.mesh_axes(axes, what)):
            if mesh_axis is not None:
                self._check_divides(axis, int(length), mesh_axis, user_location(), what)

    def _check_divides(self, axis: Axis, length: int, mesh_axis: str, location,
                       what: Optional[str] = None) -> None:
        size = self.mesh_sizes[mesh_axis]
        if length % size:
            where = f" (in {what})" if what else ""
            raise ShardingError(
                f"axis {axis.name} of length {length}{where} is mapped to mesh axis "
                f"{mesh_axis!r} of size {size}, which does not divide it: choose a length that "
                f"is a multiple of {size}, or a smaller mesh axis", location)

    # -- moving values ---------------------------------------------------------------------

    def place(self, value: Any, axes: Sequence[Axis], what: str = "a tensor",
              process_local: bool = False) -> "jax.Array":
        """`value` as a global jax Array placed by `axes` over the mesh.

        Parameters
        ----------
        value : numpy.ndarray or jax.Array
            The full array (the same on every process); with `process_local`, this
            process's slice of the split dimensions (`process_slice`).
        axes : sequence of Axis
            Its axes, in the order of its dimensions.
        what : str, optional
            The tensor, as messages name it.
        process_local : bool, optional
            Whether `value` holds only this process's part.

        Returns
        -------
        jax.Array
            The global array, each device holding its shard.

        Raises
        ------
        ShardingError
            A split dimension the mesh axis does not divide.
        """
        sharding = self.sharding(axes, what)
        if isinstance(value, GlobalValue):
            value = value.array
        if process_local:
            array = np.asarray(value)
            global_shape = self.global_shape(axes, array.shape, what)
            self.check_shape(axes, global_shape, what)
            with jax.enable_x64(True):  # float64 and int64 data keep their types
                return jax.make_array_from_process_local_data(sharding, array, global_shape)
        self.check_shape(axes, np.shape(value), what)
        return _put(value, sharding)

    def global_shape(self, axes: Sequence[Axis], local_shape: Sequence[int],
                     what: str = "a tensor") -> Tuple[int, ...]:
        """The full shape of a tensor of which this process holds `local_shape`.

        A split dimension is as many times longer as its mesh axis has positions for
        each one this process's devices occupy (1 where they span the mesh axis).

        Parameters
        ----------
        axes : sequence of Axis
            The tensor's axes.
        local_shape : sequence of int
            The shape of this process's part.
        what : str, optional
            The tensor, as messages name it.

        Returns
        -------
        tuple of int
            The global shape.

        Raises
        ------
        ShardingError
            A split dimension of the local part that this process's devices cannot share
            equally.
        """
        shape = []
        for axis, length, mesh_axis in zip(axes, local_shape, self.mesh_axes(axes, what)):
            if mesh_axis is None:
                shape.append(int(length))
                continue
            held, size = self._held_positions(mesh_axis), self.mesh_sizes[mesh_axis]
            if length % held:
                raise ShardingError(
                    f"the process-local part of {what} has {length} positions along axis "
                    f"{axis.name}, which this process's {held} positions of mesh axis "
                    f"{mesh_axis!r} cannot share equally: feed a multiple of {held}",
                    user_location())
            shape.append(int(length) * size // held)
        return tuple(shape)

    def _held_positions(self, mesh_axis: str) -> int:
        """How many positions along `mesh_axis` this process's devices occupy."""
        position = list(self.mesh_sizes).index(mesh_axis)
        devices = np.moveaxis(self.mesh.devices, position, 0)
        me = jax.process_index()
        return sum(any(d.process_index == me for d in np.ravel(row)) for row in devices)

    def process_slice(self, axis: Axis, length: int) -> slice:
        """The positions along `axis` that this process feeds with ``process_local=True``.

        Parameters
        ----------
        axis : Axis
            An axis of `axis_mapping` (a batch axis, say).
        length : int
            Its full (global) length.

        Returns
        -------
        slice
            The contiguous positions this process's devices hold; the whole axis when
            the axis is not mapped or the process's devices span its mesh axis.

        Raises
        ------
        ShardingError
            The mesh axis does not divide `length`, or the positions are not contiguous.
        """
        self.check_shape([axis], [length], f"axis {axis.name}")
        sharding = self.sharding([axis], f"axis {axis.name}")
        indices = sharding.addressable_devices_indices_map((length,)).values()
        starts = sorted({index[0].indices(length)[:2] for index in indices
                         if index is not None})
        first, last = starts[0][0], starts[-1][1]
        covered = sum(stop - start for start, stop in starts)
        if covered != last - first:
            raise ShardingError(f"this process (index {jax.process_index()}) holds positions of "
                                f"axis {axis.name} that are not contiguous ({starts}): lay the "
                                f"mesh out so that each process's devices are adjacent along "
                                f"{self.axis_mapping.get(axis.base)!r}", user_location())
        return slice(first, last)


def gathered(array: Any) -> np.ndarray:
    """The full value of a (possibly multi-process) jax Array as a NumPy array, on every process.

    Parameters
    ----------
    array : jax.Array or numpy.ndarray
        A value the sharded program made.

    Returns
    -------
    numpy.ndarray
        Its full value. With several processes, every process must call this for the
        same arrays in the same order (it is a collective).
    """
    if isinstance(array, jax.Array) and not array.is_fully_addressable \
            and not array.is_fully_replicated:
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(array, tiled=True))
    return np.asarray(array)


class GlobalValue:
    """A stored value spread over the devices of several processes, readable as NumPy.

    Kept in the transformer's state in place of a jax Array that no process holds
    whole, so that reading a stored tensor (`serialization.get_values`, `op.value`)
    gathers it; every process must read the same tensors in the same order.

    Parameters
    ----------
    array : jax.Array
        The global array.
    """

    def __init__(self, array: "jax.Array"):
        self.array = array

    @property
    def shape(self) -> Tuple[int, ...]:
        """The global shape."""
        return tuple(self.array.shape)

    @property
    def dtype(self) -> np.dtype:
        """The element type."""
        return np.dtype(self.array.dtype)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        value = gathered(self.array)
        return value if dtype is None else value.astype(dtype)

    def __repr__(self) -> str:
        return f"GlobalValue({self.dtype}{list(self.shape)}, {self.array.sharding})"


def stored(array: "jax.Array") -> Any:
    """What the transformer's state keeps for `array`.

    Parameters
    ----------
    array : jax.Array
        A new stored value, as the program made it.

    Returns
    -------
    jax.Array or GlobalValue
        The array itself when this process can read it whole, else a `GlobalValue`
        that gathers it when read.
    """
    return array if array.is_fully_addressable else GlobalValue(array)


class Placement:
    """The placements of one lowered computation: of each parameter of its core Function
    (a fed placeholder or a stored tensor) and of each result, by their axes.

    The jax backend jits the computation's programs with these placements
    (`jit`) and puts each call's arguments on the mesh first (`place`).

    Parameters
    ----------
    sharding : AxisSharding
        The mesh and axis mapping.
    lowered : LoweredComputation
        The computation's core Function and how it maps to the axes graph.
    results : sequence of Op
        The computation's results (their axes give the results' placements).
    """

    def __init__(self, sharding: AxisSharding, lowered: Any, results: Sequence[Any]):
        self.sharding = sharding
        #: (axes, description) of each parameter of the function.
        self.parameters = [(t.axes, _describe(t)) for t in lowered.state_inputs]
        outputs = [(r.axes, f"result {r.name}") for r in results if r.is_tensor_op]
        state = [(t.axes, _describe(t)) for t in lowered.state_outputs]
        effects = len(lowered.function.results) - len(outputs) - len(state)
        #: (axes, description) of each result of the function: the computation's results, a
        #: print's effect (replicated), the stored tensors' new values.
        self.results = outputs + [((), "a print's effect")] * effects + state
        self.replicated = jax.sharding.NamedSharding(sharding.mesh,
                                                     jax.sharding.PartitionSpec())
        #: The placement of each parameter, made once (a call compares, not rebuilds).
        self._targets = [sharding.sharding(axes, what) for axes, what in self.parameters]
        #: (parameter, shape) pairs whose split dimensions the mesh was found to divide.
        self._fitting: set = set()

    def jit(self, trace: Any, donated: Tuple[int, ...], extra_arguments: int) -> Any:
        """`jax.jit(trace)` with every argument and result placed.

        Parameters
        ----------
        trace : callable
            Takes one array per parameter, then `extra_arguments` more (replicated);
            returns (a tuple of one array per result, anything else, replicated).
        donated : tuple of int
            The arguments XLA may write results over.
        extra_arguments : int
            Arguments after the parameters (the host's random draws).

        Returns
        -------
        callable
            The jitted function.
        """
        sharding = self.sharding
        parameters = tuple(sharding.sharding(a, w) for a, w in self.parameters)
        results = tuple(sharding.sharding(a, w) for a, w in self.results)
        return jax.jit(trace, donate_argnums=donated,
                       in_shardings=parameters + (self.replicated,) * extra_arguments,
                       out_shardings=(results, self.replicated))

    def place(self, arguments: Sequence[Any], extra: Sequence[Any]) -> Tuple[tuple, tuple]:
        """A call's arguments on the mesh: each parameter's split by its axes, the extra
        ones (the random draws) replicated.

        Parameters
        ----------
        arguments : sequence of numpy.ndarray or jax.Array
            One full array per parameter of the function.
        extra : sequence of numpy.ndarray
            The arguments after them (the host's random draws).

        Returns
        -------
        (tuple of jax.Array, tuple of jax.Array)
            The parameters' arrays and the extra ones, placed.

        Raises
        ------
        ShardingError
            A split dimension the mesh axis does not divide.
        """
        placed = []
        for index, value in enumerate(arguments):
            if isinstance(value, GlobalValue):
                value = value.array
            if isinstance(value, jax.Array) and (index, value.shape) in self._fitting \
                    and value.sharding == self._targets[index]:
                placed.append(value)  # already where it goes (a stored value, usually)
                continue
            axes, what = self.parameters[index]
            value = self.sharding.place(value, axes, what)
            self._fitting.add((index, value.shape))
            placed.append(value)
        return tuple(placed), tuple(_put(value, self.replicated) for value in extra)


class ProcessLocalFeeds:
    """Lets a computation of a sharded transformer take process-local batches.

    Called as any computation, each process passes the same full arrays. With
    ``process_local=True`` each process passes only its own part of every split
    dimension (`AxisSharding.process_slice` says which positions), as an input
    pipeline that shards the data provides it; the results are still full on
    every process. Mixed into the jax transformer's computation class.
    """

    _process_local = False

    def __call__(self, *values, process_local: bool = False, **options):
        """Run once (see `Computation`); `process_local`: the values are this process's
        parts of the split dimensions rather than the full arrays."""
        call = super().__call__  # type: ignore[misc]  # the computation class mixed with
        if not process_local:
            return call(*values, **options)
        with self.transformer._lock:  # type: ignore[attr-defined]
            self._process_local = True
            try:
                return call(*values, **options)
            finally:
                self._process_local = False

    def _checked_feeds(self, values, feed_dict):
        computation = cast(Any, self)
        if not self._process_local:
            return super()._checked_feeds(values, feed_dict)
        sharding: AxisSharding = computation.transformer.sharding
        feeds = computation._collect_feeds(values, feed_dict or {})
        placed = {p: sharding.place(computation._feed_value(p, v), p.axes, _describe(p),
                                    process_local=True)
                  for p, v in feeds.items()}
        bindings = computation._bind(placed)
        missing = [p for p in computation._needed_feeds if p not in placed]
        if missing:
            raise _missing_feed_error(missing[0], computation._needed_feeds[missing[0]])
        return placed, bindings


def sharding_of(mesh: Any, axis_mapping: Optional[Mapping[Axis, str]]
                ) -> Optional[AxisSharding]:
    """The transformer's placements from its `mesh=` and `axis_mapping=` options.

    Parameters
    ----------
    mesh : jax.sharding.Mesh or None
        The devices (None: no mesh, everything on one device).
    axis_mapping : mapping of Axis to str, or None
        The mesh axis splitting each axis named.

    Returns
    -------
    AxisSharding or None
        The placements, or None without a mesh.

    Raises
    ------
    AxgraphTypeError
        An axis mapping without a mesh (or a bad mesh or mapping, see `AxisSharding`).
    ShardingError
        See `AxisSharding`.
    """
    if mesh is None:
        if axis_mapping:
            raise AxgraphTypeError("axis_mapping= places tensors on the devices of a mesh: give "
                                   "mesh=jax.sharding.Mesh(devices, axis_names) too",
                                   user_location())
        return None
    return AxisSharding(mesh, axis_mapping or {})


def _put(value: Any, sharding: Any) -> "jax.Array":
    """`value` (the same full array on every process) placed as `sharding` says, its
    element type kept (float64 too)."""
    if isinstance(value, jax.Array) and value.sharding.is_equivalent_to(sharding, value.ndim):
        return value
    with jax.enable_x64(True):
        if isinstance(value, jax.Array) or jax.process_count() == 1:
            return jax.device_put(value, sharding)
        array = np.asarray(value)
        return jax.make_array_from_callback(array.shape, sharding, lambda index: array[index])


def _describe(tensor: Any) -> str:
    kind = "placeholder" if tensor.input else "stored tensor"
    return tensor.name if tensor.name.startswith(kind) else f"{kind} {tensor.name}"


def _described_mesh(sizes: Mapping[str, int]) -> str:
    return "(" + ", ".join(f"{name!r}: {size}" for name, size in sizes.items()) + ")"


__all__ = ["AxisSharding", "GlobalValue", "Placement", "ProcessLocalFeeds", "ShardingError",
           "gathered", "sharding_of", "stored"]
