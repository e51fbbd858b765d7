"""Eager calls of ``backend="sim"`` kernels: task bodies from codegen's host code against the
interpreter of the real PTO-AS text (``ptojax.kernel.ENGINE``: ``"host"`` / ``"pto"``).

Per kernel, in one process: the first eager call of a fresh kernel (trace, lower, compile, generate
the engine's code, run; ``pj.nn`` ops with their kernel cache emptied) and the steady state (best of
the calls after it), with each engine, and their ratios ``pto / host``. Kernels: the tests' shared
kernels (``tests/kernels.py``), the ``pj.nn`` forward ops, the README's seed example, softmax and
layer norm 4096x1024, a flash-attention forward and the DeepSeek kernels at the tests' small shapes.
The last column says whether the two engines' outputs are equal bit for bit (NaNs equal). Target: the text engine within ``TARGET`` x of host code on every row,
first call and steady. Run: ``python benchmarks/engine.py [--quick] [--only WORD ...] [--repeat N]``;
exits 1 when a target is missed.
"""
import argparse
import functools
import sys
import time
from pathlib import Path

import jax
import numpy as np

import ptojax as pj

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from kernels import KERNELS, seed_kernel  # noqa: E402 - the tests' kernels
from benchmarks.replay import _rand, layer_norm, softmax  # noqa: E402 - the replay benchmark's kernels

K = sys.modules["ptojax.kernel"]
TARGET = 1.5


def _kernel_row(name, fn, args):
    """A row whose first call is a fresh ``pj.kernel(fn)``'s."""
    holder = {}

    def reset():
        holder["f"] = pj.kernel(fn)

    return name, reset, lambda: holder["f"](*args)


def _nn_rows(rows=16, d=32, seq=40):
    from ptojax.nn import _common

    rng = np.random.default_rng(0)
    r = lambda *shape, scale=1.0: (rng.normal(size=shape) * scale).astype(np.float32)  # noqa: E731
    x, w, w2, b, g, beta = r(rows, d), r(d, d, scale=0.2), r(d, d, scale=0.2), r(d), r(d), r(d)
    labels = rng.integers(0, d, rows).astype(np.int32)
    q, k, v = r(2, seq, 16), r(2, seq, 16), r(2, seq, 16)
    nn = pj.nn
    ops = [("nn dense", lambda: nn.dense(x, w, b, "relu", backend="sim")),
           ("nn rms_norm", lambda: nn.rms_norm(x, g, backend="sim")),
           ("nn layer_norm", lambda: nn.layer_norm(x, g, beta, backend="sim")),
           ("nn softmax", lambda: nn.softmax(x, backend="sim")),
           ("nn softmax_xent", lambda: nn.softmax_cross_entropy(x, labels, backend="sim")),
           ("nn swiglu", lambda: nn.swiglu(x, w, w2, backend="sim")),
           ("nn flash_attention", lambda: nn.flash_attention(q, k, v, backend="sim"))]
    return [(name, _common._KERNELS.clear, call) for name, call in ops]


def _deepseek_rows():
    from deepseek_cases import B, MAX_BLOCKS, N, S1, SEQ, TOPK, H, Q_LORA
    from examples.deepseek_v32 import kernels as DK
    from examples.deepseek_v32 import reference as R

    pargs, _ = R.prolog_inputs(B, S1, H, Q_LORA, N, SEQ, max_blocks=MAX_BLOCKS, seed=1)
    iargs = R.indexer_inputs(B, S1, N, SEQ, max_blocks=MAX_BLOCKS, seed=2)
    aargs = R.attention_inputs(B, S1, N, SEQ, TOPK, max_blocks=MAX_BLOCKS, seed=5)
    sfa, _ = DK.make_dsa_kernels(N, TOPK)
    return [_kernel_row("ds indexer prolog", functools.partial(DK.indexer_prolog, n_heads=N), tuple(pargs)),
            _kernel_row("ds lightning indexer", functools.partial(DK.lightning_indexer, sparse_count=TOPK),
                        tuple(iargs)),
            _kernel_row("ds sparse attention", sfa.fn, tuple(aargs))]


