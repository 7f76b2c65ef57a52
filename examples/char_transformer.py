"""Train a small character-level transformer on Python's own help text, then sample from it.

    python -m examples.char_transformer [--quick] [--epochs 3] [--steps 150] [--transformer cpu]

The corpus is `pydoc_data.topics`, the documentation that ships with every
CPython (see examples/text_data.py), so nothing is downloaded; its last tenth
is held out for the validation loss printed after every epoch.

The model is a GPT-style decoder: learned token and position embeddings, 2
pre-LayerNorm blocks (causal self-attention with 4 heads, then a GELU MLP,
each added back to its input) and a final LayerNorm before an untied output
layer (its own weight and bias, not the embedding table transposed: one
variable fewer to share, and the same layout as the PyTorch reference in
tests/test_char_transformer.py). Every tensor carries named axes:

* ``T`` the query positions (flagged recurrent, so neon layers pass it through
  as they pass REC), ``K`` the key positions (``ng.rename(x, {T: K})``),
* ``D`` the model width, ``H`` the heads and ``E`` the head size,
* ``F`` the MLP's hidden width, the vocabulary axis and the batch axis ``N``.

Attention contracts query and key over ``E`` while keeping ``H``, ``T``, ``K``
and ``N``, and the weights and values over ``K`` while keeping ``H``, ``T``,
``E`` and ``N``: batched products, ``ng.dot(q, k, reduction_axes=[E])``.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

import axgraph as ng
from axgraph.frontends.neon import (Adam, Affine, ArrayIterator, Gaussian, LookupTable,
                                    ProgressBar, fit)

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
    learning_rate: float = 1e-3
    init_scale: float = 0.02  # standard deviation of every initial weight and embedding
    eps: float = 1e-5  # layer_norm's


#: The length of a run: epochs of `steps` minibatches, the validation batches after each
#: epoch and the characters generated at the end. ``--quick`` runs the same model shorter.
FULL = {"epochs": 3, "steps": 150, "val_batches": 20, "sample_length": 300}
QUICK = {"epochs": 1, "steps": 30, "val_batches": 2, "sample_length": 100}


class LayerNormParams:
    """The gain and bias of one layer_norm over `axis`, as trainable variables."""

    def __init__(self, axis: ng.Axis, name: str, eps: float):
        self.axis, self.eps = axis, eps
        self.gain = ng.variable([axis], initial_value=1.0, name=f"{name}_gain")
        self.bias = ng.variable([axis], initial_value=0.0, name=f"{name}_bias")

    def __call__(self, x: ng.Op) -> ng.Op:
        return ng.layer_norm(x, self.axis, gain=self.gain, bias=self.bias, eps=self.eps)


class Block:
    """x + attention(ln1(x)), then that + mlp(ln2(that)): one pre-LayerNorm block."""

    def __init__(self, name: str, axes: "ModelAxes", config: Config, seed: int):
        def dense(out_axes: Sequence[ng.Axis], part: str, offset: int, activation=None):
            return Affine(weight_init=Gaussian(0.0, config.init_scale, seed=seed + offset),
                          bias_init=0.0, axes=out_axes, activation=activation,
                          name=f"{name}_{part}")

        self.axes = axes
        self.ln1 = LayerNormParams(axes.D, f"{name}_ln1", config.eps)
        self.query = dense([axes.H, axes.E], "query", 0)
        self.key = dense([axes.H, axes.E], "key", 1)
        self.value = dense([axes.H, axes.E], "value", 2)
        self.attention_out = dense([axes.D], "attention_out", 3)
        self.ln2 = LayerNormParams(axes.D, f"{name}_ln2", config.eps)
        self.mlp_in = dense([axes.F], "mlp_in", 4, activation=ng.gelu)
        self.mlp_out = dense([axes.D], "mlp_out", 5)

    def attention(self, x: ng.Op) -> ng.Op:
        """Causal self-attention of x (D, T, N): each query sees its own and earlier keys."""
        T, K, E = self.axes.T, self.axes.K, self.axes.E
        q = self.query(x)  # (H, E, T, N)
        k = ng.rename(self.key(x), {T: K})  # keys and values over K: their own positions
        v = ng.rename(self.value(x), {T: K})
        scores = ng.dot(q, k, reduction_axes=[E]) * (1.0 / math.sqrt(E.length))
        weights = ng.softmax(ng.where(ng.causal_mask(T, K), scores, -np.inf), K)
        return self.attention_out(ng.dot(weights, v, reduction_axes=[K]))  # (H, N, T, E) -> (D, T, N)

    def __call__(self, x: ng.Op) -> ng.Op:
        x = x + self.attention(self.ln1(x))
        return x + self.mlp_out(self.mlp_in(self.ln2(x)))


@dataclass(frozen=True)
class ModelAxes:
    """The named axes of one model (see the module docstring)."""

    T: ng.Axis
    K: ng.Axis
    D: ng.Axis
    H: ng.Axis
    E: ng.Axis
    F: ng.Axis
    V: ng.Axis


class CharTransformer:
    """Characters (T, N) -> next-character logits (V, T, N).

    The embeddings and layer-norm parameters are made here, the Affine layers' weights on
    the first call (neon's axis inference); every initializer is seeded from `seed`.
    """

    def __init__(self, vocab_size: int, config: Config, seed: int = 0):
        if config.d_model % config.heads:
            raise ValueError(f"d_model {config.d_model} is not a multiple of heads "
                             f"{config.heads}")
        self.config = config
        self.embedding = LookupTable(vocab_size, config.d_model,
                                     init=Gaussian(0.0, config.init_scale, seed=seed),
                                     name="token")
        self.axes = ModelAxes(
            T=ng.make_axis(config.context, name="T", recurrent=True),
            K=ng.make_axis(config.context, name="K"),
            D=self.embedding.embed_axis,
            H=ng.make_axis(config.heads, name="H"),
            E=ng.make_axis(config.d_model // config.heads, name="E"),
            F=ng.make_axis(config.mlp_width, name="F"),
            V=self.embedding.vocab_axis)
        self.position = ng.variable([self.axes.T, self.axes.D], name="position",
                                    initial_value=Gaussian(0.0, config.init_scale, seed=seed + 1))
        self.blocks = [Block(f"block{i}", self.axes, config, seed=seed + 10 * (i + 1))
                       for i in range(config.layers)]
        self.ln_final = LayerNormParams(self.axes.D, "ln_final", config.eps)
        self.head = Affine(weight_init=Gaussian(0.0, config.init_scale, seed=seed + 2),
                           bias_init=0.0, axes=[self.axes.V], name="head")

    def __call__(self, chars: ng.Op) -> ng.Op:
        x = self.embedding(chars) + self.position  # (D, T, N)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_final(x))

    def variables(self) -> Dict[str, ng.Op]:
        """The trainable variables by name (complete after the first call), inputs first."""
        found = [self.embedding.W, self.position]
        for block in self.blocks:
            found += [block.ln1.gain, block.ln1.bias]
            for layer in (block.query, block.key, block.value, block.attention_out):
                found += layer.variables()
            found += [block.ln2.gain, block.ln2.bias]
            found += block.mlp_in.variables() + block.mlp_out.variables()
        found += [self.ln_final.gain, self.ln_final.bias] + self.head.variables()
        return {op.name: op for op in found}

    def loss(self, chars: ng.Op, next_chars: ng.Op) -> ng.Op:
        """The mean cross entropy of the next characters, in nats: a scalar."""
        V = self.axes.V
        per_position = ng.cross_entropy_multi(ng.softmax(self(chars), V),
                                              ng.one_hot(next_chars, axis=V),
                                              out_axes=next_chars.axes)
        return ng.mean(per_position, out_axes=())


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
          verbose: bool = True) -> Dict:
    """Train for epochs x steps minibatches; returns losses, validation losses, a sample, seconds.

    `backend` None takes the transformer factory's (`ng.set_transformer_factory`).
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
    inputs = train_set.make_placeholders(axes={"chars": [model.axes.T], "next": [model.axes.T]})
    loss = model.loss(inputs["chars"], inputs["next"])
    step = ng.sequential([Adam(config.learning_rate)(loss), loss])
    one = ng.make_axis(1, name="N")
    context = ng.placeholder([model.axes.T, one], dtype=np.int32, name="context")
    next_logits = ng.slice_along_axis(model(context), model.axes.T, config.context - 1)

    if verbose:
        print(f"corpus: {len(text)} characters, {len(alphabet)} symbols; {len(train_inputs)} "
              f"training and {len(val_inputs)} validation windows of {config.context}",
              flush=True)
    started = time.perf_counter()
    with ng.make_transformer(backend) as transformer:
        train_step = transformer.computation(step, inputs["chars"], inputs["next"])
        evaluate_loss = transformer.computation(loss, inputs["chars"], inputs["next"])
        predict = transformer.computation(next_logits, context)

        def validation() -> Dict[str, float]:
            val_set.reset()  # the same windows after every epoch
            return {"val_loss": float(np.mean([evaluate_loss(b["chars"], b["next"])
                                               for b in val_set]))}

        history = fit(train_step, train_set, epochs, feed=lambda b: (b["chars"], b["next"]),
                      callbacks=[ProgressBar()] if verbose else [], evaluate=validation)
        seconds = time.perf_counter() - started
        prompt = codes[split:split + config.context]
        sample = generate(predict, prompt, alphabet, sample_length, temperature, seed)
    return {"losses": history["loss"], "val_losses": history["val_loss"],
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
    parser.add_argument("--transformer", default="cpu", choices=ng.transformer_choices())
    args = parser.parse_args(argv)
    if args.temperature < 0:
        parser.error(f"--temperature must be >= 0, not {args.temperature}")
    settings: Dict[str, Any] = dict(QUICK) if args.quick else {}
    for name in ("epochs", "steps", "sample_length"):
        if getattr(args, name) is not None:
            settings[name] = getattr(args, name)
    result = train(seed=args.seed, backend=args.transformer, temperature=args.temperature,
                   **settings)
    print(f"validation loss {result['val_losses'][-1]:.3f} nats/char after "
          f"{len(result['losses'])} epochs ({result['seconds']:.1f} s of training)")
    print(f"sample, after {result['prompt'][-30:]!r}:\n{result['sample']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
