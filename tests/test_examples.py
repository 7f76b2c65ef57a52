"""The runnable examples, shortened: the loss must fall and accuracy clear a floor."""
import pytest

pytest.importorskip("sklearn")

from conftest import BACKENDS  # noqa: E402
from examples import char_lstm, digits_convnet, digits_data, digits_mlp  # noqa: E402


def test_digits_mlp_learns(backend):
    result = digits_mlp.train(epochs=3, backend=backend, verbose=False)
    losses = result["losses"]
    assert losses[-1] < 0.5 * losses[0]
    assert result["test_accuracy"] >= 0.92


def test_digits_convnet_learns(backend):
    result = digits_convnet.train(epochs=2, backend=backend, verbose=False)
    losses = result["losses"]
    assert losses[-1] < 0.6 * losses[0]
    assert result["test_accuracy"] >= 0.85


#: The unrolled LSTM's training step is 2600 core nodes with 387 dots, which XLA takes
#: ~12 s per program to compile on 2 cores: the jax transformer's LSTM is checked by
#: test_neon_layers (values and gradients of each recurrent layer) instead.
LSTM_BACKENDS = [b for b in BACKENDS if b != "jax"]


@pytest.mark.parametrize("backend", LSTM_BACKENDS)
def test_char_lstm_beats_unigram_entropy(backend):
    result = char_lstm.train(epochs=3, steps=15, hidden=64, learning_rate=2e-2, backend=backend,
                             sample_length=20,
                             verbose=False)
    losses = result["losses"]
    assert losses[-1] < losses[0]
    assert losses[-1] < 0.92 * result["unigram_entropy"]
    assert len(result["sample"]) == 20


def test_digits_split_is_fixed_by_seed():
    (train_a, _), (test_a, _) = digits_data.load_digits_split(seed=3)
    (train_b, _), (test_b, _) = digits_data.load_digits_split(seed=3)
    assert (train_a == train_b).all() and (test_a == test_b).all()
    assert len(train_a) + len(test_a) == 1797


def test_char_windows_shift_by_one():
    import numpy as np

    inputs, targets = char_lstm.windows(np.arange(10, dtype=np.int32), 3)
    assert inputs.tolist() == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert targets.tolist() == [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
