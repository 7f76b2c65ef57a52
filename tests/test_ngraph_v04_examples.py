"""Nervana Graph v0.4-style programs run as written, on small local data shaped like theirs.

Each program in examples/ngraph_v04 is run as ``__main__`` with a short
command line; only its data loader (examples.ngraph_v04.data) is replaced,
by scikit-learn's digits drawn at MNIST's size, CIFAR-shaped images whose
class sets their colour and texture, and a character stream of CPython's own
help text in place of the Penn Treebank. Training must lower the cost.
"""
import runpy
import sys

import numpy as np
import pytest

from axgraph.frontends.neon import ax, loop_eval

pytest.importorskip("sklearn")

from examples.ngraph_v04 import data  # noqa: E402


def digits_as_mnist(seed=0):
    """The 8x8 digits scaled to 0..255 and blown up 3x, padded to 1 x 28 x 28 like MNIST."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = np.kron(digits.images / 16.0 * 255.0, np.ones((3, 3)))
    images = np.pad(images, ((0, 0), (2, 2), (2, 2))).astype(np.uint8)[:, None]
    order = np.random.default_rng(seed).permutation(len(images))
    train, test = order[:1347], order[1347:]
    return (data.image_split(images[train], digits.target[train]),
            data.image_split(images[test], digits.target[test]))


def cifar_shaped(count=192, seed=0):
    """3 x 32 x 32 uint8 images: each class has its own mean colour and stripe period."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, count)
    colours = rng.uniform(60, 200, (10, 3))
    stripes = np.sin(np.arange(32)[None, :] * (1 + np.arange(10))[:, None] / 3.0)  # (10, 32)
    images = (colours[labels][:, :, None, None] + 40 * stripes[labels][:, None, None, :]
              + rng.normal(0, 20, (count, 3, 32, 32)))
    images = np.clip(images, 0, 255).astype(np.uint8)
    split = count * 3 // 4
    return (data.image_split(images[:split], labels[:split]),
            data.image_split(images[split:], labels[split:]))


def help_text_as_ptb(length=12000):
    """Characters of pydoc's help topics in place of the Penn Treebank's."""
    from pydoc_data.topics import topics

    text = "".join(topics[name] for name in sorted(topics))[:length]
    cut = length * 4 // 5
    return data.char_splits({"train": text[:cut], "valid": text[cut:]})


class Loader:
    """Stands in for one of data.py's classes: same interface, given data."""

    def __init__(self, result, vocab=None):
        self.result, self.vocab = result, vocab

    def __call__(self, path="."):
        return self

    def load_data(self):
        return self.result


@pytest.fixture
def run_program(monkeypatch):
    """Runs examples.ngraph_v04.<name> as __main__ with `argv`; returns its globals.

    The standard neon axes (ax.N, ax.C, ...) get lengths from the programs;
    they are put back afterwards so other tests see them unset.
    """
    lengths = {name: axis.length for name, axis in vars(ax).items() if name != "name"}

    def run(name, loader_name, loader, argv):
        monkeypatch.setattr(data, loader_name, loader)
        monkeypatch.setattr(sys, "argv", [name, "--no_progress_bar", "-r", "0"] + argv)
        return runpy.run_module(f"examples.ngraph_v04.{name}", run_name="__main__")

    yield run
    for name, length in lengths.items():
        # A set length cannot change through the public setter (tensors rely on it); the
        # programs share the process's standard axes, so the test puts them back directly.
        getattr(ax, name)._length = length


def train_costs(program):
    return np.asarray(program["cbs"].callback_data["cost/train"])


def test_mnist_mlp_reaches_90_percent_on_digits(run_program):
    program = run_program("mnist_mlp", "MNIST", Loader(digits_as_mnist()),
                          ["-z", "32", "-t", "120", "--iter_interval", "60"])
    costs = train_costs(program)
    assert costs[-20:].mean() < 0.25 * costs[:20].mean()
    result = loop_eval(program["valid_set"], program["loss_computation"])
    assert 1 - result["misclass_pct"] >= 0.90
    history = program["cbs"].callback_data
    np.testing.assert_allclose(history["cost/misclass_pct"][-1], result["misclass_pct"])


