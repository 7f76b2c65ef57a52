"""AdamW, gradient clipping and the schedules against PyTorch: 20 steps of a small MLP.

Both sides start from the same float32 weights and see the same batches; PyTorch runs
``torch.optim`` with ``clip_grad_norm_`` and its own LR schedulers. After every step the
weights must agree to float32 tolerance.
"""
from __future__ import annotations

import numpy as np
import pytest

import axgraph as ng
from axgraph.frontends.neon import (Adam, AdamW, GradientDescentMomentum, PowerSchedule, Schedule,
                                    WarmupCosineSchedule)
from axgraph.frontends.neon.optimizer import OptimizerError

torch = pytest.importorskip("torch")

STEPS, BATCH, FEATURES, HIDDEN, CLASSES = 20, 8, 5, 6, 3


def initial_weights(seed=0):
    rng = np.random.default_rng(seed)
    return {"W1": (rng.standard_normal((FEATURES, HIDDEN)) * 0.8).astype(np.float32),
            "b1": (rng.standard_normal(HIDDEN) * 0.1).astype(np.float32),
            "W2": (rng.standard_normal((HIDDEN, CLASSES)) * 0.8).astype(np.float32),
            "b2": np.zeros(CLASSES, np.float32)}


def batches(seed=1):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((BATCH, FEATURES)).astype(np.float32),
             rng.standard_normal((BATCH, CLASSES)).astype(np.float32)) for _ in range(STEPS)]


def axgraph_run(backend, make_optimizer, weights, data):
    """The weights after each step, and each step's loss, trained by axgraph."""
    N, F = ng.make_axis(BATCH, name="N"), ng.make_axis(FEATURES, name="F")
    H, C = ng.make_axis(HIDDEN, name="H"), ng.make_axis(CLASSES, name="C")
    params = {"W1": ng.variable([F, H], initial_value=weights["W1"], name="W1"),
              "b1": ng.variable([H], initial_value=weights["b1"], name="b1"),
              "W2": ng.variable([H, C], initial_value=weights["W2"], name="W2"),
              "b2": ng.variable([C], initial_value=weights["b2"], name="b2")}
    x, y = ng.placeholder([N, F], name="x"), ng.placeholder([N, C], name="y")
    hidden = ng.tanh(ng.dot(x, params["W1"]) + params["b1"])
    out = ng.dot(hidden, params["W2"]) + params["b2"]
    loss = ng.mean(ng.square(out - y), out_axes=())
    optimizer = make_optimizer()
    step = ng.sequential([optimizer(loss), loss])
    history = []
    with ng.make_transformer(backend) as transformer:
        train = transformer.computation([step, *params.values()], x, y)
        for xb, yb in data:
            loss_value, *values = train(xb, yb)
            history.append((float(loss_value), dict(zip(params, values))))
    return history, optimizer


def torch_run(make_optimizer, make_scheduler, weights, data, clip_norm=None):
    params = {name: torch.tensor(value, requires_grad=True) for name, value in weights.items()}
    optimizer = make_optimizer(list(params.values()))
    scheduler = make_scheduler(optimizer) if make_scheduler else None
    history = []
    for xb, yb in data:
        x, y = torch.from_numpy(xb), torch.from_numpy(yb)
        out = torch.tanh(x @ params["W1"] + params["b1"]) @ params["W2"] + params["b2"]
        loss = torch.mean((out - y) ** 2)
        optimizer.zero_grad()
        loss.backward()
        if clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(list(params.values()), clip_norm)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        history.append((float(loss.detach()), {n: p.detach().numpy().copy() for n, p in params.items()}))
    return history


def warmup_cosine(optimizer, warmup=4, total=16, eta_min=1e-4):
    linear = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=1 / warmup,
                                               end_factor=1.0, total_iters=warmup - 1)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total - warmup,
                                                        eta_min=eta_min)
    return torch.optim.lr_scheduler.SequentialLR(optimizer, [linear, cosine], milestones=[warmup])


CASES = {
    "adamw": (lambda: AdamW(0.05, weight_decay=0.1),
              lambda p: torch.optim.AdamW(p, lr=0.05, weight_decay=0.1), None, None),
    "adamw_defaults": (lambda: AdamW(),
                       lambda p: torch.optim.AdamW(p), None, None),
    "adamw_clip_warmup_cosine": (
        lambda: AdamW(0.05, beta_1=0.8, beta_2=0.99, epsilon=1e-6, weight_decay=0.2,
                      gradient_clip_norm=0.5,
                      schedule=WarmupCosineSchedule(4, STEPS, min_rate=1e-4)),
        lambda p: torch.optim.AdamW(p, lr=0.05, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.2),
        lambda o: warmup_cosine(o, 4, STEPS), 0.5),
    "adam_step_decay": (lambda: Adam(0.05, schedule=PowerSchedule(5, 0.5)),
                        lambda p: torch.optim.Adam(p, lr=0.05),
                        lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=5, gamma=0.5), None),
    "sgd_multistep_clip": (
        lambda: GradientDescentMomentum(0.3, gradient_clip_norm=0.3,
                                        schedule=Schedule(step_config=[3, 11], change=0.2)),
        lambda p: torch.optim.SGD(p, lr=0.3),
        lambda o: torch.optim.lr_scheduler.MultiStepLR(o, milestones=[3, 11], gamma=0.2), 0.3),
    # neon's velocity holds past rates (v = mu v - alpha g), PyTorch's buffer does not
    # (b = mu b + g, step alpha b): the two agree while the rate is constant
    "momentum_clip": (
        lambda: GradientDescentMomentum(0.1, momentum_coef=0.9, gradient_clip_norm=0.3),
        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), None, 0.3),
}


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_twenty_steps_match_torch(backend, case):
    ours, theirs, scheduler, clip = CASES[case]
    weights, data = initial_weights(), batches()
    expected = torch_run(theirs, scheduler, weights, data, clip)
    actual, _ = axgraph_run(backend, ours, weights, data)
    for step, ((loss, values), (torch_loss, torch_values)) in enumerate(zip(actual, expected)):
        np.testing.assert_allclose(loss, torch_loss, rtol=2e-5, err_msg=f"loss of step {step}")
        for name in values:  # float32 drift: Adam's m / sqrt(v) amplifies it where m is near 0
            np.testing.assert_allclose(values[name], torch_values[name], rtol=1e-4, atol=1e-5,
                                       err_msg=f"{name} after step {step}")
    # the run moved the weights 1000 times the tolerance: the comparison means something
    assert np.max(np.abs(actual[-1][1]["W1"] - weights["W1"])) > 1e-2


