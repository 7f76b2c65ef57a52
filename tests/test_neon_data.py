"""ArrayIterator: full batches (batch axis last, as in v0.4) that wrap around, shuffling,
placeholders that batches feed; SequentialArrayIterator's windows of parallel streams."""
import numpy as np
import pytest

import axgraph as ng
from axgraph.frontends.neon.data import SINGLE_ARRAY_KEY, ArrayIterator, SequentialArrayIterator


def data(n=10):
    return {"image": np.arange(n * 6, dtype=np.float64).reshape(n, 2, 3),
            "label": np.arange(n, dtype=np.int64)}


def labels_of(iterator):
    return [batch["label"].tolist() for batch in iterator]


def test_batches_put_the_examples_along_the_last_dim_as_v04_did():
    iterator = ArrayIterator(data(), batch_size=4)
    assert iterator.shapes == {"image": (2, 3), "label": ()} and iterator.ndata == 10
    batch = next(iter(iterator))
    assert set(batch) == {"image", "label"}
    assert batch["image"].shape == (2, 3, 4)
    np.testing.assert_array_equal(batch["image"], data()["image"][:4].transpose(1, 2, 0))


def test_final_partial_batch_wraps_and_the_position_carries_over():
    iterator = ArrayIterator(data(), batch_size=4)
    assert iterator.nbatches == len(iterator) == 3
    assert labels_of(iterator) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]
    assert labels_of(iterator) == [[2, 3, 4, 5], [6, 7, 8, 9], [0, 1, 2, 3]]
    assert iterator.epoch == 2
    iterator.reset()
    assert labels_of(iterator)[0] == [0, 1, 2, 3]
    assert iterator.epoch == 1


def test_total_iterations_sets_the_epoch_length():
    iterator = ArrayIterator(data(), batch_size=4, total_iterations=5)
    assert len(labels_of(iterator)) == 5


def test_shuffle_visits_every_example_once_per_pass_and_is_reproducible():
    iterator = ArrayIterator(data(12), batch_size=4, shuffle=True, seed=3)
    first = sum(labels_of(iterator), [])
    second = sum(labels_of(iterator), [])
    assert sorted(first) == sorted(second) == list(range(12))
    assert first != second != list(range(12))
    iterator.reset()
    assert sum(labels_of(iterator), []) == first
    assert sum(labels_of(ArrayIterator(data(12), 4, shuffle=True, seed=3)), []) == first
    for batch in ArrayIterator(data(12), 4, shuffle=True, seed=3):   # rows stay together
        np.testing.assert_array_equal(batch["image"],
                                      data(12)["image"][batch["label"]].transpose(1, 2, 0))


def test_a_single_array_and_batches_are_copies():
    array = np.arange(5.0)
    iterator = ArrayIterator(array, batch_size=2)
    batch = next(iter(iterator))
    assert list(batch) == [SINGLE_ARRAY_KEY]
    batch[SINGLE_ARRAY_KEY][0] = 99
    assert array[0] == 0


@pytest.mark.parametrize("kwargs, message", [
    ({"data": {"a": np.zeros(3), "b": np.zeros(4)}, "batch_size": 2}, "same number"),
    ({"data": {"a": np.zeros(3)}, "batch_size": 4}, "larger"),
    ({"data": {"a": np.zeros(3)}, "batch_size": 0}, "positive"),
    ({"data": {}, "batch_size": 1}, "at least one"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ArrayIterator(**kwargs)


def test_placeholders_have_the_batch_axis_last_and_take_batches(transformer):
    iterator = ArrayIterator(data(), batch_size=4)
    H, W = ng.make_axis(name="H"), ng.make_axis(name="W")
    inputs = iterator.make_placeholders(axes={"image": [H, W]})
    image, label = inputs["image"], inputs["label"]
    N = image.axes[-1]
    assert N.name == "N" and N.is_batch and N.length == 4
    assert list(image.axes) == [H, W, N] and (H.length, W.length) == (2, 3)
    assert list(label.axes) == [N]
    assert image.dtype == np.float32 and label.dtype == np.int32
    total = ng.sum(image, out_axes=[N]) + label
    computation = transformer.computation(total, image, label)
    batch = next(iter(iterator))
    np.testing.assert_allclose(computation(batch["image"], batch["label"]),
                               batch["image"].sum(axis=(0, 1)) + batch["label"])


def test_placeholders_make_named_feature_axes_and_check_a_given_batch_axis():
    iterator = ArrayIterator(data(), batch_size=4)
    inputs = iterator.make_placeholders()
    assert inputs["image"].axes.names == ("image_1", "image_2", "N")
    batch_axis = ng.make_axis(name="N")
    assert iterator.make_placeholders(batch_axis=batch_axis)["label"].axes[0] is batch_axis
    assert batch_axis.length == 4
    with pytest.raises(ng.AxisLengthError, match="batch size"):
        iterator.make_placeholders(batch_axis=ng.make_axis(5, name="N"))
    with pytest.raises(ng.AxisLengthError, match="image"):
        iterator.make_placeholders(axes={"image": [ng.make_axis(name="H")]})
    with pytest.raises(ValueError, match="nope"):
        iterator.make_placeholders(axes={"nope": []})


def test_sequential_iterator_gives_windows_of_parallel_streams():
    tokens = np.arange(26, dtype=np.int32)           # 26 tokens: 2 streams x 3 windows x 4 + 2
    iterator = SequentialArrayIterator({"inp_txt": tokens, "tgt_txt": tokens + 1}, time_steps=4,
                                       batch_size=2, total_iterations=4, reverse_target=True,
                                       get_prev_target=True)
    assert (iterator.ndata, iterator.nbatches) == (6, 3)
    batches = list(iterator)
    # stream 0 is tokens 0..11, stream 1 is 12..23; batch i is window i % 3 of each, (T, N)
    np.testing.assert_array_equal(batches[0]["inp_txt"], [[0, 12], [1, 13], [2, 14], [3, 15]])
    np.testing.assert_array_equal(batches[1]["inp_txt"][:, 1], [16, 17, 18, 19])
    np.testing.assert_array_equal(batches[3]["inp_txt"], batches[0]["inp_txt"])
    np.testing.assert_array_equal(batches[0]["tgt_txt"][:, 0], [4, 3, 2, 1])    # reversed
    np.testing.assert_array_equal(batches[0]["prev_tgt"][:, 0], [1, 4, 3, 2])   # shifted by one
    iterator.reset()
    np.testing.assert_array_equal(next(iter(iterator))["inp_txt"], batches[0]["inp_txt"])
    inputs = iterator.make_placeholders()
    assert inputs["inp_txt"].axes.names == ("REC", "N") and inputs["inp_txt"].axes.lengths == (4, 2)
    with pytest.raises(ValueError, match="fewer than one batch"):
        SequentialArrayIterator({"inp_txt": tokens}, time_steps=20, batch_size=2)
