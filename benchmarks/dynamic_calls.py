"""Eager calls of a polymorphic kernel against the static kernel of the same size: host time.

A ``pj.kernel(fn, polymorphic_shapes=...)`` call runs its dynamic PTO-AS module on the runtime at the
size the arguments bind, a static ``pj.kernel(fn)`` call its own module; both keep the plan of a call for
the next one of that size and run the blocks of one function together. Per kernel and M: the best of
``REPEATS`` calls of each after a first call (compiles and plans), and their ratio. Target: at most
``BOUND`` (3x) — the dynamic kernel interpreting its blocks one after another, orchestrating every call
anew, was 7x to 16x. Host times: run it on an idle machine; the ratio is the figure.

Run: ``python benchmarks/dynamic_calls.py``; the exit status is 1 when the bound fails or a call raises.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import jax
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import ptojax as pj  # noqa: E402
from dynamic_shapes import CASES  # noqa: E402

SIZES, BOUND, REPEATS = (4097, 20000), 3.0, 5


def best(f, args) -> float:
    jax.block_until_ready(f(*args))
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    failed = []
    print(f"| kernel | M | dynamic eager call | static eager call | dynamic / static (target <= {BOUND:.1f}x) |")
    print("|---|---|---|---|---|")
    for name, (fn, poly, shapes) in CASES.items():
        dynamic = pj.kernel(fn, polymorphic_shapes=poly)
        for m in SIZES:
            args = [np.random.default_rng(m).standard_normal(s).astype(np.float32) for s in shapes(m)]
            try:
                dyn, static = best(dynamic, args), best(pj.kernel(fn), args)
            except Exception as err:  # noqa: BLE001 - reported, then the exit status says so
                failed.append(f"{name} at M={m}: {type(err).__name__}: {err}")
                continue
            print(f"| {name} | {m} | {dyn * 1e3:.1f} ms | {static * 1e3:.1f} ms | {dyn / static:.2f}x |")
            if dyn / static > BOUND:
                failed.append(f"{name} at M={m}: an eager call of the dynamic kernel takes {dyn / static:.2f}x the "
                              f"static one's (bound {BOUND:.1f}x)")
    for line in failed:
        print(f"FAILED: {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    jax.config.update("jax_platforms", "cpu")
    sys.exit(main())
