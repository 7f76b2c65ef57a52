"""Backends: the protocol that runs core Functions, and the one registry of them.

A backend compiles a Function into an Executable:

    executable = backend.compile(function, **options)
    results = executable(*arrays, out=None, donate=None)

`out` is None or one entry per result: the caller's array to write that
result into, or None for a fresh array. `donate` ({result: argument}) lets a
result overwrite an argument array the caller no longer needs; it is a
permission, never a request. What a backend actually does with them is
declared in its `Capabilities`, so callers (the lowering transformer) never
probe for attributes. Every backend binds sizes the same way, through
`Function.bind` (`bind_arguments` does it with the argument checks), and
says what that cost it in `executable.cache_info()`: how many calls found
their program ready and which bindings of the size variables it holds a
program for (a backend that specialises per binding, as "cpu" does, keeps a
bounded cache of them; one that evaluates sizes per call keeps none).

`core.compile(function, backend=name)` and `ng.make_transformer(name)` both
find backends here: registering one (`register_backend`) makes it usable
from the core API and, lowered from axes graphs, as a transformer.
"""
from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from typing import (Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Protocol, Sequence,
                    Tuple, Union, runtime_checkable)

import numpy as np

from ..debug_info import user_location
from ..errors import AxgraphTypeError, AxgraphValueError, FeedError, ShapeError
from .function import Function, parameter_signature


@dataclass(frozen=True)
class Capabilities:
    """What a backend's executables do with the optional arguments of a call.

    Declared by each backend (its `capabilities`), never probed, so that a caller
    such as the lowering transformer knows whether passing `out=` or `donate=` is
    worth anything.

    Parameters
    ----------
    donation : bool, optional
        Whether results are written over donated argument arrays where the
        program allows it (default False: `donate=` is accepted and ignored).
    caller_outputs : bool, optional
        Whether results are computed straight into the caller's `out=` arrays
        (None entries get fresh arrays) instead of being copied there afterwards
        (default False): worth passing `out` along.
    """

    donation: bool = False
    caller_outputs: bool = False


class CacheInfo(NamedTuple):
    """What an executable's cache of per-binding programs holds, and how calls fared.

    A backend that compiles a program per binding of the size variables (the
    values `Function.bind` gives for one call's arguments) counts each call
    that found its program ready as a hit and each call that had to build one
    as a miss, and keeps at most `maxsize` programs, dropping the least
    recently used. A backend that evaluates sizes per call (the interpreter,
    the NumPy reference) runs every binding with the one program made at
    compile time: it reports `maxsize` 0 and no keys, and counts every call
    as a hit (nothing was built for it).

    Attributes
    ----------
    hits : int
        Calls that ran a program already built.
    misses : int
        Calls that built (compiled) a program for a new binding.
    maxsize : int or None
        The most programs kept (None: no limit; 0: the backend does not
        specialise, one program serves every binding).
    currsize : int
        The programs kept now.
    keys : tuple of dict of str to int
        The binding of each program kept (``{"N": 32}``; ``{}`` for a function
        without size variables), least recently used first.

    Examples
    --------
    >>> import numpy as np
    >>> from axgraph import core
    >>> x = core.Parameter(core.f32, ("N",))
    >>> square = core.compile(core.Function([core.Multiply(x, x)], [x]), backend="cpu")
    >>> for n in (2, 3, 2):
    ...     _ = square(np.ones(n, np.float32))
    >>> square.cache_info()
    CacheInfo(hits=1, misses=2, maxsize=8, currsize=2, keys=({'N': 3}, {'N': 2}))
    """

    hits: int
    misses: int
    maxsize: Optional[int]
    currsize: int
    keys: Tuple[Dict[str, int], ...]


def unspecialized_cache_info(calls: int) -> CacheInfo:
    """The `CacheInfo` of an executable whose one program serves every binding.

    Parameters
    ----------
    calls : int
        The calls it has run (each a hit: nothing was built for it).

    Returns
    -------
    CacheInfo
        `calls` hits, no misses, `maxsize` 0 and no keys.
    """
    return CacheInfo(hits=calls, misses=0, maxsize=0, currsize=0, keys=())


