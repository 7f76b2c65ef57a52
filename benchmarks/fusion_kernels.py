"""Fused kernels against plain NumPy on the two cases that chose the engines.

    python -m benchmarks.fusion_kernels [--repeats 7]

Cases (the task's): chain = tanh(a*b + c) * sigmoid(d) - e over 4M f32, and
L2 = sum((x - y)**2) over 10M f32. Candidates, timed side by side and
interleaved (one run of each per round, so drifts in clock or cache hit all
alike), median of the rounds:

  naive      NumPy expressions, fresh temporaries per op
  out=       NumPy ufuncs with out= into preallocated full-size scratch
  blocked    the fusion engine "numpy": ufuncs over 64K-element blocks
  C          the fusion engine "c": one generated OpenMP loop (if a compiler works)

Extra memory is what a call needs beyond its inputs and its output: the
tracemalloc peak during the call (NumPy reports its allocations to
tracemalloc), plus the full-size scratch that `out=` preallocates. The C
kernel's only allocation is its per-block partial sums (malloc, a few KB).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
import tracemalloc
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from axgraph import core
from axgraph.transformers.cpu import fusion, kernel_c

Runner = Callable[[], np.ndarray]


def sigmoid(x: np.ndarray) -> np.ndarray:
    """The interpreter's stable sigmoid."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype)


def chain_function(n: int) -> core.Function:
    shape = core.Shape(n)
    a, b, c, d, e = (core.Parameter(core.f32, shape) for _ in range(5))
    result = core.Subtract(core.Multiply(core.Tanh(core.Add(core.Multiply(a, b), c)),
                                         core.Sigmoid(d)), e)
    return core.Function([result], [a, b, c, d, e])


def l2_function(n: int) -> core.Function:
    shape = core.Shape(n)
    x, y = core.Parameter(core.f32, shape), core.Parameter(core.f32, shape)
    difference = core.Subtract(x, y)
    squared = core.Power(difference, core.Constant(core.f32, shape, 2.0))
    return core.Function([core.Sum(squared, (0,))], [x, y])


@dataclass
class Case:
    """One benchmark case: its candidates (runner, preallocated scratch bytes) and a check."""

    label: str
    runners: Dict[str, Tuple[Runner, int]]
    check: Callable[[np.ndarray], str]
    c_kernel: Optional[object] = None


def add_engines(case: Case, function: core.Function, arrays: List[np.ndarray],
                out: np.ndarray) -> Case:
    """The fusion engines' kernels for the function's single group, as candidates."""
    (group,) = fusion.find_fusion_groups(function)
    shapes = {n: tuple(n.shape) for n in group.nodes + group.inputs}
    for engine in fusion.available_engines():
        kernel = fusion.compile_group(group, shapes, engine=engine)
        label = "blocked" if engine == "numpy" else "C"
        case.runners[label] = ((lambda k=kernel: k(*arrays, out=out)), 0)
        if engine == "c":
            case.c_kernel = kernel
    return case


def chain_case(n: int, rng: np.random.Generator) -> Case:
    a, b, c, d, e = (rng.standard_normal(n).astype(np.float32) for _ in range(5))
    out = np.empty(n, np.float32)
    t1, t2 = np.empty(n, np.float32), np.empty(n, np.float32)
    mask = np.empty(n, np.bool_)
    one, zero = np.float32(1), np.float32(0)

    def naive() -> np.ndarray:
        return np.tanh(a * b + c) * sigmoid(d) - e

    def with_out() -> np.ndarray:
        np.multiply(a, b, out=out)
        np.add(out, c, out=out)
        np.tanh(out, out=out)
        np.absolute(d, out=t1)
        np.negative(t1, out=t1)
        np.exp(t1, out=t1)
        np.add(one, t1, out=t2)
        np.greater_equal(d, zero, out=mask)
        np.copyto(t1, one, where=mask)
        np.divide(t1, t2, out=t1)
        np.multiply(out, t1, out=out)
        return np.subtract(out, e, out=out)

    expected = naive().astype(np.float64)
    case = Case("chain", {"naive": (naive, -out.nbytes),  # its result is not extra
                          "out=": (with_out, t1.nbytes * 2 + mask.nbytes)},
                lambda value: f"max |diff| vs naive {np.max(np.abs(value - expected)):.1e}")
    return add_engines(case, chain_function(n), [a, b, c, d, e], out)


def l2_case(n: int, rng: np.random.Generator) -> Case:
    x = rng.standard_normal(n).astype(np.float32) + 1
    y = rng.standard_normal(n).astype(np.float32)
    out = np.empty((), np.float32)
    scratch = np.empty(n, np.float32)

    def naive() -> np.ndarray:
        return np.sum((x - y) ** 2)

    def with_out() -> np.ndarray:
        np.subtract(x, y, out=scratch)
        np.multiply(scratch, scratch, out=scratch)
        return np.add.reduce(scratch, dtype=np.float64)

    exact = float(np.sum((x.astype(np.float64) - y) ** 2))
    case = Case("L2", {"naive": (naive, 0), "out=": (with_out, scratch.nbytes)},
                lambda value: f"rel err vs f64 {abs(float(value) - exact) / exact:.1e}")
    return add_engines(case, l2_function(n), [x, y], out)


def extra_memory(run: Runner, preallocated: int) -> int:
    tracemalloc.start()
    run()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return max(0, peak + preallocated)


def measure(runners: Dict[str, Tuple[Runner, int]], repeats: int) -> Dict[str, List[float]]:
    times: Dict[str, List[float]] = {name: [] for name in runners}
    for run, _ in runners.values():
        run()  # warm up: page in, load kernels, spin up threads
    for _ in range(repeats):
        for name, (run, _) in runners.items():
            started = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--chain-size", type=int, default=4_000_000)
    parser.add_argument("--l2-size", type=int, default=10_000_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"cores: {os.cpu_count()}, numpy {np.__version__}, engines: "
          f"{fusion.available_engines()}")
    chain = kernel_c.toolchain()
    if chain is not None:
        print(f"compiler: {chain.compiler} ({chain.version.splitlines()[0]})")
        print(f"flags: {' '.join(kernel_c.compile_flags(chain))}")
        print(f"libmvec variants declared: {', '.join(sorted(chain.vector_math)) or 'none'}")
    print()
    header = f"{'case':<7}{'candidate':<10}{'median ms':>10}{'vs naive':>10}{'extra MB':>10}  check"
    print(header)
    print("-" * len(header))
    for build, size in ((chain_case, args.chain_size), (l2_case, args.l2_size)):
        case = build(size, rng)
        times = measure(case.runners, args.repeats)
        naive_ms = statistics.median(times["naive"]) * 1e3
        for name, (run, preallocated) in case.runners.items():
            ms = statistics.median(times[name]) * 1e3
            memory = extra_memory(run, preallocated) / 2 ** 20
            check = case.check(np.asarray(run(), dtype=np.float64))
            print(f"{case.label:<7}{name:<10}{ms:>10.2f}{naive_ms / ms:>9.2f}x{memory:>10.2f}  "
                  f"{check}")
        if case.c_kernel is not None:
            calls = ", ".join(case.c_kernel.vector_math_calls()) or "none"
            print(f"{'':<7}vector math the C kernel calls: {calls}")
        print()

if __name__ == "__main__":
    main()
