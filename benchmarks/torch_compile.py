"""PyTorch training steps through `torch.compile`: the axgraph backend against eager and inductor.

    python -m benchmarks.torch_compile [--quick] [--only axgraph,eager]

Targets (issue 29), CPU, float32, each a full training step (zero_grad, forward, loss,
backward, SGD step), the same model and data for every contestant:
  1. MLP 784-512-512-10, batch 128: axgraph <= 1.0x eager, <= 1.2x inductor.
  2. the overhead-bound small net 64-32-10, batch 32: the same targets.
  3. a transformer block (batch 8, 32 tokens, width 64, 4 heads): the same targets.

Contestants: "eager" (plain PyTorch), "inductor" (`torch.compile`'s default backend:
generated C++ and OpenMP), "axgraph" (`torch.compile(backend=AxgraphBackend())`,
the cpu transformer), "aot_eager" (`torch.compile(backend="aot_eager")`: Dynamo and
AOTAutograd running PyTorch's own kernels, so no compiler at all: the floor of a backend
under AOTAutograd's own runtime; on the small net it alone takes about twice eager's
time), "dynamo" (`torch.compile(backend="eager")`: Dynamo's guards and graph call
around PyTorch's own kernels, no AOTAutograd) and "null" (a backend that computes
nothing: its graph is one autograd.Function handing back tensors made at compile time,
so its step is Dynamo's guards, the loss, autograd and the optimizer alone: the floor
of any backend that, like axgraph's thin runtime, runs a graph as one autograd node;
its weights are wrong by design and not checked). Before timing, each other compiled
contestant's parameters after two steps are checked against eager's (a contestant that
disagrees is excluded). Dynamo is reset before each case, so each model compiles as it would in a
process of its own (with static shapes).
"""
from __future__ import annotations

import copy
import sys
from typing import Any, Callable, Dict, List

from . import common
from .common import Case, Verdict

AXGRAPH, EAGER, INDUCTOR, AOT_EAGER, DYNAMO, NULL = ("axgraph", "eager", "inductor", "aot_eager",
                                                      "dynamo", "null")
TOLERANCE = 1e-4


