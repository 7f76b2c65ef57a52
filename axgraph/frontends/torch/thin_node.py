"""The thin runtime's autograd node in C++, for graph pairs that run as native C steps.

Why: on an overhead-bound step (the 64-32-10 MLP, batch 32) the Python around two C
steps of about 1 µs each (viewing tensors as arrays, making result tensors, the autograd
Function's forward and backward in Python) cost about 15 µs, more than the step's
whole arithmetic; the same work in a C++ `torch::autograd::Function` (thin_node.cpp)
takes the step from 1.08x to under eager's time (docs/torch.md has the figures). The node reads the tensors' data
pointers and calls the steps' entries by data pointers (`NativeStep.pointers_entry`),
having checked every argument against the plan (dtype, shape, contiguity): where one
does not match, the Python thin runtime runs the call.

The library is C++ built against the installed torch's headers and libraries (and
Python's), once per torch version and compiler, into the kernel cache with its checks;
where no C++ compiler or headers are found, or the build fails, the Python runtime
serves every call.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import sysconfig
import threading
from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np
import torch

from ...errors import NotDifferentiableError
from ...tensor_description import TensorDescription
from ...transformers.cpu import kernel_c

#: The library's C++ text.
SOURCE = Path(__file__).with_name("thin_node.cpp")


def _flags() -> List[str]:
    root = Path(torch.__file__).parent
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    return ["-O2", "-std=c++17", "-shared", "-fPIC", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
            f"-I{root / 'include'}", f"-I{root / 'include' / 'torch' / 'csrc' / 'api' / 'include'}",
            f"-I{sysconfig.get_paths()['include']}", f"-L{root / 'lib'}",
            f"-Wl,-rpath,{root / 'lib'}", "-ltorch", "-ltorch_cpu", "-lc10", "-ltorch_python"]


class Library:
    """The loaded node library: make plans and call them."""

    def __init__(self, handle: ctypes.CDLL):
        # (called holding the GIL: it takes references to Python objects)
        self.plan = ctypes.PYFUNCTYPE(ctypes.c_void_p, *[ctypes.c_void_p] * 5,
                                      ctypes.py_object, ctypes.py_object)(
            ("axgraph_thin_plan", handle))
        self.free = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)(("axgraph_thin_free", handle))
        # called holding the GIL: the node makes Python objects
        self.call = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.py_object)(
            ("axgraph_thin_call", handle))


#: Why the node library is not available here ("" where it is, or before the first try).
why_not = ""

_lock = threading.Lock()
#: The outcome, once known: [the library, or None where it cannot be had here].
_outcome: List[Optional[Library]] = []
#: The thread compiling the library, while it does.
_builder: Optional[threading.Thread] = None


def library(wait: bool = True) -> Optional[Library]:
    """The node library: from the kernel cache, else compiled into it (about 20 s, once
    per machine and torch version); None where it cannot be had here (`why_not` says
    why).

    Parameters
    ----------
    wait : bool
        Whether to wait for a compilation. False: where the library must still be
        compiled, the compiler runs in a background thread and None is returned until
        it is done (`pending()`), so that a training loop's first steps, served by the
        Python runtime meanwhile, do not stall for it.

    Returns
    -------
    Library or None
        The loaded library, or None.
    """
    global _builder
    with _lock:
        if _outcome:
            return _outcome[0]
        if _builder is None:
            recipe = _recipe()
            found = None if recipe is None else _opened(*recipe, compile_it=False)
            if recipe is None or found is not None:
                _outcome.append(found)
                return found
            _builder = threading.Thread(target=_build, args=recipe, daemon=True,
                                        name="axgraph-torch-node-build")
            _builder.start()
        builder = _builder
    if not wait:
        return None
    builder.join()
    return _outcome[0]


def pending() -> bool:
    """Whether the node library is being compiled in the background (see `library`)."""
    return _builder is not None and not _outcome


def _build(key: str, source: str, commands: Callable[[str, str], List[List[str]]]) -> None:
    """The background compilation: its outcome recorded, whatever it is."""
    found: Optional[Library] = None
    try:
        found = _opened(key, source, commands, compile_it=True)
    finally:
        with _lock:
            _outcome.append(found)


@functools.lru_cache(maxsize=None)
def _recipe() -> Optional[Tuple[str, str, Callable[[str, str], List[List[str]]]]]:
    """(cache key, C++ source, compile commands) of the library, or None where no C++
    compiler runs here."""
    global why_not
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        why_not = "no C++ compiler (g++ or c++) on the PATH"
        return None
    source = SOURCE.read_text()
    flags = _flags()
    try:
        version = subprocess.run([compiler, "--version"], capture_output=True, text=True,
                                 timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as error:
        why_not = f"{compiler} --version failed: {error}"
        return None
    key = hashlib.sha256("\0".join([source, " ".join(flags), version, torch.__version__])
                         .encode()).hexdigest()

    def commands(source_path: str, library_path: str) -> List[List[str]]:
        return [[compiler, source_path, "-o", library_path, *flags]]

    return key, source, commands


def _opened(key: str, source: str, commands: Callable[[str, str], List[List[str]]],
            compile_it: bool) -> Optional[Library]:
    """The library loaded from the kernel cache, compiled into it first where
    `compile_it` (else None where it is not there); None where that fails (`why_not`)."""
    global why_not
    try:
        loaded = kernel_c.cached_library(key, source, ".cpp", commands,
                                         lambda directory, name: directory.load(name),
                                         compile_missing=compile_it)
    except (kernel_c.KernelCompileError, OSError, AttributeError) as error:
        why_not = f"the node library did not build or load: {str(error)[:2000]}"
        return None
    return None if loaded is None else Library(loaded.handle)


#: c10::ScalarType's numbers, by the element type's name (NumPy's and torch's agree).
_SCALAR_TYPES = {"uint8": 0, "int8": 1, "int16": 2, "int32": 3, "int64": 4, "float16": 5,
                 "float32": 6, "float64": 7, "bool": 11}


def _spec(shape: Sequence[int], dtype: Any) -> List[int]:
    """A tensor's description in the plan's code: its scalar type, rank and lengths."""
    name = str(dtype).replace("torch.", "")
    return [_SCALAR_TYPES[name], len(shape), *shape]


class Plan:
    """A graph pair's plan in the node library; `call(args)` -> outputs, or None."""

    def __init__(self, library: Library, code: List[int], forward: Any, backward: Any):
        array = (ctypes.c_int64 * len(code))(*code)
        self._library, self._keep = library, (forward, backward)
        self.handle = library.plan(array, ctypes.cast(forward.pointers_entry, ctypes.c_void_p),
                                   ctypes.addressof(forward.fixed),
                                   ctypes.cast(backward.pointers_entry, ctypes.c_void_p),
                                   ctypes.addressof(backward.fixed), (forward, backward),
                                   NotDifferentiableError)
        self._call = library.call

    def __call__(self, args: tuple) -> Any:
        return self._call(self.handle, args)

    def __del__(self) -> None:
        handle = getattr(self, "handle", None)
        if handle:
            self._library.free(handle)


