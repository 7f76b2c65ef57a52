"""MLP training step: axgraph's cpu transformer against what a user would write instead.

    python -m benchmarks.mlp [--quick] [--profile] [--torch-compile] [--no-memory]

Targets (issue 5) measured here:
  1. 784-512-512-10 SGD step, batch 128: cpu <= 1.0x PyTorch eager; peak memory below PyTorch's.
  2. 64-32-10 step, batch 32 (dispatch-bound): cpu <= 1.0x hand-written NumPy (issue 27; issue 5
     asked 1.5x), <= 0.35x PyTorch. The cpu transformer runs this step as one native call
     (cpu/native_step.py) from its first call: a small step that updates variables.
  6. planned memory: arena <= 0.5x the naive sum of intermediates (784-512-512-10 step).
  7. compile time of the 784-512-512-10 training computation: < 2 s cold, < 0.5 s from a warm
     kernel cache (each in a fresh process; JAX jit's first-call compile is shown beside it).

Every contestant does the *same* math: ReLU MLP, softmax cross-entropy averaged over the
batch, gradients of every weight and bias, plain SGD (lr 0.01, no momentum), on the same
initial parameters and the same batch (fed again every step, so data loading is not timed).
Before timing, three steps of each are checked against a float64 NumPy reference (losses and
updated parameters), so a contestant that skips work cannot win.

Why the contestants are written as they are: each is what a competent user of that tool
writes. PyTorch: nn.Sequential of Linear/ReLU, CrossEntropyLoss, optim.SGD, 2 threads.
JAX: value_and_grad inside one jit with the parameters donated. NumPy: the forward and
backward by hand, once allocating as it goes and once into buffers preallocated with out=.
axgraph: neon Affine layers, cross_entropy_multi, and the SGD update built from
`deriv_many` + assign, because neon's GradientDescentMomentum keeps a velocity tensor even
at momentum 0, which would be extra work the others do not do.
"""
from __future__ import annotations

import abc
import argparse
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from . import common
from .common import Case, Verdict

LR = 0.01
STEPS_CHECKED = 3
BIG, SMALL = "784-512-512-10 b128", "64-32-10 b32"
SHAPES = {BIG: ((784, 512, 512, 10), 128), SMALL: ((64, 32, 10), 32)}
AXGRAPH, NUMPY, NUMPY_OUT, TORCH, JAX = "axgraph cpu", "numpy", "numpy out=", "torch eager", "jax jit"
AXGRAPH_UNFUSED = "cpu fuse=False"
COLUMNS = [AXGRAPH, AXGRAPH_UNFUSED, NUMPY, NUMPY_OUT, TORCH, JAX]


@dataclass
class Problem:
    """Initial parameters (W as (out, in), PyTorch's layout) and one batch."""

    sizes: Sequence[int]
    batch: int
    weights: List[np.ndarray]
    biases: List[np.ndarray]
    x: np.ndarray  # (batch, sizes[0]) float32 in [0, 1), like scaled pixels
    labels: np.ndarray  # (batch,) int64


def make_problem(case: str, seed: int = 0) -> Problem:
    sizes, batch = SHAPES[case]
    rng = np.random.default_rng(seed)
    weights, biases = [], []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        limit = np.sqrt(6.0 / (fan_in + fan_out))  # Glorot uniform
        weights.append(rng.uniform(-limit, limit, (fan_out, fan_in)).astype(np.float32))
        biases.append(rng.uniform(-0.1, 0.1, fan_out).astype(np.float32))
    x = rng.random((batch, sizes[0]), dtype=np.float32)
    labels = rng.integers(0, sizes[-1], batch).astype(np.int64)
    return Problem(list(sizes), batch, weights, biases, x, labels)


class Trainer(abc.ABC):
    """A contestant: calling it runs one training step and returns its loss (in its own type)."""

    note = ""

    @abc.abstractmethod
    def __call__(self) -> Any:
        """One training step; its loss."""

    def loss_value(self, result: Any) -> float:
        return float(result)

    @abc.abstractmethod
    def params(self) -> List[np.ndarray]:
        """[W1 (out, in), b1, W2, b2, ...] as float arrays (for the correctness check)."""


# -- hand-written NumPy -------------------------------------------------------------------------

