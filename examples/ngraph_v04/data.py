"""The data sets of the v0.4 examples: local files when present, else stand-ins (nothing is
downloaded).

Each loader has Nervana Graph v0.4's interface, ``MNIST(path).load_data()`` and
friends, and returns what the example programs feed to their iterators:

* ``MNIST(path)``: ``mnist.pkl.gz`` (the gzipped pickle of ((X_train, y_train),
  (X_test, y_test)) with 28x28 uint8 images) -> two dicts
  ``{"image": (n, 1, 28, 28) uint8, "label": (n,) int32}``;
* ``CIFAR10(path)``: ``cifar-10-batches-py/`` (data_batch_1..5, test_batch)
  -> two dicts ``{"image": (n, 3, 32, 32) uint8, "label": (n,) int32}``;
* ``PTB(path)``: ``ptb.train.txt``, ``ptb.valid.txt`` -> a dict of splits
  ``{"train": {"inp_txt": codes, "tgt_txt": codes shifted by one}, ...}`` of
  character codes, with the alphabet in ``.vocab``.

When a data set is absent altogether, the loader says so in one line on stderr
(the path it looked at, and ``-w/--data_dir`` to give the real one) and returns
stand-in data of the same shapes made from what ships with scikit-learn and
Python: `digits_as_mnist`, `digits_as_cifar` and `help_text_as_ptb`. Its
``stand_in`` attribute is then True, and `short_run_on_stand_ins` shortens the
program's default run to fit the small stand-in sets. A data set present in
part (one CIFAR batch missing) is an error, not a reason to substitute.

The pickles are read by `array_pickle.load_arrays`, which lets a file hold only
arrays and builtin containers: no file read here can run code.
"""
from __future__ import annotations

import argparse
import colorsys
import gzip
import os
import sys
from typing import Dict, List, Tuple

import numpy as np

from examples.digits_data import load_digits_split
from examples.ngraph_v04.array_pickle import load_arrays
from examples.text_data import load_help_text

Split = Dict[str, np.ndarray]

#: How the one-line notice tells the user to give the real data.
_DATA_DIR_OPTION = "-w/--data_dir DIR"


def image_split(images: np.ndarray, labels: np.ndarray) -> Split:
    """The dict an ArrayIterator takes: images (n, C, H, W) and int32 labels (n,)."""
    return {"image": images, "label": np.asarray(labels, dtype=np.int32)}


def char_splits(texts: Dict[str, str]) -> Tuple[Dict[str, Split], List[str]]:
    """Character codes of each text, inputs and next-character targets, and the alphabet."""
    vocab = sorted(set("".join(texts.values())))
    index = {ch: i for i, ch in enumerate(vocab)}
    splits = {}
    for name, text in texts.items():
        codes = np.fromiter((index[ch] for ch in text), dtype=np.int32, count=len(text))
        splits[name] = {"inp_txt": codes[:-1], "tgt_txt": codes[1:]}
    return splits, vocab


# -- stand-ins ----------------------------------------------------------------------------

def _digits(seed: int, looked_at: str):
    """scikit-learn's 8x8 digits split by `seed`, pixels in [0, 1]; a clear error naming
    the missing data when scikit-learn is absent too."""
    try:
        return load_digits_split(seed)
    except ImportError as error:
        raise FileNotFoundError(
            f"{looked_at} is missing, and the stand-in digits need scikit-learn (pip install "
            f"scikit-learn); put the data set there or pass {_DATA_DIR_OPTION}") from error


def _enlarged(images: np.ndarray, factor: int) -> np.ndarray:
    """(n, h, w) images with each pixel repeated `factor` x `factor` times."""
    return np.kron(images, np.ones((1, factor, factor), dtype=images.dtype))


def digits_as_mnist(seed: int = 0, looked_at: str = "mnist.pkl.gz") -> Tuple[Split, Split]:
    """scikit-learn's 8x8 digits drawn as MNIST is: 1 x 28 x 28 uint8 images (each pixel
    blown up 3x3, a 2-pixel border), 0 to 255; (train, test) split by `seed` (3:1)."""
    def draw(images: np.ndarray) -> np.ndarray:
        framed = np.pad(_enlarged(images, 3), ((0, 0), (2, 2), (2, 2)))
        return np.round(framed * 255.0).astype(np.uint8)[:, None]

    (train_x, train_y), (test_x, test_y) = _digits(seed, looked_at)
    return image_split(draw(train_x), train_y), image_split(draw(test_x), test_y)


