"""The property tests with fresh examples: a nightly-style job, never part of CI.

CI runs hypothesis derandomized (the same examples every run, so an unrelated change never
meets a new failure). That also means CI never finds anything new; this job does. It runs
every test module that uses ``@given`` under several random seeds, without ``CI`` set, and
prints each seed with its outcome, so a failure is replayed with::

    python -m pytest -p no:cacheprovider --hypothesis-seed=SEED tests/test_foo.py

Usage: ``python -m benchmarks.fresh_properties [--rounds 5] [--seed S]``.
"""
from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import List

TESTS = Path(__file__).resolve().parent.parent / "tests"


def property_test_files() -> List[Path]:
    """The test modules that draw examples with hypothesis."""
    return sorted(p for p in TESTS.glob("test_*.py") if re.search(r"^@given", p.read_text(), re.M))


def run_round(seed: int, files: List[Path]) -> bool:
    """One pytest run of the property tests under `seed`; True when it passed."""
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               f"--hypothesis-seed={seed}", *map(str, files)]
    started = time.perf_counter()
    result = subprocess.run(command, env=env, cwd=TESTS.parent, capture_output=True, text=True)
    lines = result.stdout.strip().splitlines()
    summary = lines[-1] if lines else result.stderr.strip()[-200:]
    print(f"seed {seed}: {summary} ({time.perf_counter() - started:.0f} s)", flush=True)
    if result.returncode != 0:
        print(result.stdout[-4000:], flush=True)
    return result.returncode == 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="seeds to run (default 5)")
    parser.add_argument("--seed", type=int, default=None,
                        help="first seed (default: random); round k uses seed + k")
    args = parser.parse_args(argv)
    first = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    files = property_test_files()
    print(f"property tests: {', '.join(p.name for p in files)}", flush=True)
    failed = [seed for seed in range(first, first + args.rounds) if not run_round(seed, files)]
    print(f"{args.rounds - len(failed)} passed, {len(failed)} failed"
          + (f" (seeds {failed})" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