def _models() -> Dict[str, Callable[[], Any]]:
    torch = common.import_torch()
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, width: int = 64, heads: int = 4, classes: int = 10):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.attention = nn.MultiheadAttention(width, heads, batch_first=True)
            self.feed = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                      nn.Linear(4 * width, width))
            self.head = nn.Linear(width, classes)

        def forward(self, x):
            h = self.norm1(x)
            x = x + self.attention(h, h, h, need_weights=False)[0]
            x = x + self.feed(self.norm2(x))
            return self.head(x.mean(1))

    def mlp(*sizes: int) -> Any:
        layers: List[Any] = []
        for a, b in zip(sizes, sizes[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        return nn.Sequential(*layers[:-1])

    return {
        "MLP 784-512-512-10, batch 128": lambda: (mlp(784, 512, 512, 10), (128, 784)),
        "small net 64-32-10, batch 32": lambda: (mlp(64, 32, 10), (32, 64)),
        "transformer block, batch 8, T 32, width 64": lambda: (Block(), (8, 32, 64)),
    }


class Step:
    """One SGD training step of a (possibly compiled) copy of a model."""

    def __init__(self, model: Any, shape: tuple, backend: Any):
        torch = common.import_torch()
        torch.manual_seed(0)
        self.model = copy.deepcopy(model)
        self.net = self.model if backend is None else torch.compile(self.model, backend=backend)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01)
        generator = torch.Generator().manual_seed(1)
        self.x = torch.randn(*shape, generator=generator)
        self.y = torch.randint(0, 10, (shape[0],), generator=generator)
        self.loss = torch.nn.functional.cross_entropy

    def __call__(self) -> Any:
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss(self.net(self.x), self.y)
        loss.backward()
        self.optimizer.step()
        return loss

    def weights(self) -> List[Any]:
        return [p.detach().numpy().copy() for p in self.model.parameters()]


def null_backend(gm: Any, example_inputs: List[Any]) -> Callable[..., Any]:
    """A `torch.compile` backend that computes nothing: one autograd.Function whose
    forward hands back the outputs of one run at compile time and whose backward hands
    back zeros made then (the floor of a backend, see the module docstring)."""
    torch = common.import_torch()
    with torch.no_grad():
        made = gm(*example_inputs)
    outputs = tuple(made) if isinstance(made, (tuple, list)) else (made,)
    gradients = tuple(torch.zeros_like(x) if isinstance(x, torch.Tensor) and x.requires_grad
                      else None for x in example_inputs)

    class Nothing(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *args: Any) -> Any:
            return tuple(o.view_as(o) for o in outputs)

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:
            return gradients

    return torch._dynamo.disable(lambda *args: Nothing.apply(*args))


def make_cases() -> List[Case]:
    cases = []
    for name, factory in _models().items():
        def contestants(factory: Callable[[], Any] = factory) -> Dict[str, Any]:
            torch = common.import_torch()
            torch.manual_seed(0)
            model, shape = factory()

            def axgraph() -> Step:
                from axgraph.frontends.torch import AxgraphBackend, thin_node
                # the node library, compiled in the background on a machine's first use
                # (the Python runtime serving meanwhile), is waited for: the steady state
                # is timed
                thin_node.library()
                return Step(model, shape, AxgraphBackend())
            return {AXGRAPH: axgraph, EAGER: lambda: Step(model, shape, None),
                    INDUCTOR: lambda: Step(model, shape, "inductor"),
                    AOT_EAGER: lambda: Step(model, shape, "aot_eager"),
                    DYNAMO: lambda: Step(model, shape, "eager"),
                    NULL: lambda: Step(model, shape, null_backend)}
        cases.append(Case(name, contestants()))
    return cases


def disagreement(runner: Step, eager: Step) -> float:
    """The largest relative difference of the weights after two steps each."""
    import numpy as np
    for step in (runner, eager):
        for _ in range(2):
            step()
    worst = 0.0
    for a, b in zip(runner.weights(), eager.weights()):
        worst = max(worst, float(np.max(np.abs(a - b)) / (np.max(np.abs(b)) + 1e-12)))
    return worst


def main(argv=None) -> int:
    p = common.parser(__doc__.splitlines()[0])
    args = p.parse_args(argv)
    try:
        torch = common.import_torch()
    except common.Skip as why:
        print(f"skipped: {why}")
        return 0
    torch.set_num_threads(2)
    cases = make_cases()
    settings, reference, only, load = common.start_run(args, EAGER)
    notes: List[str] = []
    timings: Dict[str, Dict[str, Any]] = {}
    verdicts: List[Verdict] = []
    for case in cases:
        # Each case compiles as in a process of its own: after another case's graphs,
        # Dynamo would give the same layers' new shapes symbolic sizes (automatic dynamic
        # shapes), which no user compiling that one model sees
        torch._dynamo.reset()
        runners, skipped = common.setup_contestants(case, only)
        notes += [f"{case.name}: {name} skipped: {why}" for name, why in skipped.items()]
        if EAGER in runners:
            for name in [n for n in runners if n not in (EAGER, NULL)]:
                error = disagreement(runners[name], _fresh_eager(case))
                if not error <= TOLERANCE:
                    notes.append(f"{case.name}: {name} EXCLUDED, weights differ by {error:.1e}")
                    del runners[name]
        print(f"timing {case.name}: {', '.join(runners)} ...", flush=True)
        timings[case.name] = settings.time(runners)
        for other, limit in ((EAGER, 1.0), (INDUCTOR, 1.2)):
            verdicts.append(Verdict(f"{case.name}: axgraph / {other}",
                                    common.ratio(timings[case.name], AXGRAPH, other), limit,
                                    why_missing="a contestant did not run"))
    print()
    columns = [AXGRAPH, EAGER, INDUCTOR, AOT_EAGER, DYNAMO, NULL]
    print(common.ratio_table("Training step (forward + backward + SGD), float32, CPU", timings,
                             columns, reference))
    notes.append("background: " + load.report())
    common.print_notes(notes)
    print()
    common.print_verdicts(verdicts)
    return 0


def _fresh_eager(case: Case) -> Step:
    step: Step = case.contestants[EAGER]()
    return step


if __name__ == "__main__":
    sys.exit(main())