def _class_colours() -> np.ndarray:
    """(10, 2, 3) RGB in 0..255: for each class a dark background and a bright ink, their
    hues spread around the colour wheel (opposite each other)."""
    return 255.0 * np.array([[colorsys.hsv_to_rgb((k / 10 + 0.5) % 1.0, 0.6, 0.35),
                              colorsys.hsv_to_rgb(k / 10, 0.8, 0.95)] for k in range(10)])


def digits_as_cifar(seed: int = 0, looked_at: str = "cifar-10-batches-py") -> Tuple[Split, Split]:
    """A CIFAR-shaped set from scikit-learn's digits: 3 x 32 x 32 uint8 images (each pixel
    blown up 4x4) in the colours of the digit's class, ten classes; (train, test) split
    by `seed` (3:1). Both the shape and the colours tell the class, so it is learnable."""
    colours = _class_colours()

    def draw(images: np.ndarray, labels: np.ndarray) -> np.ndarray:
        ink = _enlarged(images, 4)[:, None]                          # (n, 1, 32, 32)
        background = colours[labels, 0][:, :, None, None]            # (n, 3, 1, 1)
        foreground = colours[labels, 1][:, :, None, None]
        return np.round(background + (foreground - background) * ink).astype(np.uint8)

    (train_x, train_y), (test_x, test_y) = _digits(seed, looked_at)
    return (image_split(draw(train_x, train_y), train_y),
            image_split(draw(test_x, test_y), test_y))


def help_text_as_ptb(valid_length: int = 10000) -> Tuple[Dict[str, Split], List[str]]:
    """Python's help text (``pydoc_data.topics``) as a character stream in place of the
    Penn Treebank's: (splits as `PTB` gives them, the alphabet); the last
    `valid_length` characters are the validation split (short, so that scoring it
    takes a moment), the rest the training split."""
    text = load_help_text()
    return char_splits({"train": text[:-valid_length], "valid": text[-valid_length:]})


def _announce_stand_in(looked_at: str, stand_in: str) -> None:
    print(f"{looked_at} not found: training on {stand_in} instead (a short run unless -t is "
          f"given); for the real data set pass {_DATA_DIR_OPTION} (nothing is downloaded)",
          file=sys.stderr)


# -- the loaders --------------------------------------------------------------------------

class _Loader:
    """What the loaders share: the directory, and whether the data are stand-ins."""

    def __init__(self, path: str = "."):
        self.path = path
        #: True once load_data has returned stand-in data (the real set was absent).
        self.stand_in = False

    def _path(self, name: str) -> str:
        return os.path.join(os.path.expanduser(self.path), name)


def _required(path: str) -> str:
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} is missing while the rest of the data set is there; "
                                f"complete the data set (nothing is downloaded)")
    return path


class MNIST(_Loader):
    """MNIST digits: 60,000 training and 10,000 test images of 1 x 28 x 28.

    Absent ``mnist.pkl.gz``: `digits_as_mnist` (1,348 training, 449 test images).
    """

    def load_data(self) -> Tuple[Split, Split]:
        """(train, test) dicts of images (n, 1, 28, 28) uint8 and labels (n,) int32."""
        path = self._path("mnist.pkl.gz")
        if not os.path.exists(path):
            self.stand_in = True
            train_test = digits_as_mnist(looked_at=path)
            _announce_stand_in(path, "scikit-learn's digits drawn at MNIST's 28x28")
            return train_test
        with gzip.open(path, "rb") as f:
            loaded = load_arrays(f, path)
        try:
            (x_train, y_train), (x_test, y_test) = loaded
            return (image_split(np.asarray(x_train).reshape(-1, 1, 28, 28), y_train),
                    image_split(np.asarray(x_test).reshape(-1, 1, 28, 28), y_test))
        except (TypeError, ValueError) as error:
            raise ValueError(f"{path} is not MNIST as expected: a pickle of ((train images "
                             f"n x 28 x 28, labels), (test images, labels)) ({error})") from None


