"""Compile once vs compile per size: the seed kernel and a softmax at M in {1, 17, 64, 130, 1000}.

Per size: ``pj.kernel(fn)`` at each concrete M, lowered, compiled and its PTO-AS module made (what a
device build needs for every M). Once: ``pj.kernel(fn, polymorphic_shapes=...)`` compiled at its first
call to one dynamic module that serves every M. Both times in one run; the ratio is the figure.

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


def main():
    print("| kernel | compile per size (5 sizes) | compile once | ratio |")
    print("|---|---|---|---|")
    for name in CASES:
        r = measure(name)
        print(f"| {name} | {r['per_size_s']:.2f} s | {r['once_s']:.2f} s | {r['ratio']:.1f}x |")


if __name__ == "__main__":
    main()
