"""Memory-bound elementwise work: axgraph's fused kernels against NumPy, numexpr, numba, torch, JAX.

    python -m benchmarks.elementwise [--quick] [--no-memory] [--march x86-64-v3,x86-64-v2]

Targets (issue 5, tightened by the "trust" issue, item 8) measured here:
  3. L2 = sum((x - y)**2) over 10M float32: no temporaries (extra memory < 1 MB); with a C
     compiler <= 1.2x hand-written parallel numba and <= 1.0x JAX jit; relative error
     <= 1e-5 against the float64 sum.
  4. chain = tanh(a*b + c) * sigmoid(d) - e over 4M float32: with a C compiler <= 1.0x JAX jit;
     with NumPy alone (the cpu transformer's blocked-NumPy engine) <= 0.7x naive NumPy.
The JAX targets hold on AVX2 and AVX-512 machines alike: `--march x86-64-v3` adds a column
of kernels built for AVX2 (`$AXGRAPH_MARCH`), measured in the same interleaved rounds as the
native ones, so an AVX-512 machine shows both.

Why these contestants: naive NumPy is what everybody writes first; NumPy with `out=`
buffers is what a careful NumPy user writes; numexpr, numba (parallel, fastmath, a float64
accumulator: what a performance-minded user writes) and JAX jit are the tools people reach
for when NumPy's temporaries hurt; PyTorch eager (2 threads) is the other everyday array
library. Every contestant returns a new array for the chain (the caller owns it), except
"numpy out=", whose point is to reuse one.

"axgraph cpu" is `make_transformer("cpu", fuse=True)` with its default engine (generated C
where a compiler works, built for this CPU); "axgraph cpu [TARGET]" the same with kernels
built for -march=TARGET; "cpu numpy engine" forces `engine="numpy"`, the engine a machine
without a C compiler gets (target 4's second half).
"""
from __future__ import annotations

import math
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from . import common
from .common import Case, Verdict

L2_N = 10_000_000
CHAIN_N = 4_000_000
L2, CHAIN = "L2 sum((x-y)**2), 10M f32", "tanh(a*b+c)*sigmoid(d)-e, 4M f32"
AXGRAPH, AXGRAPH_NP = "axgraph cpu", "cpu numpy engine"
NUMPY, NUMPY_OUT, NUMEXPR, NUMBA, TORCH, JAX = ("numpy", "numpy out=", "numexpr", "numba par",
                                                "torch", "jax jit")
COLUMNS = [AXGRAPH, AXGRAPH_NP, NUMPY, NUMPY_OUT, NUMEXPR, NUMBA, TORCH, JAX]


def l2_data(seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.random(L2_N, dtype=np.float32), rng.random(L2_N, dtype=np.float32)


def chain_data(seed: int = 1):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(CHAIN_N, dtype=np.float32) for _ in range(5)]


def l2_reference(x, y) -> float:
    d = x.astype(np.float64) - y.astype(np.float64)
    return float(np.dot(d, d))


def chain_reference(a, b, c, d, e) -> np.ndarray:
    a, b, c, d, e = (v.astype(np.float64) for v in (a, b, c, d, e))
    return np.tanh(a * b + c) * (1.0 / (1.0 + np.exp(-d))) - e


# -- axgraph ------------------------------------------------------------------------------------

def _axgraph_setup(build: Callable, arrays: List[np.ndarray], engine: str,
                   march: Optional[str] = None):
    """A runner over a cpu-transformer computation of build(placeholders); fusion if it works.
    Kernels are built (on the first call) for -march=`march`, or natively when None."""
    import axgraph as ng

    axis = ng.make_axis(arrays[0].size, name="I")
    places = [ng.placeholder([axis]) for _ in arrays]
    result = build(*places)
    with common.kernel_march(march):
        options, note = common.cpu_transformer_options(
            lambda t: t.computation(result, *places)(*arrays), engine=engine)
        transformer = ng.make_transformer("cpu", **options)
        computation = transformer.computation(result, *places)
        computation(*arrays)

    def run():
        return computation(*arrays)

    run.note = (f"{common.describe_options(options)}" + (f", -march={march}" if march else "")
                + (f"; {note}" if note else ""))
    run.computation = computation
    return run


def axgraph_l2(engine: str = "auto", march: Optional[str] = None):
    return _axgraph_setup(lambda x, y: _ng().sum((x - y) ** 2, out_axes=()), list(l2_data()),
                          engine, march)


def axgraph_chain(engine: str = "auto", march: Optional[str] = None):
    ng = _ng()
    return _axgraph_setup(lambda a, b, c, d, e: ng.tanh(a * b + c) * ng.sigmoid(d) - e,
                          chain_data(), engine, march)


def _ng():
    import axgraph as ng

    return ng


# -- NumPy ----------------------------------------------------------------------------------------

def numpy_l2():
    x, y = l2_data()
    return lambda: np.sum((x - y) ** 2)


