"""The cost model on the real instructions: each kernel's simulated makespan priced on codegen's
planning instructions (``asm.Kernel``) vs on the real PTO-AS module that ``ptoas`` assembles
(``AscendKernel.costs(target, on=...)``; the runtime prices ``on="pto"``, ``program.PRICE_ON``).

Prints one row per kernel: makespan on codegen's instructions, on the real ones, their ratio, and the
summed block time of every program (one block each) both ways — the ratio of the blocks is the
change the cost model itself sees, the makespan's the one a profile shows (dispatch and HBM bounds
included).

    python benchmarks/real_costs.py
"""
from __future__ import annotations

import functools
import sys
from pathlib import Path

import jax
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import ptojax as pj  # noqa: E402
from ptojax.ascend import program  # noqa: E402
from ptojax.ascend.targets import target as get_target  # noqa: E402


def seed():
    from helpers import F16, rand
    from kernels import seed_kernel

    args = rand((64, 64), F16, 1, -1, 1), rand((64, 64), F16, 2, -1, 1), rand((64, 32), F16, 3, -1, 1)
    return pj.kernel(seed_kernel), args


def softmax():
    def f(x):
        with pj.tile(vec=(8, 1024)):
            return pj.ops.softmax(x)              # codegen's one tsoftmax; selection's five instructions
    return pj.kernel(f), (np.random.default_rng(0).standard_normal((48, 1024)).astype(np.float32),)


def softmax_jnn():
    def f(x):
        with pj.tile(vec=(8, 1024)):
            return jax.nn.softmax(x, axis=-1)     # jax's max / sub+exp+sum / div programs
    return pj.kernel(f), (np.random.default_rng(0).standard_normal((48, 1024)).astype(np.float32),)


def layer_norm():
    def f(x, g, b):
        with pj.tile(vec=(8, 1024)):
            return pj.ops.layer_norm(x, g, b)
    rng = np.random.default_rng(1)
    x, g, b = (rng.standard_normal(s).astype(np.float32) for s in ((48, 1024), (1024,), (1024,)))
    return pj.kernel(f), (x, g, b)


def indexer_prolog():
    from examples.deepseek_v32 import kernels as K
    from examples.deepseek_v32 import reference as R

    args, _ = R.prolog_inputs(2, 2, 256, 128, 4, [500, 300], max_blocks=4, seed=1)
    return pj.kernel(functools.partial(K.indexer_prolog, n_heads=4), options=K.PROLOG_OPTIONS), args


def lightning_indexer():
    from examples.deepseek_v32 import kernels as K
    from examples.deepseek_v32 import reference as R

    args = R.indexer_inputs(2, 2, 4, [500, 300], max_blocks=4, seed=2)
    return pj.kernel(functools.partial(K.lightning_indexer, sparse_count=64)), args


CASES = [("seed example", seed), ("softmax 48x1024 f32 (vec 8x1024)", softmax),
         ("jax.nn.softmax 48x1024 f32 (vec 8x1024)", softmax_jnn),
         ("layer norm 48x1024 f32 (vec 8x1024)", layer_norm),
         ("DeepSeek-V3.2 indexer prolog", indexer_prolog), ("DeepSeek-V3.2 lightning indexer", lightning_indexer)]


def measure(kernel, args):
    """(makespan us on codegen's instructions, on the real ones, block us both ways, real-priced share)."""
    compiled = kernel.lower(*args).compile()
    tgt = get_target(compiled.options.target)
    code = compiled._code()
    out = {}
    for on in ("codegen", "pto"):
        program.PRICE_ON = on
        try:
            out[on] = compiled.profile(*args, compute=False).makespan_us
        finally:
            program.PRICE_ON = "pto"
    blocks = {on: sum(c.seconds for c in code.costs(tgt, on).values()) * 1e6 for on in ("codegen", "pto")}
    real = code.costs(tgt, "pto").values()
    return out["codegen"], out["pto"], blocks["codegen"], blocks["pto"], sum(c.priced == "pto" for c in real), len(real)


def main():
    print(f"{'kernel':<40} {'codegen us':>11} {'real us':>9} {'ratio':>7} {'blocks cg us':>13} {'blocks real us':>15} "
          f"{'ratio':>7} {'real-priced':>12}")
    for name, make in CASES:
        cg, real, bcg, breal, n_real, n = measure(*make())
        print(f"{name:<40} {cg:>11.2f} {real:>9.2f} {real / cg:>7.3f} {bcg:>13.2f} {breal:>15.2f} {breal / bcg:>7.3f} "
              f"{n_real:>5}/{n:<6}")


if __name__ == "__main__":
    main()
