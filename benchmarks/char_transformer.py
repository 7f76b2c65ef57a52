"""The char transformer's training step: axgraph's cpu transformer against PyTorch eager.

    python -m benchmarks.char_transformer [--quick] [--profile] [--jax] [--batch 32]

Target (issue 27): one training step of examples/char_transformer.py (2 pre-LayerNorm
blocks, 4 heads, d_model 128, context 64, GELU MLP of 512, vocabulary of the help text),
batch 32, AdamW with clipping and the warmup-cosine rate: cpu <= 1.0x PyTorch eager.

Contestants: the example's own model and step (neon Embedding with positions, LayerNorm,
causal MultiHeadAttention and Affine layers in Residual blocks; AdamW with global-norm
clipping and WarmupCosineSchedule, from `make_optimizer`), and the PyTorch reference of
tests/test_char_transformer.py (nn.Embedding / LayerNorm / Linear,
F.scaled_dot_product_attention with is_causal, torch.optim.AdamW, clip_grad_norm_, the
schedulers LinearLR then CosineAnnealingLR, 2 threads), loaded with the values axgraph
initialized its variables to. Both are fed the same minibatch every step, so data loading
is not timed; before timing, three steps of each must give the same losses (rtol 1e-4),
so a contestant that skips work cannot win.

`--profile` times every line of axgraph's generated step function (one core op each) over
a few steps and prints the time by op kind and by the rank of the op's result, then the
dense products (projections, MLP, output layer: one GEMM each) against attention's
batched ones ("Dot batched": scores and weighted values, forward and backward).
On a machine other jobs keep busy, OpenBLAS's two threads wait for each other and the
dense products (the Dot rows) slow down tenfold; `OPENBLAS_NUM_THREADS=1` shows the step
without that (the machine facts print the setting).
"""
from __future__ import annotations

import collections
import importlib.util
import os
import re
import sys
import time
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

from . import common
from .common import Verdict

AXGRAPH, AXGRAPH_JAX, TORCH = "axgraph cpu", "axgraph jax", "torch eager"
COLUMNS = [AXGRAPH, AXGRAPH_JAX, TORCH]
STEPS_CHECKED = 3
#: The steps the learning-rate schedule spans: the example's full run (3 epochs of 150).
TOTAL_STEPS = 450
#: The file name the cpu transformer compiles its generated step function under.
GENERATED_FILE = "<axgraph cpu function>"
LINE_COMMENT = re.compile(r"#\s*(\w+)\s+\w+\[([^\]]*)\]")  # "# Multiply f32[4, 32, 64]"
BATCHED_CALL = "batched_matmul("  # how the generated code calls a batched GEMM


