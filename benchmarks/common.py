"""The benchmark harness: interleaved timing, ratio tables, memory probes, target verdicts.

Why it is built this way:

* **Interleaved rounds.** The development machine has 2 cores and is noisy
  (other jobs, frequency changes). Timing contestant A for ten seconds and
  then B for ten seconds lets a slow spell land on one of them only. Here
  every round takes one sample of every contestant, in a rotated order, and
  the reported figure is the median over rounds, so a disturbance hits all
  contestants alike or is voted out by the median.
* **One untimed call before each sample.** Switching contestants leaves the
  previous one's data in the caches and its OpenMP / BLAS threads spinning
  for a while; one untimed call lets them settle, so a contestant is not
  charged for its neighbour.
* **Samples of a minimum length.** A sample times as many calls as make it
  last `min_sample_s`, so timer resolution and per-sample overhead vanish
  for microsecond-scale calls (the dispatch-bound MLP) without making
  100-ms calls (convolutions) take forever.
* **Garbage collection off while timing** (as `timeit` does) and a collect
  between rounds: a collection started by one contestant's garbage would
  otherwise be charged to whoever runs next.
* **Noise.** Differences under 15 % are treated as noise: a verdict within
  15 % of its limit is flagged as such rather than read as a win or a loss.
* **Memory in a fresh process.** Peak memory is read from the kernel
  (`/proc/self/status` VmHWM, reset through `/proc/self/clear_refs`), in a
  subprocess per contestant so no contestant inherits another's heap, with
  glibc's mmap threshold pinned low (`MALLOC_MMAP_THRESHOLD_`) so that every
  large temporary is a fresh mapping that shows in the peak and leaves when
  freed, instead of being recycled out of an already resident heap where
  the peak would not see it. tracemalloc is reported beside it: it sees
  exactly the allocations NumPy makes (NumPy registers its buffers with
  tracemalloc) but nothing PyTorch, XLA or numba allocate.
* **Optional baselines.** A contestant whose package is missing is skipped
  with a note saying so; nothing here needs more than NumPy and axgraph.

A benchmark script describes its cases as `Case` objects (a name and a dict
of contestant name -> setup function returning a zero-argument runner) and
calls `run_cases`; `--probe` runs one contestant's memory probe in the
child process.
"""
from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import io
import json
import os
import platform
import pstats
import statistics
import subprocess
import sys
import time
import tracemalloc
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from axgraph.transformers.cpu.parallel import machine_busy_seconds

NOISE = 0.15  # relative differences below this are noise on the 2-core machine
PROBE_MARK = "AXGRAPH-BENCH-PROBE "
MB = 1e6

Runner = Callable[[], Any]
Setup = Callable[[], Runner]


class Skip(Exception):
    """Raised by a setup function: this contestant cannot run here (the message says why)."""


def require(module: str, pip_name: Optional[str] = None):
    """Import `module` or skip the contestant, naming the package to install."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise Skip(f"{pip_name or module} not installed ({error.__class__.__name__}); "
                   f"pip install -r benchmarks/requirements.txt") from None


def import_torch():
    """PyTorch with 2 intra-op threads, as the issue specifies (the machine has 2 cores)."""
    torch = require("torch")
    torch.set_num_threads(2)
    return torch


def torch_first() -> None:
    """Import PyTorch, where installed, before any axgraph kernel loads.

    Why: PyTorch and axgraph's kernels share one OpenMP runtime, which reads its waiting
    policy once, when it loads. Loaded after axgraph's first kernel, PyTorch waited as
    axgraph tells its own threads to (eager's 784-512-512-10 MLP step 5.7 ms against 3.0
    under its own defaults, on 2 cores), which no user of PyTorch alone sees. Imported
    first, PyTorch runs under its defaults, and so do axgraph's kernels then.
    """
    try:
        import_torch()
    except Skip:
        pass


def import_jax():
    """JAX on the CPU, float32 (x64 off, its default), without probing for accelerators."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    jax = require("jax", "jax[cpu]")
    return jax


# -- timing ------------------------------------------------------------------------------------

