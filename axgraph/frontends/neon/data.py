"""Minibatches from in-memory arrays (neon's ArrayIterator and SequentialArrayIterator).

    train = ArrayIterator({"image": X, "label": y}, batch_size=32, shuffle=True)
    inputs = train.make_placeholders()          # {"image": [image_1, N], "label": [N]}
    for batch in train:                          # one epoch
        step(batch["image"], batch["label"])

Examples lie along dimension 0 of every array given. A batch puts them
along the *last* dimension, as Nervana Graph v0.4 did: an array of images
(n, C, H, W) gives batches (C, H, W, batch_size) that feed a placeholder
with axes (C, H, W, N), and `make_placeholders` makes such placeholders
(feature axes, then N). ``train.shapes["image"]`` is one example's shape.

The final partial batch wraps around, as in neon: every batch holds exactly
`batch_size` examples (so the batch axis N has one length), and a batch that
runs past the end of the data is completed from the start of the next pass
(the next permutation when shuffling). The position carries over from one
epoch to the next, so over many epochs every example is used equally often.
`reset()` goes back to the state right after construction.

SequentialArrayIterator cuts a long token stream into `batch_size` parallel
streams and yields windows of `time_steps` tokens from each, as (time_steps,
batch_size) arrays for placeholders with axes (REC, N).
"""
from __future__ import annotations

import abc
import math
from typing import Any, Dict, Iterator, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ...axes import Axes, AxesLike, Axis, make_axis
from ...debug_info import user_location
from ...errors import AxgraphTypeError, AxgraphValueError, AxisLengthError
from ...op_graph.tensors import AssignableTensorOp, placeholder

#: The name a single array (rather than a dict of arrays) gets.
SINGLE_ARRAY_KEY = "x"

#: Placeholder element type for each kind of array data (float data becomes float32).
PLACEHOLDER_DTYPES = {"f": np.float32, "i": np.int32, "u": np.int32, "b": np.bool_}

Batch = Dict[str, np.ndarray]