class Executable(Protocol):
    """A compiled Function: call it on one array per parameter, get one array per result.

    `executable(*arrays, out=None, donate=None)` checks the arrays against the
    parameters (element types exactly, shapes binding the size variables) and
    returns a tuple of result arrays. `out` is None or one entry per result: the
    caller's array to write that result into, or None for a fresh array. `donate`
    ({result position: argument position}) lets a result overwrite an argument array
    the caller no longer needs: a permission, never a request. A bad argument
    raises FeedError, a failure while running ExecutionError.

    `executable.cache_info()` reports the programs it built per binding of the
    size variables (see `CacheInfo`); the lowering transformer's
    `computation.cache_info()` asks it.
    """

    def __call__(self, *arrays: np.ndarray, out: Any = None,
                 donate: Optional[Mapping[int, int]] = None) -> Tuple[np.ndarray, ...]:
        ...

    def cache_info(self) -> CacheInfo:
        """The calls that found their program built, those that built one, and the
        bindings programs are kept for (`CacheInfo`)."""
        ...


@runtime_checkable
class Backend(Protocol):
    """Compiles core Functions into Executables. Subclass it to inherit the defaults.

    A backend declares its `capabilities` and provides `compile(function,
    **options)`, whose keyword arguments are its own options (`fuse=`,
    `engine=`, ...); `passes()` lists the rewrites it wants after the default
    pipeline. Register one with `register_backend` to use it from `compile` and
    as a transformer.
    """

    #: Declared, never probed: see Capabilities.
    capabilities: Capabilities = Capabilities()

    #: `compile(function, **options) -> Executable`: `function` ready to call. The options
    #: are the backend's own keyword arguments (fuse=, engine=, ...); its signature says
    #: which, and a transformer checks the options given against it.
    compile: Callable[..., Executable]

    def passes(self) -> List[Any]:
        """Rewrites this backend wants after the default pipeline (none by default)."""
        return []


# -- the registry -----------------------------------------------------------------------------

_BACKENDS: Dict[str, Union[str, Backend]] = {
    "interpreter": "axgraph.core.interpreter:InterpreterBackend",
    "cpu": "axgraph.transformers.cpu.backend:CpuBackend",
    "jax": "axgraph.transformers.jax.backend:JaxBackend",
}


def register_backend(name: str, backend: Union[str, Backend, type]) -> None:
    """Make `core.compile(f, backend=name)` and `ng.make_transformer(name)` use `backend`.

    A "module:attribute" string is imported on first use, so that registering
    costs nothing until then. Registering an existing name replaces its backend.

    Parameters
    ----------
    name : str
        The name callers pass as `backend=` (and to `make_transformer`).
    backend : Backend, Backend class or str
        A Backend, a class of one (made with no arguments), or a
        "module:attribute" string naming either.

    Raises
    ------
    AxgraphTypeError
        `name` is not a non-empty string, or `backend` (not a path string) is not
        a Backend: an object with `compile` and `capabilities`, or its class.
    """
    if not isinstance(name, str) or not name:
        raise AxgraphTypeError(f"a backend name must be a non-empty string, not {name!r}",
                               user_location())
    is_path = isinstance(backend, str) and backend.count(":") == 1
    _BACKENDS[name] = backend if is_path else _instance(name, backend)  # type: ignore[assignment]  # a path string is kept as it is


def backends() -> List[str]:
    """The names `compile` (and `make_transformer`) accept as backends.

    Returns
    -------
    list of str
        Every registered backend name, sorted.
    """
    return sorted(_BACKENDS)


def get_backend(name: str) -> Backend:
    """The backend registered under `name`, imported and made on first use.

    Parameters
    ----------
    name : str
        A registered name (see `backends()`).

    Returns
    -------
    Backend
        The backend; the same object on every call.

    Raises
    ------
    AxgraphValueError
        No backend is registered under `name`.
    AxgraphTypeError
        What a "module:attribute" registration names is not a Backend or its class.
    """
    try:
        entry = _BACKENDS[name]
    except (KeyError, TypeError):
        raise AxgraphValueError(f"no core backend named {name!r}; choose one of {backends()}",
                                user_location()) from None
    if isinstance(entry, str):
        module_name, attribute = entry.split(":")
        entry = _BACKENDS[name] = _instance(
            name, getattr(importlib.import_module(module_name), attribute))
    return entry


