"""Checkpoints of a whole training run, resumable to the exact losses of an unbroken one.

    run = Checkpoint(variables=model_variables, optimizer=optimizer, data=train_set,
                     rngs={"noise": rng})
    run.save("run.npz", transformer, progress={"epoch": 3})
    ...                                    # later, in a new process, the model built again
    progress = run.restore("run.npz", transformer)

A checkpoint is a variables file (module ``axgraph.serialization``: a .npz of
arrays and a JSON manifest, written atomically, never pickled, read as
untrusted) holding

* the model's variables, as ``model/<name>``;
* the optimizer's state: ``optimizer/iteration`` (the step counter, a 0-d
  int32) and ``optimizer/<name>/<slot>`` for each variable's moments,
  velocity or master copy (``Optimizer.slots``);

and, in the manifest's metadata, the data iterator's position
(``get_state``), the state of each NumPy generator in `rngs`, and a
`progress` value of your own (epoch, history, ...). With `fit`,
``CheckpointCallback`` saves the run at the end of epochs and ``fit(...,
resume=checkpoint.restore(path, transformer))`` continues it. Restoring checks
everything before it writes anything: names, axes and dtypes of the arrays,
and every field of the metadata, so a crafted or corrupt file is a
``SerializationError`` naming the path, and nothing in it can run code.

What is not saved: the streams of random ops inside the graph (``ng.uniform``,
dropout), which each computation starts from its op's seed; a resumed run that
draws from them differs from an unbroken one from the resumption on.
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence, Union

import numpy as np

from ...debug_info import user_location
from ...errors import AxgraphValueError, SerializationError
from ...op_graph.op import Op
from ...serialization import (get_values, read_manifest, restore_with_manifest, save_variables,
                              set_values)
from ...variables_file import DTYPES, shown_path
from .callbacks import Callback, FitState
from .optimizer import Optimizer

PathLike = Union[str, "os.PathLike[str]"]
#: A random-number source a checkpoint saves: a Generator or a legacy RandomState.
RandomSource = Union[np.random.Generator, np.random.RandomState]

#: The metadata's "kind" and "version": what this module writes and reads.
KIND = "axgraph-training-run"
VERSION = 1

_FIELDS = {"kind", "version", "step", "data", "rngs", "progress"}


class Checkpoint:
    """What a training run consists of, to save it and restore it exactly.

    Name the parts once; ``save`` writes their current values and ``restore``
    puts them back, so a run continued after ``restore`` computes the same
    losses as one never interrupted (random ops inside the graph aside; see
    the module docstring). Build the model, the optimizer's step op and the
    iterator as the first run did before restoring: the variables are found
    by name, the optimizer's state by the names of the variables it trains.

    Parameters
    ----------
    variables : dict of str to Op, sequence of Op, or None, default None
        The model's variables by the names to save them under (a list uses
        their op names). None: the variables `optimizer` trains, by op name.
    optimizer : Optimizer or None, default None
        The optimizer, after it built the step op (its ``slots`` and
        ``iteration``); every variable it trains must be among `variables`.
    data : ArrayIterator, SequentialArrayIterator or None, default None
        The training data, whose position (``get_state``) is saved.
    rngs : dict of str to numpy.random.Generator or RandomState, or None
        Host random streams the run draws from (noise, sampling), by name;
        restoring sets their state in place.

    Raises
    ------
    AxgraphValueError
        When there is nothing to save, the optimizer has built no step op yet
        or trains a variable that `variables` lacks, or an rng is not a
        NumPy Generator or RandomState.

    Examples
    --------
    >>> import os, tempfile, numpy as np, axgraph as ng
    >>> w = ng.variable((), initial_value=2.0, name="w")
    >>> cost = w * w
    >>> optimizer = GradientDescentMomentum(0.25, momentum_coef=0.5)
    >>> step = ng.sequential([optimizer(cost), cost])     # returns the loss before the step
    >>> path = os.path.join(tempfile.mkdtemp(), "run.npz")
    >>> with ng.NumPyTransformer() as t:
    ...     train = t.computation(step)
    ...     print([float(train()) for _ in range(2)])
    ...     _ = Checkpoint({"w": w}, optimizer).save(path, t, progress={"epoch": 1})
    ...     print([float(train()) for _ in range(2)])     # the run goes on
    [4.0, 1.0]
    [0.0, 0.25]
    >>> with ng.NumPyTransformer() as t:                   # and is resumed, momentum and all
    ...     print(Checkpoint({"w": w}, optimizer).restore(path, t))
    ...     train = t.computation(step)
    ...     print([float(train()) for _ in range(2)])
    {'epoch': 1}
    [0.0, 0.25]
    """

    def __init__(self, variables: Union[Mapping[str, Op], Sequence[Op], None] = None,
                 optimizer: Optional[Optimizer] = None, data=None,
                 rngs: Optional[Mapping[str, RandomSource]] = None):
        if optimizer is not None and optimizer.iteration is None:
            raise AxgraphValueError("Checkpoint: the optimizer has not built a step op yet; call "
                                    "it on the cost first (optimizer(cost))", user_location())
        if variables is None:
            if optimizer is None:
                raise AxgraphValueError("Checkpoint: give the variables, or an optimizer whose "
                                        "variables are saved", user_location())
            variables = list(optimizer.slots)
        self.variables: Dict[str, Op] = (dict(variables) if isinstance(variables, Mapping)
                                         else {op.name: op for op in variables})
        self.optimizer, self.data = optimizer, data
        self.rngs: Dict[str, RandomSource] = dict(rngs or {})
        for name, rng in self.rngs.items():
            if not isinstance(rng, (np.random.Generator, np.random.RandomState)):
                raise AxgraphValueError(f"Checkpoint: rng {name!r} is a {type(rng).__name__}, not "
                                        f"a numpy.random.Generator or RandomState", user_location())
        self._stored = self._stored_tensors()

    def _stored_tensors(self) -> Dict[str, Op]:
        """Every tensor saved, by its name in the file."""
        stored = {f"model/{name}": op for name, op in self.variables.items()}
        if self.optimizer is None:
            return stored
        names = {op: name for name, op in self.variables.items()}
        missing = [v.name for v in self.optimizer.slots if v not in names]
        if missing:
            raise AxgraphValueError(f"Checkpoint: the optimizer trains {missing}, which are not "
                                    f"among the variables {sorted(self.variables)}", user_location())
        assert self.optimizer.iteration is not None  # checked in __init__
        stored["optimizer/iteration"] = self.optimizer.iteration
        for variable, slots in self.optimizer.slots.items():
            for slot, tensor in slots.items():
                stored[f"optimizer/{names[variable]}/{slot}"] = tensor
        return stored

    def save(self, path: PathLike, transformer, progress: Any = None) -> Path:
        """Write the run's current state to `path` (atomically: a crash keeps the old file).

        Parameters
        ----------
        path : str or os.PathLike
            The .npz file to write (replaced if it exists).
        transformer : Transformer
            The transformer that holds the variables' values.
        progress : JSON-like value, default None
            Your own record of the run (epoch, loss history, ...): None, bool,
            int, float (NaN and infinities included), str, NumPy scalars, and
            lists, tuples and dicts with str keys of these. ``restore`` returns
            it with its types (a tuple comes back as a list).

        Returns
        -------
        pathlib.Path
            The path written.

        Raises
        ------
        SerializationError
            When the file cannot be written, a value does not fit its variable,
            or `progress` holds something else (an array, an object, a dict key
            that is not a str or starts with "$").
        """
        values = get_values(transformer, list(self._stored.values()))
        iteration = self.optimizer.iteration if self.optimizer is not None else None
        metadata = {
            "kind": KIND, "version": VERSION,
            "step": None if iteration is None else int(values[iteration]),
            "data": None if self.data is None else self.data.get_state(),
            "rngs": {name: _random_state(rng) for name, rng in self.rngs.items()},
            "progress": _encoded(progress, "progress"),
        }
        return save_variables(path, {name: op for name, op in self._stored.items()},
                              transformer, metadata=metadata)

    def restore(self, path: PathLike, transformer) -> Any:
        """Put the run saved in `path` back: variables, optimizer state, data position, rngs.

        Everything is read and checked before anything changes: a file that
        does not match this checkpoint's parts (names, axes, dtypes,
        iterator settings, generator types) or is corrupt changes nothing.

        Parameters
        ----------
        path : str or os.PathLike
            A file written by ``save``.
        transformer : Transformer
            The transformer to write the variables' values into.

        Returns
        -------
        object
            The `progress` value given to ``save``.

        Raises
        ------
        SerializationError
            When the file is missing, corrupt, not a checkpoint, or does not
            match these parts; the message names the path and the problem.
        """
        where = f"cannot restore a training run from {shown_path(path)}"
        # The metadata is checked first (a plain variables file is told so, not that its
        # names differ); the arrays come from a second opening, which must find the same file.
        metadata = _checked_metadata(read_manifest(path).get("metadata"), where)
        values, manifest = restore_with_manifest(path, self._stored, transformer=None,
                                                 strict=True)
        if manifest.get("metadata") != metadata:
            raise SerializationError(f"{where}: the file changed while it was read")
        try:
            progress = _decoded(metadata["progress"], "progress")
            self._check_parts(metadata)
            states = {name: metadata["rngs"][name] for name in self.rngs}
            scratch = {name: _copy_of(rng) for name, rng in self.rngs.items()}
            for name, rng in scratch.items():    # a bad state fails here, before any change
                _set_random_state(rng, states[name], name)
            if self.data is not None:
                saved_position = self.data.get_state()
                self.data.set_state(metadata["data"])
        except AxgraphValueError as error:
            raise SerializationError(f"{where}: {error.message}") from None
        try:
            set_values(transformer, values)
        except SerializationError:
            if self.data is not None:
                self.data.set_state(saved_position)
            raise
        for name, rng in self.rngs.items():
            _set_random_state(rng, states[name], name)
        return progress

    def _check_parts(self, metadata: dict) -> None:
        has_step, has_data = metadata["step"] is not None, metadata["data"] is not None
        if has_step != (self.optimizer is not None) or has_data != (self.data is not None) \
                or set(metadata["rngs"]) != set(self.rngs):
            saved = _parts(has_step, has_data, metadata["rngs"])
            raise AxgraphValueError(f"the file holds {saved}; this Checkpoint has "
                                    f"{_parts(self.optimizer is not None, self.data is not None, self.rngs)}")


class CheckpointCallback(Callback):
    """Saves the run with a Checkpoint at the end of every `every` epochs of `fit`.

    The progress saved is ``FitState.resume_point()`` (the next epoch, the
    step count and the history), which ``Checkpoint.restore`` returns: pass it
    to ``fit(..., resume=...)`` to continue the run where it stopped, with the
    same losses as a run never interrupted.

    Parameters
    ----------
    checkpoint : Checkpoint
        What to save.
    path : str or os.PathLike
        The file, replaced atomically at every save.
    transformer : Transformer
        The transformer that holds the run's values.
    every : int, default 1
        Save after every `every` epochs (and after the last one).

    Raises
    ------
    AxgraphValueError
        When `every` is not a positive int.

    Examples
    --------
    >>> import os, tempfile, numpy as np, axgraph as ng
    >>> data = ArrayIterator({"x": np.linspace(-1, 1, 8)}, batch_size=4, shuffle=True)
    >>> x = data.make_placeholders()["x"]
    >>> w = ng.variable((), initial_value=0.0, name="w")
    >>> loss = ng.mean(ng.square(w * x - 3 * x), out_axes=())
    >>> optimizer = Adam(0.1)
    >>> step = ng.sequential([optimizer(loss), loss])
    >>> run = Checkpoint({"w": w}, optimizer, data)
    >>> path = os.path.join(tempfile.mkdtemp(), "run.npz")
    >>> def train(epochs, resume=None):
    ...     with ng.NumPyTransformer() as t:
    ...         progress = run.restore(path, t) if resume else None
    ...         history = fit(t.computation(step, x), data, epochs, feed=lambda b: (b["x"],),
    ...                       callbacks=[CheckpointCallback(run, path, t)], resume=progress)
    ...     return [round(v, 6) for v in history["loss"]]
    >>> unbroken = train(4)
    >>> data.reset()
    >>> _ = train(2)                                   # stopped after epoch 2 ...
    >>> train(4, resume=True) == unbroken              # ... and resumed: the same losses
    True
    """

    def __init__(self, checkpoint: Checkpoint, path: PathLike, transformer, every: int = 1):
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise AxgraphValueError(f"CheckpointCallback every must be a positive int, got "
                                    f"{every!r}", user_location())
        self.checkpoint, self.path, self.transformer, self.every = (checkpoint, path, transformer,
                                                                    every)

    def on_epoch_end(self, state: FitState) -> None:
        if (state.epoch + 1) % self.every == 0 or state.epoch + 1 == state.epochs \
                or state.stop_training:
            self.checkpoint.save(self.path, self.transformer, progress=state.resume_point())


def _parts(optimizer: bool, data: bool, rngs) -> str:
    named = ["variables"] + (["an optimizer"] if optimizer else []) + (
        ["a data iterator"] if data else []) + [f"rng {name!r}" for name in sorted(rngs)]
    return ", ".join(named)


# -- random states ------------------------------------------------------------------------


def _plain(value):
    """A random state with its arrays as lists (what JSON holds; the setters take lists)."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value.tolist() if isinstance(value, np.ndarray) else value