@dataclass
class Timing:
    """Seconds per call, one sample per round."""

    samples: List[float]
    number: int  # calls per sample
    disturbed: int = 0  # rounds kept although other processes were busy during them
    retaken: int = 0  # rounds thrown away because other processes were busy, and taken again

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def spread(self) -> float:
        """Interquartile range over the median: how noisy this contestant's samples were."""
        if len(self.samples) < 4:
            return (max(self.samples) - min(self.samples)) / self.median
        q = statistics.quantiles(self.samples, n=4)
        return (q[2] - q[0]) / self.median


def _calibrate(runner: Runner, min_sample_s: float, max_number: int) -> int:
    """Calls per sample so that a sample lasts at least `min_sample_s`."""
    number = 1
    while True:
        started = time.perf_counter()
        for _ in range(number):
            runner()
        elapsed = time.perf_counter() - started
        if elapsed >= min_sample_s or number >= max_number:
            return number
        # aim a little past the target so the next try usually suffices
        number = min(max_number, max(number * 2, int(number * 1.2 * min_sample_s / max(elapsed, 1e-9))))


def time_interleaved(runners: Mapping[str, Runner], rounds: int, min_sample_s: float,
                     warmup: int = 2, max_number: int = 10000, settle_s: float = 0.1,
                     quiet_cores: Optional[float] = 0.25) -> Dict[str, Timing]:
    """Median-able samples of every runner, taken in interleaved rounds (see module docstring).

    Before each sample the harness sleeps `settle_s`: OpenBLAS worker threads
    spin (sched_yield) for about 2**28 cycles (~0.1 s) after their last job
    and libgomp threads spin too, so without a pause a contestant would share
    the 2 cores with the previous contestant's still-spinning threads.

    A round during which other processes kept more than `quiet_cores` cores
    busy on average is thrown away and taken again (at most `rounds` times in
    all): on 2 cores, a test suite running beside the benchmark halves the
    cores an OpenMP kernel can use and makes its threads wait at barriers, so
    such a sample measures the neighbour, not the contestant. Rounds still
    disturbed when the retries run out are kept and counted in
    `Timing.disturbed`.
    """
    names = list(runners)
    for name in names:
        for _ in range(warmup):
            runners[name]()
    numbers = {name: _calibrate(runners[name], min_sample_s, max_number) for name in names}
    samples: Dict[str, List[float]] = {name: [] for name in names}
    disturbed = retries = 0
    monitor = LoadMonitor()
    enabled = gc.isenabled()
    try:
        r = 0
        while r < rounds:
            shift = r % len(names)
            order = names[shift:] + names[:shift]
            if r % 2:
                order.reverse()
            gc.collect()
            gc.disable()
            taken: Dict[str, float] = {}
            monitor.lap()
            for name in order:
                runner, number = runners[name], numbers[name]
                if settle_s:
                    time.sleep(settle_s)
                runner()  # untimed: settle caches and threads after the previous contestant
                started = time.perf_counter()
                for _ in range(number):
                    runner()
                taken[name] = (time.perf_counter() - started) / number
            if enabled:
                gc.enable()
            others = monitor.lap()
            if quiet_cores is not None and others is not None and others > quiet_cores:
                if retries < rounds:
                    retries += 1
                    continue
                disturbed += 1
            for name, value in taken.items():
                samples[name].append(value)
            r += 1
    finally:
        if enabled:
            gc.enable()
    return {name: Timing(samples[name], numbers[name], disturbed, retries) for name in names}


class LoadMonitor:
    """How busy *other* processes kept the machine while the benchmark ran.

    Machine-wide busy time from /proc/stat minus this process's and its
    waited-for children's CPU time (os.times), over the wall time and cores:
    a background test run or build shows up here, so a reader can tell a
    noisy run from a quiet one.
    """

    def __init__(self):
        self.started = time.monotonic()
        self.busy0, self.own0 = machine_busy_seconds(), self._own()
        self._last = (self.started, self.busy0, self.own0)

    def lap(self) -> Optional[float]:
        """Cores kept busy by other processes on average since the previous lap (or start)."""
        now, busy, own = time.monotonic(), machine_busy_seconds(), self._own()
        then, busy_then, own_then = self._last
        self._last = (now, busy, own)
        if busy is None or busy_then is None or now <= then:
            return None
        return max(0.0, (busy - busy_then) - (own - own_then)) / (now - then)

    @staticmethod
    def _own() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def report(self) -> str:
        elapsed = time.monotonic() - self.started
        busy = machine_busy_seconds()
        if busy is None or self.busy0 is None:
            return f"wall time {elapsed:.0f} s"
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        others = max(0.0, (busy - self.busy0) - (self._own() - self.own0))
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        return (f"wall time {elapsed:.0f} s; other processes kept {others / elapsed:.2f} of "
                f"{cores} cores busy on average (load average now {load:.2f})")