def rows(quick: bool):
    n = 1024 if quick else 4096
    f16 = np.float16
    out = [_kernel_row(f"kernels {name}", fn, args) for name, fn, args in KERNELS]
    out += _nn_rows()
    out.append(_kernel_row("seed 64x64", seed_kernel,
                           (_rand((64, 64), f16, 0), _rand((64, 64), f16, 1), _rand((64, 32), f16, 2))))
    out.append(_kernel_row(f"softmax {n}x1024", softmax, (_rand((n, 1024), np.float32, 3),)))
    out.append(_kernel_row(f"layer norm {n}x1024", layer_norm, (_rand((n, 1024), np.float32, 4),
                                                                 _rand((1024,), np.float32, 5),
                                                                 _rand((1024,), np.float32, 6))))
    from ptojax.nn import _common

    q, k, v = (_rand((2, 256, 64), np.float32, 10 + i) for i in range(3))
    out.append(("flash attn fwd 2x256x64", _common._KERNELS.clear, lambda: pj.nn.flash_attention(q, k, v, backend="sim")))
    return out + _deepseek_rows()


def _leaves(x):
    return [np.asarray(v) for v in jax.tree.leaves(jax.block_until_ready(x))]


def measure(engine, reset, call, repeat):
    """(first call s, steady s, outputs) of ``call`` with ``engine`` running the task bodies."""
    K.ENGINE = engine
    reset()
    start = time.perf_counter()
    out = _leaves(call())
    first = time.perf_counter() - start
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        _leaves(call())
        best = min(best, time.perf_counter() - start)
    return first, best, out


def _same(a, b) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and np.array_equal(x, y, equal_nan=x.dtype.kind == "f")
                                     for x, y in zip(a, b))


def _options(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="softmax/layer norm at 1024x1024")
    p.add_argument("--only", nargs="+", metavar="WORD", help="only the rows whose name contains a WORD")
    p.add_argument("--repeat", type=int, default=3, help="steady-state calls per engine (best taken)")
    return p.parse_args(argv)


def main(argv=None):
    opts = _options(sys.argv[1:] if argv is None else argv)
    selected = [r for r in rows(opts.quick) if not opts.only or any(w in r[0] for w in opts.only)]
    if not selected:
        print(f"no row matches {opts.only}")
        return 1
    default = K.ENGINE
    print(f"{'kernel':<30} {'host 1st s':>10} {'pto 1st s':>10} {'ratio':>7} {'host s':>9} {'pto s':>9} "
          f"{'ratio':>7}  {'pto = host':>10}")
    missed, firsts, steadies = [], [], []
    try:
        for name, reset, call in selected:
            try:
                h1, hs, hout = measure("host", reset, call, opts.repeat)
                p1, ps, pout = measure("pto", reset, call, opts.repeat)
            except Exception as err:  # noqa: BLE001 - a row that cannot run is a miss, reported
                print(f"{name:<30} failed: {type(err).__name__}: {str(err)[:200]}", flush=True)
                missed.append(name)
                continue
            r1, rs = p1 / h1, ps / hs
            firsts.append(r1)
            steadies.append(rs)
            same = _same(hout, pout)
            if r1 > TARGET or rs > TARGET or not same:
                missed.append(name)
            print(f"{name:<30} {h1:>10.3f} {p1:>10.3f} {r1:>6.1f}x {hs:>9.4f} {ps:>9.4f} {rs:>6.1f}x  "
                  f"{'yes' if same else 'NO':>10}", flush=True)
    finally:
        K.ENGINE = default
    if firsts:
        geo = lambda v: float(np.exp(np.mean(np.log(v))))  # noqa: E731
        print(f"{'geometric mean':<30} {'':>10} {'':>10} {geo(firsts):>6.1f}x {'':>9} {'':>9} {geo(steadies):>6.1f}x")
    print(f"{len(missed)} row(s) miss the {TARGET}x target or differ" if missed else "all rows within target")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