def _random_state(rng: RandomSource) -> dict:
    if isinstance(rng, np.random.Generator):
        return {"type": "Generator", "state": _plain(rng.bit_generator.state)}
    return {"type": "RandomState", "state": _plain(rng.get_state(legacy=False))}


def _copy_of(rng: RandomSource) -> RandomSource:
    """A generator of the same kind, to try a state on before setting it on `rng`."""
    if isinstance(rng, np.random.Generator):
        return np.random.Generator(type(rng.bit_generator)())
    return np.random.RandomState()


def _set_random_state(rng: RandomSource, saved: dict, name: str) -> None:
    kind = "Generator" if isinstance(rng, np.random.Generator) else "RandomState"
    if saved["type"] != kind:
        raise AxgraphValueError(f"rng {name!r} is a {kind}, but the file holds a "
                                f"{str(saved['type'])[:40]}")
    try:
        if isinstance(rng, np.random.Generator):
            rng.bit_generator.state = saved["state"]
        else:
            rng.set_state(saved["state"])
    except (KeyError, IndexError, ValueError, TypeError, OverflowError) as error:
        raise AxgraphValueError(f"rng {name!r}: the file's state does not fit it: "
                                f"{type(error).__name__}: {str(error)[:200]}") from None


# -- the metadata -------------------------------------------------------------------------