# -- tables and verdicts -------------------------------------------------------------------------

def format_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def _text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(row[k])) for row in [header, *rows]) for k in range(len(header))]
    lines = ["  ".join(str(cell).ljust(w) if k == 0 else str(cell).rjust(w)
                       for k, (cell, w) in enumerate(zip(row, widths))).rstrip()
             for row in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def ratio_table(title: str, results: Mapping[str, Mapping[str, Optional[Timing]]],
                columns: Sequence[str], reference: str) -> str:
    """Rows = cases, columns = contestants; each cell 'x.xx ms (r.rrx)' relative to `reference`.

    A cell whose contestant did not run reads 'n/a'; a row without the
    reference shows times only. The last column gives the largest spread
    (interquartile range / median) of the row, a noise gauge.
    """
    header = ["case", *columns, "max IQR"]
    rows = []
    for case, timings in results.items():
        ref = timings.get(reference)
        row = [case]
        spreads = []
        for column in columns:
            timing = timings.get(column)
            if timing is None:
                row.append("n/a")
                continue
            spreads.append(timing.spread)
            cell = format_time(timing.median)
            if ref is not None:
                cell += f" ({timing.median / ref.median:.2f}x)"
            row.append(cell)
        row.append(f"{max(spreads):.0%}" if spreads else "")
        rows.append(row)
    footer = []
    for case, timings in results.items():
        any_timing = next((t for t in timings.values() if t is not None), None)
        if any_timing is not None and (any_timing.retaken or any_timing.disturbed):
            footer.append(f"{case}: {any_timing.retaken} round(s) retaken because other "
                          f"processes were busy, {any_timing.disturbed} kept although disturbed")
    return f"{title}\n(ratios relative to '{reference}'; median of interleaved rounds)\n" + \
        _text_table(header, rows) + "".join("\n" + line for line in footer)


def value_table(title: str, results: Mapping[str, Mapping[str, Any]], columns: Sequence[str],
                fmt: Callable[[Any], str]) -> str:
    """Rows = cases, columns = contestants; each cell fmt(value), 'n/a' where missing."""
    header = ["case", *columns]
    rows = [[case, *[("n/a" if values.get(c) is None else fmt(values[c])) for c in columns]]
            for case, values in results.items()]
    return f"{title}\n" + _text_table(header, rows)


@dataclass
class Verdict:
    """One target: `value` must be <= `limit` (or < when `strict`)."""

    target: str
    value: Optional[float]
    limit: float
    unit: str = "x"
    strict: bool = False
    why_missing: str = ""
    noisy: bool = True  # a timing (flag closeness to the limit), not a count or a plan

    @property
    def met(self) -> Optional[bool]:
        if self.value is None:
            return None
        return self.value < self.limit if self.strict else self.value <= self.limit

    def line(self) -> str:
        if self.value is None:
            return f"  [n/a   ] {self.target}: not measured ({self.why_missing})"
        shown = _show(self.value, self.unit)
        relation = "<" if self.strict else "<="
        state = "met" if self.met else "missed"
        close = self.noisy and abs(self.value - self.limit) <= NOISE * self.limit
        noise = " (within 15 % noise)" if close else ""
        return f"  [{state:<6}] {self.target}: {shown} (target {relation} {_show(self.limit, self.unit)}){noise}"


def _show(value: float, unit: str) -> str:
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "s":
        return f"{value:.3f} s"
    if unit == "MB":
        return f"{value:.2f} MB"
    return f"{value:.3g}{unit}"


def ratio(timings: Mapping[str, Optional[Timing]], a: str, b: str) -> Optional[float]:
    """median(a) / median(b), or None when either did not run."""
    ta, tb = timings.get(a), timings.get(b)
    if ta is None or tb is None:
        return None
    return ta.median / tb.median


def print_notes(notes: Sequence[str]) -> None:
    """The run's notes (skipped contestants, excluded results, the background load)."""
    print()
    print("Notes:")
    for note in notes:
        print("  " + note)


def print_verdicts(verdicts: Sequence[Verdict]) -> None:
    print("Targets:")
    for verdict in verdicts:
        print(verdict.line())


# -- memory ----------------------------------------------------------------------------------------

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_bytes() -> Optional[int]:
    """Resident set size now, from /proc/self/statm (None off Linux)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except OSError:
        return None


def peak_rss_bytes() -> Optional[int]:
    """The resident high-water mark (VmHWM) since start or the last `reset_peak_rss`."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0: write 5 to clear_refs); False if impossible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def measure_memory(runner_factory: Setup, warmup: int = 2, steps: int = 3) -> Dict[str, Any]:
    """Memory of one contestant, in this process (meant for a fresh child, see `probe_memory`).

    setup (build model / graph / data) happens before the baseline `rss0`.
    `retained`: RSS growth over the warmup calls (compiled code, arenas,
    caches, gradients a framework keeps between steps); `transient`: the
    peak above that during steady calls (temporaries); `peak` = both, i.e.
    the high-water mark of the steady calls above the baseline.
    `traced_peak`: tracemalloc's peak during the steady calls, above what was
    traced when they began (NumPy-side allocations only).
    """
    runner = runner_factory()
    gc.collect()
    rss0 = rss_bytes()
    for _ in range(warmup):
        runner()
    gc.collect()
    rss1 = rss_bytes()
    can_reset = reset_peak_rss()
    tracemalloc.start()
    traced_start = tracemalloc.get_traced_memory()[0]
    for _ in range(steps):
        runner()
    traced_peak = tracemalloc.get_traced_memory()[1] - traced_start
    tracemalloc.stop()
    hwm = peak_rss_bytes()
    result: Dict[str, Any] = {"traced_peak": traced_peak, "reset_ok": can_reset}
    if None not in (rss0, rss1, hwm) and can_reset:
        result.update(retained=rss1 - rss0, transient=max(0, hwm - rss1), peak=max(0, hwm - rss0))
    return result


def probe_memory(module: str, case: str, contestant: str, quick: bool,
                 extra_args: Sequence[str] = (), timeout: float = 300) -> Dict[str, Any]:
    """Run `measure_memory` for one contestant in a fresh `python -m module --probe ...`."""
    env = dict(os.environ)
    # Every allocation of 64 KiB or more becomes its own mapping (and the
    # threshold stops adapting), so temporaries show in the peak and leave.
    env["MALLOC_MMAP_THRESHOLD_"] = "65536"
    command = [sys.executable, "-m", module, "--probe", case, contestant, *extra_args]
    if quick:
        command.append("--quick")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env,
                              cwd=_repo_root())
    except subprocess.TimeoutExpired:
        return {"error": f"probe timed out after {timeout:.0f} s"}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(PROBE_MARK):
            return json.loads(line[len(PROBE_MARK):])
    tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
    return {"error": f"probe exited {done.returncode}: {tail[0][:200]}"}


