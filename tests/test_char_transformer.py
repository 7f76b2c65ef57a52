"""examples/char_transformer.py against a PyTorch model written here: same weights, same batches.

The reference is built from ordinary PyTorch modules (Embedding, LayerNorm, Linear,
scaled_dot_product_attention with is_causal) and loaded with the values axgraph's
transformer initialized its variables to; both then take AdamW steps (torch.optim.AdamW,
clip_grad_norm_, LinearLR then CosineAnnealingLR) on the same minibatches and their
losses must agree step by step. The example's own runs are checked too: a run resumed
from a mid-run checkpoint has the uninterrupted run's losses exactly.
"""
import math

import numpy as np
import pytest

import axgraph as ng
from axgraph.frontends.neon import Callback
from examples import char_transformer as ct
from examples.text_data import load_help_text

torch = pytest.importorskip("torch")
F = torch.nn.functional

#: A small model of the example's architecture: seconds to train 20 steps on 2 cores.
#: Weight decay 0.1 (the example's is 0.01) so that decaying the wrong variables shows.
SMALL = ct.Config(layers=2, heads=2, d_model=32, context=16, mlp_width=64, batch=8,
                  learning_rate=1e-2, weight_decay=0.1)
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

        The layouts are checked by axis, so that a change fails here rather than as a
        mismatch of losses: Affine weights are (out, in - 1), nn.Linear's (out, in);
        the attention's Wq, Wk, Wv are (heads, head size, D - 1), which flattened is the
        (out, in) of a Linear whose output is split into heads (head-major, as
        ``view(batch, length, heads, -1)`` splits it); Wo is (D, heads - 1, head size - 1),
        the (out, in) of the Linear that merges the heads back.
        """
        D = model.D

        def copy(target, variable, axes):
            assert [a.name for a in variable.axes] == [a.name for a in axes], variable.axes
            target.copy_(torch.from_numpy(values[variable.name].reshape(target.shape)))

        def affine(target, layer, out_axis):
            copy(target.weight, layer.W, [out_axis] + [a for a in layer.W.axes][1:])
            assert all(a.dual_level == -1 for a in list(layer.W.axes)[1:])
            copy(target.bias, layer.b, [out_axis])

        def norm(target, layer):
            copy(target.weight, layer.gain, [D])
            copy(target.bias, layer.bias, [D])

        with torch.no_grad():
            copy(self.token.weight, model.embedding.W, [model.V, D])
            copy(self.position, model.embedding.P, [model.T, D])
            for mine, attention, mlp, norms in zip(self.blocks, model.attentions, model.mlps,
                                                   model.norms):
                norm(mine.ln1, norms[0])
                norm(mine.ln2, norms[1])
                heads = [attention.head_axis, attention.head_size_axis]
                named = model.variables()
                for part, target in (("q", mine.query), ("k", mine.key), ("v", mine.value)):
                    copy(target.weight, getattr(attention, f"W{part}"), heads + [D - 1])
                    copy(target.bias, named[f"{attention.name}_b{part}"], heads)
                copy(mine.attention_out.weight, attention.Wo, [D] + [a - 1 for a in heads])
                copy(mine.attention_out.bias, named[f"{attention.name}_bo"], [D])
                affine(mine.mlp_in, mlp[0], model.F)
                affine(mine.mlp_out, mlp[1], D)
            norm(self.ln_final, model.ln_final)
            affine(self.head, model.head, model.V)
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
    """(model, initial variable values, per-step losses) of the example's model and
    optimizer (AdamW, warmup-cosine, clipping) trained on batches."""
    model = ct.CharTransformer(len(alphabet), config, seed=5)
    N = ng.make_axis(config.batch, name="N")
    chars, next_chars = (ng.placeholder([model.T, N], dtype=np.int32) for _ in range(2))
    loss = model.loss(chars, next_chars)
    step = ng.sequential([ct.make_optimizer(model, len(batches))(loss), loss])
    variables = model.variables()
    with ng.make_transformer(backend) as transformer:
        initial = transformer.computation(list(variables.values()))()
        train_step = transformer.computation(step, chars, next_chars)
        losses = [float(train_step(*batch)) for batch in batches]
    return model, dict(zip(variables, (np.array(v) for v in initial))), losses


def torch_training(reference, config, total_steps):
    """A training step of `reference` as the example's: torch.optim.AdamW decaying the
    matrices (dim > 1: embeddings and weights) only, clip_grad_norm_ before each step, and
    the warmup-cosine schedule as LinearLR then CosineAnnealingLR. Returns step(chars,
    next_chars) -> the loss before the step."""
    warmup = max(1, int(total_steps * config.warmup_fraction))
    parameters = list(reference.parameters())
    optimizer = torch.optim.AdamW(
        [{"params": [p for p in parameters if p.dim() > 1]},
         {"params": [p for p in parameters if p.dim() <= 1], "weight_decay": 0.0}],
        lr=config.learning_rate, weight_decay=config.weight_decay)
    linear = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=1 / warmup,
                                               end_factor=1.0, total_iters=warmup - 1)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total_steps - warmup)
    scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [linear, cosine],
                                                      milestones=[warmup])

    def step(chars, next_chars):
        optimizer.zero_grad(set_to_none=True)
        loss = torch_loss(reference, chars, next_chars)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(parameters, config.clip_norm)
        optimizer.step()
        scheduler.step()
        return loss.item()

    return step


def torch_run(model, values, vocab_size, config, batches):
    torch.manual_seed(0)
    reference = TorchCharTransformer(vocab_size, config).load_axgraph(model, values)
    step = torch_training(reference, config, len(batches))
    return reference, [step(*batch) for batch in batches]


def test_loss_curve_matches_pytorch():
    """20 AdamW steps from the same weights on the same batches: the same losses.

    The run is the example's: a warmup of 2 steps then a cosine to 0, gradients
    clipped to a global norm of 1 (which the first steps exceed), weight decay on
    the matrices only. Both compute in float32 with different summation orders
    (BLAS blocking, a fused attention kernel in PyTorch), a few ulps apart per op
    (float32's ulp is 1.2e-7 relative); Adam's step lr * m / sqrt(v) carries a
    gradient's relative error into the weights, and over 20 steps at a large rate
    (1e-2) the losses drift apart by up to 1.4e-6 relative (measured). 1e-5 leaves
    a margin of seven; a mistake is larger: without the clipping the losses move
    by 2e-2, with another warmup by 4e-2, decaying no variable by 5e-4.
    """
    alphabet, batches = corpus_batches(SMALL, STEPS, seed=1)
    model, values, losses = axgraph_run(SMALL, alphabet, batches)
    _, expected = torch_run(model, values, len(alphabet), SMALL, batches)
    assert losses[0] == pytest.approx(math.log(len(alphabet)), rel=0.05)  # near uniform
    assert losses[-1] < losses[0] - 0.5  # it learns
    np.testing.assert_allclose(losses, expected, rtol=1e-5)


def test_greedy_generation_matches_pytorch_and_sampling_repeats():
    """Greedy text equals PyTorch's argmax continuation; a seed fixes the sampled text."""
    config = ct.Config(layers=1, heads=2, d_model=16, context=8, mlp_width=32, batch=2)
    alphabet, codes = ct.encode(load_help_text())
    model = ct.CharTransformer(len(alphabet), config, seed=3)
    one = ng.make_axis(1, name="N")
    context = ng.placeholder([model.T, one], dtype=np.int32)
    logits = ng.slice_along_axis(model(context), model.T, config.context - 1)
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


def test_quick_run_prints_validation_loss_and_sample_and_writes_its_files(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    plot, run = tmp_path / "loss.png", tmp_path / "run.npz"
    assert ct.main(["--quick", "--steps", "2", "--sample-length", "30", "--seed", "1",
                    "--plot", str(plot), "--checkpoint", str(run)]) == 0
    out = capsys.readouterr().out
    assert "validation loss" in out
    loss = float(out.split("validation loss ")[1].split()[0])
    assert 0 < loss < math.log(200)  # a loss in nats per character over ~100 symbols
    assert "sample, after" in out
    assert out.split("sample, after", 1)[1].split("\n", 1)[1].strip()
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the run is over: resuming it trains no more and reports the same validation loss
    assert ct.main(["--quick", "--steps", "2", "--sample-length", "30", "--seed", "1",
                    "--resume", str(run)]) == 0
    again = capsys.readouterr().out
    assert f"resumed from {run} after epoch 1 (2 steps)" in again
    assert float(again.split("validation loss ")[1].split()[0]) == loss


#: A tiny model for the runs of train(): seconds on 2 cores.
TINY = ct.Config(layers=1, heads=2, d_model=16, context=16, mlp_width=32, batch=4)
TINY_RUN = dict(config=TINY, epochs=3, steps=3, val_batches=1, sample_length=5, seed=2,
                verbose=False)


class StopAfterEpoch(Callback):
    """Ends the run after `epoch` epochs, as an interruption would (after its checkpoint)."""

    def __init__(self, epoch):
        self.epoch = epoch

    def on_epoch_end(self, state):
        if state.epoch + 1 == self.epoch:
            state.request_stop("interrupted")


def test_resume_from_a_mid_run_checkpoint_gives_the_uninterrupted_losses(tmp_path):
    """Stopped after epoch 1 of 3 and resumed from its checkpoint: every step's loss, the
    validation losses and the sample equal those of the run never interrupted (AdamW's
    moments and step count, the schedule's position, the shuffled order all restored)."""
    unbroken = ct.train(**TINY_RUN)
    path = str(tmp_path / "run.npz")
    stopped = ct.train(checkpoint=path, callbacks=[StopAfterEpoch(1)], **TINY_RUN)
    assert len(stopped["step_losses"]) == 3
    assert stopped["step_losses"] == unbroken["step_losses"][:3]
    resumed = ct.train(resume=path, checkpoint=path, **TINY_RUN)
    assert len(unbroken["step_losses"]) == 9
    assert resumed["step_losses"] == unbroken["step_losses"]
    assert resumed["val_losses"] == unbroken["val_losses"]
    assert resumed["sample"] == unbroken["sample"]
    fresh = ct.train(**dict(TINY_RUN, seed=3))   # another run: the comparison can fail
    assert fresh["step_losses"][3:] != unbroken["step_losses"][3:]


def test_resume_with_other_options_or_a_missing_file_is_a_clear_error(tmp_path, capsys):
    """Not a traceback: the file, what does not match, and what --resume expects."""
    path, missing = tmp_path / "run.npz", tmp_path / "missing.npz"
    small = ["--quick", "--steps", "1", "--sample-length", "1"]
    assert ct.main(small + ["--checkpoint", str(path)]) == 0
    capsys.readouterr()
    for argv, expected in (
            (["--quick", "--steps", "2", "--resume", str(path)], "'total_iterations': 1"),
            (small + ["--resume", str(missing)], "no such file")):
        with pytest.raises(SystemExit) as stop:
            ct.main(argv)
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert str(argv[-1]) in err and expected in err
        assert "--resume takes the options of the run that saved it" in err