def _positive_int(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise AxgraphValueError(f"{what} must be a positive int, got {value!r}", user_location())
    return int(value)


class _EpochIterator(abc.ABC):
    """One ``for`` loop is one epoch of `total_iterations` batches; the position carries over."""

    batch_size: int

    def __init__(self, total_iterations: Optional[int]):
        self.total_iterations = (self.nbatches if total_iterations is None
                                 else _positive_int(total_iterations, "total_iterations"))
        self.reset()

    @property
    @abc.abstractmethod
    def nbatches(self) -> int:
        """Batches in one pass over the data."""

    @abc.abstractmethod
    def _restart(self) -> None:
        """Back to the first batch."""

    @abc.abstractmethod
    def _next_batch(self) -> Batch:
        """The next batch (copies, batch axis last)."""

    def __len__(self) -> int:
        """Batches per epoch (``total_iterations``)."""
        return self.total_iterations

    def reset(self) -> None:
        """Back to the state right after construction."""
        self._restart()
        self.epoch = 0

    def __iter__(self) -> Iterator[Batch]:
        """One epoch: `total_iterations` dicts name -> batch array."""
        for _ in range(self.total_iterations):
            yield self._next_batch()
        self.epoch += 1

    def get_state(self) -> Dict[str, Any]:
        """Where the iterator is, as a JSON-ready dict (what a training checkpoint saves).

        Take it between epochs or batches; ``set_state`` on an iterator built
        over the same data with the same settings then yields the same batches
        from there on.

        Returns
        -------
        dict
            The epoch, the position and (when shuffling) the random state, with
            the settings ``set_state`` checks (ints, strs and lists only).
        """
        return {"iterator": type(self).__name__, "settings": self._settings(), "epoch": self.epoch,
                **self._position_state()}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Go back to a position taken with ``get_state`` (from this run or a saved one).

        Parameters
        ----------
        state : dict
            What ``get_state`` returned, perhaps read back from a file.

        Raises
        ------
        AxgraphValueError
            When `state` is not one this iterator's ``get_state`` makes, or was
            taken from an iterator of another class or with other settings
            (batch size, number of examples, shuffling, ...). Nothing changes then.
        """
        expected = {"iterator", "settings", "epoch", *self._position_state()}
        if not isinstance(state, Mapping) or set(state) != expected:
            raise AxgraphValueError(f"{type(self).__name__}.set_state: expected a dict with the fields "
                                    f"{sorted(expected)}, got {_shown_fields(state)}", user_location())
        if state["iterator"] != type(self).__name__ or state["settings"] != self._settings():
            raise AxgraphValueError(f"{type(self).__name__}.set_state: the state is of a "
                                    f"{state['iterator']!r} with settings {state['settings']!r}; this "
                                    f"iterator has {self._settings()!r}", user_location())
        epoch = _count(state["epoch"], "epoch")
        self._set_position(state)
        self.epoch = epoch

    @abc.abstractmethod
    def _settings(self) -> Dict[str, Any]:
        """What must match for a state to apply: the sizes and options, as JSON values."""

    @abc.abstractmethod
    def _position_state(self) -> Dict[str, Any]:
        """The fields of get_state beyond the class, settings and epoch."""

    @abc.abstractmethod
    def _set_position(self, state: Mapping[str, Any]) -> None:
        """Check and apply the position fields of `state` (all or nothing)."""


def _shown_fields(state) -> str:
    return repr(sorted(map(str, state))) if isinstance(state, Mapping) else type(state).__name__


def _count(value, what: str, most: Optional[int] = None) -> int:
    """`value` if it is an int from 0 to `most`, else an AxgraphValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0 \
            or (most is not None and value > most):
        bound = "" if most is None else f" up to {most}"
        raise AxgraphValueError(f"set_state: {what} must be an int from 0{bound}, got {value!r}",
                                user_location())
    return int(value)


class ArrayIterator(_EpochIterator):
    """Iterates over minibatches of named arrays; one ``for`` loop is one epoch.

    neon's ArrayIterator, as Nervana Graph v0.4 used it: each batch is a dict
    name -> array holding `batch_size` examples along its *last* dimension,
    ready to feed placeholders whose batch axis N comes last (see
    ``make_placeholders``). Every batch is full: a batch that runs past the
    end of the data is completed from the start of the next pass, and the
    position carries over to the next epoch. ``reset()`` starts over.

    Parameters
    ----------
    data : mapping of str to array_like, or array_like
        Arrays with the examples along dimension 0, all with the same number
        of them; a single array is named ``SINGLE_ARRAY_KEY`` ("x").
    batch_size : int
        Examples per batch, at most the number of examples.
    total_iterations : int or None, default None
        Batches per epoch (``len(iterator)``); None means ``nbatches``, one
        pass over the data. v0.4's examples give the whole run's iterations
        here and make one pass with ``loop_train``.
    shuffle : bool, default False
        Visit the examples in a new random order on every pass over the data.
    seed : int, default 0
        Seed of the shuffling stream (``reset()`` restarts it).

    Attributes
    ----------
    ndata : int
        The number of examples.
    nbatches : int
        Batches in one pass: ceil(ndata / batch_size).
    shapes : dict of str to tuple of int
        One example's shape per array.

    Raises
    ------
    AxgraphValueError
        When there is no array, the arrays hold different numbers of examples
        (or one is a scalar), or `batch_size` / `total_iterations` is not a
        positive int or `batch_size` exceeds the number of examples.

    Examples
    --------
    >>> import numpy as np
    >>> images, labels = np.arange(10).reshape(5, 2), np.arange(5)
    >>> train = ArrayIterator({"image": images, "label": labels}, batch_size=2)
    >>> len(train), train.shapes["image"]
    (3, (2,))
    >>> for batch in train:                       # the last batch wraps around
    ...     print(batch["image"].shape, batch["label"])
    (2, 2) [0 1]
    (2, 2) [2 3]
    (2, 2) [4 0]
    """

    def __init__(self, data: Union[Mapping[str, np.ndarray], np.ndarray], batch_size: int,
                 total_iterations: Optional[int] = None, shuffle: bool = False, seed: int = 0):
        arrays = dict(data) if isinstance(data, Mapping) else {SINGLE_ARRAY_KEY: data}
        if not arrays:
            raise AxgraphValueError("ArrayIterator needs at least one array", user_location())
        self.data: Dict[str, np.ndarray] = {name: np.asarray(a) for name, a in arrays.items()}
        counts = {name: (a.shape[0] if a.ndim else None) for name, a in self.data.items()}
        if None in counts.values() or len(set(counts.values())) != 1:
            raise AxgraphValueError(f"ArrayIterator: every array needs the same number of examples along "
                             f"dim 0; got {counts}", user_location())
        self.ndata: int = next(n for n in counts.values() if n is not None)  # all equal
        self.batch_size = _positive_int(batch_size, "batch_size")
        if self.batch_size > self.ndata:
            raise AxgraphValueError(f"batch_size {batch_size} is larger than the {self.ndata} examples", user_location())
        self.shuffle = bool(shuffle)
        self.seed = seed
        super().__init__(total_iterations)

    @property
    def nbatches(self) -> int:
        """Batches in one pass over the data: ceil(ndata / batch_size)."""
        return math.ceil(self.ndata / self.batch_size)

    @property
    def shapes(self) -> Dict[str, Tuple[int, ...]]:
        """The shape of one example of each array (v0.4: ``C, H, W = it.shapes["image"]``)."""
        return {name: array.shape[1:] for name, array in self.data.items()}

    def _restart(self) -> None:
        self._rng = np.random.default_rng(self.seed)
        self._order = self._new_order()
        self._position = 0

    def _new_order(self) -> np.ndarray:
        # The state the order is drawn from is kept: get_state saves it and set_state draws
        # the same order again (rather than saving the permutation itself).
        self._order_state = self._rng.bit_generator.state
        return self._rng.permutation(self.ndata) if self.shuffle else np.arange(self.ndata)

    def _settings(self) -> Dict[str, Any]:
        return {"ndata": self.ndata, "batch_size": self.batch_size, "shuffle": self.shuffle,
                "total_iterations": self.total_iterations}

    def _position_state(self) -> Dict[str, Any]:
        return {"position": self._position, "order_random_state": _json_ready(self._order_state)}

    def _set_position(self, state: Mapping[str, Any]) -> None:
        position = _count(state["position"], "position", self.ndata)
        generator = np.random.default_rng()
        try:
            generator.bit_generator.state = state["order_random_state"]
        except (KeyError, IndexError, ValueError, TypeError, OverflowError) as error:
            raise AxgraphValueError(f"ArrayIterator.set_state: order_random_state is not a "
                                    f"{type(generator.bit_generator).__name__} state: "
                                    f"{type(error).__name__}: {error}", user_location()) from None
        self._rng = generator
        self._order = self._new_order()
        self._position = position

    def _next_indices(self) -> np.ndarray:
        chosen, needed = [], self.batch_size
        while needed:
            if self._position == self.ndata:
                self._order, self._position = self._new_order(), 0
            taken = self._order[self._position:self._position + needed]
            chosen.append(taken)
            self._position += len(taken)
            needed -= len(taken)
        return np.concatenate(chosen)

    def _next_batch(self) -> Batch:
        indices = self._next_indices()
        return {name: np.ascontiguousarray(np.moveaxis(np.take(array, indices, axis=0), 0, -1))
                for name, array in self.data.items()}

    def make_placeholders(self, batch_axis: Optional[Axis] = None,
                          axes: Optional[Mapping[str, Sequence[Axis]]] = None,
                          ) -> Dict[str, AssignableTensorOp]:
        """A placeholder per array, with axes feature axes + [N], fed by a batch as is.

        The element type follows ``PLACEHOLDER_DTYPES``: float data gets
        float32 placeholders, integer data int32, booleans bool.

        Parameters
        ----------
        batch_axis : Axis or None, default None
            The batch axis; None makes a new axis named "N" (so it is the
            batch axis). Its length is set to `batch_size` if unset.
        axes : mapping of str to sequence of Axis, or None, default None
            The feature axes of some arrays, by array name; their lengths are
            set from the data if unset. The other arrays get new axes named
            ``<name>_<dim>`` (``image_1``, ``image_2``, ...).

        Returns
        -------
        dict of str to AssignableTensorOp
            A placeholder per array, by the array's name.

        Raises
        ------
        AxgraphValueError
            When `axes` names an array this iterator does not have.
        axgraph.AxisLengthError
            When an axis given has a length other than the data's (or the
            batch size), or an array is given the wrong number of axes.
        AxgraphTypeError
            When an array's element type cannot be held by a placeholder.

        Examples
        --------
        >>> import numpy as np, axgraph as ng
        >>> train = ArrayIterator({"image": np.zeros((6, 3, 2)), "label": np.zeros(6, int)}, 2)
        >>> C, W = ng.make_axis(name="C"), ng.make_axis(name="W")
        >>> inputs = train.make_placeholders(axes={"image": [C, W]})
        >>> inputs["image"].axes, inputs["label"].axes, inputs["label"].dtype
        (Axes(C: 3, W: 2, N: 2), Axes(N: 2), dtype('int32'))
        """
        axes = dict(axes or {})
        unknown = set(axes) - set(self.data)
        if unknown:
            raise AxgraphValueError(f"make_placeholders: axes given for {sorted(unknown)}, which are not "
                             f"arrays of this iterator ({sorted(self.data)})", user_location())
        if batch_axis is None:
            batch_axis = make_axis(self.batch_size, name="N")
        _fit_length(batch_axis, self.batch_size, "the batch size")
        result = {}
        for name, array in self.data.items():
            features = _feature_axes(name, array, axes.get(name))
            result[name] = placeholder(features + Axes([batch_axis]),
                                       dtype=_placeholder_dtype(name, array), name=name)
        return result


class SequentialArrayIterator(_EpochIterator):
    """Windows of `time_steps` tokens from `batch_size` parallel streams (v0.4's iterator).

    Each array of `data_arrays` (a dict name -> 1-d token array, all of one
    length) is cut to ``ndata * time_steps`` tokens and split into
    `batch_size` contiguous streams; batch i holds window ``i % nbatches`` of
    every stream, as a (time_steps, batch_size) array, so consecutive batches
    continue each stream (what a recurrent model carried across batches
    needs). Tokens past the last whole batch are dropped.

    Parameters
    ----------
    data_arrays : mapping of str to array_like
        1-d token arrays of one length, by name (v0.4: "inp_txt", "tgt_txt").
    time_steps : int
        Tokens per window: the length of the REC axis fed.
    batch_size : int
        Parallel streams: the length of the batch axis fed.
    total_iterations : int or None, default None
        Batches per epoch; None means ``nbatches``, one pass over the streams.
    reverse_target : bool, default False
        Reverse the token order within every window of the `tgt_key` array.
    get_prev_target : bool, default False
        Add an array "prev_tgt": each `tgt_key` window rolled one step to the
        right (its last token comes first), as v0.4 made it.
    tgt_key : str, default "tgt_txt"
        The name of the target array that the two options above act on.

    Attributes
    ----------
    ndata : int
        The number of windows used: nbatches * batch_size.
    nbatches : int
        Windows per stream.

    Raises
    ------
    AxgraphValueError
        When `data_arrays` is not a non-empty dict of 1-d arrays of one
        length, `time_steps` or `batch_size` is not a positive int, there are
        fewer tokens than one batch, or an option needs a `tgt_key` array that
        is missing.

    Examples
    --------
    >>> import numpy as np
    >>> text = SequentialArrayIterator({"inp_txt": np.arange(13)}, time_steps=3, batch_size=2)
    >>> for batch in text:                 # streams 0..5 and 6..11; token 12 is dropped
    ...     print(batch["inp_txt"].T)
    [[0 1 2]
     [6 7 8]]
    [[ 3  4  5]
     [ 9 10 11]]
    """

    def __init__(self, data_arrays: Mapping[str, np.ndarray], time_steps: int, batch_size: int,
                 total_iterations: Optional[int] = None, reverse_target: bool = False,
                 get_prev_target: bool = False, tgt_key: str = "tgt_txt"):
        if not isinstance(data_arrays, Mapping) or not data_arrays:
            raise AxgraphValueError("SequentialArrayIterator needs a dict name -> 1-d token array", user_location())
        arrays = {name: np.asarray(a) for name, a in data_arrays.items()}
        lengths = {name: (len(a) if a.ndim == 1 else None) for name, a in arrays.items()}
        if None in lengths.values() or len(set(lengths.values())) != 1:
            raise AxgraphValueError(f"SequentialArrayIterator: every array must be 1-d and of one "
                             f"length; got shapes { {n: a.shape for n, a in arrays.items()} }", user_location())
        self.time_steps = _positive_int(time_steps, "time_steps")
        self.batch_size = _positive_int(batch_size, "batch_size")
        length = next(n for n in lengths.values() if n is not None)  # all equal
        #: Sequences of `time_steps` tokens used (a whole number of batches' worth).
        self.ndata = length // (self.batch_size * self.time_steps) * self.batch_size
        if self.ndata == 0:
            raise AxgraphValueError(f"SequentialArrayIterator: {length} tokens are fewer than one batch "
                             f"of {self.batch_size} x {self.time_steps}", user_location())
        windows = {name: a[:self.ndata * self.time_steps].reshape(
            self.batch_size, self.nbatches, self.time_steps) for name, a in arrays.items()}
        if (reverse_target or get_prev_target) and tgt_key not in windows:
            raise AxgraphValueError(f"SequentialArrayIterator: no target array {tgt_key!r} to reverse or "
                             f"shift; arrays are {sorted(windows)}", user_location())
        if reverse_target:
            windows[tgt_key] = windows[tgt_key][:, :, ::-1]
        if get_prev_target:
            windows["prev_tgt"] = np.roll(windows[tgt_key], shift=1, axis=2)
        self._windows = windows
        super().__init__(total_iterations)

    @property
    def nbatches(self) -> int:
        """Windows per stream: ndata / batch_size."""
        return self.ndata // self.batch_size

    def _restart(self) -> None:
        self._index = 0

    def _settings(self) -> Dict[str, Any]:
        return {"ndata": self.ndata, "batch_size": self.batch_size,
                "time_steps": self.time_steps, "total_iterations": self.total_iterations}

    def _position_state(self) -> Dict[str, Any]:
        return {"index": self._index}

    def _set_position(self, state: Mapping[str, Any]) -> None:
        self._index = _count(state["index"], "index")

    def _next_batch(self) -> Batch:
        window = self._index % self.nbatches
        self._index += 1
        return {name: np.ascontiguousarray(w[:, window, :].T) for name, w in self._windows.items()}

    def make_placeholders(self, time_axis: Optional[Axis] = None,
                          batch_axis: Optional[Axis] = None) -> Dict[str, AssignableTensorOp]:
        """A placeholder (REC, N) per array; new axes named REC and N unless given.

        Parameters
        ----------
        time_axis : Axis or None, default None
            The recurrent axis; None makes a new axis named "REC". Its length
            is set to `time_steps` if unset.
        batch_axis : Axis or None, default None
            The batch axis; None makes a new axis named "N". Its length is set
            to `batch_size` if unset.

        Returns
        -------
        dict of str to AssignableTensorOp
            A placeholder with axes (time_axis, batch_axis) per array (int32
            for integer tokens), "prev_tgt" included when made.

        Raises
        ------
        axgraph.AxisLengthError
            When an axis given has a length other than `time_steps` or `batch_size`.
        AxgraphTypeError
            When an array's element type cannot be held by a placeholder.
        """
        time_axis = time_axis if time_axis is not None else make_axis(name="REC")
        batch_axis = batch_axis if batch_axis is not None else make_axis(name="N")
        _fit_length(time_axis, self.time_steps, "time_steps")
        _fit_length(batch_axis, self.batch_size, "the batch size")
        return {name: placeholder([time_axis, batch_axis], dtype=_placeholder_dtype(name, w),
                                  name=name)
                for name, w in self._windows.items()}


def _json_ready(value):
    """A random state with its arrays as lists (what JSON holds; the setters take lists)."""
    if isinstance(value, dict):
        return {key: _json_ready(item) for key, item in value.items()}
    return value.tolist() if isinstance(value, np.ndarray) else value


def _placeholder_dtype(name: str, array: np.ndarray):
    dtype = PLACEHOLDER_DTYPES.get(array.dtype.kind)
    if dtype is None:
        raise AxgraphTypeError(f"make_placeholders: array {name!r} has dtype {array.dtype}, which a "
                        f"placeholder cannot hold", user_location())
    return dtype


def _fit_length(axis: Axis, length: int, what: str) -> None:
    if axis.length is None:
        axis.length = length
    elif axis.length != length:
        raise AxisLengthError(f"axis {axis.name} has length {axis.length} but {what} is {length}")


def _feature_axes(name: str, array: np.ndarray, given: AxesLike) -> Axes:
    shape = array.shape[1:]
    if given is None:
        return Axes([make_axis(length, name=f"{name}_{dim}") for dim, length in enumerate(shape, 1)])
    given = Axes(given)
    if len(given) != len(shape):
        raise AxisLengthError(f"make_placeholders: array {name!r} has feature shape {shape} but "
                              f"{len(given)} axes were given: {given}")
    for axis, length in zip(given, shape):
        _fit_length(axis, length, f"dimension {given.index(axis) + 1} of array {name!r}")
    return given


__all__ = ["ArrayIterator", "PLACEHOLDER_DTYPES", "SINGLE_ARRAY_KEY", "SequentialArrayIterator"]