def emit_probe_result(result: Mapping[str, Any]) -> None:
    """The child's answer to `probe_memory` (one marked JSON line on stdout)."""
    print(PROBE_MARK + json.dumps(result), flush=True)


def run_subprocess_json(args: Sequence[str], env: Optional[Mapping[str, str]] = None,
                        timeout: float = 300) -> Dict[str, Any]:
    """Run `python *args` and return its marked JSON line (or {'error': ...})."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    try:
        done = subprocess.run([sys.executable, *args], capture_output=True, text=True,
                              timeout=timeout, env=full_env, cwd=_repo_root())
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(PROBE_MARK):
            return json.loads(line[len(PROBE_MARK):])
    tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
    return {"error": f"exited {done.returncode}: {tail[0][:200]}"}


def _repo_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def format_mb(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value / MB:.2f} MB"


# -- axgraph ------------------------------------------------------------------------------------

def cpu_transformer_options(try_call: Callable[[Any], None], engine: str = "auto"
                            ) -> Tuple[Dict[str, Any], str]:
    """The cpu transformer options to benchmark with, and a note about them.

    Fusion is preferred; another engineer may still be finishing it, so
    `try_call(transformer)` (compile a computation on it and call it once) is
    run on a throwaway `make_transformer("cpu", fuse=True)` and, if it raises,
    fuse=False is used instead and the note says why. The trial transformer
    is discarded either way so the benchmarked one starts from fresh state.
    """
    import axgraph as ng

    options = {"fuse": True, "engine": engine}
    try:
        trial = ng.make_transformer("cpu", **options)
        try_call(trial)
        trial.close()
        return options, ""
    except Exception as error:  # noqa: BLE001 - any failure means: benchmark without fusion
        message = str(error).splitlines()[0][:160]
        return ({"fuse": False, "engine": engine},
                f"fuse=True failed ({type(error).__name__}: {message}); measured with fuse=False")


@contextlib.contextmanager
def kernel_march(march: Optional[str]) -> Iterator[None]:
    """Build the C kernels compiled inside the block for -march=`march` ($AXGRAPH_MARCH);
    None keeps the caller's setting (native unless the environment says otherwise).

    The cpu transformer compiles on a computation's first call, so that call
    belongs inside the block; kernels keep their target once built.
    """
    if march is None:
        yield
        return
    from axgraph.transformers.cpu import kernel_c

    saved = os.environ.get(kernel_c.MARCH_VARIABLE)
    os.environ[kernel_c.MARCH_VARIABLE] = march
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(kernel_c.MARCH_VARIABLE, None)
        else:
            os.environ[kernel_c.MARCH_VARIABLE] = saved


def describe_options(options: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in options.items())


# -- profiling ------------------------------------------------------------------------------------

def profile_runner(runner: Runner, calls: int, top: int = 20, sort: str = "tottime") -> str:
    """cProfile `calls` calls of `runner`; the `top` entries by `sort`, as text."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        runner()
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.strip_dirs().sort_stats(sort).print_stats(top)
    return out.getvalue()


