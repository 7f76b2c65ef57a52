"""examples/char_transformer.py against a PyTorch model written here: same weights, same batches.

The reference is built from ordinary PyTorch modules (Embedding, LayerNorm, Linear,
scaled_dot_product_attention with is_causal) and loaded with the values axgraph's
transformer initialized its variables to; both then take Adam steps on the same
minibatches and their losses must agree step by step.
"""
import math

import numpy as np
import pytest

import axgraph as ng
from axgraph.frontends.neon import Adam
from examples import char_transformer as ct
from examples.text_data import load_help_text

torch = pytest.importorskip("torch")
F = torch.nn.functional

#: A small model of the example's architecture: seconds to train 20 steps on 2 cores.
SMALL = ct.Config(layers=2, heads=2, d_model=32, context=16, mlp_width=64, batch=8,
                  learning_rate=1e-2)
STEPS = 20


class TorchBlock(torch.nn.Module):
    """One pre-LayerNorm block: x + attention(ln1(x)), then + mlp(ln2(.))."""

    def __init__(self, config):
        super().__init__()
        d, inner = config.d_model, config.mlp_width
        self.heads = config.heads
        self.ln1 = torch.nn.LayerNorm(d, eps=config.eps)
        self.query, self.key, self.value = (torch.nn.Linear(d, d) for _ in range(3))
        self.attention_out = torch.nn.Linear(d, d)
        self.ln2 = torch.nn.LayerNorm(d, eps=config.eps)
        self.mlp_in, self.mlp_out = torch.nn.Linear(d, inner), torch.nn.Linear(inner, d)

    def forward(self, x):
        batch, length, width = x.shape
        h = self.ln1(x)

        def heads(linear):  # (batch, heads, length, head size)
            return linear(h).view(batch, length, self.heads, -1).transpose(1, 2)

        attended = F.scaled_dot_product_attention(heads(self.query), heads(self.key),
                                                  heads(self.value), is_causal=True)
        x = x + self.attention_out(attended.transpose(1, 2).reshape(batch, length, width))
        return x + self.mlp_out(F.gelu(self.mlp_in(self.ln2(x))))


class TorchCharTransformer(torch.nn.Module):
    """The example's model in PyTorch: characters (batch, T) -> logits (batch, T, vocab)."""

    def __init__(self, vocab_size, config):
        super().__init__()
        self.token = torch.nn.Embedding(vocab_size, config.d_model)
        self.position = torch.nn.Parameter(torch.zeros(config.context, config.d_model))
        self.blocks = torch.nn.ModuleList(TorchBlock(config) for _ in range(config.layers))
        self.ln_final = torch.nn.LayerNorm(config.d_model, eps=config.eps)
        self.head = torch.nn.Linear(config.d_model, vocab_size)

    def forward(self, chars):
        x = self.token(chars) + self.position
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_final(x))

    def load_axgraph(self, model, values):
        """Copy axgraph's variable values (a name -> array dict) into this model.

        Every axgraph Affine weight has axes (out..., in - 1...), heads before head
        size, which flattened is nn.Linear's (out, in) layout; the names are checked
        so that a change of layout fails here rather than as a mismatch of losses.
        """
        def linear(target, layer):
            levels = [a.dual_level for a in layer.W.axes]
            assert levels == sorted(levels, reverse=True)  # out axes (level 0) first
            target.weight.copy_(torch.from_numpy(values[layer.W.name].reshape(
                target.weight.shape)))
            target.bias.copy_(torch.from_numpy(values[layer.b.name].reshape(-1)))

        def norm(target, params):
            target.weight.copy_(torch.from_numpy(values[params.gain.name]))
            target.bias.copy_(torch.from_numpy(values[params.bias.name]))

        assert [a.name for a in model.blocks[0].query.W.axes][:2] == ["H", "E"]
        assert [a.name for a in model.blocks[0].attention_out.W.axes][1:] == ["H-1", "E-1"]
        with torch.no_grad():
            self.token.weight.copy_(torch.from_numpy(values[model.embedding.W.name]))
            assert list(model.position.axes) == [model.axes.T, model.axes.D]
            self.position.copy_(torch.from_numpy(values[model.position.name]))
            for mine, theirs in zip(self.blocks, model.blocks):
                norm(mine.ln1, theirs.ln1)
                norm(mine.ln2, theirs.ln2)
                for part in ("query", "key", "value", "attention_out", "mlp_in", "mlp_out"):
                    linear(getattr(mine, part), getattr(theirs, part))
            norm(self.ln_final, model.ln_final)
            linear(self.head, model.head)
        return self


def torch_loss(model, chars, next_chars):
    """Mean cross entropy over every position, for (T, N) int arrays as axgraph is fed."""
    logits = model(torch.from_numpy(chars.T.astype(np.int64)))
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                           torch.from_numpy(next_chars.T.astype(np.int64)).reshape(-1))


