"""Real PTO, judged by the vendor: every program ptojax emits for a zoo of kernels, assembled by
Huawei's ``ptoas`` (``PTOAS`` or ``ptoas`` on PATH) for A2/A3 (``a3``) and A5 (``a5``).

Prints one row per kernel family — programs, accepted for a3 / a5, instruction kinds used, the
share of instructions that are real PTO (a user's ``pj.tiles.register_op`` instruction is not) —
and the first rejection of each family. Exits non-zero unless every program is accepted for a3.

    python benchmarks/ptoas_conformance.py [--fuzz N]     # N: random kernels of the CI fuzz set too
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import ptojax as pj  # noqa: E402
from ptojax import ascend, execute  # noqa: E402
from ptojax.ascend import instructions  # noqa: E402
from ptojax.ascend.ptoas import PtoasError, assemble  # noqa: E402


@contextlib.contextmanager
def recording():
    """Every compiled kernel (:class:`~ptojax.ascend.AscendKernel`) made inside the block."""
    made, original = [], ascend.compile_kernel

    def compile_kernel(*args, **kwargs):
        made.append(original(*args, **kwargs))
        return made[-1]

    ascend.compile_kernel = execute.compile_kernel = compile_kernel
    try:
        yield made
    finally:
        ascend.compile_kernel = execute.compile_kernel = original


def lowering_kernels():
    from kernels import KERNELS, seed_kernel
    from helpers import F16, rand

    seed_args = rand((64, 64), F16, 1, -1, 1), rand((64, 64), F16, 2, -1, 1), rand((64, 32), F16, 3, -1, 1)
    with recording() as made:
        pj.kernel(seed_kernel).lower(*seed_args).compile()
        for _, fn, args in KERNELS:
            pj.kernel(fn).lower(*args).compile()
    return {"seed example": made[:1], "lowering tests": made[1:]}


def deepseek_kernels():
    from examples.deepseek_v32 import kernels as K
    from examples.deepseek_v32 import reference as R

    b, s1, h, q_lora, n, topk, seq = 2, 2, 256, 128, 4, 64, [500, 300]
    with recording() as made:
        pargs, table = R.prolog_inputs(b, s1, h, q_lora, n, seq, max_blocks=4, seed=1)
        pj.kernel(functools.partial(K.indexer_prolog, n_heads=n)).lower(*pargs).compile()
        iargs = R.indexer_inputs(b, s1, n, seq, max_blocks=4, seed=2)
        pj.kernel(functools.partial(K.lightning_indexer, sparse_count=topk)).lower(*iargs).compile()
        sfa, _ = K.make_dsa_kernels(n, topk)
        sfa.lower(*R.attention_inputs(b, s1, n, seq, topk, max_blocks=4, seed=5)).compile()
    return {"DeepSeek-V3.2": made}


def nn_kernels():
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(0)            # shapes of their own: pj.nn caches its compiled kernels
    x, w, bias, g = (rng.standard_normal(s).astype(np.float32) for s in ((24, 40), (40, 40), (40,), (40,)))
    q = rng.standard_normal((2, 24, 16)).astype(np.float32)
    labels = rng.integers(0, 40, 24).astype(np.int32)
    nn = pj.nn
    cases = [(lambda x, w, b: nn.dense(x, w, b, "gelu", backend="sim"), (x, w, bias)),
             (lambda x, g: nn.rms_norm(x, g, 1e-6, backend="sim"), (x, g)),
             (lambda x, g, b: nn.layer_norm(x, g, b, 1e-5, backend="sim"), (x, g, bias)),
             (lambda x: nn.softmax(x, backend="sim"), (x,)),
             (lambda x: nn.softmax_cross_entropy(x, labels, backend="sim"), (x,)),
             (lambda x, a, c: nn.swiglu(x, a, c, backend="sim"), (x, w, w[:, ::-1].copy())),
             (lambda q, k, v: nn.flash_attention(q, k, v, backend="sim"), (q, q, q))]
    with recording() as made:
        for f, args in cases:                    # forward and backward kernels
            out, vjp = jax.vjp(f, *args)
            vjp(jnp.ones_like(out))
    return {"pj.nn (fwd + bwd)": made}


def fuzz_kernels(n: int):
    from hypothesis import HealthCheck, given, settings

    import fuzz

    made = []

    @settings(max_examples=n, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(fuzz.kernels(max_ops=3))
    def draw(spec):
        fn, args = fuzz.build(spec)
        with recording() as one:
            pj.kernel(fn).lower(*args).compile()
        made.extend(one)

    draw()
    return {f"fuzz (CI set, {n})": made}


def judge(kernels, arch: str):
    """(programs, accepted programs, first rejection) of compiled kernels for ``arch``."""
    programs = accepted = 0
    first = None
    for k in kernels:
        n = len(k.kernels)
        programs += n
        try:
            assemble(k.pto(arch), arch=arch)
            accepted += n
        except (PtoasError, pj.errors.PtoError) as err:
            first = first or str(err)
    return programs, accepted, first


def kinds(kernels):
    """(instruction mnemonics used, instructions, real instructions)."""
    used, total, real = collections.Counter(), 0, 0
    for k in kernels:
        try:
            text = k.pto()
        except pj.errors.PtoError:
            continue
        for op in re.findall(r"^\s*(?:%\S+ = )?pto\.([\w.]+)", text, re.M):
            used[op] += 1
            total += 1
            real += op in instructions.TABLE or op in _VIEWS
    return used, total, real


_VIEWS = {"make_tensor_view", "partition_view", "alloc_tile", "get_block_idx", "treshape", "subset", "tgetval"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fuzz", type=int, default=0, help="also judge N kernels of the CI fuzz set")
    args = parser.parse_args(argv)
    families = {**lowering_kernels(), **deepseek_kernels(), **nn_kernels()}
    if args.fuzz:
        families.update(fuzz_kernels(args.fuzz))
    print(f"{'kernels':<22} {'programs':>8} {'a3 ok':>7} {'a5 ok':>7} {'kinds':>6} {'real':>7}")
    failed, all_kinds = 0, collections.Counter()
    for name, kernels in families.items():
        programs, a3, first = judge(kernels, "a3")
        _, a5, _ = judge(kernels, "a5")
        used, total, real = kinds(kernels)
        all_kinds.update(used)
        failed += programs - a3
        print(f"{name:<22} {programs:>8} {a3:>7} {a5:>7} {len(used):>6} {real / max(total, 1):>7.1%}")
        if first:
            print(f"    first a3 rejection: {first[:300]}")
    print(f"instruction kinds used ({len(all_kinds)}): {' '.join(sorted(all_kinds))}")
    print("every program accepted for a3" if not failed else f"{failed} programs rejected for a3")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
