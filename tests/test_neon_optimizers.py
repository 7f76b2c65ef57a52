"""Optimizers: the first steps on a small quadratic equal NumPy written from neon's formulas."""
import numpy as np
import pytest

import axgraph as ng
from axgraph.frontends.neon.optimizer import (Adagrad, Adam, ExpSchedule, GradientDescentMomentum,
                                              PowerSchedule, RMSProp, Schedule, StepSchedule)

P = np.array([1.0, -2.0, 0.5])
K = np.array([1.0, 3.0, 0.5])
W0 = np.array([0.3, 0.7, -1.2])
U0 = np.array([2.0, -1.0])


def build(dtype=np.float64):
    """cost = sum(K * (w - P)**2) + 0.5 * sum(u**2) + sum(w) * sum(u)."""
    A = ng.make_axis(3, name="A")
    B = ng.make_axis(2, name="B")
    w = ng.variable([A], dtype=dtype, initial_value=W0, name="w")
    u = ng.variable([B], dtype=dtype, initial_value=U0, name="u")
    p = ng.constant(P, [A], dtype=dtype)
    k = ng.constant(K, [A], dtype=dtype)
    cost = (ng.sum(k * ng.square(w - p), out_axes=()) + 0.5 * ng.sum(ng.square(u), out_axes=())
            + ng.sum(w, out_axes=()) * ng.sum(u, out_axes=()))
    return w, u, cost


def np_cost(w, u):
    return np.sum(K * (w - P) ** 2) + 0.5 * np.sum(u ** 2) + np.sum(w) * np.sum(u)


def np_grads(w, u):
    return [2 * K * (w - P) + np.sum(u), u + np.sum(w)]


# -- hand-written NumPy versions of the rules (neon's documented formulas) ----------------

def effective(grads, thetas, clip_norm=None, clip_value=None, wdecay=0.0):
    scale = 1.0
    if clip_norm is not None:
        norm = np.sqrt(sum(np.sum(g ** 2) for g in grads))
        scale = clip_norm / max(norm, clip_norm)
    out = []
    for g, theta in zip(grads, thetas):
        if clip_value is not None:
            g = np.clip(g, -clip_value, clip_value)
        out.append(scale * g + wdecay * theta)
    return out


def gdm_rule(mu=0.0, nesterov=False):
    def rule(theta, g, state, alpha, t):
        v = state.get("v", np.zeros_like(theta))
        v = mu * v - alpha * g
        state["v"] = v
        return theta + (mu * v - alpha * g if nesterov else v)
    return rule


def rmsprop_rule(decay, eps):
    def rule(theta, g, state, alpha, t):
        ms = decay * state.get("ms", np.zeros_like(theta)) + (1 - decay) * g ** 2
        state["ms"] = ms
        return theta - alpha * g / (np.sqrt(ms + eps) + eps)
    return rule


def adam_rule(b1, b2, eps):
    def rule(theta, g, state, alpha, t):
        m = b1 * state.get("m", np.zeros_like(theta)) + (1 - b1) * g
        v = b2 * state.get("v", np.zeros_like(theta)) + (1 - b2) * g ** 2
        state["m"], state["v"] = m, v
        m_hat, v_hat = m / (1 - b1 ** t), v / (1 - b2 ** t)
        return theta - alpha * m_hat / (np.sqrt(v_hat) + eps)
    return rule


def adagrad_rule(eps):
    def rule(theta, g, state, alpha, t):
        total = state.get("G", np.zeros_like(theta)) + g ** 2
        state["G"] = total
        return theta - alpha * g / np.sqrt(total + eps)
    return rule


def reference_steps(rule, rate, steps=3, **clip):
    """[(loss before the step, w after, u after)] for `steps` steps."""
    thetas, states, out = [W0.copy(), U0.copy()], [{}, {}], []
    for t in range(steps):
        loss = np_cost(*thetas)
        grads = effective(np_grads(*thetas), thetas, **clip)
        thetas = [rule(theta, g, state, rate(t), t + 1)
                  for theta, g, state in zip(thetas, grads, states)]
        out.append((loss, *thetas))
    return out