def test_cifar10_mlp_learns(run_program):
    program = run_program("cifar10_mlp", "CIFAR10", Loader(cifar_shaped()),
                          ["-z", "16", "-t", "40", "--iter_interval", "40"])
    costs = train_costs(program)
    assert costs[-10:].mean() < 0.7 * costs[:10].mean()


def test_cifar10_conv_learns(run_program):
    program = run_program("cifar10_conv", "CIFAR10", Loader(cifar_shaped()),
                          ["-z", "16", "-t", "24", "--iter_interval", "24"])
    costs = train_costs(program)
    assert costs[-6:].mean() < 0.8 * costs[:6].mean()


def test_char_rnn_learns(run_program):
    splits, vocab = help_text_as_ptb()
    program = run_program("char_rnn", "PTB", Loader(splits, vocab),
                          ["-z", "16", "-t", "60", "--iter_interval", "60"])
    costs = train_costs(program)
    assert costs[0] == pytest.approx(np.log2(len(vocab)), rel=0.05)   # bits: uniform at first
    assert costs[-10:].mean() < 0.8 * costs[:5].mean()


# -- the walk-throughs ------------------------------------------------------------------

def run_walk_through(name, capsys, replacements=()):
    """Runs examples/ngraph_v04/walk_through/<name>.py, with each (old, new) line replaced
    once (only to shorten training); returns its globals and what it printed."""
    import pathlib

    path = pathlib.Path(data.__file__).parent / "walk_through" / f"{name}.py"
    source = path.read_text()
    for old, new in replacements:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    namespace = {"__name__": "__main__", "__file__": str(path)}
    exec(compile(source, str(path), "exec"), namespace)
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


def test_mnist_direct_reaches_90_percent_on_digits(capsys, monkeypatch):
    monkeypatch.setattr(data, "MNIST", Loader(digits_as_mnist()))
    program, printed = run_walk_through("mnist_direct", capsys,
                                        [("num_iterations = 2000", "num_iterations = 100")])
    assert "[Epoch 1.0] Cost" in printed
    assert np.mean(program["all_errors"]) <= 0.10


def test_data_loaders_read_the_real_file_formats(tmp_path):
    """MNIST's pickle, CIFAR-10's python batches and PTB's text, written small by hand."""
    import gzip
    import pickle

    rng = np.random.default_rng(0)
    mnist = [(rng.integers(0, 256, (n, 28, 28), dtype=np.uint8), np.arange(n) % 10)
             for n in (6, 4)]
    with gzip.open(tmp_path / "mnist.pkl.gz", "wb") as f:
        pickle.dump(mnist, f)
    train, test = data.MNIST(str(tmp_path)).load_data()
    assert train["image"].shape == (6, 1, 28, 28) and test["label"].dtype == np.int32
    np.testing.assert_array_equal(train["image"][2, 0], mnist[0][0][2])

    batches = tmp_path / "cifar-10-batches-py"
    batches.mkdir()
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        with open(batches / name, "wb") as f:
            pickle.dump({"data": rng.integers(0, 256, (2, 3072), dtype=np.uint8),
                         "labels": [1, 2]}, f)
    train, test = data.CIFAR10(str(tmp_path)).load_data()
    assert train["image"].shape == (10, 3, 32, 32) and test["label"].tolist() == [1, 2]

    (tmp_path / "ptb.train.txt").write_text("abcab")
    (tmp_path / "ptb.valid.txt").write_text("cad")
    ptb = data.PTB(str(tmp_path))
    splits = ptb.load_data()
    assert ptb.vocab == ["a", "b", "c", "d"]
    assert splits["train"]["inp_txt"].tolist() == [0, 1, 2, 0]
    assert splits["train"]["tgt_txt"].tolist() == [1, 2, 0, 1]
    with pytest.raises(FileNotFoundError, match="nothing is downloaded"):
        data.MNIST(str(tmp_path / "nowhere")).load_data()