def numpy_out_l2():
    """One preallocated buffer: no allocation per call, but it still writes and re-reads 40 MB."""
    x, y = l2_data()
    buf = np.empty_like(x)

    def run():
        np.subtract(x, y, out=buf)
        np.multiply(buf, buf, out=buf)
        return np.add.reduce(buf)

    return run


def numpy_chain():
    a, b, c, d, e = chain_data()
    return lambda: np.tanh(a * b + c) * (1.0 / (1.0 + np.exp(-d))) - e


def numpy_out_chain():
    a, b, c, d, e = chain_data()
    t1, t2 = np.empty_like(a), np.empty_like(a)

    def run():
        np.multiply(a, b, out=t1)
        np.add(t1, c, out=t1)
        np.tanh(t1, out=t1)
        np.negative(d, out=t2)
        np.exp(t2, out=t2)
        np.add(t2, 1.0, out=t2)
        np.reciprocal(t2, out=t2)
        np.multiply(t1, t2, out=t1)
        np.subtract(t1, e, out=t1)
        return t1

    return run


# -- numexpr, numba, torch, JAX -----------------------------------------------------------------

def numexpr_l2():
    ne = common.require("numexpr")
    ne.set_num_threads(2)
    x, y = l2_data()
    return lambda: ne.evaluate("sum((x - y)**2)", local_dict={"x": x, "y": y})


def numexpr_chain():
    ne = common.require("numexpr")
    ne.set_num_threads(2)
    a, b, c, d, e = chain_data()
    arrays = {"a": a, "b": b, "c": c, "d": d, "e": e}
    return lambda: ne.evaluate("tanh(a*b + c) * (1 / (1 + exp(-d))) - e", local_dict=arrays)


def _numba():
    numba = common.require("numba")
    return numba


def numba_l2():
    numba = _numba()

    @numba.njit(parallel=True, fastmath=True, cache=False)
    def l2(x, y):
        total = 0.0  # float64 accumulator
        for i in numba.prange(x.size):
            diff = x[i] - y[i]
            total += diff * diff
        return total

    x, y = l2_data()
    l2(x, y)  # compile outside the timing
    return lambda: l2(x, y)


def numba_chain():
    numba = _numba()

    @numba.njit(parallel=True, fastmath=True, cache=False)
    def chain(a, b, c, d, e):
        out = np.empty_like(a)
        for i in numba.prange(a.size):
            out[i] = math.tanh(a[i] * b[i] + c[i]) * (1.0 / (1.0 + math.exp(-d[i]))) - e[i]
        return out

    arrays = chain_data()
    chain(*arrays)
    return lambda: chain(*arrays)


def torch_l2():
    torch = common.import_torch()
    x, y = (torch.from_numpy(v) for v in l2_data())
    return lambda: torch.sum((x - y) ** 2)


def torch_chain():
    torch = common.import_torch()
    a, b, c, d, e = (torch.from_numpy(v) for v in chain_data())
    return lambda: torch.tanh(a * b + c) * torch.sigmoid(d) - e


def jax_l2():
    jax = common.import_jax()
    import jax.numpy as jnp

    f = jax.jit(lambda x, y: jnp.sum((x - y) ** 2))
    x, y = (jax.device_put(v) for v in l2_data())
    f(x, y).block_until_ready()
    return lambda: f(x, y).block_until_ready()


def jax_chain():
    jax = common.import_jax()
    import jax.numpy as jnp

    f = jax.jit(lambda a, b, c, d, e: jnp.tanh(a * b + c) * jax.nn.sigmoid(d) - e)
    arrays = [jax.device_put(v) for v in chain_data()]
    f(*arrays).block_until_ready()
    return lambda: f(*arrays).block_until_ready()


def marched(march: str) -> str:
    """The column of axgraph with kernels built for -march=`march`."""
    return f"{AXGRAPH} [{march}]"


def make_cases(marches: Sequence[str] = ()) -> List[Case]:
    """The two cases; each target in `marches` adds an axgraph contestant built for it."""
    def axgraph(setup: Callable) -> Dict[str, Callable]:
        contestants = {AXGRAPH: lambda: setup("auto"), AXGRAPH_NP: lambda: setup("numpy")}
        for march in marches:
            contestants[marched(march)] = lambda march=march: setup("auto", march)
        return contestants

    return [
        Case(L2, {**axgraph(axgraph_l2), NUMPY: numpy_l2, NUMPY_OUT: numpy_out_l2,
                  NUMEXPR: numexpr_l2, NUMBA: numba_l2, TORCH: torch_l2, JAX: jax_l2}),
        Case(CHAIN, {**axgraph(axgraph_chain), NUMPY: numpy_chain, NUMPY_OUT: numpy_out_chain,
                     NUMEXPR: numexpr_chain, NUMBA: numba_chain, TORCH: torch_chain,
                     JAX: jax_chain}),
    ]


def _as_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):  # torch
        value = value.detach().numpy()
    return np.asarray(value, dtype=np.float64)


