"""Where Nervana Graph v0.4's training callbacks keep their history.

The callbacks write named datasets ("cost/train", "time/loss", ...) with
attributes into one store, as v0.4 did into an HDF5 file:

* with h5py installed (``pip install axgraph[h5]``), the store is an
  ``h5py.File``: the `output_file` when one is given (replaced if it
  exists), else an in-memory HDF5 file;
* without h5py, the store is `MemoryGroup`, which holds the same datasets
  as NumPy arrays in memory; asking for an `output_file` then raises, since
  nothing could write it.

h5py is imported only here, and only when a store is opened.
"""
from __future__ import annotations

import itertools
import os
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np

from ...debug_info import user_location
from ...errors import AxgraphError, AxgraphValueError

_store_serials = itertools.count()


class CallbackDataError(AxgraphError, RuntimeError):
    """The callbacks' history cannot be stored where it was asked to go."""


class MemoryDataset(np.ndarray):
    """A NumPy array with an ``attrs`` dict, like an h5py dataset."""

    attrs: Dict[str, Any]

    def __array_finalize__(self, obj) -> None:
        self.attrs = getattr(obj, "attrs", {})


class MemoryGroup:
    """The part of h5py's Group the callbacks use: nested groups, datasets, attrs.

    The store the callbacks write to when h5py is not installed. Paths are
    "/"-separated as in HDF5 (``group["cost/train"]``); missing groups on
    the way are made by ``create_group`` and ``create_dataset``. Takes no
    arguments.
    """

    def __init__(self):
        self.attrs: Dict[str, Any] = {}
        self._members: Dict[str, Union["MemoryGroup", MemoryDataset]] = {}

    def _parent(self, path: str, create: bool) -> Tuple["MemoryGroup", str]:
        *groups, leaf = path.strip("/").split("/")
        node = self
        for name in groups:
            if name not in node._members and create:
                node._members[name] = MemoryGroup()
            found = node._members[name]
            if not isinstance(found, MemoryGroup):
                raise AxgraphValueError(f"{name} in {path} is a dataset, not a group", user_location())
            node = found
        return node, leaf

    def create_group(self, path: str) -> "MemoryGroup":
        """A new empty group at `path`.

        Parameters
        ----------
        path : str
            Where, "/"-separated.

        Returns
        -------
        MemoryGroup
            The group.

        Raises
        ------
        AxgraphValueError
            When `path` exists, or a part of it is a dataset.
        """
        parent, leaf = self._parent(path, create=True)
        if leaf in parent._members:
            raise AxgraphValueError(f"{path} already exists", user_location())
        group = parent._members[leaf] = MemoryGroup()
        return group

    def create_dataset(self, path: str, shape, dtype="float32") -> MemoryDataset:
        """A new zero-filled dataset at `path`.

        Parameters
        ----------
        path : str
            Where, "/"-separated.
        shape : int or tuple of int
            Its shape.
        dtype : numpy dtype or str, default "float32"
            Its element type.

        Returns
        -------
        MemoryDataset
            The dataset: a NumPy array with an ``attrs`` dict.

        Raises
        ------
        AxgraphValueError
            When `path` exists, or a part of it is a dataset.
        """
        parent, leaf = self._parent(path, create=True)
        if leaf in parent._members:
            raise AxgraphValueError(f"{path} already exists", user_location())
        dataset = np.zeros(shape, dtype=dtype).view(MemoryDataset)
        dataset.attrs = {}
        parent._members[leaf] = dataset
        return dataset

    def __getitem__(self, path: str):
        parent, leaf = self._parent(path, create=False)
        return parent._members[leaf]

    def __contains__(self, path: str) -> bool:
        try:
            self[path]
        except KeyError:
            return False
        return True

    def keys(self):
        return self._members.keys()

    def flush(self) -> None:
        """Nothing to write: the history lives in memory."""

    def close(self) -> None:
        """Nothing to release."""


def open_callback_data(output_file: Optional[str]):
    """A fresh store for the callbacks' history (see the module docstring).

    Parameters
    ----------
    output_file : str or None
        The HDF5 file to write (replaced if it exists); None keeps the
        history in memory.

    Returns
    -------
    h5py.File or MemoryGroup
        An open HDF5 file (on disk, or in memory for None) when h5py is
        installed, else a MemoryGroup.

    Raises
    ------
    CallbackDataError
        When `output_file` is given and h5py is not installed.
    OSError
        When h5py cannot create `output_file`.
    """
    try:
        import h5py  # type: ignore[import-untyped]  # h5py ships no type hints
    except ImportError:
        if output_file is not None:
            raise CallbackDataError(
                f"writing the training history to {output_file!r} needs h5py "
                f"(pip install 'axgraph[h5]'); pass output_file=None to keep it in memory"
            ) from None
        return MemoryGroup()
    if output_file is None:
        return h5py.File(f"axgraph-callbacks-{os.getpid()}-{next(_store_serials)}", "w",
                         driver="core", backing_store=False)
    if os.path.isfile(output_file):
        os.remove(output_file)
    return h5py.File(output_file, "w")


__all__ = ["CallbackDataError", "MemoryDataset", "MemoryGroup", "open_callback_data"]
