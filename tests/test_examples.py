"""The runnable examples, shortened: the loss must fall and accuracy clear a floor."""
import pytest

pytest.importorskip("sklearn")

from examples import digits_mlp  # noqa: E402


def test_digits_mlp_learns(backend):
    history = digits_mlp.train(epochs=3, backend=backend, verbose=False)
    losses = history["losses"]
    assert losses[-1] < 0.5 * losses[0]
    assert history["test_accuracy"] >= 0.90


def test_digits_split_is_fixed_by_seed():
    (train_a, _), (test_a, _) = digits_mlp.load_digits_split(seed=3)
    (train_b, _), (test_b, _) = digits_mlp.load_digits_split(seed=3)
    assert (train_a == train_b).all() and (test_a == test_b).all()
    assert len(train_a) + len(test_a) == 1797