def test_decay_filter_matches_torch_parameter_groups():
    """Decay on the matrices only = PyTorch's groups: weights decayed, biases not."""
    weights, data = initial_weights(), batches()

    def groups(params):
        return torch.optim.AdamW([{"params": [params[0], params[2]], "weight_decay": 0.3},
                                  {"params": [params[1], params[3]], "weight_decay": 0.0}],
                                 lr=0.05)

    expected = torch_run(groups, None, weights, data)
    actual, _ = axgraph_run("numpy", lambda: AdamW(0.05, weight_decay=0.3,
                                                   decay_filter=lambda v: len(v.axes) > 1),
                            weights, data)
    everything, _ = axgraph_run("numpy", lambda: AdamW(0.05, weight_decay=0.3), weights, data)
    for name in weights:
        np.testing.assert_allclose(actual[-1][1][name], expected[-1][1][name], rtol=1e-4,
                                   atol=1e-5, err_msg=name)
    assert np.max(np.abs(everything[-1][1]["b1"] - actual[-1][1]["b1"])) > 1e-4
    with pytest.raises(OptimizerError, match="decay_filter must be a function"):
        AdamW(decay_filter=3)


def test_clipping_actually_clipped():
    """With a bound this small every step of the clipped case is scaled: without clipping
    the weights end elsewhere, so the test above checks the clipping itself."""
    weights, data = initial_weights(), batches()
    clipped, _ = axgraph_run("numpy", lambda: AdamW(0.05, gradient_clip_norm=1e-3), weights, data)
    free, _ = axgraph_run("numpy", lambda: AdamW(0.05), weights, data)
    assert np.max(np.abs(clipped[-1][1]["W1"] - free[-1][1]["W1"])) > 1e-3


@pytest.mark.parametrize("make_schedule, make_torch", [
    (lambda: WarmupCosineSchedule(4, 16, min_rate=1e-4), warmup_cosine),
    (lambda: WarmupCosineSchedule(0, 10),                         # no warmup: the cosine alone
     lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=10)),
    (lambda: PowerSchedule(3, 0.1), lambda o: torch.optim.lr_scheduler.StepLR(o, 3, 0.1)),
    (lambda: Schedule([2, 5], 0.5), lambda o: torch.optim.lr_scheduler.MultiStepLR(o, [2, 5], 0.5)),
])
def test_schedule_rates_match_torch(make_schedule, make_torch):
    parameter = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.SGD([parameter], lr=0.3)
    scheduler = make_torch(optimizer)
    expected = []
    for _ in range(20):
        expected.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    schedule = make_schedule()
    actual = [schedule.learning_rate_at(0.3, t, np.float64) for t in range(len(expected))]
    limit = getattr(schedule, "total_steps", len(expected))   # PyTorch's cosine then rises again
    np.testing.assert_allclose(actual[:limit + 1], expected[:limit + 1], rtol=1e-9, atol=1e-12)


def test_warmup_cosine_holds_the_minimum_after_total_steps():
    schedule = WarmupCosineSchedule(2, 6, min_rate=0.01)
    assert [schedule.learning_rate_at(1.0, t, np.float64) for t in (6, 7, 100)] == [0.01] * 3


def test_schedule_and_adamw_errors():
    from axgraph.errors import AxgraphValueError
    with pytest.raises(AxgraphValueError, match="total_steps must be an int >= 5"):
        WarmupCosineSchedule(4, 4)
    with pytest.raises(AxgraphValueError, match="warmup_steps"):
        WarmupCosineSchedule(-1, 4)
    with pytest.raises(AxgraphValueError, match="min_rate"):
        WarmupCosineSchedule(1, 4, min_rate=-0.1)
    with pytest.raises(AxgraphValueError, match="step must be a non-negative int"):
        WarmupCosineSchedule(1, 4).learning_rate_at(1.0, -1)
    with pytest.raises(OptimizerError, match="weight_decay must be a non-negative number"):
        AdamW(weight_decay=-1)


def test_optimizer_slots_name_every_state_tensor():
    weights, data = initial_weights(), batches()[:1]
    _, optimizer = axgraph_run("numpy", lambda: AdamW(0.05), weights, data)
    assert sorted(v.name for v in optimizer.slots) == ["W1", "W2", "b1", "b2"]
    assert all(sorted(slots) == ["m", "v"] for slots in optimizer.slots.values())
    assert optimizer.iteration is not None and optimizer.iteration.dtype == np.int32
