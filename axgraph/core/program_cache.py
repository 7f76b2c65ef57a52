"""The cache of programs a specialising backend keeps, one per binding of the size variables.

The cpu and jax backends build a program per binding (the values `Function.bind` gives a
call's arguments), keep the most recently used few, and report them in `cache_info()`:
the counting, the order and the eviction are this one class's.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Dict, Generic, Optional, Tuple, TypeVar

import numpy as np

from ..debug_info import user_location
from ..errors import AxgraphTypeError, AxgraphValueError
from .backend import CacheInfo

P = TypeVar("P")
Key = Tuple[Tuple[str, int], ...]


#: Programs kept per compiled function, one per binding of its size variables, unless
#: `cache_size=` says otherwise: enough for the few batch lengths of a training loop (the
#: full batches, the last partial one, an evaluation batch) with room to spare.
CACHE_SIZE = 8


def checked_cache_size(cache_size: Optional[int]) -> Optional[int]:
    """`cache_size` if it is a valid size for the cache of programs per binding.

    Parameters
    ----------
    cache_size : int or None
        The most programs to keep (at least 1), or None for no limit.

    Returns
    -------
    int or None
        `cache_size`, unchanged.

    Raises
    ------
    AxgraphTypeError
        `cache_size` is not an int (a bool is not one) nor None.
    AxgraphValueError
        `cache_size` is below 1.
    """
    if cache_size is None:
        return None
    if isinstance(cache_size, bool) or not isinstance(cache_size, (int, np.integer)):
        raise AxgraphTypeError(f"cache_size is the number of programs a compiling backend "
                               f"keeps, one per binding of the size variables: an int >= 1, or None for no "
                               f"limit; not {type(cache_size).__name__} {cache_size!r:.40}",
                               user_location())
    if cache_size < 1:
        raise AxgraphValueError(f"cache_size={cache_size}: a compiling backend keeps at least "
                                f"the program it is running, so cache_size must be >= 1 (or None "
                                f"for no limit)", user_location())
    return int(cache_size)


class ProgramCache(Generic[P]):
    """Programs by binding, the least recently used dropped first, with hit/miss counts.

    Parameters
    ----------
    build : callable
        ``build(bindings) -> program``, called on a miss.
    maxsize : int or None, optional
        The most programs kept (checked by `checked_cache_size`; None: no limit).
    on_evict : callable, optional
        ``on_evict(key, program)``, called after a program is dropped (to release what
        refers to it).
    """

    def __init__(self, build: Callable[[Dict[str, int]], P],
                 maxsize: Optional[int] = CACHE_SIZE,
                 on_evict: Optional[Callable[[Key, P], None]] = None):
        self.build = build
        self.maxsize = checked_cache_size(maxsize)
        self.on_evict = on_evict
        #: Binding (sorted items) -> its program, least recently used first.
        self.programs: "OrderedDict[Key, P]" = OrderedDict()
        self.hits = self.misses = 0
        #: The program of the last call (the most recently used).
        self.last: Optional[P] = None

    @staticmethod
    def key(bindings: Dict[str, int]) -> Key:
        """The cache key of `bindings`: its items, sorted."""
        return tuple(sorted(bindings.items()))

    def get(self, bindings: Dict[str, int]) -> P:
        """The program for `bindings` (built on a miss), now the most recently used."""
        key = self.key(bindings)
        program = self.programs.get(key)
        if program is None:
            self.misses += 1
            program = self.programs[key] = self.build(dict(bindings))
            if self.maxsize is not None and len(self.programs) > self.maxsize:
                old_key, old = self.programs.popitem(last=False)
                if self.on_evict is not None:
                    self.on_evict(old_key, old)
            self.last = program
        else:
            self.hit(key, program)
        return program

    def hit(self, key: Key, program: P) -> None:
        """Count a call that found `program` (under `key`) by a faster route; it becomes the
        most recently used."""
        self.hits += 1
        if program is not self.last:  # else already the most recently used
            self.programs.move_to_end(key)
            self.last = program

    def hit_last(self) -> P:
        """Count a call that runs the last program again (found by the caller's own check
        that its binding is unchanged), and return that program."""
        assert self.last is not None, "hit_last before any program was built"
        self.hits += 1
        return self.last

    def peek(self, bindings: Dict[str, int]) -> Optional[P]:
        """The program kept for `bindings`, if any, without counting or reordering."""
        return self.programs.get(self.key(bindings))

    def info(self) -> CacheInfo:
        """The counts and the bindings kept, least recently used first (`CacheInfo`)."""
        return CacheInfo(hits=self.hits, misses=self.misses, maxsize=self.maxsize,
                         currsize=len(self.programs),
                         keys=tuple(dict(key) for key in self.programs))
