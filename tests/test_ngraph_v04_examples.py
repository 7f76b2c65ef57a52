"""Nervana Graph v0.4-style programs run as written, on a machine without their data sets.

Each program in examples/ngraph_v04 is run as ``__main__`` with a short command
line and ``-w`` naming an empty directory: the loaders of
examples.ngraph_v04.data then say so in one line and hand out their stand-ins
(scikit-learn's digits drawn at MNIST's size, the digits coloured per class at
CIFAR's, and CPython's own help text in place of the Penn Treebank). Training
must lower the cost. The loaders' reading of the real file formats, and their
refusal of pickles that would run code, are tested with small files written
here.
"""
import gzip
import os
import pickle
import runpy
import sys

import numpy as np
import pytest

from axgraph.frontends.neon import ax, loop_eval

pytest.importorskip("sklearn")

from examples.ngraph_v04 import data  # noqa: E402
from examples.ngraph_v04.array_pickle import RefusedPickleError  # noqa: E402


#: The empty data directory the programs are given (under the test's tmp_path).
NO_DATA = "no_data"


@pytest.fixture
def run_program(monkeypatch, tmp_path, capsys):
    """Runs examples.ngraph_v04.<name> as __main__ with `argv` and the data directory an
    empty one; returns its globals and the lines it wrote to stderr.

    The standard neon axes (ax.N, ax.C, ...) get lengths from the programs;
    they are put back afterwards so other tests see them unset.
    """
    lengths = {name: axis.length for name, axis in vars(ax).items() if name != "name"}
    empty = tmp_path / NO_DATA
    empty.mkdir()

    def run(name, argv):
        monkeypatch.setattr(sys, "argv", [name, "--no_progress_bar", "-r", "0",
                                          "-w", str(empty)] + argv)
        program = runpy.run_module(f"examples.ngraph_v04.{name}", run_name="__main__")
        return program, capsys.readouterr().err.splitlines()

    yield run
    for name, length in lengths.items():
        # A set length cannot change through the public setter (tensors rely on it); the
        # programs share the process's standard axes, so the test puts them back directly.
        getattr(ax, name)._length = length


def assert_one_line_notice(lines, looked_at):
    """The loader's notice: one line naming the path looked at and how to give data."""
    notices = [line for line in lines if "not found" in line]
    assert len(notices) == 1, lines
    assert notices[0].startswith(f"{looked_at} not found: training on ")
    assert "-w/--data_dir" in notices[0]


def train_costs(program):
    return np.asarray(program["cbs"].callback_data["cost/train"])


def test_mnist_mlp_reaches_90_percent_on_stand_in_digits(run_program, tmp_path):
    program, stderr = run_program("mnist_mlp", ["-z", "32", "-t", "120",
                                                "--iter_interval", "60"])
    assert_one_line_notice(stderr, tmp_path / NO_DATA / "mnist.pkl.gz")
    assert program["mnist"].stand_in
    costs = train_costs(program)
    assert len(costs) == 120
    assert costs[-20:].mean() < 0.25 * costs[:20].mean()
    result = loop_eval(program["valid_set"], program["loss_computation"])
    assert 1 - result["misclass_pct"] >= 0.90
    history = program["cbs"].callback_data
    np.testing.assert_allclose(history["cost/misclass_pct"][-1], result["misclass_pct"])


def test_mnist_mlp_runs_on_jax_with_dash_b_as_v04_ran_on_gpu(run_program, tmp_path):
    """`-b jax` (v0.4 programs said `-b gpu` for their GPU transformer) runs the same
    program compiled by XLA, to the same accuracy."""
    pytest.importorskip("jax")
    program, _ = run_program("mnist_mlp", ["-z", "32", "-t", "120", "--iter_interval", "60",
                                           "-b", "jax"])
    assert program["args"].backend == "jax"
    assert program["loss_computation"].comp_func.transformer.transformer_name == "jax"
    costs = train_costs(program)
    assert len(costs) == 120
    assert costs[-20:].mean() < 0.25 * costs[:20].mean()
    result = loop_eval(program["valid_set"], program["loss_computation"])
    assert 1 - result["misclass_pct"] >= 0.90


