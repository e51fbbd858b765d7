"""Kernel benchmarks: host execution of the simulated chip vs ``jax.jit`` on XLA:CPU, and compile time
(lower + compile) as the problem grows.

Run: ``python benchmarks/kernel.py``. All figures are ratios or times measured in this one run.
"""
import time

import jax
import numpy as np

import ptojax as pj
from ptojax.demo import DEMOS


def _time(fn, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - start)
    return best


def host_execution():
    print(f"{'kernel':<16} {'sim ms':>9} {'jax.jit ms':>11} {'sim / jit':>10}")
    for name, fn, make_args in DEMOS:
        args = make_args()
        sim = pj.kernel(fn)
        jitted = jax.jit(fn)
        sim(*args), jitted(*args)                     # compile both first
        t_sim, t_jit = _time(lambda: sim(*args)), _time(lambda: jitted(*args))
        print(f"{name:<16} {t_sim * 1e3:>9.2f} {t_jit * 1e3:>11.3f} {t_sim / t_jit:>10.0f}x")


def compile_growth():
    print(f"\n{'rows':>7} {'lower ms':>9} {'compile ms':>11} {'block calls':>12} {'instances':>10}")
    for rows in (256, 1024, 4096, 16384):
        def kernel(x, w):
            with pj.tile(vec=(8, 256)):           # rms_norm keeps whole rows: 8 x 1024 f32
                h = pj.ops.rms_norm(x)
            with pj.tile(cube=(64, 64, 128)):
                return pj.ops.matmul(pj.ops.cast(h, np.float16), w)
        x = jax.ShapeDtypeStruct((rows, 1024), np.float32)
        w = jax.ShapeDtypeStruct((1024, 512), np.float16)
        f = pj.kernel(kernel)
        start = time.perf_counter()
        lowered = f.lower(x, w)
        t_lower = time.perf_counter() - start
        start = time.perf_counter()
        lowered.compile()
        t_compile = time.perf_counter() - start
        eqns = lowered.lowering.block.jaxpr.eqns
        instances = sum(p.instances for e in eqns for p in e.params["spec"].parts)
        print(f"{rows:>7} {t_lower * 1e3:>9.1f} {t_compile * 1e3:>11.1f} {len(eqns):>12} {instances:>10}")


if __name__ == "__main__":
    host_execution()
    compile_growth()
