"""A long fuzz campaign over random kernels (tests/fuzz.py): sim == xla and every level verifies.

    python benchmarks/fuzz_campaign.py --examples 10000 [--seed 0] [--max-ops 10] [--out tests/regressions]

Every failing kernel is written to ``<out>/fuzz_<seed>.py`` (its spec and the error as a comment);
``tests/test_fuzz.py::test_regression`` reruns every file there. Exits 1 if anything failed.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time
import traceback

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

from hypothesis import HealthCheck, given, seed, settings  # noqa: E402

import fuzz  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-ops", type=int, default=10)
    parser.add_argument("--out", default=str(ROOT / "tests" / "regressions"))
    args = parser.parse_args(argv)
    out = pathlib.Path(args.out)
    failures, count, start = [], [0], time.perf_counter()

    @seed(args.seed)
    @settings(max_examples=args.examples, deadline=None, database=None, phases=["generate"],
              suppress_health_check=list(HealthCheck))
    @given(fuzz.kernels(max_ops=args.max_ops))
    def campaign(spec):
        count[0] += 1
        try:
            fuzz.check(spec)
        except Exception as err:  # noqa: BLE001 - every failure is a finding
            text = f"{type(err).__name__}: {err}\n" + fuzz.describe(spec)
            out.mkdir(parents=True, exist_ok=True)
            path = out / f"fuzz_{spec['seed']}.py"
            path.write_text(fuzz.regression_source(spec, text))
            failures.append(path)
            print(f"[{count[0]}] FAIL -> {path}\n{text}\n{traceback.format_exc(limit=3)}", flush=True)
        if count[0] % 100 == 0:
            print(f"[{count[0]}] {len(failures)} failure(s), {time.perf_counter() - start:.0f} s", flush=True)

    campaign()
    print(f"{count[0]} kernels, {len(failures)} failure(s), {time.perf_counter() - start:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