def _instance(name: str, backend) -> Backend:
    if isinstance(backend, type):
        backend = backend()
    if not (isinstance(backend, Backend) and isinstance(backend.capabilities, Capabilities)):
        raise AxgraphTypeError(f"register_backend({name!r}, ...) takes a Backend (an object "
                               f"with compile(function, **options) and capabilities), its "
                               f"class, or a 'module:attribute' string; not {backend!r}",
                               user_location())
    return backend


def compile(function: Function, backend: str = "interpreter", **options: Any) -> Executable:
    """`function` ready to call on row-major NumPy arrays: `fn(*arrays, out=None)`.

    Parameters
    ----------
    function : Function
        The function to compile.
    backend : str, optional
        The name of a registered backend (default "interpreter", the reference).
    **options
        The backend's own keyword arguments (the cpu backend's `fuse=`, ...).

    Returns
    -------
    Executable
        A callable taking one array per parameter (of exactly its element type)
        and returning a tuple of one array per result.

    Raises
    ------
    AxgraphTypeError
        `function` is not a core Function.
    AxgraphValueError
        No backend is registered under `backend`.
    AxgraphTypeError
        The backend's compile does not take one of `options`; the message lists those
        it takes.

    Examples
    --------
    >>> import numpy as np
    >>> from axgraph import core
    >>> x = core.Parameter(core.f32, ("N",))
    >>> f = core.Function([core.Multiply(x, x)], [x])
    >>> (squares,) = core.compile(f)(np.array([1, 2, 3], np.float32))
    >>> squares.tolist()
    [1.0, 4.0, 9.0]
    """
    if not isinstance(function, Function):
        raise AxgraphTypeError(f"compile() takes a core Function, not "
                               f"{type(function).__name__}", user_location())
    chosen = get_backend(backend)
    check_options(chosen, options, f"compile(backend={backend!r})")
    return chosen.compile(function, **options)


def check_options(backend: "Backend", options: Mapping[str, Any], caller: str) -> None:
    """Refuse options that `backend.compile` does not take, before anything is built.

    Parameters
    ----------
    backend : Backend
        The backend whose compile will be called.
    options : mapping of str to object
        The keyword arguments meant for it.
    caller : str
        How the user called it, for the message (``make_transformer('cpu')``).

    Raises
    ------
    AxgraphTypeError
        An option the backend's compile does not take, naming the options it does take.
    """
    signature = inspect.signature(backend.compile)
    try:
        signature.bind(None, **options)
    except TypeError as error:
        raise AxgraphTypeError(f"{caller}: {error}; the backend's compile takes {signature}",
                               user_location()) from None


# -- what every backend does with a call's arguments ----------------------------------------------

def bind_arguments(function: Function, arrays: Sequence
                   ) -> Tuple[Tuple[np.ndarray, ...], Dict[str, int]]:
    """The arguments of a call checked against `function`'s parameters, and the sizes they bind.

    What every backend does first with a call's arguments: their count, that each
    is a NumPy array, and its element type exactly (nothing is converted); then
    the size variables of the parameters' shapes are bound from the arrays'
    shapes (`Function.bind`).

    Parameters
    ----------
    function : Function
        The function being called.
    arrays : sequence of numpy.ndarray
        One array (or NumPy scalar) per parameter, in order.

    Returns
    -------
    arrays : tuple of numpy.ndarray
        The arguments, as arrays.
    bindings : dict of str to int
        The value of each size variable.

    Raises
    ------
    FeedError
        The number of arrays is not the number of parameters; an argument is not
        a NumPy array or does not have its parameter's element type; or the
        shapes do not fit the parameters' (a rank, a dim, or two values for one
        size variable). It names the parameter and the user's line.
    """
    parameters = function.parameters
    if len(arrays) != len(parameters):
        raise FeedError(f"{function.name} takes {len(parameters)} argument(s) "
                        f"({', '.join(parameter_signature(p) for p in parameters)}); got "
                        f"{len(arrays)}", user_location())
    checked = []
    for index, (array, parameter) in enumerate(zip(arrays, parameters)):
        if not isinstance(array, (np.ndarray, np.generic)):
            raise FeedError(f"{function.describe_parameter(index)} takes a NumPy array; got "
                            f"{type(array).__name__} {array!r:.40}", user_location())
        array = np.asarray(array)
        if array.dtype != parameter.element_type.dtype:
            raise FeedError(f"{function.describe_parameter(index)} takes "
                            f"{parameter.type_str()}; got {array.dtype} {array.shape} (element "
                            f"types are never converted: use array.astype("
                            f"{parameter.element_type.dtype}))", user_location())
        checked.append(array)
    try:
        bindings = function.bind([a.shape for a in checked])
    except ShapeError as error:
        raise FeedError(error.message, user_location()) from None
    return tuple(checked), bindings