def corpus_batches(config, count, seed):
    """`count` (chars, next) minibatches of (T, N) windows from the example's corpus."""
    alphabet, codes = ct.encode(load_help_text())
    inputs, targets = ct.windows(codes, config.context)
    rng = np.random.default_rng(seed)
    picks = [rng.choice(len(inputs), config.batch, replace=False) for _ in range(count)]
    return alphabet, [(np.ascontiguousarray(inputs[p].T), np.ascontiguousarray(targets[p].T))
                      for p in picks]


def axgraph_run(config, alphabet, batches, backend="cpu"):
    """(initial variable values, per-step losses) of the example's model trained on batches."""
    model = ct.CharTransformer(len(alphabet), config, seed=5)
    N = ng.make_axis(config.batch, name="N")
    chars, next_chars = (ng.placeholder([model.axes.T, N], dtype=np.int32) for _ in range(2))
    loss = model.loss(chars, next_chars)
    step = ng.sequential([Adam(config.learning_rate)(loss), loss])
    variables = model.variables()
    with ng.make_transformer(backend) as transformer:
        initial = transformer.computation(list(variables.values()))()
        train_step = transformer.computation(step, chars, next_chars)
        losses = [float(train_step(*batch)) for batch in batches]
    return model, dict(zip(variables, (np.array(v) for v in initial))), losses


def torch_run(model, values, vocab_size, config, batches):
    torch.manual_seed(0)
    reference = TorchCharTransformer(vocab_size, config).load_axgraph(model, values)
    optimizer = torch.optim.Adam(reference.parameters(), lr=config.learning_rate)
    losses = []
    for chars, next_chars in batches:
        optimizer.zero_grad()
        loss = torch_loss(reference, chars, next_chars)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return reference, losses


def test_loss_curve_matches_pytorch():
    """20 Adam steps from the same weights on the same batches: the same losses.

    Both compute in float32 with different summation orders (BLAS blocking, a
    fused attention kernel in PyTorch, multiply-and-sum here), a few ulps apart
    per op (float32's ulp is 1.2e-7 relative); Adam's step lr * m / sqrt(v)
    carries a gradient's relative error into the weights, and over 20 steps at
    a large rate (1e-2) the losses drift apart by up to 2e-6 relative. 2e-5
    leaves a margin of ten; a mistake is far larger (scaling the attention
    scores by 1/E instead of 1/sqrt(E) moves the losses by 1e-3 within 20 steps).
    """
    alphabet, batches = corpus_batches(SMALL, STEPS, seed=1)
    model, values, losses = axgraph_run(SMALL, alphabet, batches)
    _, expected = torch_run(model, values, len(alphabet), SMALL, batches)
    assert losses[0] == pytest.approx(math.log(len(alphabet)), rel=0.05)  # near uniform
    assert losses[-1] < losses[0] - 0.5  # it learns
    np.testing.assert_allclose(losses, expected, rtol=2e-5)


def test_greedy_generation_matches_pytorch_and_sampling_repeats():
    """Greedy text equals PyTorch's argmax continuation; a seed fixes the sampled text."""
    config = ct.Config(layers=1, heads=2, d_model=16, context=8, mlp_width=32, batch=2)
    alphabet, codes = ct.encode(load_help_text())
    model = ct.CharTransformer(len(alphabet), config, seed=3)
    one = ng.make_axis(1, name="N")
    context = ng.placeholder([model.axes.T, one], dtype=np.int32)
    logits = ng.slice_along_axis(model(context), model.axes.T, config.context - 1)
    variables = model.variables()
    prompt = codes[:config.context]
    with ng.make_transformer("cpu") as transformer:
        values = dict(zip(variables, transformer.computation(list(variables.values()))()))
        predict = transformer.computation(logits, context)
        greedy = ct.generate(predict, prompt, alphabet, 12, temperature=0, seed=0)
        sampled = [ct.generate(predict, prompt, alphabet, 12, temperature=1.0, seed=seed)
                   for seed in (7, 7, 8)]
    reference = TorchCharTransformer(len(alphabet), config).load_axgraph(model, values)
    window, expected = list(prompt), []
    with torch.no_grad():
        for _ in range(12):
            code = int(reference(torch.tensor([window]))[0, -1].argmax())
            expected.append(alphabet[code])
            window = window[1:] + [code]
    assert greedy == "".join(expected)
    assert sampled[0] == sampled[1] and sampled[0] != sampled[2]
    assert all(len(s) == 12 and set(s) <= set(alphabet) for s in sampled)


def test_quick_run_prints_validation_loss_and_sample(capsys):
    assert ct.main(["--quick", "--steps", "2", "--sample-length", "30", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "validation loss" in out
    loss = float(out.split("validation loss ")[1].split()[0])
    assert 0 < loss < math.log(200)  # a loss in nats per character over ~100 symbols
    assert "sample, after" in out
    assert out.split("sample, after", 1)[1].split("\n", 1)[1].strip()
