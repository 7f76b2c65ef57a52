"""Run the ``axgraph`` command line in a process of its own, as a user would."""
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]


def run_axgraph(*args: str, cwd: Optional[Path] = None, timeout: float = 120
                ) -> subprocess.CompletedProcess:
    """``python -m axgraph ARGS`` with this checkout's axgraph first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "")
                                                       .split(os.pathsep) if p])
    return subprocess.run([sys.executable, "-m", "axgraph", *map(str, args)], cwd=cwd or ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)
