"""Compile once vs compile per size, and the price of dynamism: the seed kernel and a softmax at M in
{1, 17, 64, 130, 1000}.

Per size: ``pj.kernel(fn)`` at each concrete M, lowered, compiled and its PTO-AS module made (what a
device build needs for every M). Once: ``pj.kernel(fn, polymorphic_shapes=...)`` compiled at its first
call to one dynamic module that serves every M. Both times in one run; the ratio is the figure.

Makespan: the simulated A3's makespan of the dynamic kernel at each M (its ``ceil(m/T)`` blocks as
tasks, each priced at its valid rows) over the static kernel's compiled for that M (full blocks and a
tail program). Target: at most ``MAKESPAN_BOUND`` (1.10x) at every size -- the two run the same tiles
on the same cores, so what the dynamic module adds is its index arithmetic; blocks run one after
another, or a tail priced as a full block (1.19x for the softmax at M = 1), fail it.
Exits non-zero when the bound fails or a measure raises.

Run: ``python benchmarks/dynamic_shapes.py``.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import ptojax as pj  # noqa: E402
from kernels import seed_kernel  # noqa: E402

SIZES = (1, 17, 64, 130, 1000)
MAKESPAN_BOUND = 1.10


def _softmax(x):
    with pj.tile(vec=(32, 64)):
        return pj.ops.softmax(x * 0.5, axis=-1)


CASES = {"seed": (seed_kernel, ("m, 64", "m, 64", None), lambda m: [(m, 64), (m, 64), (64, 32)]),
         "softmax": (_softmax, ("m, 64",), lambda m: [(m, 64)])}


def measure(name) -> dict:
    fn, poly, shapes = CASES[name]
    pj.kernel(fn).lower(*[jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes(7)]).compile().as_text("pto")  # warm
    start = time.perf_counter()
    for m in SIZES:
        pj.kernel(fn).lower(*[jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes(m)]).compile().as_text("pto")
    per_size = time.perf_counter() - start
    start = time.perf_counter()
    f = pj.kernel(fn, polymorphic_shapes=poly)
    compiled = [f.compiled_for(*[np.zeros(s, np.float32) for s in shapes(m)]) for m in SIZES]
    once = time.perf_counter() - start
    assert f.compiles == 1 and all(c is compiled[0] for c in compiled)
    return {"per_size_s": per_size, "once_s": once, "ratio": per_size / once}


def makespans(name) -> dict:
    """M -> (dynamic makespan, static makespan) in µs, shapes only (the schedule needs no values)."""
    fn, poly, shapes = CASES[name]
    f = pj.kernel(fn, polymorphic_shapes=poly)
    dynamic = f.compiled_for(*[np.zeros(s, np.float32) for s in shapes(SIZES[0])])
    out = {}
    for m in SIZES:
        static = pj.kernel(fn).lower(*[jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes(m)]).compile()
        out[m] = (dynamic.profile(m=m).makespan_us, static.profile().makespan_us)
    assert f.compiles == 1
    return out


def main() -> int:
    failed = []
    print("| kernel | compile per size (5 sizes) | compile once | ratio |")
    print("|---|---|---|---|")
    for name in CASES:
        try:
            r = measure(name)
        except Exception as err:  # noqa: BLE001 - reported, then the exit status says so
            failed.append(f"{name} compile: {type(err).__name__}: {err}")
            continue
        print(f"| {name} | {r['per_size_s']:.2f} s | {r['once_s']:.2f} s | {r['ratio']:.1f}x |")
    print(f"\n| kernel | M | dynamic makespan | static makespan | dynamic / static (target <= {MAKESPAN_BOUND:.2f}x) |")
    print("|---|---|---|---|---|")
    for name in CASES:
        try:
            rows = makespans(name)
        except Exception as err:  # noqa: BLE001
            failed.append(f"{name} makespan: {type(err).__name__}: {err}")
            continue
        for m, (dyn, static) in rows.items():
            ratio = dyn / static
            print(f"| {name} | {m} | {dyn:.2f} us | {static:.2f} us | {ratio:.3f}x |")
            if ratio > MAKESPAN_BOUND:
                failed.append(f"{name} at M={m}: the dynamic makespan is {ratio:.3f}x the static one's "
                              f"(bound {MAKESPAN_BOUND:.2f}x)")
    for line in failed:
        print(f"FAILED: {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
