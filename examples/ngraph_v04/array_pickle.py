"""Reading pickled data sets (mnist.pkl.gz, CIFAR-10's batches) without letting them run code.

A pickle names the functions that rebuild its objects, and ``pickle.load`` calls
whatever it names: a crafted ``mnist.pkl.gz`` could run any command. The data
sets hold only NumPy arrays of numbers and builtin numbers, strings, lists,
tuples and dicts, so `load_arrays` lets a file name only the few functions that
rebuild those and refuses anything else before it is called.
"""
from __future__ import annotations

import pickle
from typing import IO, Any, Callable, Dict, Tuple

import numpy as np


class RefusedPickleError(pickle.UnpicklingError):
    """A pickle asks for something an array data set never holds (it may be crafted)."""


def _plain_dtype(*args, **kwargs) -> np.dtype:
    """``np.dtype`` for element types of plain data: an object dtype would unpickle
    arbitrary objects into the array, so it is refused."""
    dtype = np.dtype(*args, **kwargs)
    if dtype.hasobject:
        raise RefusedPickleError(f"refusing an array of Python objects (dtype {dtype}); the "
                                 f"data sets hold numbers")
    return dtype


def _latin1_bytes(text: str, encoding: str = "latin1") -> bytes:
    """How protocols 0-2 write ``bytes`` (``_codecs.encode(text, "latin1")``); any other
    codec is refused."""
    if encoding not in ("latin1", "latin-1") or not isinstance(text, str):
        raise RefusedPickleError(f"refusing _codecs.encode with encoding {encoding!r}")
    return text.encode("latin1")


def _array_functions() -> Dict[Tuple[str, str], Callable]:
    """Every (module, name) a pickle of plain arrays names, in NumPy 1 and 2 spellings,
    mapped to this NumPy's object. The rebuilding functions are found through
    ``ndarray.__reduce_ex__`` itself, so no private module is imported by name."""
    probe = np.zeros(1)
    reconstruct = probe.__reduce_ex__(2)[0]
    from_buffer = probe.__reduce_ex__(5)[0]
    allowed: Dict[Tuple[str, str], Callable] = {("numpy", "ndarray"): np.ndarray,
                                                ("numpy", "dtype"): _plain_dtype,
                                                ("_codecs", "encode"): _latin1_bytes}
    for package in ("numpy.core", "numpy._core"):
        allowed[(f"{package}.multiarray", "_reconstruct")] = reconstruct
        allowed[(f"{package}.numeric", "_frombuffer")] = from_buffer
    for module in ("builtins", "__builtin__"):   # Python 3 and Python 2 spellings
        for kind in (tuple, list, dict, str, bytes, int, float):
            allowed[(module, kind.__name__)] = kind
    return allowed


_ALLOWED = _array_functions()


class ArrayUnpickler(pickle.Unpickler):
    """An Unpickler that resolves only the names in `_ALLOWED` (see `load_arrays`)."""

    def __init__(self, file: IO[bytes], source: str):
        super().__init__(file, encoding="latin1")   # Python 2 pickles of str and arrays
        self.source = source

    def find_class(self, module: str, name: str) -> Any:
        """The allowed object for ``module.name``; anything else raises RefusedPickleError."""
        found = _ALLOWED.get((module, name))
        if found is None:
            raise RefusedPickleError(
                f"{self.source}: refusing to load {module}.{name}: the file may hold only "
                f"NumPy arrays of numbers and numbers, strings, lists, tuples and dicts "
                f"(a pickle can name any function to call, so nothing else is loaded)")
        return found


def load_arrays(file: IO[bytes], source: str) -> Any:
    """The object pickled in the open binary `file`, allowed to hold only NumPy arrays of
    numbers and builtin numbers, strings, bytes, lists, tuples and dicts.

    Parameters
    ----------
    file
        An open binary file (or gzip stream) positioned at the pickle.
    source
        What to call the file in errors (its path).

    Returns
    -------
    object
        The unpickled object.

    Raises
    ------
    RefusedPickleError
        If the pickle names any other function or class (nothing it names is called),
        or holds an array of Python objects.
    """
    try:
        return ArrayUnpickler(file, source).load()
    except RefusedPickleError as error:
        if str(error).startswith(source):
            raise
        raise RefusedPickleError(f"{source}: {error}") from None
