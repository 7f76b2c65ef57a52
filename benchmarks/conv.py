"""LeNet-style convolutional training step: axgraph's cpu transformer against PyTorch and NumPy.

    python -m benchmarks.conv [--quick] [--no-memory]

Target measured here:
  5. conv-pool-conv-pool-affine training step, batch 64, 28x28 single-channel input:
     cpu <= 0.8x PyTorch eager (issue 27; issue 5 asked 1.5x).

The network is Caffe's LeNet for MNIST without its hidden dense layer: conv 5x5 with 20
channels, ReLU, 2x2 max pool, conv 5x5 with 50 channels, ReLU, 2x2 max pool, affine to 10
classes, softmax cross-entropy averaged over the batch, plain SGD (lr 0.01). Valid
convolutions, so the feature maps go 28 -> 24 -> 12 -> 8 -> 4.

Contestants: PyTorch eager (nn.Conv2d / MaxPool2d / Linear, CrossEntropyLoss, optim.SGD,
2 threads), a hand-written NumPy version (im2col through sliding_window_view and one
matmul per convolution; what a NumPy user writes), and axgraph (neon Convolution, Pooling
and Affine layers, axes found by role, SGD from deriv_many + assign as in benchmarks/mlp.py).
All start from the same parameters; three steps of each are checked against the NumPy
version run in float64 before anything is timed.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from . import common, mlp
from .common import Case, Verdict
from .mlp import LR, STEPS_CHECKED, Trainer, check_trainer

BATCH, SIDE, K1, K2, KSIZE, CLASSES = 64, 28, 20, 50, 5, 10
CASE = f"LeNet step, batch {BATCH}"
AXGRAPH, AXGRAPH_UNFUSED, NUMPY, TORCH = "axgraph cpu", "cpu fuse=False", "numpy im2col", "torch eager"
COLUMNS = [AXGRAPH, AXGRAPH_UNFUSED, NUMPY, TORCH]


@dataclass
class Problem:
    """Parameters in PyTorch's layouts (conv (K, C, R, S), dense (out, in) over (C, H, W))."""

    params: List[np.ndarray]  # conv1 W, b, conv2 W, b, dense W (10, 800), b
    x: np.ndarray  # (batch, 1, 28, 28) float32
    labels: np.ndarray  # (batch,) int64


def make_problem(seed: int = 0) -> Problem:
    rng = np.random.default_rng(seed)

    def uniform(shape, fan_in):
        bound = 1.0 / np.sqrt(fan_in)  # PyTorch's default init range
        return rng.uniform(-bound, bound, shape).astype(np.float32)

    after = (SIDE - KSIZE + 1) // 2
    after = (after - KSIZE + 1) // 2
    params = [uniform((K1, 1, KSIZE, KSIZE), KSIZE * KSIZE), uniform((K1,), KSIZE * KSIZE),
              uniform((K2, K1, KSIZE, KSIZE), K1 * KSIZE * KSIZE),
              uniform((K2,), K1 * KSIZE * KSIZE),
              uniform((CLASSES, K2 * after * after), K2 * after * after),
              uniform((CLASSES,), K2 * after * after)]
    x = rng.random((BATCH, 1, SIDE, SIDE), dtype=np.float32)
    labels = rng.integers(0, CLASSES, BATCH).astype(np.int64)
    return Problem(params, x, labels)


# -- NumPy im2col ---------------------------------------------------------------------------------

