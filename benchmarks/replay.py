"""The jitted replay of the real PTO-AS text (``ptojax.ascend.replay``) against ``jax.jit`` of the same
function on the same JAX backend.

Per kernel: ``replay / jit`` — steady-state time of ``jax.jit(pj.kernel(fn))`` (the sim kernel inlined
into XLA; data-steered kernels take the host callback, marked ``host``) over ``jax.jit(fn)``'s — and
the first call (lower + compile + first run of a fresh kernel under ``jax.jit``). Targets: steady state
<= 1.2x on every row, first call <= 1 s for the seed example and a ``lax.scan`` over 256 rows (a loop
the replay rolls), <= 5 s for the DeepSeek kernels.
Run: ``python benchmarks/replay.py [--quick] [--host] [--only WORD ...]`` (``--only``: the rows whose
name contains one of the words); exits 1 when a target is missed. ``--host`` lowers every kernel to
the host callback (the MPMD runtime), as the library does only where data steers the schedule: the
replay's alternative, against the same targets.
"""
import argparse
import functools
import importlib
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import ptojax as pj

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from kernels import seed_kernel  # noqa: E402 - the tests' kernels

O = pj.ops
K = importlib.import_module("ptojax.kernel")
STEADY, SEED_FIRST, DEEPSEEK_FIRST = 1.2, 1.0, 5.0


def _rand(shape, dtype, seed):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype)


def softmax(x):
    with pj.tile(vec=(8, 1024)):
        return jax.nn.softmax(x, axis=-1)


def layer_norm(x, g, b):
    with pj.tile(vec=(8, 1024)):
        return O.layer_norm(x, g, b)


def indexer_topk(q, k, w):
    """Indexer-style scores ``relu(q kᵀ) · w`` summed over heads, then the top 64 keys."""
    with pj.tile(cube=(64, 128, 256)):
        s = O.matmul(q, k, transpose_b=True)                      # (heads, keys)
    with pj.tile(vec=(8, 1024)):
        s = jnp.sum(jax.nn.relu(s.astype(jnp.float32)) * w[:, None], axis=0, keepdims=True)
        return O.topk(s, 64)[1]


def rnn(x, h):
    """A ``lax.scan`` over the rows: the runtime writes it out trip by trip, the replay rolls it back."""
    return jax.lax.scan(lambda c, r: (jnp.tanh(c * 0.5 + r), c), h, x)


def flash(q, k, v):
    def loss(q, k, v, backend):
        return jnp.sum(pj.nn.flash_attention(q, k, v, backend=backend) ** 2)
    return jax.grad(functools.partial(loss, backend="sim"), argnums=(0, 1, 2))(q, k, v)


def flash_xla(q, k, v):
    def loss(q, k, v):
        return jnp.sum(pj.nn.flash_attention(q, k, v, backend="xla") ** 2)
    return jax.grad(loss, argnums=(0, 1, 2))(q, k, v)


def _deepseek():
    from deepseek_cases import B, H, MAX_BLOCKS, N, Q_LORA, S1, SEQ, TOPK
    from examples.deepseek_v32 import kernels as DK
    from examples.deepseek_v32 import reference as R

    pargs, _ = R.prolog_inputs(B, S1, H, Q_LORA, N, SEQ, max_blocks=MAX_BLOCKS, seed=1)
    iargs = R.indexer_inputs(B, S1, N, SEQ, max_blocks=MAX_BLOCKS, seed=2)
    aargs = R.attention_inputs(B, S1, N, SEQ, TOPK, max_blocks=MAX_BLOCKS, seed=5)
    sfa, _ = DK.make_dsa_kernels(N, TOPK)
    return [("ds indexer prolog", functools.partial(DK.indexer_prolog, n_heads=N), tuple(pargs), DEEPSEEK_FIRST),
            ("ds lightning indexer", functools.partial(DK.lightning_indexer, sparse_count=TOPK), tuple(iargs),
             DEEPSEEK_FIRST),
            ("ds sparse attention", sfa.fn, tuple(aargs), DEEPSEEK_FIRST)]