def test_cifar10_mlp_learns_on_stand_in_images(run_program, tmp_path):
    program, stderr = run_program("cifar10_mlp", ["-z", "16", "-t", "40",
                                                  "--iter_interval", "40"])
    assert_one_line_notice(stderr, tmp_path / NO_DATA / "cifar-10-batches-py")
    images = program["train_data"]["image"]
    assert images.shape[1:] == (3, 32, 32) and images.dtype == np.uint8
    costs = train_costs(program)
    assert costs[-10:].mean() < 0.7 * costs[:10].mean()


def test_cifar10_conv_learns_on_stand_in_images(run_program, tmp_path):
    program, stderr = run_program("cifar10_conv", ["-z", "16", "-t", "24",
                                                   "--iter_interval", "24"])
    assert_one_line_notice(stderr, tmp_path / NO_DATA / "cifar-10-batches-py")
    costs = train_costs(program)
    assert costs[-6:].mean() < 0.8 * costs[:6].mean()


def test_char_rnn_learns_on_stand_in_text(run_program, tmp_path):
    program, stderr = run_program("char_rnn", ["-z", "32", "-t", "60", "--iter_interval", "60"])
    assert_one_line_notice(stderr, tmp_path / NO_DATA / "ptb.train.txt")
    vocab = program["tree_bank_data"].vocab
    costs = train_costs(program)
    assert costs[0] == pytest.approx(np.log2(len(vocab)), rel=0.05)   # bits: uniform at first
    assert costs[-10:].mean() < 0.8 * costs[:5].mean()


def test_mnist_direct_reaches_90_percent_on_stand_in_digits(run_program, tmp_path):
    program, stderr = run_program("walk_through.mnist_direct", ["-t", "100"])
    assert_one_line_notice(stderr, tmp_path / NO_DATA / "mnist.pkl.gz")
    assert program["num_iterations"] == 100
    assert np.mean(program["all_errors"]) <= 0.10


def test_a_default_run_on_stand_ins_is_short_and_options_still_rule(run_program):
    program, _ = run_program("mnist_mlp", [])
    args = program["args"]
    assert (args.num_iterations, args.iter_interval) == (200, 200)
    assert len(train_costs(program)) == 200
    assert len(program["cbs"].callback_data["cost/misclass_pct"]) == 1   # scored at the end
    program, _ = run_program("mnist_mlp", ["-t", "3"])
    assert (program["args"].num_iterations, program["args"].iter_interval) == (3, 200)
    assert len(train_costs(program)) == 3


# -- the walk-throughs ------------------------------------------------------------------

def run_walk_through(name, capsys):
    """Runs examples/ngraph_v04/walk_through/<name>.py as a script; returns its globals and
    what it printed."""
    namespace = runpy.run_module(f"examples.ngraph_v04.walk_through.{name}",
                                 run_name="__main__")
    return namespace, capsys.readouterr().out


def test_graph_introduction_computes_x_plus_one(capsys):
    _, printed = run_walk_through("graph_introduction", capsys)
    assert [float(v) for v in printed.split()] == [1.0, 2.0, 3.0, 4.0, 5.0, 42.0]


def test_logistic_regression_part_1_learns(capsys):
    program, printed = run_walk_through("logistic_regression_part_1", capsys)
    assert printed.count("loss") == 100
    # W starts at 0, so the first loss is ln 2 per example.
    first_loss = float(printed.splitlines()[0].rsplit(" ", 1)[1])
    assert first_loss == pytest.approx(np.log(2), rel=1e-5)
    assert program["loss_val"] < 0.2 * first_loss


def test_logistic_regression_part_2_learns(capsys):
    program, printed = run_walk_through("logistic_regression_part_2", capsys)
    assert printed.startswith("['W', 'b']")
    start = 4 * np.log(2) / 128          # avg_loss with W = 0, b = 0: 4 batches of ln 2 / 128
    assert float(printed.splitlines()[1].rsplit(" ", 1)[1]) == pytest.approx(start, rel=1e-5)
    # The notebook divides the gradient of the batch mean by the batch size once more,
    # so its steps are small: the loss falls by about a third in 10 epochs.
    assert float(program["avg_loss"](program["EVAL_XS"], program["EVAL_YS"])) < 0.8 * start


# -- the real file formats, and pickles that would run code ---------------------------------

def mnist_like(rng):
    """((train images, labels), (test images, labels)) as the real file holds them:
    uint8 images of 28 x 28 and uint8 labels."""
    return tuple((rng.integers(0, 256, (n, 28, 28), dtype=np.uint8),
                  rng.integers(0, 10, n, dtype=np.uint8)) for n in (6, 4))