class NumpyNaive(Trainer):
    """Forward, backward and SGD by hand, allocating every intermediate (what most people write).

    Weights are kept as (in, out) so the forward is `h @ W + b`. `dtype=float64`
    gives the reference the other contestants are checked against.
    """

    def __init__(self, problem: Problem, dtype=np.float32):
        self.W = [np.ascontiguousarray(w.T, dtype=dtype) for w in problem.weights]
        self.b = [b.astype(dtype) for b in problem.biases]
        self.x = problem.x.astype(dtype)
        self.y = problem.labels
        self.rows = np.arange(problem.batch)
        self.lr = dtype(LR)

    def __call__(self):
        W, b, last = self.W, self.b, len(self.W) - 1
        acts, pre = [self.x], []
        h = self.x
        for i in range(last):
            z = h @ W[i] + b[i]
            pre.append(z)
            h = np.maximum(z, 0)
            acts.append(h)
        logits = h @ W[last] + b[last]
        shifted = logits - logits.max(axis=1, keepdims=True)
        exps = np.exp(shifted)
        sums = exps.sum(axis=1, keepdims=True)
        loss = np.mean(np.log(sums[:, 0]) - shifted[self.rows, self.y])
        d = exps / sums
        d[self.rows, self.y] -= 1
        d /= len(self.rows)
        for i in range(last, -1, -1):
            dW = acts[i].T @ d
            db = d.sum(axis=0)
            if i:
                d = (d @ W[i].T) * (pre[i - 1] > 0)
            W[i] -= self.lr * dW
            b[i] -= self.lr * db
        return loss

    def params(self):
        return [p for w, b in zip(self.W, self.b) for p in (w.T, b)]


class NumpyOut(NumpyNaive):
    """The same math into buffers preallocated once: no per-step allocation but a few tiny ones."""

    def __init__(self, problem: Problem):
        super().__init__(problem)
        B, sizes = problem.batch, problem.sizes
        f32 = np.float32
        self.z = [np.empty((B, n), f32) for n in sizes[1:]]
        self.a = [np.empty((B, n), f32) for n in sizes[1:-1]]
        self.da = [np.empty((B, n), f32) for n in sizes[1:-1]]
        self.mask = [np.empty((B, n), bool) for n in sizes[1:-1]]
        self.dW = [np.empty_like(w) for w in self.W]
        self.db = [np.empty_like(b) for b in self.b]
        C = sizes[-1]
        self.m, self.s, self.ls, self.picked = (np.empty(B, f32) for _ in range(4))
        self.shifted, self.p = np.empty((B, C), f32), np.empty((B, C), f32)
        self.flat = self.rows * C + self.y  # where each example's label sits in the (B, C) block
        self.inv_batch = f32(1.0 / B)

    def __call__(self):
        W, b, z, a, last = self.W, self.b, self.z, self.a, len(self.W) - 1
        h = self.x
        for i in range(last + 1):
            np.matmul(h, W[i], out=z[i])
            z[i] += b[i]
            if i < last:
                np.maximum(z[i], 0, out=a[i])
                h = a[i]
        np.max(z[last], axis=1, out=self.m)
        np.subtract(z[last], self.m[:, None], out=self.shifted)
        np.exp(self.shifted, out=self.p)
        np.sum(self.p, axis=1, out=self.s)
        np.log(self.s, out=self.ls)
        np.take(self.shifted.reshape(-1), self.flat, out=self.picked)
        np.subtract(self.ls, self.picked, out=self.ls)
        loss = self.ls.mean()
        np.divide(self.p, self.s[:, None], out=self.p)
        self.p.reshape(-1)[self.flat] -= 1.0
        self.p *= self.inv_batch
        d = self.p
        for i in range(last, -1, -1):
            np.matmul((a[i - 1] if i else self.x).T, d, out=self.dW[i])
            np.sum(d, axis=0, out=self.db[i])
            if i:
                np.matmul(d, W[i].T, out=self.da[i - 1])
                np.greater(z[i - 1], 0, out=self.mask[i - 1])
                np.multiply(self.da[i - 1], self.mask[i - 1], out=self.da[i - 1])
                d = self.da[i - 1]
            self.dW[i] *= self.lr
            W[i] -= self.dW[i]
            self.db[i] *= self.lr
            b[i] -= self.db[i]
        return loss


# -- PyTorch eager ----------------------------------------------------------------------------------

