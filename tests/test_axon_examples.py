"""The Axon examples infer every shape from their inputs' annotations and run."""
import numpy as np
import pytest

from axgraph.dims import evaluate
from axgraph.frontends import axon
from examples.axon import attention, conv, mlp, rnn


def test_mlp_runs_every_batch_size_with_one_graph(backend):
    result = mlp.run(batches=(3, 5), backend=backend, verbose=False)
    assert result["types"]["y"] == "f32[B, 10]"
    assert result["types"]["dense"] == "f32[*b, k] -> f32[k, n] -> f32[*b, n]"
    for batch, output in result["outputs"].items():
        assert output.shape == (batch, 10)
        np.testing.assert_allclose(output.sum(axis=1), 1.0, rtol=1e-5)


def test_one_conv_graph_serves_every_image_size(backend):
    result = conv.run(sizes=((12, 9), (4, 4)), backend=backend, verbose=False)
    height = axon.infer(conv.SOURCE)["features"].shape[2]  # two 2x2 pools after same-size convs
    assert [evaluate(height, {"H": h}) for h in range(4, 13)] == [h // 4 for h in range(4, 13)]
    assert sorted(result["checks"]) == ["H >= 4", "W >= 4"]
    assert result["outputs"][(12, 9)]["features"].shape == (4, 16, 3, 2)
    assert result["outputs"][(4, 4)]["scores"].shape == (4, 16)
    assert [str(d) for d in result["graph"].shapes["features"]] == ["N", "16", "H//4", "W//4"]


def test_rnn_folds_over_each_sequence_length(backend):
    result = rnn.run(lengths=(2, 4), backend=backend, verbose=False)
    assert result["types"]["last"] == "f32[B, 16]"
    assert result["types"]["states"] == "f32[T, B, 16]"
    for length, output in result["outputs"].items():
        # the fold's result is the scan's last state
        np.testing.assert_allclose(output["last"], output["states"][-1], rtol=1e-6)
        assert output["states"].shape == (length, 3, 16)


def test_attention_keeps_the_sequence_length_symbolic(backend):
    result = attention.run(lengths=(2, 7), backend=backend, verbose=False)
    assert result["types"]["mixed"] == "f32[B, T, 8]"
    (length,) = {a.length for a in result["graph"].inputs["tokens"].axes if a.name == "T"}
    assert str(length) == "T"
    assert result["outputs"][7].shape == (2, 7, 8)


def test_the_mlp_learns_digits(backend):
    pytest.importorskip("sklearn")
    from examples.axon import train_mlp

    result = train_mlp.train(epochs=3, backend=backend, verbose=False)
    assert result["losses"][-1] < 0.5 * result["losses"][0]
    assert result["test_accuracy"] >= 0.9


def test_the_guide_lists_every_builtin():
    from pathlib import Path

    guide = (Path(__file__).resolve().parent.parent / "docs" / "axon.md").read_text()
    table = guide[guide.index("## Builtins"):guide.index("## How inference works")]
    assert [name for name in axon.BUILTINS if f"`{name}" not in table] == []


def test_the_docstring_examples_run():
    import doctest

    from axgraph.frontends.axon import program

    result = doctest.testmod(program, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 2 and result.failed == 0