def write_mnist(path, payload, protocol):
    with gzip.open(path / "mnist.pkl.gz", "wb") as f:
        f.write(pickle.dumps(payload, protocol=protocol))


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_mnist_reads_a_gzipped_pickle_of_arrays_as_the_real_file_is(tmp_path, capsys,
                                                                   protocol):
    rng = np.random.default_rng(protocol)
    payload = mnist_like(rng)
    write_mnist(tmp_path, payload, protocol)
    mnist = data.MNIST(str(tmp_path))
    train, test = mnist.load_data()
    assert not mnist.stand_in and capsys.readouterr().err == ""
    assert train["image"].shape == (6, 1, 28, 28) and train["image"].dtype == np.uint8
    np.testing.assert_array_equal(train["image"][:, 0], payload[0][0])
    np.testing.assert_array_equal(test["image"][:, 0], payload[1][0])
    assert test["label"].dtype == np.int32
    np.testing.assert_array_equal(test["label"], payload[1][1])


def test_mnist_reads_numpy_1s_module_names(tmp_path):
    """The real file names NumPy 1's ``numpy.core.multiarray._reconstruct``."""
    payload = mnist_like(np.random.default_rng(7))
    stream = pickle.dumps(payload, protocol=2)
    stream = stream.replace(b"numpy._core.multiarray\n", b"numpy.core.multiarray\n")
    assert b"numpy.core.multiarray\n_reconstruct" in stream
    with gzip.open(tmp_path / "mnist.pkl.gz", "wb") as f:
        f.write(stream)
    train, _ = data.MNIST(str(tmp_path)).load_data()
    np.testing.assert_array_equal(train["image"][:, 0], payload[0][0])


def test_cifar10_reads_its_python_batches(tmp_path):
    rng = np.random.default_rng(0)
    batches = tmp_path / "cifar-10-batches-py"
    batches.mkdir()
    written = {}
    for index, name in enumerate([f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]):
        written[name] = rng.integers(0, 256, (2, 3072), dtype=np.uint8)
        with open(batches / name, "wb") as f:
            pickle.dump({"batch_label": name, "labels": [index % 10, 9],
                         "data": written[name], "filenames": [b"a.png", b"b.png"]}, f,
                        protocol=2)
    cifar = data.CIFAR10(str(tmp_path))
    train, test = cifar.load_data()
    assert not cifar.stand_in
    assert train["image"].shape == (10, 3, 32, 32) and test["label"].tolist() == [5, 9]
    np.testing.assert_array_equal(train["image"][2], written["data_batch_2"][0].reshape(3, 32, 32))
    os.remove(batches / "data_batch_3")
    with pytest.raises(FileNotFoundError, match="data_batch_3 is missing while the rest"):
        data.CIFAR10(str(tmp_path)).load_data()


def test_ptb_reads_its_text_files(tmp_path):
    (tmp_path / "ptb.train.txt").write_text("abcab")
    (tmp_path / "ptb.valid.txt").write_text("cad")
    ptb = data.PTB(str(tmp_path))
    splits = ptb.load_data()
    assert ptb.vocab == ["a", "b", "c", "d"] and not ptb.stand_in
    assert splits["train"]["inp_txt"].tolist() == [0, 1, 2, 0]
    assert splits["train"]["tgt_txt"].tolist() == [1, 2, 0, 1]
    os.remove(tmp_path / "ptb.valid.txt")
    with pytest.raises(FileNotFoundError, match="ptb.valid.txt is missing while the rest"):
        data.PTB(str(tmp_path)).load_data()


class RunsACommand:
    """Unpickling this calls os.system: what a crafted data file would do."""

    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


class Evaluates:
    def __reduce__(self):
        return eval, ("__import__('os').getcwd()",)


def names_a_call(stream, name):
    """Whether the pickle `stream` looks up `name` and calls something (REDUCE)."""
    import pickletools

    ops = [(op.name, arg) for op, arg, _ in pickletools.genops(stream)]
    return any(arg == name for _, arg in ops) and any(op == "REDUCE" for op, _ in ops)


