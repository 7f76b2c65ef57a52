"""Compile once per binding, visibly: a computation over a batch axis without a length
runs any batch fed to it; cpu builds a program per batch length in a bounded LRU cache that
`computation.cache_info()` shows, the other backends never build another, and the results
equal those of graphs built with the lengths fixed (and NumPy's, written by hand)."""
import weakref

import numpy as np
import pytest

import axgraph as ng
from axgraph import core
from axgraph.core import interpreter

FEATURES, HIDDEN, CLASSES, RATE, MOMENTUM = 64, 32, 10, 0.1, 0.9
BATCHES = (32, 64, 32)


def _initial_weights():
    rng = np.random.default_rng(7)
    return [rng.uniform(-0.3, 0.3, (HIDDEN, FEATURES)), np.zeros(HIDDEN),
            rng.uniform(-0.3, 0.3, (CLASSES, HIDDEN)), np.zeros(CLASSES)]


class DigitsMLP:
    """The digits MLP (8x8 pixels, tanh hidden layer, softmax over 10 classes) trained by
    SGD with momentum, its variables shared by every step built from it."""

    def __init__(self):
        self.F = ng.make_axis(FEATURES, name="F")
        self.H = ng.make_axis(HIDDEN, name="H")
        self.Y = ng.make_axis(CLASSES, name="Y")
        axes = [[self.H, self.F], [self.H], [self.Y, self.H], [self.Y]]
        self.weights = [ng.variable(a, initial_value=v, dtype=np.float64)
                        for a, v in zip(axes, _initial_weights())]
        self.velocities = [ng.persistent_tensor(a, initial_value=0.0, dtype=np.float64)
                           for a in axes]

    def step(self, N):
        """(images, labels, one training step returning the mean loss before the update)
        for the batch axis N."""
        x = ng.placeholder([self.F, N], dtype=np.float64, name="images")
        y = ng.placeholder([N], dtype=np.int32, name="labels")
        w1, b1, w2, b2 = self.weights
        with ng.Op.saved_user_deps():
            hidden = ng.tanh(ng.dot(w1, x) + b1)
            probabilities = ng.softmax(ng.dot(w2, hidden) + b2, normalization_axes=[self.Y])
            loss = ng.mean(ng.cross_entropy_multi(probabilities, ng.one_hot(y, axis=self.Y)),
                           out_axes=())
            gradients = [ng.deriv(loss, w) for w in self.weights]
            updates = []
            for w, v, g in zip(self.weights, self.velocities, gradients):
                updates += [ng.assign(v, MOMENTUM * v - RATE * g), ng.assign(w, w + v)]
            train = ng.doall([loss, *gradients, *updates])
        return x, y, ng.sequential([train, loss])


def _numpy_training(batches):
    """The same steps written by hand in float64: the losses and the final weights."""
    params = _initial_weights()
    velocities = [np.zeros_like(p) for p in params]
    losses = []
    for x, labels in batches:
        w1, b1, w2, b2 = params
        n = x.shape[1]
        hidden = np.tanh(w1 @ x + b1[:, None])
        logits = w2 @ hidden + b2[:, None]
        p = np.exp(logits - logits.max(axis=0))
        p /= p.sum(axis=0)
        targets = np.eye(CLASSES)[:, labels]
        losses.append(-np.sum(targets * np.log(p)) / n)
        d_logits = (p - targets) / n
        d_hidden = (w2.T @ d_logits) * (1 - hidden ** 2)
        gradients = [d_hidden @ x.T, d_hidden.sum(axis=1), d_logits @ hidden.T,
                     d_logits.sum(axis=1)]
        for i, g in enumerate(gradients):
            velocities[i] = MOMENTUM * velocities[i] - RATE * g
            params[i] = params[i] + velocities[i]
    return np.array(losses), params


@pytest.fixture
def batches(rng):
    return [(rng.random((FEATURES, n)), rng.integers(0, CLASSES, n).astype(np.int32))
            for n in BATCHES]


