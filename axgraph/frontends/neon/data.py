"""Minibatches from in-memory arrays (neon's ArrayIterator).

    train = ArrayIterator({"image": X, "label": y}, batch_size=32, shuffle=True)
    inputs = train.make_placeholders()          # {"image": [N, image_1], "label": [N]}
    for batch in train:                          # one epoch
        step(batch["image"], batch["label"])

Examples lie along dimension 0 of every array, and each batch keeps that
layout, so a batch feeds the placeholders of `make_placeholders` (axes
``[N] + feature axes``) as it is.

The final partial batch wraps around, as in neon: every batch holds exactly
`batch_size` examples (so the batch axis N has one length), and a batch that
runs past the end of the data is completed from the start of the next pass
(the next permutation when shuffling). The position carries over from one
epoch to the next, so over many epochs every example is used equally often.
`reset()` goes back to the state right after construction.
"""
from __future__ import annotations

import math
from typing import Dict, Iterator, Mapping, Optional, Sequence, Union

import numpy as np

from ...axes import Axes, AxesLike, Axis, make_axis
from ...errors import AxisLengthError
from ...op_graph.tensors import AssignableTensorOp, placeholder

#: The name a single array (rather than a dict of arrays) gets.
SINGLE_ARRAY_KEY = "x"

#: Placeholder element type for each kind of array data (float data becomes float32).
PLACEHOLDER_DTYPES = {"f": np.float32, "i": np.int32, "u": np.int32, "b": np.bool_}


class ArrayIterator:
    """Iterates over minibatches of named arrays; one ``for`` loop is one epoch.

    Args:
        data: a dict name -> array with examples along dim 0, or one array
            (named ``SINGLE_ARRAY_KEY``).
        batch_size: examples per batch (every batch is full; see the module docstring).
        total_iterations: batches per epoch; by default ``nbatches``, one pass
            over the data.
        shuffle: visit the examples in a new random order on every pass.
        seed: seed of the shuffling stream.
    """

    def __init__(self, data: Union[Mapping[str, np.ndarray], np.ndarray], batch_size: int,
                 total_iterations: Optional[int] = None, shuffle: bool = False, seed: int = 0):
        arrays = dict(data) if isinstance(data, Mapping) else {SINGLE_ARRAY_KEY: data}
        if not arrays:
            raise ValueError("ArrayIterator needs at least one array")
        self.data: Dict[str, np.ndarray] = {name: np.asarray(a) for name, a in arrays.items()}
        counts = {name: (a.shape[0] if a.ndim else None) for name, a in self.data.items()}
        if None in counts.values() or len(set(counts.values())) != 1:
            raise ValueError(f"ArrayIterator: every array needs the same number of examples along "
                             f"dim 0; got {counts}")
        self.ndata: int = next(n for n in counts.values() if n is not None)  # all equal
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
                or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        if batch_size > self.ndata:
            raise ValueError(f"batch_size {batch_size} is larger than the {self.ndata} examples")
        self.batch_size = int(batch_size)
        if total_iterations is not None and (isinstance(total_iterations, bool)
                                             or int(total_iterations) < 1):
            raise ValueError(f"total_iterations must be a positive int, got {total_iterations!r}")
        self.total_iterations = self.nbatches if total_iterations is None else int(total_iterations)
        self.shuffle = bool(shuffle)
        self.seed = seed
        self.reset()

    @property
    def nbatches(self) -> int:
        """Batches in one pass over the data: ceil(ndata / batch_size)."""
        return math.ceil(self.ndata / self.batch_size)

    def __len__(self) -> int:
        """Batches per epoch (``total_iterations``)."""
        return self.total_iterations

    def reset(self) -> None:
        """Back to the first example, and restart the shuffling stream from `seed`."""
        self._rng = np.random.default_rng(self.seed)
        self._order = self._new_order()
        self._position = 0
        self.epoch = 0

    def _new_order(self) -> np.ndarray:
        return self._rng.permutation(self.ndata) if self.shuffle else np.arange(self.ndata)

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

    def __iter__(self) -> Iterator[Dict[str, np.ndarray]]:
        """One epoch: `total_iterations` dicts name -> batch array (copies)."""
        for _ in range(self.total_iterations):
            indices = self._next_indices()
            yield {name: np.take(array, indices, axis=0) for name, array in self.data.items()}
        self.epoch += 1

    def make_placeholders(self, batch_axis: Optional[Axis] = None,
                          axes: Optional[Mapping[str, Sequence[Axis]]] = None,
                          ) -> Dict[str, AssignableTensorOp]:
        """A placeholder per array, with axes [N] + feature axes, fed by a batch as is.

        `batch_axis` defaults to a new axis named 'N' (so it is the batch axis)
        of length `batch_size`. `axes` may name the feature axes of some arrays
        ({name: [axes]}); the others get new axes named '<name>_<dim>'. The
        element type follows ``PLACEHOLDER_DTYPES``.
        """
        axes = dict(axes or {})
        unknown = set(axes) - set(self.data)
        if unknown:
            raise ValueError(f"make_placeholders: axes given for {sorted(unknown)}, which are not "
                             f"arrays of this iterator ({sorted(self.data)})")
        if batch_axis is None:
            batch_axis = make_axis(self.batch_size, name="N")
        _fit_length(batch_axis, self.batch_size, "the batch size")
        result = {}
        for name, array in self.data.items():
            features = _feature_axes(name, array, axes.get(name))
            dtype = PLACEHOLDER_DTYPES.get(array.dtype.kind)
            if dtype is None:
                raise TypeError(f"make_placeholders: array {name!r} has dtype {array.dtype}, "
                                f"which a placeholder cannot hold")
            result[name] = placeholder(Axes([batch_axis]) + features, dtype=dtype, name=name)
        return result


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


__all__ = ["ArrayIterator", "PLACEHOLDER_DTYPES", "SINGLE_ARRAY_KEY"]