def cases(quick: bool):
    n = 1024 if quick else 4096
    f16 = np.float16
    out = [("seed 64x64", seed_kernel, (_rand((64, 64), f16, 0), _rand((64, 64), f16, 1), _rand((64, 32), f16, 2)), SEED_FIRST),
           (f"softmax {n}x1024", softmax, (_rand((n, 1024), np.float32, 3),), None),
           (f"layer norm {n}x1024", layer_norm, (_rand((n, 1024), np.float32, 4), _rand((1024,), np.float32, 5),
                                                 _rand((1024,), np.float32, 6)), None),
           ("indexer top-k 8K", indexer_topk, (_rand((64, 128), f16, 7), _rand((8192, 128), f16, 8),
                                                _rand((64,), np.float32, 9)), None)]
    if not quick:
        out.append(("indexer top-k 64K", indexer_topk, (_rand((64, 128), f16, 7), _rand((65536, 128), f16, 8),
                                                         _rand((64,), np.float32, 9)), None))
    rows = 64 if quick else 256
    out.append((f"scan {rows} rows", rnn, (_rand((rows, 256), np.float32, 13), _rand((256,), np.float32, 14)),
                SEED_FIRST))
    qkv = tuple(_rand((4, 256, 64), np.float32, 10 + i) for i in range(3))
    out.append(("flash attn fwd+bwd", (flash, flash_xla), qkv, None))
    return out + _deepseek()


def _best(fn, args, repeat):
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - start)
    return best


def measure(name, fn, args, first_target, repeat):
    sim_fn, ref_fn = fn if isinstance(fn, tuple) else (pj.kernel(fn), fn)
    sim, ref = jax.jit(sim_fn), jax.jit(ref_fn)
    start = time.perf_counter()
    jax.block_until_ready(sim(*args))
    first = time.perf_counter() - start
    hlo = sim.lower(*args).as_text()
    path = "host" if "callback" in hlo else "replay"
    jax.block_until_ready(ref(*args))
    ratio = _best(sim, args, repeat) / _best(ref, args, repeat)
    missed = [f"steady {ratio:.2f}x > {STEADY}x"] if ratio > STEADY else []
    if first_target is not None and first > first_target:
        missed.append(f"first call {first:.2f} s > {first_target} s")
    print(f"{name:<22} {path:>6} {ratio:>10.2f}x {first:>9.2f} s  {'; '.join(missed) or 'ok'}", flush=True)
    return missed


def _options(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smaller softmax/layer norm, fewer repeats")
    p.add_argument("--host", action="store_true", help="measure the host callback instead of the replay")
    p.add_argument("--only", nargs="+", metavar="WORD", help="only the rows whose name contains a WORD")
    return p.parse_args(argv)


def main(argv=None):
    opts = _options(sys.argv[1:] if argv is None else argv)
    quick = opts.quick
    if opts.host:
        K._replay = lambda call: None       # as for a kernel whose schedule data steers
    print(f"JAX backend: {jax.default_backend()}")
    print(f"{'kernel':<22} {'path':>6} {'replay/jit':>11} {'first call':>11}  target")
    missed = []
    rows = [c for c in cases(quick) if not opts.only or any(w in c[0] for w in opts.only)]
    if not rows:
        print(f"no row matches {opts.only}")
        return 1
    for name, fn, args, first in rows:
        try:
            missed += measure(name, fn, args, first, repeat=3 if quick else 10)
        except Exception as err:  # noqa: BLE001 - a row that cannot run is a miss, reported
            print(f"{name:<22} failed: {type(err).__name__}: {str(err)[:200]}", flush=True)
            missed.append(name)
    print(f"{len(missed)} target(s) missed" if missed else "all targets met")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