class TorchEager(common.TorchSGDTrainer, Trainer):
    """nn.Sequential(Linear, ReLU, ..., Linear), CrossEntropyLoss, optim.SGD; 2 threads."""

    def __init__(self, problem: Problem):
        torch = common.import_torch()
        nn = torch.nn
        layers: List[Any] = []
        for i, (w, b) in enumerate(zip(problem.weights, problem.biases)):
            linear = nn.Linear(w.shape[1], w.shape[0])
            with torch.no_grad():
                linear.weight.copy_(torch.from_numpy(w))
                linear.bias.copy_(torch.from_numpy(b))
            layers.append(linear)
            if i < len(problem.weights) - 1:
                layers.append(nn.ReLU())
        self.model = nn.Sequential(*layers)
        self.linears = [m for m in layers if isinstance(m, nn.Linear)]
        self.loss_fn = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=LR)
        self.x = torch.from_numpy(problem.x)
        self.y = torch.from_numpy(problem.labels)
        self.trained = [p for m in self.linears for p in (m.weight, m.bias)]



# -- JAX jit ------------------------------------------------------------------------------------

class JaxJit(Trainer):
    """value_and_grad + SGD inside one jax.jit, parameters donated (updated in place by XLA)."""

    def __init__(self, problem: Problem):
        jax = common.import_jax()
        import jax.numpy as jnp

        self.jax = jax

        def loss_fn(params, x, y):
            h = x
            for w, b in params[:-1]:
                h = jax.nn.relu(h @ w + b)
            w, b = params[-1]
            logp = jax.nn.log_softmax(h @ w + b)
            return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

        def step(params, x, y):
            loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
            new = jax.tree_util.tree_map(lambda p, g: p - LR * g, params, grads)
            return new, loss

        self.step = jax.jit(step, donate_argnums=0)
        self.state = [(jnp.asarray(w.T), jnp.asarray(b)) for w, b in zip(problem.weights,
                                                                         problem.biases)]
        self.x = jnp.asarray(problem.x)
        self.y = jnp.asarray(problem.labels.astype(np.int32))

    def __call__(self):
        self.state, loss = self.step(self.state, self.x, self.y)
        # one XLA execution makes the loss and the new parameters together: waiting for the
        # loss waits for the step, as the axgraph contestants wait for theirs
        self.jax.block_until_ready(loss)
        return loss

    def params(self):
        return [np.asarray(p) for w, b in self.state for p in (np.asarray(w).T, b)]


# -- axgraph ------------------------------------------------------------------------------------

def build_axgraph_graph(problem: Problem):
    """The training-step graph: (step op, x placeholder, label placeholder, variables)."""
    import axgraph as ng
    from axgraph.autodiff import deriv_many
    from axgraph.frontends.neon import Affine, Rectlin, Sequential, Softmax

    N = ng.make_axis(problem.batch, name="N")
    F = ng.make_axis(problem.sizes[0], name="F")
    Y = ng.make_axis(problem.sizes[-1], name="Y")
    x = ng.placeholder([N, F], name="x")
    labels = ng.placeholder([N], dtype=np.int32, name="labels")
    layers = []
    last = len(problem.weights) - 1
    for i, (w, b) in enumerate(zip(problem.weights, problem.biases)):
        # the weight's axes are (out, in - 1): PyTorch's (out, in) layout, so w goes in as is
        if i < last:
            layers.append(Affine(nout=w.shape[0], weight_init=w, bias_init=b, activation=Rectlin()))
        else:
            layers.append(Affine(axes=Y, weight_init=w, bias_init=b, activation=Softmax()))
    model = Sequential(layers)
    loss = ng.mean(ng.cross_entropy_multi(model(x), ng.one_hot(labels, axis=Y)), out_axes=())
    variables = model.variables()
    with ng.Op.saved_user_deps():
        grads = deriv_many(loss, variables)
        updates = [ng.assign(v, v - LR * g) for v, g in zip(variables, grads)]
        update = ng.doall([loss, *grads, *updates])
    step = ng.sequential([update, loss])
    return step, x, labels, variables