class NumpyIm2col(Trainer):
    """The step by hand in NHWC: im2col + one matmul per convolution, col2im by 25 slice-adds.

    NHWC keeps each im2col row in (C, R, S) order, PyTorch's filter flattening,
    and makes the matmul's output already NHWC: no transposes in the forward.
    """

    def __init__(self, problem: Problem, dtype=np.float32):
        w1, b1, w2, b2, wd, bd = problem.params
        self.w = [w1.reshape(K1, -1).astype(dtype), w2.reshape(K2, -1).astype(dtype)]
        self.b = [b1.astype(dtype), b2.astype(dtype)]
        side = wd.shape[1] // K2
        side = int(round(np.sqrt(side)))
        # dense weight over PyTorch's (C, H, W) flattening, re-ordered to NHWC's (H, W, C)
        self.wd = np.ascontiguousarray(wd.reshape(CLASSES, K2, side, side).transpose(0, 2, 3, 1)
                                       .reshape(CLASSES, -1).T, dtype=dtype)
        self.bd = bd.astype(dtype)
        self.x = np.ascontiguousarray(problem.x.transpose(0, 2, 3, 1), dtype=dtype)  # NHWC
        self.y = problem.labels
        self.rows = np.arange(len(self.y))
        self.lr = dtype(LR)
        self.side = side

    @staticmethod
    def _cols(x):
        n, h, w, c = x.shape
        ho, wo = h - KSIZE + 1, w - KSIZE + 1
        windows = sliding_window_view(x, (KSIZE, KSIZE), axis=(1, 2))  # (n, ho, wo, c, R, S)
        return windows.reshape(n * ho * wo, c * KSIZE * KSIZE), (n, ho, wo)

    @staticmethod
    def _pool(a):
        n, h, w, c = a.shape
        blocks = a.reshape(n, h // 2, 2, w // 2, 2, c)
        pooled = blocks.max(axis=(2, 4))
        return pooled, blocks

    @staticmethod
    def _unpool(d, blocks, pooled):
        mask = blocks == pooled[:, :, None, :, None, :]
        grad = mask * d[:, :, None, :, None, :]
        n, h2, _, w2, _, c = blocks.shape
        return grad.reshape(n, h2 * 2, w2 * 2, c)

    def __call__(self):
        w, b = self.w, self.b
        cols1, (n, h1, w1_) = self._cols(self.x)
        z1 = (cols1 @ w[0].T + b[0]).reshape(n, h1, w1_, K1)
        a1 = np.maximum(z1, 0)
        p1, blocks1 = self._pool(a1)
        cols2, (_, h2, w2_) = self._cols(p1)
        z2 = (cols2 @ w[1].T + b[1]).reshape(n, h2, w2_, K2)
        a2 = np.maximum(z2, 0)
        p2, blocks2 = self._pool(a2)
        flat = p2.reshape(n, -1)
        logits = flat @ self.wd + self.bd
        shifted = logits - logits.max(axis=1, keepdims=True)
        exps = np.exp(shifted)
        sums = exps.sum(axis=1, keepdims=True)
        loss = np.mean(np.log(sums[:, 0]) - shifted[self.rows, self.y])
        d = exps / sums
        d[self.rows, self.y] -= 1
        d /= n
        dwd, dbd = flat.T @ d, d.sum(axis=0)
        dp2 = (d @ self.wd.T).reshape(p2.shape)
        dz2 = self._unpool(dp2, blocks2, p2) * (z2 > 0)
        dz2_flat = dz2.reshape(-1, K2)
        dw2, db2 = dz2_flat.T @ cols2, dz2_flat.sum(axis=0)
        dcols = (dz2_flat @ w[1]).reshape(n, h2, w2_, K1, KSIZE, KSIZE)
        dp1 = np.zeros_like(p1)
        for r in range(KSIZE):
            for s in range(KSIZE):
                dp1[:, r:r + h2, s:s + w2_, :] += dcols[:, :, :, :, r, s]
        dz1 = self._unpool(dp1, blocks1, p1) * (z1 > 0)
        dz1_flat = dz1.reshape(-1, K1)
        dw1, db1 = dz1_flat.T @ cols1, dz1_flat.sum(axis=0)
        for param, grad in ((w[0], dw1), (b[0], db1), (w[1], dw2), (b[1], db2), (self.wd, dwd),
                            (self.bd, dbd)):
            param -= self.lr * grad
        return loss

    def params(self):
        s = self.side
        wd = self.wd.T.reshape(CLASSES, s, s, K2).transpose(0, 3, 1, 2).reshape(CLASSES, -1)
        return [self.w[0].reshape(K1, 1, KSIZE, KSIZE), self.b[0],
                self.w[1].reshape(K2, K1, KSIZE, KSIZE), self.b[1], wd, self.bd]


# -- PyTorch eager ---------------------------------------------------------------------------------

class TorchEager(common.TorchSGDTrainer, Trainer):
    """nn.Sequential(Conv2d, ReLU, MaxPool2d, Conv2d, ReLU, MaxPool2d, Flatten, Linear)."""

    def __init__(self, problem: Problem):
        torch = common.import_torch()
        nn = torch.nn
        self.model = nn.Sequential(nn.Conv2d(1, K1, KSIZE), nn.ReLU(), nn.MaxPool2d(2),
                                   nn.Conv2d(K1, K2, KSIZE), nn.ReLU(), nn.MaxPool2d(2),
                                   nn.Flatten(), nn.Linear(problem.params[4].shape[1], CLASSES))
        self.parameters = list(self.model.parameters())
        with torch.no_grad():
            for p, value in zip(self.parameters, problem.params):
                p.copy_(torch.from_numpy(value))
        self.loss_fn = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.SGD(self.parameters, lr=LR)
        self.x = torch.from_numpy(problem.x)
        self.y = torch.from_numpy(problem.labels)
        self.trained = self.parameters



# -- axgraph ------------------------------------------------------------------------------------

def build_axgraph_graph(problem: Problem):
    """(step op, image placeholder, label placeholder, variables) for the LeNet step."""
    import axgraph as ng
    from axgraph.autodiff import deriv_many
    from axgraph.frontends.neon import (Affine, Convolution, Pooling, Rectlin, Sequential,
                                        Softmax, ar)

    w1, b1, w2, b2, wd, bd = problem.params
    N = ng.make_axis(BATCH, name="N")
    C = ng.make_axis(1, name="C", roles=[ar.Channel])
    H = ng.make_axis(SIDE, name="H", roles=[ar.Height])
    W = ng.make_axis(SIDE, name="W", roles=[ar.Width])
    Y = ng.make_axis(CLASSES, name="Y")
    images = ng.placeholder([N, C, H, W], name="images")
    labels = ng.placeholder([N], dtype=np.int32, name="labels")
    side = int(round(np.sqrt(wd.shape[1] // K2)))
    # Filters have axes (K, C - 1, R - 1, S - 1), PyTorch's (out, in, kh, kw); the dense weight
    # has (Y, K - 1, H - 1, W - 1) over the pooled map's (K, H, W, N) axes, PyTorch's flattening.
    model = Sequential([
        Convolution((KSIZE, KSIZE, K1), filter_init=w1, bias_init=b1, activation=Rectlin()),
        Pooling(2),
        Convolution((KSIZE, KSIZE, K2), filter_init=w2, bias_init=b2, activation=Rectlin()),
        Pooling(2),
        Affine(axes=Y, weight_init=wd.reshape(CLASSES, K2, side, side), bias_init=bd,
               activation=Softmax()),
    ])
    probs = model(images)
    loss = ng.mean(ng.cross_entropy_multi(probs, ng.one_hot(labels, axis=Y)), out_axes=())
    variables = model.variables()  # conv1 W, b, conv2 W, b, dense W, b: the Problem's order
    with ng.Op.saved_user_deps():
        grads = deriv_many(loss, variables)
        updates = [ng.assign(v, v - LR * g) for v, g in zip(variables, grads)]
        update = ng.doall([loss, *grads, *updates])
    return ng.sequential([update, loss]), images, labels, variables


class AxgraphCpu(mlp.AxgraphCpu):
    """The LeNet step on make_transformer("cpu"), as benchmarks/mlp.py runs its MLP."""

    build_graph = staticmethod(build_axgraph_graph)

    def __init__(self, problem: Problem, options: Optional[Dict[str, Any]] = None):
        super().__init__(problem, options)
        self.shapes = [p.shape for p in problem.params]

    def params(self):
        return [np.asarray(v).reshape(shape) for v, shape in zip(self.read(), self.shapes)]


class AxgraphUnfused(AxgraphCpu):
    def __init__(self, problem: Problem):
        super().__init__(problem, options={"fuse": False, "engine": "auto"})


CASES = [Case(CASE, {AXGRAPH: lambda: AxgraphCpu(make_problem()),
                     AXGRAPH_UNFUSED: lambda: AxgraphUnfused(make_problem()),
                     NUMPY: lambda: NumpyIm2col(make_problem()),
                     TORCH: lambda: TorchEager(make_problem())})]


def reference_run(problem: Problem) -> Dict[str, Any]:
    ref = NumpyIm2col(problem, dtype=np.float64)
    initial = [np.array(p, np.float64) for p in ref.params()]
    losses = [float(ref()) for _ in range(STEPS_CHECKED)]
    return {"losses": losses, "params": [np.array(p) for p in ref.params()], "initial": initial}


def main(argv=None) -> int:
    p = common.parser(__doc__.splitlines()[0])
    args = p.parse_args(argv)
    if args.probe:
        return common.run_probe_child(CASES, args)
    settings, reference, only, load = common.start_run(args, TORCH)

    notes: List[str] = []
    case = CASES[0]
    runners, skipped = common.setup_contestants(case, only)
    notes += [f"{name} skipped: {why}" for name, why in skipped.items()]
    ref = reference_run(make_problem())
    for name in list(runners):
        problem = check_trainer(runners[name], ref)
        if problem:
            notes.append(f"{name} EXCLUDED, wrong result: {problem}")
            del runners[name]
    if AXGRAPH in runners:
        ax = runners[AXGRAPH]
        notes.append(f"axgraph options {common.describe_options(ax.options)}"
                     + (f"; {ax.note}" if ax.note else ""))
    print(f"timing {case.name}: {', '.join(runners)} ...", flush=True)
    timings = {case.name: settings.time(runners)}
    memory = {}
    if not args.no_memory:
        memory = {case.name: {name: common.probe_memory("benchmarks.conv", case.name, name,
                                                        args.quick) for name in runners}}
    print()
    columns = [c for c in COLUMNS if c in timings[case.name]]
    print(common.ratio_table("Convolutional training step (forward + backward + SGD), float32",
                             timings, columns, reference))
    if memory:
        print()
        print(common.value_table("Peak memory of steady steps above the pre-first-step baseline "
                                 "(RSS high-water mark, fresh process each)",
                                 {c: {n: m.get("peak") for n, m in per.items()}
                                  for c, per in memory.items()}, columns, common.format_mb))
        for name, m in memory[case.name].items():
            if "error" in m:
                notes.append(f"memory probe of {name} failed: {m['error']}")
    notes.append("background: " + load.report())
    common.print_notes(notes)
    print()
    common.print_verdicts([
        Verdict("5. LeNet step, batch 64: cpu / torch eager",
                common.ratio(timings[case.name], AXGRAPH, TORCH), 0.8,
                why_missing="axgraph or torch missing"),
    ])
    return 0


if __name__ == "__main__":
    sys.exit(main())