class CIFAR10(_Loader):
    """CIFAR-10: 50,000 training and 10,000 test images of 3 x 32 x 32.

    Absent ``cifar-10-batches-py/``: `digits_as_cifar` (1,348 training, 449 test images).
    """

    def _batch(self, name: str) -> Tuple[np.ndarray, np.ndarray]:
        path = _required(self._path(os.path.join("cifar-10-batches-py", name)))
        with open(path, "rb") as f:
            batch = load_arrays(f, path)
        try:
            data, labels = (batch[key] if key in batch else batch[key.encode()]
                            for key in ("data", "labels"))
            return np.asarray(data).reshape(-1, 3, 32, 32), np.asarray(labels)
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"{path} is not a CIFAR-10 batch as expected: a pickled dict of "
                             f"'data' (n x 3072) and 'labels' ({error!r})") from None

    def load_data(self) -> Tuple[Split, Split]:
        """(train, test) dicts of images (n, 3, 32, 32) uint8 and labels (n,) int32."""
        directory = self._path("cifar-10-batches-py")
        if not os.path.exists(directory):
            self.stand_in = True
            train_test = digits_as_cifar(looked_at=directory)
            _announce_stand_in(directory, "scikit-learn's digits drawn at CIFAR's 3x32x32 in "
                                          "a colour per class")
            return train_test
        parts = [self._batch(f"data_batch_{i}") for i in range(1, 6)]
        train = image_split(np.concatenate([p[0] for p in parts]),
                            np.concatenate([p[1] for p in parts]))
        return train, image_split(*self._batch("test_batch"))


class PTB(_Loader):
    """The Penn Treebank as a character stream (v0.4's char_rnn data).

    Absent ``ptb.train.txt`` and ``ptb.valid.txt``: `help_text_as_ptb`.
    """

    def __init__(self, path: str = "."):
        super().__init__(path)
        self.vocab: List[str] = []

    def load_data(self) -> Dict[str, Split]:
        """{"train": ..., "valid": ...}, each {"inp_txt": codes, "tgt_txt": next codes}."""
        paths = {split: self._path(f"ptb.{split}.txt") for split in ("train", "valid")}
        if not any(os.path.exists(path) for path in paths.values()):
            self.stand_in = True
            data, self.vocab = help_text_as_ptb()
            _announce_stand_in(paths["train"], "Python's help text (pydoc_data.topics)")
            return data
        texts = {}
        for split, path in paths.items():
            with open(_required(path), encoding="utf-8") as f:
                texts[split] = f.read()
        data, self.vocab = char_splits(texts)
        return data


# -- the default run on stand-ins -----------------------------------------------------------

def _given(parser: argparse.ArgumentParser, dest: str) -> bool:
    """Whether the command line (or its -c config file) set option `dest` rather than
    leaving it at its default: parsed again into a namespace that already holds a marker
    there, which argparse overwrites only with a given value."""
    marker = object()
    probe = parser.parse_args(namespace=argparse.Namespace(**{dest: marker}))
    return getattr(probe, dest) is not marker


def short_run_on_stand_ins(dataset: _Loader, parser: argparse.ArgumentParser,
                           args: argparse.Namespace, iterations: int) -> None:
    """Shorten the default run when `dataset` gave stand-in data.

    v0.4's default of 2000 iterations is sized for the real data sets; the stand-ins
    are small, so when ``-t`` was not given the run is `iterations` long, and when
    ``--iter_interval`` was not given either the validation set is scored once, at the
    end. With real data, or with the options given, `args` is left as it is.

    Parameters
    ----------
    dataset
        The loader whose ``load_data`` has run.
    parser, args
        The program's NgraphArgparser and what it parsed; ``args.num_iterations`` and
        ``args.iter_interval`` are changed in place.
    iterations
        The length of a default run on the stand-in data.
    """
    if not dataset.stand_in or _given(parser, "num_iterations"):
        return
    args.num_iterations = iterations
    if not _given(parser, "iter_interval"):
        args.iter_interval = iterations
