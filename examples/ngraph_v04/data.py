"""The data sets of the v0.4 examples, read from local files (nothing is downloaded).

Each loader has Nervana Graph v0.4's interface, ``MNIST(path).load_data()``
and friends, and returns what the example programs feed to their iterators:

* ``MNIST(path)``: ``mnist.pkl.gz`` (the pickle of ((X_train, y_train),
  (X_test, y_test)) with 28x28 uint8 images) -> two dicts
  ``{"image": (n, 1, 28, 28) uint8, "label": (n,) int32}``;
* ``CIFAR10(path)``: ``cifar-10-batches-py/`` (data_batch_1..5, test_batch)
  -> two dicts ``{"image": (n, 3, 32, 32) uint8, "label": (n,) int32}``;
* ``PTB(path)``: ``ptb.train.txt``, ``ptb.valid.txt`` -> a dict of splits
  ``{"train": {"inp_txt": codes, "tgt_txt": codes shifted by one}, ...}`` of
  character codes, with the alphabet in ``.vocab``.

Tests replace these classes with small local data of the same shapes.
"""
from __future__ import annotations

import gzip
import os
import pickle
from typing import Dict, List, Tuple

import numpy as np

Split = Dict[str, np.ndarray]


def _path(directory: str, name: str) -> str:
    path = os.path.join(os.path.expanduser(directory), name)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} is missing; put the data set there (nothing is "
                                f"downloaded) or pass --data_dir")
    return path


def image_split(images: np.ndarray, labels: np.ndarray) -> Split:
    """The dict an ArrayIterator takes: images (n, C, H, W) and int32 labels (n,)."""
    return {"image": images, "label": np.asarray(labels, dtype=np.int32)}


class MNIST:
    """MNIST digits: 60,000 training and 10,000 test images of 1 x 28 x 28."""

    def __init__(self, path: str = "."):
        self.path = path

    def load_data(self) -> Tuple[Split, Split]:
        with gzip.open(_path(self.path, "mnist.pkl.gz"), "rb") as f:
            (x_train, y_train), (x_test, y_test) = pickle.load(f, encoding="latin1")
        return (image_split(x_train.reshape(-1, 1, 28, 28), y_train),
                image_split(x_test.reshape(-1, 1, 28, 28), y_test))


class CIFAR10:
    """CIFAR-10: 50,000 training and 10,000 test images of 3 x 32 x 32."""

    def __init__(self, path: str = "."):
        self.path = path

    def _batch(self, name: str) -> Tuple[np.ndarray, np.ndarray]:
        with open(_path(self.path, os.path.join("cifar-10-batches-py", name)), "rb") as f:
            batch = pickle.load(f, encoding="latin1")
        return np.asarray(batch["data"]).reshape(-1, 3, 32, 32), np.asarray(batch["labels"])

    def load_data(self) -> Tuple[Split, Split]:
        parts = [self._batch(f"data_batch_{i}") for i in range(1, 6)]
        train = image_split(np.concatenate([p[0] for p in parts]),
                            np.concatenate([p[1] for p in parts]))
        return train, image_split(*self._batch("test_batch"))


def char_splits(texts: Dict[str, str]) -> Tuple[Dict[str, Split], List[str]]:
    """Character codes of each text, inputs and next-character targets, and the alphabet."""
    vocab = sorted(set("".join(texts.values())))
    index = {ch: i for i, ch in enumerate(vocab)}
    splits = {}
    for name, text in texts.items():
        codes = np.fromiter((index[ch] for ch in text), dtype=np.int32, count=len(text))
        splits[name] = {"inp_txt": codes[:-1], "tgt_txt": codes[1:]}
    return splits, vocab


class PTB:
    """The Penn Treebank as a character stream (v0.4's char_rnn data)."""

    def __init__(self, path: str = "."):
        self.path = path
        self.vocab: List[str] = []

    def load_data(self) -> Dict[str, Split]:
        texts = {}
        for split in ("train", "valid"):
            with open(_path(self.path, f"ptb.{split}.txt")) as f:
                texts[split] = f.read()
        data, self.vocab = char_splits(texts)
        return data