def _train_polymorphic(backend, batches, **options):
    """The steps of one computation over a batch axis without a length."""
    model = DigitsMLP()
    x, y, step = model.step(ng.make_axis(name="N"))
    with ng.make_transformer(backend, **options) as t:
        train = t.computation(step, x, y)
        losses = np.array([train(images, labels) for images, labels in batches])
        return losses, list(t.computation(model.weights)()), train.cache_info()


def test_the_batch_polymorphic_digits_mlp_step_compiles_twice_on_cpu(batches):
    losses, weights, info = _train_polymorphic("cpu", batches)
    assert (info.misses, info.hits, info.currsize, info.maxsize) == (2, 1, 2, 8)
    assert info.keys == ({"N": 64}, {"N": 32})  # the 32 program, used last, is newest
    expected_losses, expected_weights = _numpy_training(batches)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-12)
    for got, expected in zip(weights, expected_weights):
        np.testing.assert_allclose(got, expected, rtol=1e-11, atol=1e-14)


def test_the_polymorphic_step_equals_steps_built_with_fixed_batch_lengths(batches):
    # One model, one fixed-length step per batch length, sharing the variables.
    model = DigitsMLP()
    steps = {n: model.step(ng.make_axis(n, name="N")) for n in set(BATCHES)}
    with ng.make_transformer("cpu") as t:
        trains = {n: t.computation(step, x, y) for n, (x, y, step) in steps.items()}
        fixed_losses = np.array([trains[images.shape[1]](images, labels)
                                 for images, labels in batches])
        fixed_weights = t.computation(model.weights)()
        fixed_source = trains[32].source
    losses, weights, _ = _train_polymorphic("cpu", batches)
    np.testing.assert_allclose(losses, fixed_losses, rtol=1e-14)
    for got, expected in zip(weights, fixed_weights):
        np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-16)
    # The program built for N = 32 is the fixed-length graph's, line for line: 1/N is a
    # constant in it, not a DimValue computed per call.
    model = DigitsMLP()
    x, y, step = model.step(ng.make_axis(name="N"))
    with ng.make_transformer("cpu") as t:
        train = t.computation(step, x, y)
        train(*batches[0])
        assert train.source == fixed_source
        assert "DimValue" in [n.op for n in train.function.nodes]  # symbolic before binding


@pytest.mark.parametrize("backend", ["numpy", "interpreter"])
def test_backends_that_evaluate_lengths_per_call_never_build_another_program(
        backend, batches, monkeypatch):
    compiled = []
    original = interpreter.InterpretedFunction.__init__
    monkeypatch.setattr(interpreter.InterpretedFunction, "__init__",
                        lambda self, f: compiled.append(f) or original(self, f))
    model = DigitsMLP()
    x, y, step = model.step(ng.make_axis(name="N"))
    with ng.make_transformer(backend) as t:
        train = t.computation(step, x, y)
        losses = [train(*batches[0])]
        built = len(compiled)  # interpreter: the step, and the stored tensors' initial values
        losses += [train(images, labels) for images, labels in batches[1:]]
        assert len(compiled) == built  # nothing for N = 64, nor for N = 32 again
        assert train.cache_info() == core.CacheInfo(hits=3, misses=0, maxsize=0, currsize=0,
                                                    keys=())
        weights = t.computation(model.weights)()
    expected_losses, expected_weights = _numpy_training(batches)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-12)
    for got, expected in zip(weights, expected_weights):
        np.testing.assert_allclose(got, expected, rtol=1e-11, atol=1e-14)


def test_evicting_programs_keeps_training_right(batches):
    # cache_size=1: every change of batch length evicts the program (and the donation
    # it remembered) and builds the other again.
    losses, weights, info = _train_polymorphic("cpu", batches, cache_size=1)
    assert (info.misses, info.hits, info.maxsize, info.keys) == (3, 0, 1, ({"N": 32},))
    expected_losses, expected_weights = _numpy_training(batches)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-12)
    for got, expected in zip(weights, expected_weights):
        np.testing.assert_allclose(got, expected, rtol=1e-11, atol=1e-14)