def _checked_metadata(metadata, where: str) -> dict:
    """The metadata's fields, each of the type ``save`` writes, or a SerializationError."""
    if not isinstance(metadata, dict) or metadata.get("kind") != KIND:
        raise SerializationError(f"{where}: it is a variables file, not a training checkpoint "
                                 f"(no {KIND!r} metadata)")
    problem = None
    if set(metadata) != _FIELDS:
        problem = f"its metadata has fields {sorted(metadata)[:10]}, not {sorted(_FIELDS)}"
    elif metadata["version"] != VERSION or isinstance(metadata["version"], bool):
        problem = f"it has version {str(metadata['version'])[:20]}; this axgraph reads {VERSION}"
    elif metadata["step"] is not None and (not isinstance(metadata["step"], int)
                                           or isinstance(metadata["step"], bool)):
        problem = "its step is not an int"
    elif metadata["data"] is not None and not isinstance(metadata["data"], dict):
        problem = "its data state is not an object"
    elif not isinstance(metadata["rngs"], dict) or not all(
            isinstance(s, dict) and set(s) == {"type", "state"} for s in metadata["rngs"].values()):
        problem = "its rngs are not objects with a type and a state"
    if problem:
        raise SerializationError(f"{where}: {problem}")
    return metadata


#: How values JSON lacks are written: {"$float": "nan"} and {"$numpy": [dtype, value]}.
_FLOAT, _NUMPY = "$float", "$numpy"
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _encoded(value, where: str):
    """`value` in JSON's terms, marking what JSON lacks (non-finite floats, NumPy scalars)."""
    if isinstance(value, np.generic) and value.dtype.str in DTYPES and value.dtype.kind in "biuf":
        # first: numpy.float64 is also a float
        return {_NUMPY: [value.dtype.str, _encoded(value.item(), where)]}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {_FLOAT: repr(float(value))}
    if isinstance(value, (list, tuple)):
        return [_encoded(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, dict):
        bad = [key for key in value if not isinstance(key, str) or key.startswith("$")]
        if bad:
            raise SerializationError(f"Checkpoint.save: {where} has key {bad[0]!r}; keys are "
                                     f"str not starting with '$'")
        return {key: _encoded(item, f"{where}[{key!r}]") for key, item in value.items()}
    raise SerializationError(f"Checkpoint.save: {where} is a {type(value).__name__}; progress "
                             f"holds None, bool, int, float, str, NumPy scalars, lists and dicts "
                             f"(save arrays as variables)")


def _decoded(value, where: str):
    """The value `_encoded` made, checked: anything else is an AxgraphValueError."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [_decoded(item, where) for item in value]
    if not isinstance(value, dict):
        raise AxgraphValueError(f"{where} holds a {type(value).__name__}")
    if set(value) == {_FLOAT} and value[_FLOAT] in _NON_FINITE:
        return _NON_FINITE[value[_FLOAT]]
    if set(value) == {_NUMPY}:
        return _numpy_scalar(value[_NUMPY], where)
    if any(key.startswith("$") for key in value):
        raise AxgraphValueError(f"{where} holds an object with the unknown marker "
                                f"{sorted(value)[0][:40]!r}")
    return {key: _decoded(item, where) for key, item in value.items()}


def _numpy_scalar(pair, where: str):
    if not (isinstance(pair, list) and len(pair) == 2 and pair[0] in DTYPES
            and DTYPES[pair[0]].kind in "biuf"):
        raise AxgraphValueError(f"{where} holds a malformed NumPy scalar {str(pair)[:60]}")
    dtype, number = DTYPES[pair[0]], _decoded(pair[1], where)
    if isinstance(number, (list, dict)) or number is None or isinstance(number, str):
        raise AxgraphValueError(f"{where} holds a NumPy scalar of {dtype} that is not a number")
    with np.errstate(all="ignore"):
        scalar = np.array(number).astype(dtype)[()]
    if not (scalar == number or (math.isnan(float(scalar)) and math.isnan(float(number)))):
        raise AxgraphValueError(f"{where} holds {str(number)[:40]}, which a {dtype} cannot hold")
    return scalar


__all__ = ["Checkpoint", "CheckpointCallback"]