def checked_outs(function: Function, out, arguments: Sequence[np.ndarray],
                 shapes: Sequence[Tuple[int, ...]]) -> Tuple[Optional[np.ndarray], ...]:
    """The caller's `out=` for a call of `function` (`check_out_arrays`), its results of
    these concrete `shapes`, its arguments named as `function` describes them."""
    return check_out_arrays(
        out, [(node.name, node.element_type.dtype, shape)
              for node, shape in zip(function.results, shapes)],
        arguments, function.describe_parameter)


def check_out_arrays(out, results: Sequence[Tuple[str, Any, Sequence[Optional[int]]]],
                     arguments: Sequence[Any] = (),
                     describe_argument: Callable[[int], str] = "argument {}".format
                     ) -> Tuple[Optional[np.ndarray], ...]:
    """The caller's `out=`, one entry per result (None: a fresh array), checked before
    anything runs: each a writeable array of its result's dtype and shape, none sharing
    memory with an argument or with another result array. The one check of `out=` of
    every backend and transformer.

    Parameters
    ----------
    out : numpy.ndarray or sequence of (numpy.ndarray or None)
        The caller's arrays; one array alone stands for a sequence of one.
    results : sequence of (str, numpy.dtype or None, sequence of int or None)
        Per result: its name, its dtype (None: it has no value, so no array may be
        given) and its shape (a None dim: any length).
    arguments : sequence, optional
        The values the call reads, which no result array may share memory with.
    describe_argument : callable, optional
        The name of argument i, for messages.

    Returns
    -------
    tuple of (numpy.ndarray or None)
        `out` as a tuple with one entry per result.

    Raises
    ------
    FeedError
        `out` has another number of entries than there are results, or an entry is
        not a writeable array of its result's dtype and shape, or shares memory with
        an argument or another entry; named with the caller's line.
    """
    out = (out,) if isinstance(out, np.ndarray) else tuple(out)
    if len(out) != len(results):
        raise FeedError(f"out= has {len(out)} array(s) for {len(results)} result(s)",
                        user_location())
    for k, (array, (name, dtype, shape)) in enumerate(zip(out, results)):
        if array is None:
            continue
        if not isinstance(array, np.ndarray):
            raise FeedError(f"out[{k}] must be a NumPy array, not {type(array).__name__}",
                            user_location())
        if dtype is None:
            raise FeedError(f"result {k} ({name}) has no value to write into out[{k}]: give "
                            f"None there", user_location())
        if array.dtype != dtype or len(array.shape) != len(shape) or any(
                d is not None and d != n for d, n in zip(shape, array.shape)):
            raise FeedError(f"out[{k}] is {array.dtype}{list(array.shape)}, but result {k} "
                            f"({name}) is {np.dtype(dtype)}{list(shape)}", user_location())
        if not array.flags.writeable:
            raise FeedError(f"out[{k}] is read-only", user_location())
        for index, argument in enumerate(arguments):
            if isinstance(argument, np.ndarray) and np.may_share_memory(array, argument):
                raise FeedError(f"out[{k}] is (or overlaps) the array of "
                                f"{describe_argument(index)}: argument arrays cannot be used "
                                f"as result arrays", user_location())
        for j in range(k):
            if out[j] is not None and np.may_share_memory(array, out[j]):
                raise FeedError(f"out[{k}] and out[{j}] share memory: each result needs a "
                                f"distinct array", user_location())
    return out