def load_reference():
    """tests/test_char_transformer.py, whose PyTorch model is the reference (torch required)."""
    common.import_torch()
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests",
                        "test_char_transformer.py")
    spec = importlib.util.spec_from_file_location("char_transformer_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Problem:
    """The model's config, the alphabet and one (T, N) minibatch of the corpus."""

    def __init__(self, batch: int):
        from examples import char_transformer as ct
        from examples.text_data import load_help_text

        self.config = ct.Config(batch=batch)
        self.alphabet, codes = ct.encode(load_help_text())
        inputs, targets = ct.windows(codes, self.config.context)
        picks = np.random.default_rng(0).choice(len(inputs), batch, replace=False)
        self.chars = np.ascontiguousarray(inputs[picks].T)
        self.next_chars = np.ascontiguousarray(targets[picks].T)


class AxgraphStep:
    """The example's training step on make_transformer(backend); every instance starts from
    the same values (the initializers are seeded)."""

    def __init__(self, problem: Problem, backend: str = "cpu"):
        import axgraph as ng
        from examples import char_transformer as ct

        config = problem.config
        self.model = ct.CharTransformer(len(problem.alphabet), config, seed=0)
        N = ng.make_axis(config.batch, name="N")
        chars, next_chars = (ng.placeholder([self.model.T, N], dtype=np.int32)
                             for _ in range(2))
        loss = self.model.loss(chars, next_chars)
        step = ng.sequential([ct.make_optimizer(self.model, TOTAL_STEPS)(loss), loss])
        variables = self.model.variables()
        self.transformer = ng.make_transformer(backend)
        self.values = dict(zip(variables, (np.array(v) for v in self.transformer.computation(
            list(variables.values()))())))
        self.computation = self.transformer.computation(step, chars, next_chars)
        self.args = (problem.chars, problem.next_chars)

    def __call__(self):
        return float(self.computation(*self.args))


class TorchStep:
    """The PyTorch reference, with axgraph's initial values, and its AdamW step."""

    def __init__(self, problem: Problem, axgraph: AxgraphStep):
        reference = load_reference()
        config = problem.config
        self.model = reference.TorchCharTransformer(len(problem.alphabet), config).load_axgraph(
            axgraph.model, axgraph.values)
        self.step = reference.torch_training(self.model, config, TOTAL_STEPS)
        self.args = (problem.chars, problem.next_chars)

    def __call__(self):
        return self.step(*self.args)


def make_contestants(batch: int, jax: bool) -> Tuple[AxgraphStep, Dict[str, Callable[[], float]],
                                                     List[str]]:
    """(axgraph cpu step, every contestant by name, notes on those skipped), all from the
    same initial values."""
    problem = Problem(batch)
    axgraph = AxgraphStep(problem)
    runners: Dict[str, Callable[[], float]] = {AXGRAPH: axgraph}
    notes = []
    if jax:
        try:
            common.import_jax()
            runners[AXGRAPH_JAX] = AxgraphStep(problem, "jax")
        except common.Skip as why:
            notes.append(f"{AXGRAPH_JAX} skipped: {why}")
    try:
        runners[TORCH] = TorchStep(problem, axgraph)
    except common.Skip as why:
        notes.append(f"{TORCH} skipped: {why}")
    return axgraph, runners, notes


def check_losses(runners: Dict[str, Callable[[], float]]) -> List[str]:
    """The first steps' losses of every contestant, which must agree; notes on any that do not."""
    losses = {name: [runner() for _ in range(STEPS_CHECKED)] for name, runner in runners.items()}
    notes = [f"losses of the first {STEPS_CHECKED} steps: " + "; ".join(
        f"{name} {', '.join(f'{v:.5f}' for v in values)}" for name, values in losses.items())]
    for name, values in losses.items():
        if not np.allclose(values, losses[AXGRAPH], rtol=1e-4):
            notes.append(f"LOSSES OF {name} DIFFER: the timing compares different work")
    return notes


# -- where the time goes ---------------------------------------------------------------------------

def line_times(calls: int, runner: Callable[[], Any]) -> Dict[int, float]:
    """Seconds spent on each line of the generated step function over `calls` runs.

    A trace function sees a line event when each line starts; the time up to the
    next line event (or the return) is charged to the line. Calls made from the
    generated code (kernels, NumPy) are not traced, so they count to their line.
    """
    spent: Dict[int, float] = collections.defaultdict(float)
    state = {"line": None, "since": 0.0}

    def local(frame, event, arg):
        now = time.perf_counter()
        if state["line"] is not None:
            spent[state["line"]] += now - state["since"]
        state["line"] = frame.f_lineno if event == "line" else None
        state["since"] = time.perf_counter()
        return local

    def global_trace(frame, event, arg):
        return local if frame.f_code.co_filename == GENERATED_FILE else None

    sys.settrace(global_trace)
    try:
        for _ in range(calls):
            runner()
    finally:
        sys.settrace(None)
    return spent


def op_kind(line: str) -> Tuple[str, int]:
    """(core op kind, result rank) of a generated line, from its comment; the batched
    products (attention's scores and weighted values, forward and backward) are told
    apart from the dense ones by the batched GEMM they call."""
    match = LINE_COMMENT.search(line)
    if not match:
        return "(other)", 0
    kind = match.group(1)
    if kind == "Dot" and BATCHED_CALL in line:
        kind = "Dot batched"
    return kind, len(match.group(2).split(","))


def profile_report(step: AxgraphStep, calls: int = 5) -> str:
    """The generated step's time by core op kind and result rank, largest first."""
    computation = step.computation
    source_lines = computation.source.splitlines()
    started = time.perf_counter()
    for _ in range(calls):
        step()
    total = (time.perf_counter() - started) / calls
    spent = line_times(calls, step)
    by_kind: Dict[Tuple[str, int], List[float]] = collections.defaultdict(lambda: [0.0, 0])
    for line, seconds in spent.items():
        kind = op_kind(source_lines[line - 1]) if line <= len(source_lines) else ("(other)", 0)
        by_kind[kind][0] += seconds / calls
        by_kind[kind][1] += 1
    traced = sum(v[0] for v in by_kind.values())
    rows = sorted(by_kind.items(), key=lambda item: -item[1][0])
    out = [f"axgraph step: {total * 1e3:.1f} ms untraced, {traced * 1e3:.1f} ms in traced lines "
           f"of the generated function ({len(source_lines)} lines); by op kind and result rank:"]
    for (kind, rank), (seconds, lines) in rows[:14]:
        out.append(f"  {kind:<12} rank {rank}  {seconds * 1e3:8.1f} ms  {seconds / traced:6.1%}"
                   f"  ({lines} lines)")
    dense = sum(v[0] for (kind, _), v in by_kind.items() if kind == "Dot")
    batched = sum(v[0] for (kind, _), v in by_kind.items() if kind == "Dot batched")
    out.append(f"  dense products (projections, MLP, output layer and their gradients): "
               f"{dense * 1e3:.1f} ms, {dense / traced:.0%}; attention's batched products: "
               f"{batched * 1e3:.1f} ms, {batched / traced:.0%}; everything else: "
               f"{(traced - dense - batched) * 1e3:.1f} ms")
    return "\n".join(out)


def main(argv=None) -> int:
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--jax", action="store_true",
                   help="also time the step on the jax transformer (compiling takes ~20 s)")
    p.add_argument("--profile", action="store_true",
                   help="also time every line of axgraph's generated step, by op kind")
    args = p.parse_args(argv)
    settings, reference, _only, load = common.start_run(args, TORCH)
    case = f"char transformer step, batch {args.batch}"
    axgraph, runners, notes = make_contestants(args.batch, args.jax)
    notes += check_losses(runners)
    print(f"timing {case}: {', '.join(runners)} ...", flush=True)
    timings = {case: settings.time(runners)}
    print()
    print(common.ratio_table("Char transformer training step (forward + backward + AdamW), float32",
                             timings, [c for c in COLUMNS if c in runners], reference))
    if args.profile:
        print()
        print(profile_report(axgraph))
    notes.append("background: " + load.report())
    common.print_notes(notes)
    print()
    common.print_verdicts([
        Verdict("char transformer step, batch 32: cpu / torch eager",
                common.ratio(timings[case], AXGRAPH, TORCH), 1.0,
                why_missing="torch missing"),
    ])
    for runner in runners.values():
        if isinstance(runner, AxgraphStep):
            runner.transformer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