class AxgraphCpu(Trainer):
    """The graph above on `make_transformer("cpu", **options)`; options decided by a trial."""

    #: (step op, data placeholder, label placeholder, variables) of a problem.
    build_graph = staticmethod(build_axgraph_graph)

    def __init__(self, problem, options: Optional[Dict[str, Any]] = None):
        import axgraph as ng

        step, x, labels, variables = self.build_graph(problem)
        self.feeds = (problem.x, problem.labels.astype(np.int32))
        if options is None:
            options, self.note = common.cpu_transformer_options(
                lambda t: t.computation(step, x, labels)(*self.feeds))
        self.options = options
        self.transformer = ng.make_transformer("cpu", **options)
        self.computation = self.transformer.computation(step, x, labels)
        self.read = self.transformer.computation(variables)

    def __call__(self):
        return self.computation(*self.feeds)

    def params(self):
        return [np.asarray(v) for v in self.read()]


class AxgraphUnfused(AxgraphCpu):
    """The cpu transformer with fusion off: shows what fusion (and its OpenMP kernels) add."""

    def __init__(self, problem: Problem):
        super().__init__(problem, options={"fuse": False, "engine": "auto"})


CONTESTANTS = {AXGRAPH: AxgraphCpu, AXGRAPH_UNFUSED: AxgraphUnfused, NUMPY: NumpyNaive,
               NUMPY_OUT: NumpyOut, TORCH: TorchEager, JAX: JaxJit}


def make_case(name: str) -> Case:
    def setup_for(cls):
        return lambda: cls(make_problem(name))

    return Case(name, {c: setup_for(cls) for c, cls in CONTESTANTS.items()})


CASES = [make_case(BIG), make_case(SMALL)]


# -- checking ---------------------------------------------------------------------------------

def check_trainer(trainer: Trainer, reference: Dict[str, Any]) -> Optional[str]:
    """None if `trainer` matches the float64 reference over STEPS_CHECKED steps, else why not."""
    losses = [trainer.loss_value(trainer()) for _ in range(STEPS_CHECKED)]
    loss_error = max(abs(a - b) / abs(b) for a, b in zip(losses, reference["losses"]))
    if not loss_error <= 1e-4:
        return f"losses {losses} vs reference {reference['losses']} (rel. error {loss_error:.1e})"
    for k, (got, want, start) in enumerate(zip(trainer.params(), reference["params"],
                                               reference["initial"])):
        moved = np.max(np.abs(want - start))
        error = np.max(np.abs(np.asarray(got, np.float64).reshape(want.shape) - want))
        if not error <= 1e-3 * moved + 1e-7:
            return (f"parameter {k} after {STEPS_CHECKED} steps differs by {error:.2e} "
                    f"(the update moved it by {moved:.2e})")
    return None


def reference_run(problem: Problem) -> Dict[str, Any]:
    ref = NumpyNaive(problem, dtype=np.float64)
    initial = [np.array(p, np.float64) for p in ref.params()]
    losses = [float(ref()) for _ in range(STEPS_CHECKED)]
    return {"losses": losses, "params": [np.array(p) for p in ref.params()], "initial": initial}


# -- compile time ---------------------------------------------------------------------------------

def compile_child(which: str, options: Dict[str, Any]) -> Dict[str, Any]:
    """In a fresh process: seconds from `computation(...)` to the end of the first call, less
    one steady step; the graph and data are built before the clock starts."""
    import time

    problem = make_problem(BIG)
    if which == "axgraph":
        import axgraph as ng

        step, x, labels, _ = build_axgraph_graph(problem)
        feeds = (problem.x, problem.labels.astype(np.int32))
        started = time.perf_counter()
        transformer = ng.make_transformer("cpu", **options)
        computation = transformer.computation(step, x, labels)
        computation(*feeds)
        first = time.perf_counter() - started
        run = lambda: computation(*feeds)  # noqa: E731
    elif which == "jax":
        trainer = JaxJit(problem)
        started = time.perf_counter()
        trainer()
        first = time.perf_counter() - started
        run = trainer
    elif which == "torch.compile":
        torch = common.import_torch()
        trainer = TorchEager(problem)
        model = torch.compile(trainer.model)
        trainer.model = model
        started = time.perf_counter()
        trainer()
        first = time.perf_counter() - started
        run = trainer
    else:
        return {"error": f"unknown compile probe {which!r}"}
    steady = []
    for _ in range(7):
        t0 = time.perf_counter()
        run()
        steady.append(time.perf_counter() - t0)
    step_time = float(np.median(steady))
    return {"first_call": first, "step": step_time, "compile": max(0.0, first - step_time)}