def _row_major(layout: Any) -> bool:
    """Whether a tangent's traced layout is the row-major one the node hands the step."""
    if isinstance(layout, torch.memory_format):
        return layout == torch.contiguous_format
    size, stride = layout
    expected = TensorDescription.row_major(tuple(size), np.float32).element_strides
    return all(s == e for s, e, n in zip(stride, expected, size) if n > 1)


def plan_for(runtime: Any, args: Sequence[Any]) -> Optional[Plan]:
    """The node's plan for a thin runtime whose graphs have run natively (after a call with
    `args`), or None where the node does not apply (the Python runtime then serves)."""
    forward, backward = runtime.forward, runtime.backward
    if os.environ.get("AXGRAPH_TORCH_NODE", "1") == "0":
        return None
    fw_native: Any = getattr(getattr(forward.executable, "last_program", None), "native", None)
    bw_native: Any = getattr(getattr(backward.executable, "last_program", None), "native", None)
    if fw_native is None or bw_native is None or not forward.static or not backward.static:
        return None
    if runtime.sizes or runtime.dynamic_outputs or runtime.dynamic_saved or \
            runtime.non_differentiable or runtime.unchecked or \
            not all(isinstance(a, torch.Tensor) for a in args) or \
            not all(_row_major(layout) for _, layout in runtime.tangents) or \
            [i for i, _ in runtime.tangents] != list(range(runtime.outputs)):
        return None
    lib = library(wait=False)  # (while it compiles, the Python runtime serves)
    if lib is None:
        return None
    if any(str(a.dtype).replace("torch.", "") not in _SCALAR_TYPES for a in args):
        return None
    code: List[int] = [len(args)]
    for a in args:
        code += _spec(tuple(a.shape), a.dtype)
    if forward.built.tensor_inputs != list(range(len(args))):
        return None
    code += [len(forward.built.tensor_inputs), *range(len(args))]
    code += [len(fw_native.result_types)]
    for shape, dtype in fw_native.result_types:
        code += _spec(shape, dtype)
    outputs = forward.built.outputs
    code.append(len(outputs))
    for position, output in enumerate(outputs):
        if position in forward.repeats:
            output = outputs[forward.repeats[position]]
        if output.kind == "result":
            if forward.result_shapes[output.index] is not None or output.permutation:
                return None
            code += [0, output.index, 0]
        elif output.kind == "argument" and not output.copy and position >= runtime.outputs:
            permutation = list(output.permutation or ())
            code += [1, output.index, len(permutation), *permutation]
        else:
            return None
    user = [o.index for o in outputs[:runtime.outputs]]
    if len(set(user)) != len(user):
        return None
    code.append(runtime.outputs)
    code.append(runtime.outputs)
    first_results = fw_native.result_types
    for o in outputs[:runtime.outputs]:
        code += _spec(*first_results[o.index])
    saved_count = len(outputs) - runtime.outputs
    if backward.built.tensor_inputs != list(range(saved_count + runtime.outputs)):
        return None
    code += [len(backward.built.tensor_inputs), *backward.built.tensor_inputs]
    code += [len(bw_native.result_types)]
    for shape, dtype in bw_native.result_types:
        code += _spec(shape, dtype)
    grads = backward.built.outputs
    if len(grads) != len(args):
        return None
    code.append(len(grads))
    for output in grads:
        if output.kind == "result" and backward.result_shapes[output.index] is None \
                and not output.permutation:
            code += [0, output.index, 0]
        elif output.kind == "value" and output.value is None:
            code += [2, 0, 0]
        else:
            return None
    return Plan(lib, code, fw_native, bw_native)


__all__ = ["Library", "Plan", "library", "pending", "plan_for"]