CASES = {
    "sgd": (lambda: GradientDescentMomentum(0.1), gdm_rule(), {}),
    "momentum": (lambda: GradientDescentMomentum(0.1, momentum_coef=0.9), gdm_rule(0.9), {}),
    "nesterov": (lambda: GradientDescentMomentum(0.1, momentum_coef=0.9, nesterov=True),
                 gdm_rule(0.9, nesterov=True), {}),
    "wdecay": (lambda: GradientDescentMomentum(0.1, momentum_coef=0.5, wdecay=0.01),
               gdm_rule(0.5), {"wdecay": 0.01}),
    "clip_value": (lambda: GradientDescentMomentum(0.1, gradient_clip_value=0.5), gdm_rule(),
                   {"clip_value": 0.5}),
    "clip_norm": (lambda: GradientDescentMomentum(0.1, momentum_coef=0.9, gradient_clip_norm=1.0),
                  gdm_rule(0.9), {"clip_norm": 1.0}),
    "rmsprop": (lambda: RMSProp(), rmsprop_rule(0.95, 1e-6), {}),
    "rmsprop_tuned": (lambda: RMSProp(0.5, 0.05, epsilon=1e-3, gradient_clip_value=1.0),
                      rmsprop_rule(0.5, 1e-3), {"clip_value": 1.0}),
    "adam": (lambda: Adam(), adam_rule(0.9, 0.999, 1e-8), {}),
    "adam_tuned": (lambda: Adam(0.1, beta_1=0.5, beta_2=0.9, epsilon=1e-4, wdecay=0.1),
                   adam_rule(0.5, 0.9, 1e-4), {"wdecay": 0.1}),
    "adagrad": (lambda: Adagrad(), adagrad_rule(1e-8), {}),
    "adagrad_clip_norm": (lambda: Adagrad(0.5, gradient_clip_norm=2.0), adagrad_rule(1e-8),
                          {"clip_norm": 2.0}),
}
RATES = {"sgd": 0.1, "momentum": 0.1, "nesterov": 0.1, "wdecay": 0.1, "clip_value": 0.1,
         "clip_norm": 0.1, "rmsprop": 2e-3, "rmsprop_tuned": 0.05, "adam": 1e-3,
         "adam_tuned": 0.1, "adagrad": 0.01, "adagrad_clip_norm": 0.5}


def run_steps(transformer, optimizer, steps=3, dtype=np.float64):
    w, u, cost = build(dtype)
    step = ng.sequential([optimizer(cost), cost])
    computation = transformer.computation([step, w, u])
    return [computation() for _ in range(steps)]


@pytest.mark.parametrize("case", sorted(CASES))
def test_first_three_steps_match_numpy(transformer, case):
    make, rule, clip = CASES[case]
    got = run_steps(transformer, make())
    expected = reference_steps(rule, lambda t: RATES[case], **clip)
    for step, (ours, theirs) in enumerate(zip(got, expected)):
        for name, a, b in zip(("loss", "w", "u"), ours, theirs):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12,
                                       err_msg=f"{case}: {name} after step {step + 1}")


def test_float32_variables_train_in_float32(transformer):
    got = run_steps(transformer, Adam(0.1), dtype=np.float32)
    expected = reference_steps(adam_rule(0.9, 0.999, 1e-8), lambda t: 0.1)
    assert got[-1][1].dtype == np.float32
    np.testing.assert_allclose(got[-1][1], expected[-1][1], rtol=1e-4)


SCHEDULES = {
    "constant": (Schedule(), [0.1] * 7),
    "listed": (Schedule([2, 5], 0.5), [0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025]),
    "every_3": (Schedule(3, 0.1), [0.1, 0.1, 0.1, 0.01, 0.01, 0.01, 0.001]),
    "power": (PowerSchedule(2, 0.5), [0.1, 0.1, 0.05, 0.05, 0.025, 0.025, 0.0125]),
    "exp": (ExpSchedule(0.5), [0.1 / (1 + 0.5 * t) for t in range(7)]),
    "step": (StepSchedule([1, 4], [0.05, 0.02]), [0.1, 0.05, 0.05, 0.05, 0.02, 0.02, 0.02]),
}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_schedule_learning_rates(transformer, name):
    schedule, expected = SCHEDULES[name]
    optimizer = GradientDescentMomentum(0.1, schedule=schedule)
    w, u, cost = build()
    step = ng.sequential([optimizer(cost), cost])
    computation = transformer.computation([step, optimizer.learning_rate_op])
    rates = [float(computation()[1]) for _ in expected]
    np.testing.assert_allclose(rates, expected, rtol=1e-12)
    assert int(transformer.computation(optimizer.iteration)()) == len(expected)


def test_schedule_drives_the_updates(transformer):
    schedule = Schedule([1, 2], 0.5)
    got = run_steps(transformer, GradientDescentMomentum(0.2, momentum_coef=0.9, schedule=schedule))
    expected = reference_steps(gdm_rule(0.9), lambda t: 0.2 * 0.5 ** t)
    np.testing.assert_allclose(got[-1][1], expected[-1][1], rtol=1e-9)