def _cubes(cache_size):
    n = core.Dim("N")
    x = core.Parameter(core.f64, (n,), name="x")
    cubes = core.Multiply(core.Multiply(x, x), x)
    return core.compile(core.Function([cubes], [x]), backend="cpu", cache_size=cache_size)


def test_the_least_recently_used_program_is_evicted_first():
    executable = _cubes(cache_size=2)
    for n in (1, 2, 3, 1):
        (got,) = executable(np.arange(n, dtype=np.float64))
        np.testing.assert_array_equal(got, np.arange(n, dtype=np.float64) ** 3)
    info = executable.cache_info()
    # 3 evicted 1, then 1 (built again) evicted 2
    assert info == core.CacheInfo(hits=0, misses=4, maxsize=2, currsize=2,
                                  keys=({"N": 3}, {"N": 1}))
    executable(np.ones(3))  # a hit makes N = 3 the most recent ...
    executable(np.ones(4))  # ... so N = 1 goes
    info = executable.cache_info()
    assert (info.hits, info.misses, info.keys) == (1, 5, ({"N": 3}, {"N": 4}))
    (got,) = executable(np.full(2, 2.0))  # evicted earlier: built again, right
    np.testing.assert_array_equal(got, [8.0, 8.0])
    assert executable.cache_info().misses == 6


def test_an_evicted_program_frees_its_arena_at_once():
    executable = _cubes(cache_size=1)
    executable(np.ones(1000))
    arena = weakref.ref(executable.last_program.namespace["ARENA"])
    assert arena() is not None
    executable(np.ones(3))  # evicts N = 1000, without waiting for the garbage collector
    assert arena() is None
    assert executable.cache_info().keys == ({"N": 3},)


def test_an_unbounded_cache_keeps_every_binding():
    executable = _cubes(cache_size=None)
    for n in range(1, 12):
        executable(np.ones(n))
    info = executable.cache_info()
    assert (info.maxsize, info.currsize, info.misses) == (None, 11, 11)


def test_a_function_without_size_variables_keeps_one_program_under_no_binding():
    x = core.Parameter(core.f32, (3,))
    executable = core.compile(core.Function([core.Negative(x)], [x]), backend="cpu")
    for _ in range(3):
        executable(np.ones(3, np.float32))
    assert executable.cache_info() == core.CacheInfo(2, 1, 8, 1, ({},))


@pytest.mark.parametrize("size, error, words", [
    (0, ng.AxgraphValueError, "must be >= 1"),
    (-3, ng.AxgraphValueError, "must be >= 1"),
    ("8", ng.AxgraphTypeError, "not str '8'"),
    (True, ng.AxgraphTypeError, "not bool True"),
    (2.5, ng.AxgraphTypeError, "not float 2.5"),
])
def test_a_bad_cache_size_is_refused_when_the_transformer_is_made(size, error, words):
    with pytest.raises(error) as info:
        ng.make_transformer("cpu", cache_size=size)
    message = str(info.value)
    assert "cache_size" in message and words in message
    assert "test_compile_cache.py" in message  # the user's line
    with pytest.raises(error, match="cache_size"):
        _cubes(cache_size=size)


def test_cache_size_is_kept_by_make_transformer_and_its_factory():
    x = ng.placeholder([ng.make_axis(name="N")], dtype=np.float64)
    factory = ng.transformers.make_transformer_factory("cpu", cache_size=3)
    with factory() as t:
        double = t.computation(x * 2.0, x)
        for n in (1, 2, 3, 4):
            np.testing.assert_array_equal(double(np.ones(n)), np.full(n, 2.0))
        assert double.cache_info().keys == ({"N": 2}, {"N": 3}, {"N": 4})


