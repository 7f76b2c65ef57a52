"""Train a small character-level transformer on Python's own help text, then sample from it.

    python -m examples.char_transformer [--quick] [--epochs 3] [--steps 150]
        [--checkpoint run.npz] [--resume run.npz] [--plot loss.png] [--transformer cpu]

The corpus is `pydoc_data.topics`, the documentation that ships with every
CPython (see examples/text_data.py), so nothing is downloaded; its last tenth
is held out for the validation loss printed after every epoch.

The model is a GPT-style decoder built from neon layers: an `Embedding` with
learned positions, 2 pre-LayerNorm blocks (each a `Residual` around
`LayerNorm` + causal `MultiHeadAttention` with 4 heads, then one around
`LayerNorm` + a GELU MLP of two `Affine` layers), a final `LayerNorm` and an
untied output `Affine`, all in one `Sequential`. It trains with `AdamW`
(weight decay on the weight matrices and embeddings only), a warmup-then-cosine
learning rate and global-norm gradient clipping, as GPT-style models do; the
PyTorch reference in tests/test_char_transformer.py computes the same run.

Every tensor carries named axes: the positions ``T`` (flagged recurrent, so the
layers pass it through as they pass a batch axis), the model width ``D``, the
vocabulary ``V``, the MLP's hidden axis ``F`` and the batch axis ``N``; the
attention layers add their heads, head size and key axes.

``--checkpoint PATH`` saves the whole run (weights, AdamW's moments and step
counter, the data iterator's position, the history) after every epoch, and
``--resume PATH`` continues such a run, given the same options, with exactly
the losses it would have had uninterrupted. ``--plot PNG`` draws the loss curve.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

import axgraph as ng
from axgraph.frontends.neon import (AdamW, Affine, ArrayIterator, Callback, Checkpoint,
                                    CheckpointCallback, Embedding, Gaussian, LayerNorm,
                                    MultiHeadAttention, ProgressBar, Residual, Sequential,
                                    WarmupCosineSchedule, fit, plot_history)

from .char_lstm import windows
from .text_data import load_help_text


@dataclass(frozen=True)
class Config:
    """The model's shape and the training run's settings."""

    layers: int = 2
    heads: int = 4
    d_model: int = 128
    context: int = 64  # characters a prediction sees
    mlp_width: int = 512  # the MLP's hidden axis F (4 d_model)
    batch: int = 32
    learning_rate: float = 3e-3  # the peak, after the warmup
    warmup_fraction: float = 0.1  # of all steps, warming up linearly; then a cosine to 0
    weight_decay: float = 0.01  # AdamW's, on the weight matrices and embeddings
    clip_norm: float = 1.0  # the global L2 norm the gradients are scaled down to
    init_scale: float = 0.02  # standard deviation of every initial weight and embedding
    eps: float = 1e-5  # LayerNorm's


#: The length of a run: epochs of `steps` minibatches, the validation batches after each
#: epoch and the characters generated at the end. ``--quick`` runs the same model shorter.
FULL = {"epochs": 3, "steps": 150, "val_batches": 20, "sample_length": 300}
QUICK = {"epochs": 1, "steps": 30, "val_batches": 2, "sample_length": 100}


class CharTransformer:
    """Characters (T, N) -> next-character logits (V, T, N): neon layers in a Sequential.

    The weights are made on the first call (neon's axis inference); every initializer
    is seeded from `seed`, so two models with one seed start equal.
    """

    def __init__(self, vocab_size: int, config: Config, seed: int = 0):
        if config.d_model % config.heads:
            raise ValueError(f"d_model {config.d_model} is not a multiple of heads "
                             f"{config.heads}")
        self.config = config

        def gaussian(offset: int) -> Gaussian:
            return Gaussian(0.0, config.init_scale, seed=seed + offset)

        self.T = ng.make_axis(config.context, name="T", recurrent=True)
        self.embedding = Embedding(vocab_size, config.d_model, init=gaussian(0),
                                   positions=self.T, position_init=gaussian(1), name="token")
        self.D, self.V = self.embedding.embed_axis, self.embedding.vocab_axis
        self.F = ng.make_axis(config.mlp_width, name="F")
        self.attentions: List[MultiHeadAttention] = []
        self.mlps: List[Sequence[Affine]] = []
        self.norms: List[Sequence[LayerNorm]] = []  # each block's two, before attention and MLP
        blocks: List[Residual] = []
        for i in range(config.layers):
            name, offset = f"block{i}", 10 * (i + 1)
            attention = MultiHeadAttention(self.D, config.heads, config.d_model // config.heads,
                                           weight_init=gaussian(offset), bias_init=0.0,
                                           causal=True, name=f"{name}_attention")
            mlp = (Affine(gaussian(offset + 1), bias_init=0.0, axes=[self.F],
                          activation=ng.gelu, name=f"{name}_mlp_in"),
                   Affine(gaussian(offset + 2), bias_init=0.0, axes=[self.D],
                          name=f"{name}_mlp_out"))
            norms = (LayerNorm(self.D, config.eps, name=f"{name}_ln1"),
                     LayerNorm(self.D, config.eps, name=f"{name}_ln2"))
            self.attentions.append(attention)
            self.mlps.append(mlp)
            self.norms.append(norms)
            blocks += [Residual([norms[0], attention]), Residual([norms[1], *mlp])]
        self.ln_final = LayerNorm(self.D, config.eps, name="ln_final")
        self.head = Affine(gaussian(2), bias_init=0.0, axes=[self.V], name="head")
        self.network = Sequential([self.embedding, *blocks, self.ln_final, self.head],
                                  name="char_transformer")

    def __call__(self, chars: ng.Op) -> ng.Op:
        return self.network(chars)

    def variables(self) -> Dict[str, ng.Op]:
        """The trainable variables by name (after the first call), in the network's order."""
        return {op.name: op for op in self.network.variables()}

    def weight_matrices(self) -> List[ng.Op]:
        """The variables AdamW decays: embeddings and projections, not biases or gains."""
        found = [self.embedding.W, self.embedding.P]
        for attention, mlp in zip(self.attentions, self.mlps):
            found += [attention.Wq, attention.Wk, attention.Wv, attention.Wo]
            found += [layer.W for layer in mlp]
        return found + [self.head.W]

    def loss(self, chars: ng.Op, next_chars: ng.Op) -> ng.Op:
        """The mean cross entropy of the next characters, in nats: a scalar."""
        per_position = ng.cross_entropy_multi(ng.softmax(self(chars), self.V),
                                              ng.one_hot(next_chars, axis=self.V),
                                              out_axes=next_chars.axes)
        return ng.mean(per_position, out_axes=())


def make_optimizer(model: CharTransformer, total_steps: int) -> AdamW:
    """AdamW with the run's warmup-then-cosine rate and global-norm clipping.

    The schedule spans `total_steps` (all epochs), so a resumed run must plan the same
    total; the model must have been called (its weights exist).
    """
    config = model.config
    warmup = max(1, int(total_steps * config.warmup_fraction))
    decayed = {id(op) for op in model.weight_matrices()}
    return AdamW(config.learning_rate, weight_decay=config.weight_decay,
                 gradient_clip_norm=config.clip_norm,
                 schedule=WarmupCosineSchedule(warmup, max(total_steps, warmup + 1)),
                 decay_filter=lambda variable: id(variable) in decayed)


def encode(text: str):
    """(alphabet, codes): the sorted characters of `text` and `text` as int32 indices."""
    alphabet = "".join(sorted(set(text)))
    lookup = {ch: i for i, ch in enumerate(alphabet)}
    return alphabet, np.fromiter((lookup[ch] for ch in text), dtype=np.int32, count=len(text))


def generate(predict, prompt: np.ndarray, alphabet: str, length: int, temperature: float,
             seed: int) -> str:
    """`length` characters, each drawn from the model's next-character distribution given
    the last `len(prompt)` characters; temperature 0 takes the most likely one (greedy)."""
    rng = np.random.default_rng(seed)
    window, out = list(prompt), []
    for _ in range(length):
        logits = np.asarray(predict(np.asarray(window, dtype=np.int32)[:, None]),
                            dtype=np.float64).ravel()
        if temperature == 0:
            code = int(np.argmax(logits))
        else:
            weights = np.exp((logits - logits.max()) / temperature)
            code = int(rng.choice(len(weights), p=weights / weights.sum()))
        out.append(alphabet[code])
        window = window[1:] + [code]
    return "".join(out)


def train(epochs: int = FULL["epochs"], steps: int = FULL["steps"], config: Config = Config(),
          seed: int = 0, backend: Optional[str] = "cpu", val_batches: int = FULL["val_batches"],
          sample_length: int = FULL["sample_length"], temperature: float = 0.8,
          checkpoint: Optional[str] = None, resume: Optional[str] = None,
          plot: Optional[str] = None, callbacks: Sequence[Callback] = (),
          verbose: bool = True) -> Dict:
    """Train for epochs x steps minibatches; returns the losses, a sample and the seconds.

    The result holds the per-epoch "losses" and "val_losses", the per-step
    "step_losses", the "prompt" and the generated "sample", and "seconds" of training.
    `checkpoint` saves the run after every epoch; `resume` restores one saved by a run
    with the same arguments and continues it; `plot` writes the loss curve (a PNG, needs
    matplotlib). `callbacks` join fit's (one may stop the run early). `backend` None
    takes the transformer factory's (`ng.set_transformer_factory`).
    """
    text = load_help_text()
    alphabet, codes = encode(text)
    split = len(codes) * 9 // 10
    train_inputs, train_targets = windows(codes[:split], config.context)
    val_inputs, val_targets = windows(codes[split:], config.context)
    train_set = ArrayIterator({"chars": train_inputs, "next": train_targets}, config.batch,
                              total_iterations=steps, shuffle=True, seed=seed)
    val_set = ArrayIterator({"chars": val_inputs, "next": val_targets}, config.batch,
                            total_iterations=min(val_batches, len(val_inputs) // config.batch))

    model = CharTransformer(len(alphabet), config, seed=seed)
    inputs = train_set.make_placeholders(axes={"chars": [model.T], "next": [model.T]})
    loss = model.loss(inputs["chars"], inputs["next"])
    optimizer = make_optimizer(model, epochs * steps)
    step = ng.sequential([optimizer(loss), loss])
    run = Checkpoint(model.variables(), optimizer, train_set)
    one = ng.make_axis(1, name="N")
    context = ng.placeholder([model.T, one], dtype=np.int32, name="context")
    next_logits = ng.slice_along_axis(model(context), model.T, config.context - 1)

    if verbose:
        print(f"corpus: {len(text)} characters, {len(alphabet)} symbols; {len(train_inputs)} "
              f"training and {len(val_inputs)} validation windows of {config.context}",
              flush=True)
    started = time.perf_counter()
    with ng.make_transformer(backend) as transformer:
        progress = run.restore(resume, transformer) if resume else None
        if verbose and progress is not None:
            print(f"resumed from {resume} after epoch {progress['epoch']} "
                  f"({progress['iteration']} steps)", flush=True)
        train_step = transformer.computation(step, inputs["chars"], inputs["next"])
        evaluate_loss = transformer.computation(loss, inputs["chars"], inputs["next"])
        predict = transformer.computation(next_logits, context)

        def validation() -> Dict[str, float]:
            val_set.reset()  # the same windows after every epoch
            return {"val_loss": float(np.mean([evaluate_loss(b["chars"], b["next"])
                                               for b in val_set]))}

        extra: List[Callback] = [ProgressBar()] if verbose else []
        if checkpoint:
            extra.append(CheckpointCallback(run, checkpoint, transformer))
        history = fit(train_step, train_set, epochs, feed=lambda b: (b["chars"], b["next"]),
                      callbacks=extra + list(callbacks), evaluate=validation,
                      learning_rate=optimizer.learning_rate_at, resume=progress)
        seconds = time.perf_counter() - started
        prompt = codes[split:split + config.context]
        sample = generate(predict, prompt, alphabet, sample_length, temperature, seed)
    if plot:
        plot_history(history, plot)
    return {"losses": history["loss"], "val_losses": history["val_loss"],
            "step_losses": history.steps["loss"],
            "prompt": "".join(alphabet[c] for c in prompt), "sample": sample,
            "seconds": seconds}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"a short run of the same model ({QUICK['epochs']} epoch of "
                             f"{QUICK['steps']} steps): under a minute on 2 cores")
    for name, what in (("epochs", "epochs"), ("steps", "minibatches per epoch"),
                       ("sample_length", "characters to generate at the end")):
        parser.add_argument("--" + name.replace("_", "-"), type=int, default=None,
                            help=f"{what} (default {FULL[name]}, quick: {QUICK[name]})")
    parser.add_argument("--temperature", type=float, default=0.8,
                        help="sampling temperature (default 0.8); 0 takes the most likely "
                             "character")
    parser.add_argument("--seed", type=int, default=0, help="of the weights, batches and sample")
    parser.add_argument("--checkpoint", metavar="PATH",
                        help="save the whole run (.npz) after every epoch")
    parser.add_argument("--resume", metavar="PATH",
                        help="continue the run saved in PATH (by --checkpoint, with the same "
                             "options), with the losses it would have had uninterrupted")
    parser.add_argument("--plot", metavar="PNG", help="write the loss curve (needs matplotlib)")
    parser.add_argument("--transformer", default="cpu", choices=ng.transformer_choices())
    args = parser.parse_args(argv)
    if args.temperature < 0:
        parser.error(f"--temperature must be >= 0, not {args.temperature}")
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        parser.error("--plot needs matplotlib (pip install axgraph[viz])")
    settings: Dict[str, Any] = dict(QUICK) if args.quick else {}
    for name in ("epochs", "steps", "sample_length"):
        if getattr(args, name) is not None:
            settings[name] = getattr(args, name)
    try:
        result = train(seed=args.seed, backend=args.transformer, temperature=args.temperature,
                       checkpoint=args.checkpoint, resume=args.resume, plot=args.plot,
                       **settings)
    except ng.SerializationError as error:  # a checkpoint that cannot be read or written
        hint = " (--resume takes the options of the run that saved it)" if args.resume else ""
        parser.exit(2, f"{parser.prog}: error: {error}{hint}\n")
    print(f"validation loss {result['val_losses'][-1]:.3f} nats/char after "
          f"{len(result['losses'])} epochs ({result['seconds']:.1f} s of training)")
    if args.plot:
        print(f"loss curve: {args.plot}")
    print(f"sample, after {result['prompt'][-30:]!r}:\n{result['sample']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