def test_update_runs_only_when_named(transformer):
    w, u, cost = build()
    update = GradientDescentMomentum(0.1)(cost)
    later = ng.sum(w, out_axes=())                  # created after the update: independent of it
    read = transformer.computation([cost, later])
    first = read()
    assert read() == first
    transformer.computation(update)()
    assert read()[0] < first[0]


def test_explicit_variables_leave_the_others_alone(transformer):
    w, u, cost = build()
    step = GradientDescentMomentum(0.1)(cost, variables=[u])
    computation = transformer.computation([step, w, u])
    _, w_value, u_value = computation()
    np.testing.assert_array_equal(w_value, W0)
    np.testing.assert_allclose(u_value, U0 - 0.1 * np_grads(W0, U0)[1])


def test_cost_with_axes_is_averaged_over_the_batch(transformer):
    N = ng.make_axis(4, name="N")
    A = ng.make_axis(2, name="A")
    w = ng.variable([A], dtype=np.float64, initial_value=np.array([1.0, -1.0]), name="w")
    x = ng.constant(np.arange(8.0).reshape(2, 4), [A, N], dtype=np.float64)
    per_example = ng.sum(w * x, out_axes=[N])
    step = GradientDescentMomentum(1.0)(per_example)
    _, value = transformer.computation([step, w])()
    np.testing.assert_allclose(value, [1.0, -1.0] - np.arange(8.0).reshape(2, 4).mean(axis=1))


RECURRENT_COST_STEPS = {  # optimizer, step as a function of the gradient g (by hand)
    "gdm": (lambda: GradientDescentMomentum(0.5), lambda g: 0.5 * g),
    "rmsprop": (lambda: RMSProp(0.5, 0.5, epsilon=1.0),
                lambda g: 0.5 * g / (np.sqrt(0.5 * g ** 2 + 1.0) + 1.0)),
}


@pytest.mark.parametrize("case", sorted(RECURRENT_COST_STEPS))
def test_cost_with_a_recurrent_axis_is_summed_over_time_as_in_v04(transformer, case):
    """v0.4: grad of sum(cost) over all axes / len(N); not the mean over (REC, N)."""
    make, step = RECURRENT_COST_STEPS[case]
    T, N, A = ng.make_axis(3, name="REC"), ng.make_axis(4, name="N"), ng.make_axis(2, name="A")
    x_value = np.arange(24.0).reshape(2, 3, 4) / 10
    w = ng.variable([A], dtype=np.float64, initial_value=np.array([1.0, -1.0]), name="w")
    x = ng.constant(x_value, [A, T, N], dtype=np.float64)
    cost = ng.sum(w * x, out_axes=[T, N])           # one value per example and time step
    _, value = transformer.computation([make()(cost), w])()
    grad = x_value.sum(axis=(1, 2)) / 4              # d/dw of the sum over (REC, N) / len(N)
    np.testing.assert_allclose(value, [1.0, -1.0] - step(grad))


def test_positional_arguments_follow_v04():
    rmsprop = RMSProp(0.95, 2e-3)
    assert (rmsprop.decay_rate, rmsprop.learning_rate) == (0.95, 2e-3)
    gdm = GradientDescentMomentum(0.1, 0.9, False, 1e-4)
    assert (gdm.learning_rate, gdm.momentum_coef, gdm.wdecay) == (0.1, 0.9, 1e-4)
    with pytest.raises(ng.AxgraphError, match="stochastic_round"):
        GradientDescentMomentum(0.1, 0.9, True)


def test_errors_name_the_problem():
    A = ng.make_axis(2, name="A")
    no_variables = ng.sum(ng.constant(np.ones(2), [A]), out_axes=())
    with pytest.raises(ng.GraphError, match="no trainable variable"):
        GradientDescentMomentum(0.1)(no_variables)
    counter = ng.variable([A], dtype=np.int32, initial_value=0, name="counter")
    with pytest.raises(ng.DTypeError, match="counter"):
        GradientDescentMomentum(0.1)(ng.sum(counter, out_axes=()), variables=[counter])
    with pytest.raises(ValueError):
        GradientDescentMomentum(-1.0)
    with pytest.raises(ValueError):
        Adam(beta_1=1.0)
    with pytest.raises(ValueError):
        Schedule([3, 2], 0.5)
    with pytest.raises(TypeError, match="StepSchedule"):
        Schedule([1, 2], [0.1, 0.2])
    with pytest.raises(ValueError):
        StepSchedule([1, 2], [0.1])