def check(case: str, runners: Dict[str, Callable]) -> Dict[str, Any]:
    """Each contestant's error against float64: relative for L2, max absolute for the chain.

    Returns name -> error, or name -> "WRONG: ..." when the result is not the computation.
    """
    errors: Dict[str, Any] = {}
    if case == L2:
        want = l2_reference(*l2_data())
        for name, run in runners.items():
            got = float(_as_numpy(run()))
            errors[name] = abs(got - want) / want
    else:
        want = chain_reference(*chain_data())
        for name, run in runners.items():
            got = _as_numpy(run())
            errors[name] = float(np.max(np.abs(got - want))) if got.shape == want.shape else \
                f"WRONG: shape {got.shape}"
    return errors


def main(argv=None) -> int:
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--march", default="",
                   help="comma-separated -march targets (x86-64-v3, x86-64-v2, ...): an axgraph "
                        "column each, its kernels built for that target; this CPU must run them")
    args = p.parse_args(argv)
    marches = [m.strip() for m in args.march.split(",") if m.strip()]
    cases = make_cases(marches)
    if args.probe:
        return common.run_probe_child(cases, args)

    settings, reference, only, load = common.start_run(args, NUMPY)
    axgraph_columns = [AXGRAPH, *map(marched, marches)]

    timings: Dict[str, Dict[str, Any]] = {}
    errors: Dict[str, Dict[str, Any]] = {}
    memory: Dict[str, Dict[str, Any]] = {}
    notes: List[str] = []
    for case in cases:
        runners, skipped = common.setup_contestants(case, only)
        notes += [f"{case.name}: {name} skipped: {why}" for name, why in skipped.items()]
        for name in (*axgraph_columns, AXGRAPH_NP):
            if name in runners:
                notes.append(f"{case.name}: {name}: {runners[name].note}")
        errors[case.name] = check(case.name, runners)
        # beyond these the contestant computes something else (a poor float32 sum is reported,
        # not excluded)
        limit = 0.1 if case.name == L2 else 1e-3
        for name, error in errors[case.name].items():
            if isinstance(error, str) or not error <= limit:
                notes.append(f"{case.name}: {name} EXCLUDED, wrong result (error {error})")
                del runners[name]
        print(f"timing {case.name}: {', '.join(runners)} ...", flush=True)
        timings[case.name] = settings.time(runners)
        if not args.no_memory:
            extra = ["--march", args.march] if marches else []
            memory[case.name] = {name: common.probe_memory("benchmarks.elementwise", case.name,
                                                           name, args.quick, extra)
                                 for name in runners}
        del runners  # free the 10M / 4M-element inputs of every contestant before the next case

    print()
    columns = [c for c in [AXGRAPH, *axgraph_columns[1:], *COLUMNS[1:]]
               if any(c in t for t in timings.values())]
    print(common.ratio_table("Elementwise and reduction, float32", timings, columns, reference))
    print()
    print(common.value_table("Error against float64 (L2: relative; chain: max absolute)",
                             errors, columns,
                             lambda e: e if isinstance(e, str) else f"{e:.1e}"))
    if memory:
        print()
        print(common.value_table("Extra memory of steady calls above the pre-first-call baseline "
                                 "(RSS high-water mark, fresh process each; a 4M-f32 result is "
                                 "16 MB)", {c: {n: m.get("peak") for n, m in per.items()}
                                             for c, per in memory.items()},
                                 columns, common.format_mb))
        print(common.value_table("NumPy-side allocations per call (tracemalloc peak)",
                                 {c: {n: m.get("traced_peak") for n, m in per.items()}
                                  for c, per in memory.items()}, columns, common.format_mb))
        for case, per in memory.items():
            for name, m in per.items():
                if "error" in m:
                    notes.append(f"{case}: memory probe of {name} failed: {m['error']}")
    notes.append("background: " + load.report())
    common.print_notes(notes)

    l2t, chaint = timings.get(L2, {}), timings.get(CHAIN, {})
    l2_memory = memory.get(L2, {}).get(AXGRAPH, {}).get("peak")
    l2_error = errors.get(L2, {}).get(AXGRAPH)
    verdicts = [
        Verdict("3. L2: axgraph extra memory", None if l2_memory is None else l2_memory / common.MB,
                1.0, unit="MB", strict=True, why_missing="memory not probed", noisy=False),
        Verdict("3. L2: cpu / numba parallel", common.ratio(l2t, AXGRAPH, NUMBA), 1.2,
                why_missing="numba missing"),
        *[Verdict(f"3. L2: {name} / jax jit", common.ratio(l2t, name, JAX), 1.0,
                  why_missing="jax or axgraph missing") for name in axgraph_columns],
        Verdict("3. L2: relative error vs float64", l2_error if isinstance(l2_error, float)
                else None, 1e-5, unit="", why_missing="axgraph did not run", noisy=False),
        *[Verdict(f"4. chain: {name} / jax jit", common.ratio(chaint, name, JAX), 1.0,
                  why_missing="jax or axgraph missing") for name in axgraph_columns],
        Verdict("4. chain: cpu numpy engine / naive numpy", common.ratio(chaint, AXGRAPH_NP, NUMPY),
                0.7, why_missing="axgraph did not run"),
    ]
    print()
    common.print_verdicts(verdicts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