def measure_compile_times(options: Dict[str, Any], torch_compile: bool) -> Dict[str, Dict]:
    """Cold (empty AXGRAPH_CACHE_DIR) and warm (same dir again) axgraph compiles, and JAX's."""
    results = {}
    options_arg = ",".join(f"{k}={v}" for k, v in options.items())
    with tempfile.TemporaryDirectory(prefix="axgraph-bench-cache-") as cache:
        env = {"AXGRAPH_CACHE_DIR": cache}
        for label in ("axgraph cold cache", "axgraph warm cache"):
            results[label] = common.run_subprocess_json(
                ["-m", "benchmarks.mlp", "--compile-probe", "axgraph", "--options", options_arg],
                env=env)
    if _available("jax"):
        results["jax jit"] = common.run_subprocess_json(
            ["-m", "benchmarks.mlp", "--compile-probe", "jax"])
    if torch_compile and _available("torch"):
        results["torch.compile"] = common.run_subprocess_json(
            ["-m", "benchmarks.mlp", "--compile-probe", "torch.compile"], timeout=600)
    return results


def _available(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _parse_options(text: str) -> Dict[str, Any]:
    options: Dict[str, Any] = {}
    for item in filter(None, text.split(",")):
        key, value = item.split("=", 1)
        options[key] = {"True": True, "False": False}.get(value, value)
    return options


# -- the run --------------------------------------------------------------------------------------

def main(argv=None) -> int:
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--profile", action="store_true",
                   help="cProfile the axgraph step of the 64-32-10 case and print the top entries")
    p.add_argument("--torch-compile", action="store_true",
                   help="also time torch.compile's first step (about half a minute)")
    p.add_argument("--compile-probe", default=None, help=argparse.SUPPRESS)
    p.add_argument("--options", default="fuse=True,engine=auto", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.compile_probe:
        common.emit_probe_result(compile_child(args.compile_probe, _parse_options(args.options)))
        return 0
    if args.probe:
        return common.run_probe_child(CASES, args)

    settings, reference, only, load = common.start_run(args, NUMPY)

    timings: Dict[str, Dict[str, Any]] = {}
    memory: Dict[str, Dict[str, Any]] = {}
    notes: List[str] = []
    plans: Dict[str, Any] = {}
    axgraph_options: Dict[str, Any] = {"fuse": False, "engine": "auto"}
    runners_small: Dict[str, Any] = {}
    for case in CASES:
        runners, skipped = common.setup_contestants(case, only)
        notes += [f"{case.name}: {name} skipped: {why}" for name, why in skipped.items()]
        ref = reference_run(make_problem(case.name))
        for name in list(runners):
            problem = check_trainer(runners[name], ref)
            if problem:
                notes.append(f"{case.name}: {name} EXCLUDED, wrong result: {problem}")
                del runners[name]
        if AXGRAPH in runners:
            ax = runners[AXGRAPH]
            axgraph_options = ax.options
            notes.append(f"{case.name}: axgraph options {common.describe_options(ax.options)}"
                         + (f"; {ax.note}" if ax.note else ""))
            try:
                plans[case.name] = ax.computation.memory_plan()
            except Exception as error:  # noqa: BLE001
                notes.append(f"{case.name}: memory_plan() failed: {error}")
        print(f"timing {case.name}: {', '.join(runners)} ...", flush=True)
        timings[case.name] = settings.time(runners)
        if case.name == SMALL:
            runners_small = runners
        if not args.no_memory:
            memory[case.name] = {}
            for name in runners:
                memory[case.name][name] = common.probe_memory("benchmarks.mlp", case.name, name,
                                                              args.quick)
    compile_times = measure_compile_times(axgraph_options, args.torch_compile)

    print()
    columns = [c for c in COLUMNS if any(c in t for t in timings.values())]
    print(common.ratio_table("MLP training step (forward + backward + SGD), float32", timings,
                             columns, reference))
    if memory:
        print()
        peak = {case: {n: m.get("peak") for n, m in per.items()} for case, per in memory.items()}
        retained = {case: {n: m.get("retained") for n, m in per.items()}
                    for case, per in memory.items()}
        transient = {case: {n: m.get("transient") for n, m in per.items()}
                     for case, per in memory.items()}
        traced = {case: {n: m.get("traced_peak") for n, m in per.items()}
                  for case, per in memory.items()}
        print(common.value_table("Peak memory of steady steps above the pre-first-step baseline "
                                 "(RSS high-water mark, fresh process each)", peak, columns,
                                 common.format_mb))
        print(common.value_table("  of which retained between steps (compiled code, arenas, "
                                 "grads, allocator caches)", retained, columns, common.format_mb))
        print(common.value_table("  of which transient within a step", transient, columns,
                                 common.format_mb))
        print(common.value_table("NumPy-side allocations per step (tracemalloc peak; blind to "
                                 "torch/XLA)", traced, columns, common.format_mb))
        for case, per in memory.items():
            for name, m in per.items():
                if "error" in m:
                    notes.append(f"{case}: memory probe of {name} failed: {m['error']}")
    if plans:
        print()
        print("axgraph memory plan (arena vs one allocation per intermediate):")
        for case, plan in plans.items():
            print(f"  {case}: arena {plan.arena_bytes / common.MB:.2f} MB, naive "
                  f"{plan.naive_bytes / common.MB:.2f} MB (ratio "
                  f"{plan.arena_bytes / plan.naive_bytes:.2f}), peak live "
                  f"{plan.peak_live_bytes / common.MB:.2f} MB")
    print()
    print("Compile time of the 784-512-512-10 training computation (fresh process each; "
          "first call less one steady step):")
    for label, result in compile_times.items():
        if "error" in result:
            print(f"  {label}: failed: {result['error']}")
        else:
            print(f"  {label}: {result['compile']:.3f} s (first call {result['first_call']:.3f} s,"
                  f" steady step {result['step'] * 1e3:.2f} ms)")
    notes.append("background: " + load.report())
    if notes:
        common.print_notes(notes)

    big, small = timings.get(BIG, {}), timings.get(SMALL, {})
    numpy_best = _best(small, [NUMPY, NUMPY_OUT])
    verdicts = [
        Verdict("1. 784-512-512-10 step: cpu / torch eager", common.ratio(big, AXGRAPH, TORCH), 1.0,
                why_missing="axgraph or torch missing"),
        Verdict("1. 784-512-512-10 step: cpu peak memory / torch peak memory",
                _memory_ratio(memory.get(BIG, {}), AXGRAPH, TORCH), 1.0, strict=True,
                why_missing="memory not probed or torch missing", noisy=False),
        Verdict(f"2. 64-32-10 step: cpu / hand-written NumPy (the faster: {numpy_best})",
                common.ratio(small, AXGRAPH, numpy_best) if numpy_best else None, 1.0,
                why_missing="numpy contestants missing"),
        Verdict("2. 64-32-10 step: cpu / torch eager", common.ratio(small, AXGRAPH, TORCH), 0.35,
                why_missing="axgraph or torch missing"),
        Verdict("6. planned arena / naive sum of intermediates (784-512-512-10)",
                plans[BIG].arena_bytes / plans[BIG].naive_bytes if BIG in plans else None, 0.5,
                why_missing="no memory plan", noisy=False),
        Verdict("7. compile time, cold kernel cache",
                compile_times.get("axgraph cold cache", {}).get("compile"), 2.0, unit="s",
                strict=True, why_missing="compile probe failed"),
        Verdict("7. compile time, warm kernel cache",
                compile_times.get("axgraph warm cache", {}).get("compile"), 0.5, unit="s",
                strict=True, why_missing="compile probe failed"),
    ]
    print()
    common.print_verdicts(verdicts)

    if args.profile and AXGRAPH in runners_small:
        print()
        print(f"cProfile of 2000 axgraph steps, {SMALL} (top 25 by own time):")
        print(common.profile_runner(runners_small[AXGRAPH], 2000, top=25))
    return 0


def _best(timings: Dict[str, Any], names: Sequence[str]) -> Optional[str]:
    present = [n for n in names if n in timings]
    return min(present, key=lambda n: timings[n].median) if present else None


def _memory_ratio(per: Dict[str, Dict], a: str, b: str) -> Optional[float]:
    pa, pb = per.get(a, {}).get("peak"), per.get(b, {}).get("peak")
    if pa is None or not pb:
        return None
    return pa / pb


if __name__ == "__main__":
    sys.exit(main())