@pytest.mark.parametrize("backend", ["numpy", "interpreter", "cpu"])
def test_cache_info_on_every_transformer(backend):
    N = ng.make_axis(name="N")
    x = ng.placeholder([N], dtype=np.float64)
    with ng.make_transformer(backend) as t:
        total = t.computation(ng.sum(x, out_axes=()), x)
        before = total.cache_info()
        assert (before.hits, before.misses, before.currsize, before.keys) == (0, 0, 0, ())
        for n in (4, 5, 4, 4):
            assert total(np.ones(n)) == n
        with pytest.raises(ng.FeedError):  # refused before any program is chosen
            total(np.ones((2, 2)))
        info = total.cache_info()
    if backend == "cpu":
        assert info == core.CacheInfo(hits=2, misses=2, maxsize=8, currsize=2,
                                      keys=({"N": 5}, {"N": 4}))
    else:
        assert info == core.CacheInfo(hits=4, misses=0, maxsize=0, currsize=0, keys=())
    with pytest.raises(ng.TransformerClosedError):
        total.cache_info()


def test_a_backend_whose_executables_do_not_report_their_cache_says_so(monkeypatch):
    monkeypatch.setattr(core.backend, "_BACKENDS", dict(core.backend._BACKENDS))

    class Plain(core.Backend):
        def compile(self, function):
            run = core.get_backend("interpreter").compile(function)
            return lambda *arrays, out=None, donate=None: run(*arrays, out=out)

    core.register_backend("plain", Plain)
    x = ng.placeholder([ng.make_axis(length=2, name="A")], dtype=np.float64)
    with ng.make_transformer("plain") as t:
        double = t.computation(x * 2.0, x)
        np.testing.assert_array_equal(double(np.ones(2)), [2.0, 2.0])
        with pytest.raises(ng.AxgraphTypeError, match=r"'plain' backend.*cache_info\(\)"):
            double.cache_info()


def test_a_stream_of_new_lengths_keeps_every_memo_bounded():
    # What a call remembers to skip work (checked feed shapes, bound shapes, argument
    # signatures) stays bounded, and the signature shortcut never outlives its program.
    from axgraph.core.function import KNOWN_SHAPES

    x = ng.placeholder([ng.make_axis(name="N")], dtype=np.float64)
    with ng.make_transformer("cpu", cache_size=2) as t:
        double = t.computation(x * 2.0, x)
        for n in range(1, KNOWN_SHAPES + 10):
            np.testing.assert_array_equal(double(np.arange(n, dtype=np.float64)),
                                          2.0 * np.arange(n))
        executable = t._compile(double)[1]
        assert len(executable._known) == double.cache_info().currsize == 2
        assert len(executable.function._bound) <= KNOWN_SHAPES
        assert len(double._known_feeds) <= KNOWN_SHAPES
        np.testing.assert_array_equal(double(np.ones(3)), [2.0, 2.0, 2.0])  # evicted: rebuilt


def test_binding_shapes_seen_before_gives_the_same_sizes_each_time():
    n = core.Dim("N")
    x = core.Parameter(core.f32, (2 * n + 1,), name="x")
    f = core.Function([core.Negative(x)], [x])
    first = f.bind([(7,)])
    first["N"] = 100  # the caller's dict: the next answer is not changed by it
    assert f.bind([(7,)]) == {"N": 3} and f.bind([[7]]) == {"N": 3}
    with pytest.raises(ng.ShapeError, match="5/2"):
        f.bind([(6,)])
    with pytest.raises(ng.ShapeError, match="1 parameter"):
        f.bind([(7,), (7,)])


def test_a_random_draw_continues_its_stream_across_bindings_and_evictions():
    # Each binding's program is built from the function specialised to its sizes; the
    # draw in it is a new node, but it must go on drawing from the one stream of its op.
    n = core.Dim("N")
    x = core.Parameter(core.f64, (n,), name="x")
    noisy = core.Add(x, core.RandomUniform(core.f64, (n,), 0.0, 1.0, seed=5))
    f = core.Function([noisy], [x])
    executable = core.compile(f, backend="cpu", cache_size=1)
    stream = np.random.default_rng(5)
    for length in (3, 4, 3):
        (got,) = executable(np.zeros(length))
        np.testing.assert_array_equal(got, stream.uniform(0.0, 1.0, length))
    assert executable.cache_info().misses == 3