# -- machine facts -----------------------------------------------------------------------------

def _version(module: str) -> str:
    import importlib
    import importlib.metadata

    try:
        return importlib.metadata.version(module)
    except importlib.metadata.PackageNotFoundError:
        try:
            return getattr(importlib.import_module(module), "__version__", "?")
        except ImportError:
            return "not installed"


def machine_facts() -> str:
    """CPU, cores, versions, BLAS (via threadpoolctl when present), OpenBLAS overrides, C compiler."""
    import numpy as np

    lines = []
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    lines.append(f"machine: {cpu}, {cores} usable cores, {platform.system()} {platform.release()}")
    lines.append(f"python {platform.python_version()}, numpy {np.__version__}, axgraph "
                 f"{_version('axgraph')}; optional: " + ", ".join(
                     f"{m} {_version(m)}" for m in ("torch", "jax", "numba", "numexpr")))
    try:
        from threadpoolctl import threadpool_info

        blas = [f"{i.get('internal_api')} {i.get('version')} ({i.get('architecture', '?')}, "
                f"{i.get('num_threads')} threads)" for i in threadpool_info()
                if i.get("user_api") == "blas"]
        lines.append("numpy BLAS: " + ("; ".join(blas) or "none found"))
    except ImportError:
        lines.append("numpy BLAS: threadpoolctl not installed (see np.show_config())")
    overrides = {k: v for k, v in os.environ.items() if k.startswith(("OPENBLAS_", "AXGRAPH_"))
                 or k in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "MKL_NUM_THREADS",
                          # PyTorch, MKL and oneDNN held to AVX2 (an AVX2 machine's kernels)
                          "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS",
                          "ONEDNN_MAX_CPU_ISA")}
    lines.append("env: " + (", ".join(f"{k}={v}" for k, v in sorted(overrides.items()))
                            or "no OPENBLAS_*/OMP_*/AXGRAPH_* overrides"))
    try:
        from axgraph.transformers.cpu import kernel_c

        chain = kernel_c.toolchain()
        if chain:
            version = str(getattr(chain, "version", chain)).splitlines()[0]
            flags = " ".join(getattr(chain, "flags", ()))
            isa = [m.strip("_") for m in sorted(kernel_c.feature_macros(chain.compiler, "native")
                                                or ()) if m.startswith(("__AVX", "__SSE4_2"))]
            lines.append(f"C compiler for fused kernels: {version} ({flags}); this CPU: "
                         f"{' '.join(isa) or 'no AVX'}")
        else:
            lines.append("C compiler for fused kernels: none (NumPy engine only)")
    except Exception as error:  # noqa: BLE001 - facts are best effort
        lines.append(f"C compiler for fused kernels: unknown ({type(error).__name__})")
    return "\n".join(lines)


