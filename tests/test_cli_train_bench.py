"""``axgraph train`` and ``axgraph bench`` as subprocesses, and the installed ``axgraph``
script of ``pip install -e .``."""
import ast
import importlib.util
import re
import shutil
import subprocess
import sys

import pytest

from axgraph.cli import source_tree
from axgraph.cli.failures import CommandError
from cli_runner import ROOT, run_axgraph


def final_accuracy(output: str) -> float:
    found = re.search(r"final test accuracy ([\d.]+)% after (\d+) epochs", output)
    assert found, output
    return float(found.group(1))


def test_train_digits_mlp_resumes_to_the_uninterrupted_run(tmp_path):
    pytest.importorskip("sklearn")
    whole = run_axgraph("train", "digits-mlp", "--epochs", "2", "--transformer", "numpy")
    assert whole.returncode == 0, whole.stderr
    # the progress bar: one line per epoch, with the loss falling
    losses = [float(x) for x in re.findall(r"epoch \d/2 +loss ([\d.]+)", whole.stderr)]
    assert len(losses) == 2 and losses[1] < losses[0]
    saved = tmp_path / "run.npz"
    first = run_axgraph("train", "digits-mlp", "--quick", "--epochs", "1", "--transformer",
                        "numpy", "--checkpoint", saved)
    assert first.returncode == 0, first.stderr
    assert saved.is_file()
    rest = run_axgraph("train", "digits-mlp", "--epochs", "2", "--transformer", "numpy",
                       "--resume", saved)
    assert rest.returncode == 0, rest.stderr
    assert f"resumed from {saved} after epoch 1" in rest.stdout
    assert "epoch 1/2" not in rest.stderr and "epoch 2/2" in rest.stderr
    assert final_accuracy(rest.stdout) == final_accuracy(whole.stdout)
    assert f"loss {losses[1]:.4f}" in rest.stderr


def test_train_with_a_missing_checkpoint_fails_clearly(tmp_path):
    pytest.importorskip("sklearn")
    done = run_axgraph("train", "digits-mlp", "--resume", tmp_path / "absent.npz")
    assert done.returncode == 2
    assert "axgraph train digits-mlp: error: cannot read" in done.stderr
    assert "absent.npz" in done.stderr


def test_train_rejects_an_unknown_example_and_transformer():
    assert run_axgraph("train", "digits-rnn").returncode == 2
    done = run_axgraph("train", "digits-mlp", "--transformer", "abacus")
    assert done.returncode == 2 and "invalid choice: 'abacus'" in done.stderr


def test_train_char_lstm_quick_prints_its_metrics():
    done = run_axgraph("train", "char-lstm", "--quick", "--epochs", "1")
    assert done.returncode == 0, done.stderr
    found = re.search(r"final loss ([\d.]+) nats/char against a unigram entropy of ([\d.]+)",
                      done.stdout)
    assert found and 0 < float(found.group(1)) < 2 * float(found.group(2))
    assert "epoch 1/1" in done.stderr


def test_without_a_checkout_train_and_bench_say_where_they_come_from(monkeypatch, tmp_path):
    monkeypatch.setattr(source_tree, "ROOT", tmp_path)
    for package in ("examples", "benchmarks"):
        with pytest.raises(CommandError, match=f"the {package} directory is not installed"):
            source_tree.directory(package)


def benchmark_names():
    """The modules of benchmarks/ with a top-level main, read here on their own."""
    names = []
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        tree = ast.parse(path.read_text())
        if any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in tree.body):
            names.append(path.stem)
    return names


def test_bench_lists_every_benchmark_with_its_summary():
    done = run_axgraph("bench", "--list")
    assert done.returncode == 0, done.stderr
    listed = [line.split()[0] for line in done.stdout.splitlines()]
    assert listed == benchmark_names()
    assert "common" not in listed
    mlp = next(line for line in done.stdout.splitlines() if line.startswith("mlp "))
    assert "MLP training step" in mlp


def test_bench_runs_one_and_prints_its_table():
    done = run_axgraph("bench", "shape_inference", "--quick")
    assert done.returncode == 0, done.stderr
    assert "== axgraph bench shape_inference" in done.stdout
    rows = re.findall(r"^ +(\d+) +([\d.]+) +([\d.]+) +([\d.]+)$", done.stdout, re.M)
    assert len(rows) >= 2
    for ops, seconds, per_op, _ in rows:
        # seconds are printed to 3 decimals, µs per op to 1: the check allows both roundings
        rounding = 0.0005 / int(ops) * 1e6 + 0.05
        assert float(per_op) == pytest.approx(float(seconds) / int(ops) * 1e6, abs=rounding)


def test_bench_with_an_unknown_name_fails():
    done = run_axgraph("bench", "mlp", "no_such_bench")
    assert done.returncode == 1
    assert "no benchmark 'no_such_bench'" in done.stderr


@pytest.mark.skipif(importlib.util.find_spec("setuptools") is None,
                    reason="installing needs setuptools")
def test_pip_install_editable_puts_an_axgraph_script_on_the_path(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, project / name)
    shutil.copytree(ROOT / "axgraph", project / "axgraph",
                    ignore=shutil.ignore_patterns("__pycache__"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                    venv], check=True)
    python = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "-q",
                    "--no-deps", "--no-build-isolation", "--no-index", "-e", project],
                   check=True, capture_output=True)
    script = venv / "bin" / "axgraph"
    assert script.is_file()
    done = subprocess.run([script, "--version"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "axgraph 0.1.0"
    graph = tmp_path / "graph.py"
    graph.write_text("import axgraph as ng\n"
                     "x = ng.placeholder([ng.make_axis(length=3, name='C')], name='x')\n"
                     "y = ng.exp(x, name='y')\n")
    done = subprocess.run([script, "check", graph], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "y = Exp(x) : (C: 3) float32  # graph.py:3" in done.stdout
    # the installed copy has no examples/: train says where they come from
    done = subprocess.run([script, "train", "digits-mlp"], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 1
    assert f"not installed with axgraph (looked in {project})" in done.stderr


def test_the_default_benchmarks_exist():
    from axgraph.cli import bench

    assert set(bench.DEFAULT) <= set(benchmark_names())


def test_char_lstm_resumed_from_its_checkpoint_has_the_uninterrupted_losses(tmp_path,
                                                                           monkeypatch):
    from examples import char_lstm

    steps_run = []

    def counting_fit(train_step, *args, **kwargs):
        def step(*feeds):
            steps_run.append(1)
            return train_step(*feeds)
        return fit(step, *args, **kwargs)

    fit = char_lstm.fit
    monkeypatch.setattr(char_lstm, "fit", counting_fit)

    small = dict(steps=3, seq_len=8, batch=8, hidden=16, embed=8, sample_length=0,
                 verbose=False, backend="numpy")
    whole = char_lstm.train(epochs=2, **small)
    path = tmp_path / "lstm.npz"
    first = char_lstm.train(epochs=1, checkpoint=str(path), **small)
    assert first["losses"] == whole["losses"][:1]
    steps_run.clear()
    resumed = char_lstm.train(epochs=2, resume=str(path), **small)
    assert len(steps_run) == small["steps"]     # only the second epoch ran
    assert resumed["losses"] == pytest.approx(whole["losses"], rel=1e-6)
