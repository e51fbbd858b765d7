"""The documented benchmark scripts whose figures come from the cost model (no host timing) run at their
default flags and exit 0: a script that raises, or whose target fails, fails here."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("script", ["fusion", "real_costs", "kernel", "l1_reuse", "dynamic_shapes"])
def test_benchmark_script_runs_at_its_defaults(script):
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / f"{script}.py")], capture_output=True, text=True,
                         cwd=ROOT, timeout=600, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    assert run.stdout.strip()