# -- the driver -----------------------------------------------------------------------------------

@dataclass
class Settings:
    """How long to measure: the full run or `--quick`."""

    rounds: int
    min_sample_s: float
    warmup: int
    memory_steps: int
    settle_s: float = 0.1

    @classmethod
    def from_args(cls, args) -> "Settings":
        if args.quick:
            settings = cls(rounds=5, min_sample_s=0.03, warmup=1, memory_steps=2)
        else:
            settings = cls(rounds=15, min_sample_s=0.1, warmup=3, memory_steps=3)
        if args.rounds:
            settings.rounds = args.rounds
        if args.settle is not None:
            settings.settle_s = args.settle
        return settings

    def time(self, runners: Mapping[str, Runner]) -> Dict[str, Timing]:
        return time_interleaved(runners, self.rounds, self.min_sample_s, self.warmup,
                                settle_s=self.settle_s)


@dataclass
class Case:
    """One benchmark case: contestant name -> setup() returning a zero-argument runner."""

    name: str
    contestants: Dict[str, Setup]
    check: Optional[Callable[[Dict[str, Any]], List[str]]] = None  # see run_case
    notes: List[str] = field(default_factory=list)


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="short run: 5 rounds of 30-ms samples")
    p.add_argument("--rounds", type=int, default=0, help="interleaved rounds (default 15, quick 5)")
    p.add_argument("--reference", default=None, help="the column ratios are relative to")
    p.add_argument("--only", default=None,
                   help="comma-separated contestant names to run (plus the reference)")
    p.add_argument("--no-memory", action="store_true", help="skip the memory probes")
    p.add_argument("--settle", type=float, default=None,
                   help="seconds of pause before each sample (default 0.1; see time_interleaved)")
    p.add_argument("--probe", nargs=2, metavar=("CASE", "CONTESTANT"), help=argparse.SUPPRESS)
    return p


def setup_contestants(case: Case, only: Optional[Sequence[str]] = None
                      ) -> Tuple[Dict[str, Runner], Dict[str, str]]:
    """Run every setup; (runners, skipped name -> why)."""
    runners: Dict[str, Runner] = {}
    skipped: Dict[str, str] = {}
    for name, setup in case.contestants.items():
        if only and name not in only:
            continue
        try:
            runners[name] = setup()
        except Skip as why:
            skipped[name] = str(why)
        except Exception as error:  # noqa: BLE001 - a broken contestant must not stop the run
            skipped[name] = f"setup failed: {type(error).__name__}: {str(error).splitlines()[0][:160]}"
    return runners, skipped


def run_probe_child(cases: Sequence[Case], args) -> int:
    """`--probe CASE CONTESTANT`: measure one contestant's memory and print it (child side)."""
    torch_first()
    case_name, contestant = args.probe
    settings = Settings.from_args(args)
    for case in cases:
        if case.name == case_name:
            setup = case.contestants[contestant]
            try:
                result = measure_memory(setup, warmup=2, steps=settings.memory_steps)
            except Skip as why:
                result = {"error": str(why)}
            emit_probe_result(result)
            return 0
    emit_probe_result({"error": f"no case {case_name!r}"})
    return 1


def start_run(args, default_reference: str):
    """The shared start of a benchmark: settings, reference, `--only` filter, load monitor.

    Prints the machine facts and the run's shape first, so every table comes with them.
    """
    torch_first()
    settings = Settings.from_args(args)
    reference = args.reference or default_reference
    only = set(args.only.split(",")) | {reference} if args.only else None
    print(machine_facts())
    load = LoadMonitor()
    print(f"run: {'quick' if args.quick else 'full'}, {settings.rounds} interleaved rounds, "
          f"samples >= {settings.min_sample_s * 1e3:.0f} ms\n")
    return settings, reference, only, load


class TorchSGDTrainer:
    """A PyTorch eager training step: zero grads, loss, backward, SGD step.

    Subclasses set `model`, `loss_fn`, `optimizer`, `x`, `y` and `trained` (the
    parameters in the order `params()` reports them).
    """

    def __call__(self):
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.model(self.x), self.y)
        loss.backward()
        self.optimizer.step()
        return loss

    def loss_value(self, result):
        return float(result.detach())

    def params(self):
        return [p.detach().numpy().copy() for p in self.trained]