@pytest.mark.parametrize("protocol", [2, 4])
def test_a_pickle_that_would_run_a_command_is_refused_and_nothing_runs(tmp_path, protocol):
    marker = tmp_path / "ran"
    payload = ((RunsACommand(f"touch {marker}"), np.zeros(3)), (np.zeros(2), np.zeros(2)))
    stream = pickle.dumps(payload, protocol=protocol)
    assert names_a_call(stream, "system") or names_a_call(stream, "posix system")
    with gzip.open(tmp_path / "mnist.pkl.gz", "wb") as f:
        f.write(stream)
    path = str(tmp_path / "mnist.pkl.gz")
    with pytest.raises(RefusedPickleError, match=r"mnist\.pkl\.gz: refusing to load "
                                                 r"(posix|os|nt)\.system") as caught:
        data.MNIST(str(tmp_path)).load_data()
    assert str(caught.value).startswith(path)
    assert isinstance(caught.value, pickle.UnpicklingError)
    assert not marker.exists()

    batches = tmp_path / "cifar-10-batches-py"
    batches.mkdir()
    with open(batches / "data_batch_1", "wb") as f:
        pickle.dump({"data": Evaluates(), "labels": [1]}, f, protocol=protocol)
    with pytest.raises(RefusedPickleError, match=r"data_batch_1: refusing to load "
                                                 r"(builtins|__builtin__)\.eval"):
        data.CIFAR10(str(tmp_path)).load_data()


def test_an_array_of_python_objects_is_refused(tmp_path):
    write_mnist(tmp_path, ((np.array([1, "a"], dtype=object), np.zeros(2)),
                           (np.zeros(2), np.zeros(2))), protocol=2)
    with pytest.raises(RefusedPickleError, match="mnist.pkl.gz: refusing an array of Python "
                                                 "objects"):
        data.MNIST(str(tmp_path)).load_data()


def test_a_pickle_of_something_else_is_a_clear_error(tmp_path):
    write_mnist(tmp_path, [np.zeros(3)], protocol=4)
    with pytest.raises(ValueError, match="is not MNIST as expected"):
        data.MNIST(str(tmp_path)).load_data()


# -- the stand-ins ------------------------------------------------------------------------

def test_stand_ins_have_the_real_sets_shapes_and_types():
    mnist_train, _ = data.digits_as_mnist()
    assert mnist_train["image"].max() == 255 and mnist_train["image"].min() == 0
    for (train, test), channels, size in ((data.digits_as_mnist(), 1, 28),
                                          (data.digits_as_cifar(), 3, 32)):
        for split in (train, test):
            assert split["image"].shape[1:] == (channels, size, size)
            assert split["image"].dtype == np.uint8 and split["label"].dtype == np.int32
            assert set(split["label"].tolist()) == set(range(10))
        assert len(train["label"]) + len(test["label"]) == 1797   # every digit, once
    splits, vocab = data.help_text_as_ptb()
    assert len(splits["valid"]["inp_txt"]) == 10000 - 1
    codes = np.concatenate([splits["train"]["inp_txt"], splits["valid"]["tgt_txt"]])
    assert codes.max() == len(vocab) - 1
    np.testing.assert_array_equal(splits["train"]["inp_txt"][1:],
                                  splits["train"]["tgt_txt"][:-1])


def test_mnist_stand_in_draws_each_digit_pixel_as_a_3x3_block():
    from sklearn.datasets import load_digits

    train, _ = data.digits_as_mnist()
    digits = load_digits().images
    image = train["image"][0, 0].astype(float)
    blocks = image[2:26, 2:26].reshape(8, 3, 8, 3)
    assert (blocks == blocks[:, :1, :, :1]).all() and not image[:2].any()
    small = blocks[:, 0, :, 0] / 255.0 * 16.0
    assert any(np.allclose(small, digit, atol=0.05) for digit in digits)


def test_without_scikit_learn_the_missing_data_set_is_named(tmp_path, monkeypatch):
    def without_scikit_learn(seed):
        raise ImportError("No module named 'sklearn'")

    monkeypatch.setattr(data, "load_digits_split", without_scikit_learn)
    for loader, name in ((data.MNIST, "mnist.pkl.gz"), (data.CIFAR10, "cifar-10-batches-py")):
        with pytest.raises(FileNotFoundError, match=f"{name} is missing, and the stand-in "
                                                    f"digits need scikit-learn"):
            loader(str(tmp_path)).load_data()
