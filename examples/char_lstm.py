"""Train a character-level LSTM on Python's own help text, then sample from it.

    python -m examples.char_lstm [--epochs 6] [--quick] [--steps 100] [--backend cpu]
                                 [--checkpoint run.npz] [--resume run.npz]

The corpus is `pydoc_data.topics`, the English documentation that ships
with every CPython (about 465,000 characters), so nothing is downloaded.
The network embeds characters, runs an LSTM over a window of the recurrent
axis REC and predicts the next character at every step. Its loss is
compared with the unigram entropy: the loss of a model that knows only how
often each character occurs.
"""
from __future__ import annotations

import argparse
import collections
import math
import sys
import time
from typing import Dict, List, Optional, Tuple

import numpy as np

import axgraph as ng
from axgraph.frontends.neon import (LSTM, Adam, Affine, ArrayIterator, Callback,
                                    CheckpointCallback, GlorotUniform, LookupTable, ProgressBar,
                                    Sequential, Softmax, Uniform, fit, inference_mode_on)

from .command_line import add_run_options, run_checkpoint, run_options
from .text_data import load_help_text


def unigram_entropy(text: str) -> float:
    """Entropy of the character frequencies, in nats per character."""
    counts = collections.Counter(text)
    return -sum(c / len(text) * math.log(c / len(text)) for c in counts.values())


def windows(codes: np.ndarray, length: int) -> Tuple[np.ndarray, np.ndarray]:
    """Non-overlapping (input, next-character) windows of `length` characters."""
    count = (len(codes) - 1) // length
    inputs = codes[:count * length].reshape(count, length)
    targets = codes[1:count * length + 1].reshape(count, length)
    return inputs, targets


def sample(predict, codes: np.ndarray, alphabet: str, length: int, context: int,
           temperature: float, rng: np.random.Generator) -> str:
    """`length` characters drawn one by one, each from the model's next-char distribution."""
    window = list(codes[-context:])
    out = []
    for _ in range(length):
        probabilities = predict(np.asarray(window, dtype=np.int32)[None, :]).ravel()
        logits = np.log(np.maximum(probabilities, 1e-12)) / temperature
        weights = np.exp(logits - logits.max())
        code = int(rng.choice(len(weights), p=weights / weights.sum()))
        out.append(alphabet[code])
        window = window[1:] + [code]
    return "".join(out)


def train(epochs: int = 6, steps: int = 100, seq_len: int = 32, batch: int = 32,
          hidden: int = 128, embed: int = 32, learning_rate: float = 3e-3, seed: int = 0,
          backend: Optional[str] = "cpu", sample_length: int = 300, verbose: bool = True,
          batch_axis: Optional[ng.Axis] = None, checkpoint: Optional[str] = None,
          resume: Optional[str] = None) -> Dict:
    """Train for epochs x steps minibatches; returns losses, entropy, a sample and seconds.

    `checkpoint` saves the run after every epoch; `resume` continues one saved by a run
    with the same arguments.

    `backend` None takes the transformer factory's (`ng.set_transformer_factory`);
    `batch_axis` is the axis the batches are fed along (new if None), for a transformer
    that places tensors by their axes.
    """
    text = load_help_text()
    alphabet = "".join(sorted(set(text)))
    lookup = {ch: i for i, ch in enumerate(alphabet)}
    codes = np.fromiter((lookup[ch] for ch in text), dtype=np.int32, count=len(text))
    inputs, targets = windows(codes, seq_len)

    REC = ng.make_axis(seq_len, name="REC")  # the recurrent axis the LSTM unrolls
    V = ng.make_axis(len(alphabet), name="V")  # the next-character classes
    train_set = ArrayIterator({"chars": inputs, "next": targets}, batch,
                              total_iterations=steps, shuffle=True, seed=seed)
    placeholders = train_set.make_placeholders(batch_axis=batch_axis,
                                               axes={"chars": [REC], "next": [REC]})
    model = Sequential([
        LookupTable(len(alphabet), embed, init=Uniform(-0.1, 0.1, seed=seed)),
        LSTM(hidden, init=GlorotUniform(seed=seed + 1), return_sequence=True),
        Affine(axes=V, weight_init=GlorotUniform(seed=seed + 2), bias_init=0.0,
               activation=Softmax()),
    ])
    loss = ng.cross_entropy_multi(model(placeholders["chars"]),
                                  ng.one_hot(placeholders["next"], axis=V))
    optimizer = Adam(learning_rate)
    step = ng.sequential([optimizer(loss), ng.mean(loss, out_axes=())])
    run = run_checkpoint(model, optimizer, train_set)

    context = ng.placeholder([ng.make_axis(1, name="N"), REC], dtype=np.int32, name="context")
    with inference_mode_on():
        next_char = ng.slice_along_axis(model(context), REC, seq_len - 1)

    entropy = unigram_entropy(text)
    if verbose:
        print(f"corpus: {len(text)} characters, {len(alphabet)} symbols, unigram entropy "
              f"{entropy:.3f} nats/char", flush=True)
    started = time.perf_counter()
    with ng.make_transformer(backend) as transformer:
        progress = run.restore(resume, transformer) if resume else None
        if verbose and progress is not None:
            print(f"resumed from {resume} after epoch {progress['epoch']}", flush=True)
        train_step = transformer.computation(step, placeholders["chars"], placeholders["next"])
        predict = transformer.computation(next_char, context)
        callbacks: List[Callback] = [ProgressBar()] if verbose else []
        if checkpoint:
            callbacks.append(CheckpointCallback(run, checkpoint, transformer))
        history = fit(train_step, train_set, epochs, feed=lambda b: (b["chars"], b["next"]),
                      callbacks=callbacks, resume=progress)
        seconds = time.perf_counter() - started
        text_sample = sample(predict, codes[:seq_len * 1000], alphabet, sample_length, seq_len,
                             0.7, np.random.default_rng(seed)) if sample_length else ""
    return {"losses": history["loss"], "unigram_entropy": entropy, "sample": text_sample,
            "seconds": seconds}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_options(parser, epochs=6, quick_epochs=1)
    parser.add_argument("--steps", type=int, default=None,
                        help="minibatches per epoch (default 100, --quick: 20)")
    parser.add_argument("--seq-len", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.steps is None:
        args.steps = 20 if args.quick else 100
    sample_length = 60 if args.quick else 300
    result = run_options(parser, args, lambda: train(
        args.epochs, args.steps, args.seq_len, hidden=args.hidden, seed=args.seed,
        backend=args.backend, sample_length=sample_length, checkpoint=args.checkpoint,
        resume=args.resume))
    final = result["losses"][-1]
    print(f"final loss {final:.3f} nats/char against a unigram entropy of "
          f"{result['unigram_entropy']:.3f} ({final / result['unigram_entropy']:.0%}) "
          f"in {result['seconds']:.1f} s")
    print("sample:\n" + result["sample"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
