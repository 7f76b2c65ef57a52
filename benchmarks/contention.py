"""Training steps beside a competing busy process: threads against a neighbour.

    python -m benchmarks.contention [--quick] [--rounds N] [--march x86-64-v3]

Targets (issue 27, "Contention") measured here:
  * the default thread count is never slower than one thread (default / 1 thread <= 1.0x,
    alone and contended);
  * a training step degrades by at most 1.5x when another process takes a core
    (contended / alone <= 1.5x, default threads).

Cases: the 784-512-512-10 MLP step (batch 128) and the 64-32-10 one (batch 32) of
benchmarks/mlp.py, on axgraph's cpu transformer and on PyTorch eager, each run with its
default threads and with one thread, alone and beside a competitor: a subprocess that
spins on one core for as long as it is told to (what a second job, a data loader or a
browser does to a laptop).

How: every case and thread setting runs in a fresh process of its own, because OpenMP and
OpenBLAS read their thread counts when they load (`OMP_NUM_THREADS`, `OPENBLAS_NUM_THREADS`,
`AXGRAPH_NUM_THREADS` = 1 for the one-thread runs, nothing set for the default), and so
that one case's spinning BLAS threads never land in another's samples. Each such
process times its contestants in interleaved rounds (benchmarks/common.py), each round
taken alone and then with the competitor spinning, so a slow spell of the machine hits both
conditions alike; the figures are medians over rounds. The competitor starts before the
round's first sample (after the usual settle pause) and stops after its last. The rounds
are not thrown away when the machine is busy (the harness's quiet-round check is off here:
this benchmark *makes* the machine busy).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

from axgraph.transformers.cpu import parallel

from . import common, mlp
from .common import Verdict

ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "AXGRAPH_NUM_THREADS": "1"}
SETTINGS = {"default": {}, "1 thread": ONE_THREAD}
CASES = [mlp.BIG, mlp.SMALL]
AXGRAPH, TORCH = "axgraph cpu", "torch eager"
CONDITIONS = ("alone", "contended")
SPIN = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass\n"


class Competitor:
    """A subprocess spinning one core while `running`."""

    def __init__(self):
        self.process: Optional[subprocess.Popen] = None

    def start(self, seconds: float = 120.0) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", SPIN.format(seconds=seconds)])
        time.sleep(0.05)  # let it reach its loop

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
            self.process = None


def _torch_trainer(problem: mlp.Problem, threads: Optional[int]):
    trainer = mlp.TorchEager(problem)
    if threads is not None:  # import_torch set 2 (the setting): the run's own count
        import torch

        torch.set_num_threads(threads)
    return trainer


def child(setting: str, cases: List[str], rounds: int, min_sample_s: float, settle_s: float,
          march: Optional[str]) -> Dict[str, Any]:
    """In a fresh process with the setting's environment: medians per case, contestant and
    condition, in seconds per step."""
    common.torch_first()
    runners: Dict[str, Any] = {}
    notes: List[str] = []
    threads = 1 if setting == "1 thread" else None
    for case in cases:
        try:
            with common.kernel_march(march):
                trainer = mlp.AxgraphCpu(mlp.make_problem(case))
                for _ in range(mlp.STEPS_CHECKED + 10):  # compiled, native where it qualifies
                    trainer()
            runners[f"{case}|{AXGRAPH}"] = trainer
        except Exception as error:  # noqa: BLE001 - reported, the others still run
            notes.append(f"{case}: axgraph failed: {type(error).__name__}: {error}"[:200])
        try:
            runners[f"{case}|{TORCH}"] = _torch_trainer(mlp.make_problem(case), threads)
        except common.Skip as why:
            notes.append(f"{case}: torch skipped: {why}")
    numbers = {name: common._calibrate(run, min_sample_s, 10000) for name, run in runners.items()}
    samples: Dict[str, Dict[str, List[float]]] = {n: {c: [] for c in CONDITIONS} for n in runners}
    competitor = Competitor()
    names = list(runners)
    try:
        for r in range(rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for condition in CONDITIONS:
                if condition == "contended":
                    competitor.start()
                for name in order:
                    time.sleep(settle_s)
                    runners[name]()  # untimed: settle caches and threads
                    # and again once axgraph's governor can look at this condition's load
                    # alone: it decides from the load since its last look, which may have
                    # been in the other condition (the sample is shorter than its interval)
                    time.sleep(parallel.LOAD_INTERVAL * 1.25)
                    runners[name]()
                    started = time.perf_counter()
                    for _ in range(numbers[name]):
                        runners[name]()
                    samples[name][condition].append(
                        (time.perf_counter() - started) / numbers[name])
                competitor.stop()
    finally:
        competitor.stop()
    medians = {name: {c: statistics.median(v) for c, v in per.items()}
               for name, per in samples.items()}
    return {"medians": medians, "notes": notes}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="5 rounds of 30-ms samples")
    p.add_argument("--rounds", type=int, default=0, help="rounds per setting (default 9, quick 5)")
    p.add_argument("--march", default=None,
                   help="build axgraph's C kernels for this -march (e.g. x86-64-v3)")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--cases", default=",".join(CASES), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    rounds = args.rounds or (5 if args.quick else 9)
    min_sample_s = 0.03 if args.quick else 0.1
    if args.child:
        result = child(args.child, args.cases.split(","), rounds, min_sample_s, 0.1, args.march)
        common.emit_probe_result(result)
        return 0

    print(common.machine_facts())
    print(f"run: {rounds} rounds per thread setting, samples >= {min_sample_s * 1e3:.0f} ms, "
          f"competitor: one process spinning one core"
          + (f"; kernels built for -march={args.march}" if args.march else "") + "\n")
    load = common.LoadMonitor()
    results: Dict[str, Dict[str, Any]] = {}
    notes: List[str] = []
    for case in args.cases.split(","):
        for setting, env in SETTINGS.items():
            command = ["-m", "benchmarks.contention", "--child", setting, "--cases", case,
                       "--rounds", str(rounds)]
            if args.quick:
                command.append("--quick")
            if args.march:
                command += ["--march", args.march]
            print(f"timing {case} with threads: {setting} ...", flush=True)
            result = _run_child(command, env)
            if "error" in result:
                notes.append(f"{case}, {setting}: {result['error']}")
                continue
            results.setdefault(setting, {}).update(result["medians"])
            notes += [f"{setting}: {note}" for note in result["notes"]]

    header = ["case", "contestant", "threads", "alone", "contended", "contended/alone",
              "default/1 thread (alone, contended)"]
    rows = []
    figures: Dict[str, Dict[str, Dict[str, float]]] = {}
    for key in sorted({k for per in results.values() for k in per}, key=_row_order):
        case, contestant = key.split("|")
        for setting in SETTINGS:
            medians = results.get(setting, {}).get(key)
            if medians is None:
                continue
            figures.setdefault(key, {})[setting] = medians
            alone, contended = medians["alone"], medians["contended"]
            versus = ""
            one = results.get("1 thread", {}).get(key)
            if setting == "default" and one:
                versus = (f"{alone / one['alone']:.2f}x, {contended / one['contended']:.2f}x")
            rows.append([case, contestant, setting, common.format_time(alone),
                         common.format_time(contended), f"{contended / alone:.2f}x", versus])
    print()
    print("Training step alone and beside one spinning process (median of interleaved rounds)")
    print(common._text_table(header, rows))
    notes.append("background: " + load.report() + " (the competitor included)")
    common.print_notes(notes)
    print()
    verdicts = []
    for key, per in figures.items():
        default, one = per.get("default"), per.get("1 thread")
        if default is None:
            continue
        name = key.replace("|", ", ")
        verdicts.append(Verdict(f"{name}: contended / alone (default threads)",
                                default["contended"] / default["alone"], 1.5))
        if one is not None:
            for condition in CONDITIONS:
                verdicts.append(Verdict(f"{name}: default / 1 thread ({condition})",
                                        default[condition] / one[condition], 1.0))
    axgraph_torch = []
    for case in CASES:
        ax, torch = figures.get(f"{case}|{AXGRAPH}", {}), figures.get(f"{case}|{TORCH}", {})
        for condition in CONDITIONS:
            if "default" in ax and "default" in torch:
                axgraph_torch.append(f"  {case}, {condition}: axgraph / torch eager (default "
                                     f"threads) = {ax['default'][condition] / torch['default'][condition]:.2f}x")
    common.print_verdicts(verdicts)
    if axgraph_torch:
        print()
        print("axgraph against PyTorch eager:")
        print("\n".join(axgraph_torch))
    return 0


def _run_child(args: List[str], settings: Dict[str, str]) -> Dict[str, Any]:
    """`python *args` with the thread variables exactly as `settings` gives them (the
    default run has none set, whatever this process has), and its marked JSON answer."""
    env = {k: v for k, v in os.environ.items() if k not in ONE_THREAD}
    env.update(settings)
    try:
        done = subprocess.run([sys.executable, *args], capture_output=True, text=True,
                              timeout=1800, env=env, cwd=os.path.dirname(os.path.dirname(
                                  os.path.abspath(__file__))))
    except subprocess.TimeoutExpired:
        return {"error": "timed out"}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(common.PROBE_MARK):
            return json.loads(line[len(common.PROBE_MARK):])
    tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
    return {"error": f"exited {done.returncode}: {tail[0][:200]}"}


def _row_order(key: str):
    case, contestant = key.split("|")
    return (CASES.index(case) if case in CASES else 99, contestant)


if __name__ == "__main__":
    sys.exit(main())
