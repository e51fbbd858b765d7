"""ptojax's benchmark suite: one entry point, a markdown table on stdout, the rows as JSON.

Run from the repository root::

    python benchmarks/suite.py --quick      # small shapes, compile at 8K/32K, executor throughput: < 1 min
    python benchmarks/suite.py              # + the seed's shape (B=4, S1=2, KV 64K, top-k 2048): minutes
    python benchmarks/suite.py --full       # + DIA sim vs jax.jit at the seed's shape: longer still
    python benchmarks/suite.py --json out.json          # default: benchmark-results.json
    python benchmarks/suite.py --quick --only executor --target tasks_per_s=1e6    # one measure, own target

The exit status is 1 when a target fails or a measure raises (0 otherwise).

Measures, each with its target where it has one (PASS / FAIL; "—": no target):

(a) host time of the simulated chip (``backend="sim"``) over ``jax.jit`` on XLA:CPU of the same function
    (the ``backend="xla"`` kernel, same options; for the ``pj.nn`` ops ``jax.grad`` of a scalar loss with
    ``backend="sim"`` vs ``"xla"``). Both are wrapped in ``jax.jit`` (the sim kernel: the replay of its
    real PTO-AS text inlined, or the host callback where data steers its schedule), warmed up (one call
    after the compiling one), then alternately ``repeats`` times on
    device-resident inputs (``block_until_ready``); the ratio of the medians. Target ≤ 2× on the seed
    example and on each DeepSeek kernel at the seed's shape. The ``pj.nn`` ops at tests/test_nn.py's small shapes and (not --quick) at a training step's, ``TRAINING``.
(b) lower + compile time of the DeepSeek kernels from ``jax.ShapeDtypeStruct`` specs, a fresh
    ``pj.kernel`` each time (no compile cache), at KV 8K / 32K / 64K / 128K: the fastest of ``repeats``
    samples taken in turns (a compile of 40–200 ms on a shared machine gains up to 2× in its slow phases;
    noise only adds time), after one untimed compile per kernel (the process's one-time costs: JAX's own
    caches, imports).
    Targets: ≤ 2 s per kernel at 64K; the 128K time ≤ 1.2× the 8K time.
(c) predicted makespan over the lower bound of each DeepSeek kernel at the seed's shape
    (``profile(compute=False)``: the same timeline, task bodies not run), and DIA's SPMD over MPMD
    makespan. Targets: ≤ 1.2× the bound; MPMD ≥ 1.25× faster than SPMD.
(d) the scheduler's throughput end to end on a 100 000-task DAG: building the task graph (dependencies
    from regions, ranks) and the event-driven dispatch (``benchmarks/runtime.py``; the median of three).
    Target ≥ 250 000 tasks/s.

The DeepSeek-V3.2 kernels (``examples/deepseek_v32``) run with the tuned settings of
``benchmarks/deepseek_v32.py``: the prolog's tuned tiles, ``INDEXER_OPTIONS``, ``DIA_OPTIONS`` and
``DIA_TILES``; sparse attention alone uses DIA's attention tiles. Shapes: the seed's (B=4, S1=2, 64 index
heads, 128 MLA heads, KV 64K, top-k 2048) and tests/test_deepseek.py's small one.

Host times depend on the machine and on what else runs on it: the machine (platform, CPUs, load
average, versions) is printed at the top and stored in the JSON.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import ptojax as pj  # noqa: E402
from benchmarks import deepseek_v32 as D  # noqa: E402  (the tuned options)
from benchmarks import runtime as RT  # noqa: E402  (the executor throughput)
from examples.deepseek_v32 import kernels as K  # noqa: E402
from examples.deepseek_v32 import reference as R  # noqa: E402
from ptojax.demo import DEMOS, seed_example  # noqa: E402

FORMAT = "ptojax.benchmark-suite/1"
BLOCK = 128                                 # paged-cache block size of the DeepSeek kernels
# The tuned settings of benchmarks/deepseek_v32.py (the fallbacks: the suite's first settings; the
# Lightning Indexer's Gather (1, 8) tile is needed: the default does not fit UB).
INDEXER_OPTIONS = getattr(D, "INDEXER_OPTIONS", {"tiles": {"Gather": {"vec": (1, 8)}, "Reduce": {"vec": (64, 256)}},
                                                 "tiles_per_block": {"Score": 16, "Reduce": 4, "Gather": 4}})
DIA_OPTIONS = D.DIA_OPTIONS
DIA_TILES = getattr(D, "DIA_TILES", {"indexer": {"gather_vec": (1, 8)}})
ATTENTION_TILES = DIA_TILES.get("attention")       # sparse attention alone as inside DIA
ATTENTION_OPTIONS = getattr(D, "ATTENTION_OPTIONS", None)
KERNELS = ("prolog", "indexer", "attention", "dia")
TITLES = {"prolog": "Indexer Prolog", "indexer": "Lightning Indexer",
          "attention": "sparse attention" + (" (gather_l1)" if (ATTENTION_TILES or {}).get("gather_l1") else ""),
          "dia": "DIA"}
SECTIONS = {"a": "(a) host execution: sim / jax.jit (XLA:CPU)", "b": "(b) lower + compile time",
            "c": "(c) predicted makespan (a3 model)", "d": "(d) event-driven executor"}


# ----------------------------------------------------------------------------------------- shapes
@dataclasses.dataclass(frozen=True)
class Shape:
    """A DeepSeek-V3.2 configuration: ``b`` batches of ``s1`` new tokens, hidden ``h``, ``q_lora``,
    ``n_idx`` index heads (x128), ``heads`` MLA heads (latent 512 + rope 64), top-``topk``, per-batch
    KV lengths ``seq`` paged in blocks of 128 (``max_blocks`` per batch in the block table)."""
    name: str
    b: int
    s1: int
    h: int
    q_lora: int
    n_idx: int
    heads: int
    topk: int
    seq: tuple
    max_blocks: int | None = None

    @property
    def t(self):
        return self.b * self.s1

    @property
    def table_width(self):
        return self.max_blocks or -(-max(self.seq) // BLOCK)

    @property
    def cache_blocks(self):
        return sum(-(-s // BLOCK) for s in self.seq)

    def at_kv(self, kv: int) -> "Shape":
        return dataclasses.replace(self, name=f"KV {kv_text(kv)}", seq=(kv,) * self.b, max_blocks=None)


def kv_text(kv: int) -> str:
    return f"{kv // 1024}K" if kv % 1024 == 0 else str(kv)


TRAINING = dict(rows=1024, d=256, seq=256)      # pj.nn at a training step's shape: (1024, 256); attention (2, 256, 16)
SEED = Shape("seed: B=4 S1=2 KV 64K top-k 2048", 4, 2, 7168, 1536, 64, 128, 2048, (65536,) * 4)
SMALL = Shape("small: B=2 S1=2 KV 500/300 top-k 64", 2, 2, 256, 128, 4, 4, 64, (500, 300), 4)  # tests/test_deepseek


def make_kernel(which: str, s: Shape, backend: str = "sim", donate: bool = False, attention_tiles=ATTENTION_TILES):
    """A fresh ``pj.kernel`` of one DeepSeek kernel with the tuned tiles and options (``donate``: the
    prolog's and DIA's caches; ``attention_tiles``: sparse attention's tiles, None for the defaults)."""
    if which == "prolog":
        fn = functools.partial(K.indexer_prolog, n_heads=s.n_idx, tiles=K.PROLOG_TILES)
        return pj.kernel(fn, backend=backend, options=K.PROLOG_OPTIONS, donate_argnums=(13, 14) if donate else ())
    if which == "indexer":
        fn = functools.partial(K.lightning_indexer, sparse_count=s.topk)
        return pj.kernel(fn, backend=backend, options=INDEXER_OPTIONS)
    if which == "attention":
        options = ATTENTION_OPTIONS if attention_tiles is ATTENTION_TILES else None
        return K.make_dsa_kernels(s.n_idx, s.topk, backend=backend, tiles={"attention": attention_tiles},
                                  options=options)[0]
    if which == "dia":
        fn = functools.partial(K.dia, n_heads=s.n_idx, sparse_count=s.topk, scale_value=K.SOFTMAX_SCALE,
                               tiles=DIA_TILES)
        return pj.kernel(fn, backend=backend, options=DIA_OPTIONS, donate_argnums=(13, 14) if donate else ())
    raise ValueError(f"unknown kernel {which!r}; one of {KERNELS}")


def make_args(which: str, s: Shape):
    """Random inputs (NumPy) of one DeepSeek kernel, from ``examples/deepseek_v32/reference.py``."""
    kw = dict(max_blocks=s.max_blocks)
    if which == "prolog":
        return list(R.prolog_inputs(s.b, s.s1, s.h, s.q_lora, s.n_idx, list(s.seq), **kw)[0])
    if which == "indexer":
        return list(R.indexer_inputs(s.b, s.s1, s.n_idx, list(s.seq), **kw))
    if which == "attention":
        return list(R.attention_inputs(s.b, s.s1, s.heads, list(s.seq), s.topk, **kw))
    if which == "dia":
        pargs, table = R.prolog_inputs(s.b, s.s1, s.h, s.q_lora, s.n_idx, list(s.seq), **kw)
        q, kv, _, _, lens, qr, kr = R.attention_inputs(s.b, s.s1, s.heads, list(s.seq), s.topk, seed=1,
                                                       indices=False, **kw)
        return list(pargs) + [table, lens, q, qr, kv, kr]
    raise ValueError(f"unknown kernel {which!r}; one of {KERNELS}")


def make_specs(which: str, s: Shape):
    """``jax.ShapeDtypeStruct`` s of :func:`make_args` without building the arrays (KV up to 128K)."""
    S, bf, d, t = jax.ShapeDtypeStruct, jnp.bfloat16, 128, s.t
    nb, mb = s.cache_blocks, s.table_width
    table, lens = S((s.b, mb), jnp.int32), S((s.b,), jnp.int32)
    prolog = [S((t, s.h), bf), S((t, s.q_lora), jnp.int8), S((t, 1), jnp.float32),
              S((s.q_lora, s.n_idx * d), jnp.int8), S((s.n_idx * d, 1), jnp.float32), S((s.h, d), bf),
              S((s.h, s.n_idx), bf), S((d,), bf), S((d,), bf), S((t, K.ROPE_DIM), bf), S((t, K.ROPE_DIM), bf),
              S((d, d), bf), S((d, d), bf), S((nb, BLOCK, 1, d), jnp.int8), S((nb, BLOCK, 1), jnp.float16),
              S((t,), jnp.int32)]
    q, qr = S((t, s.heads, 512), bf), S((t, s.heads, K.ROPE_DIM), bf)
    kv, kr = S((nb, BLOCK, 1, 512), bf), S((nb, BLOCK, 1, K.ROPE_DIM), bf)
    if which == "prolog":
        return prolog
    if which == "indexer":
        return [S((t, s.n_idx, d), jnp.int8), S((nb, BLOCK, 1, d), jnp.int8), S((t, s.n_idx), jnp.float16),
                S((t, s.n_idx), jnp.float16), S((nb, BLOCK, 1), jnp.float16), lens, table]
    if which == "attention":
        return [q, kv, S((t, 1, s.topk), jnp.int32), table, lens, qr, kr]
    if which == "dia":
        return prolog + [table, lens, q, qr, kv, kr]
    raise ValueError(f"unknown kernel {which!r}; one of {KERNELS}")


# ------------------------------------------------------------------------------------------- rows
def row(section, name, value, unit, target=None, passed=None, **detail):
    """One result: ``target`` a readable bound ("≤ 2×") or None; ``passed`` True / False / None (no target)."""
    return {"section": section, "name": name, "value": value, "unit": unit, "target": target, "passed": passed,
            "detail": detail}


def failed_row(section, name, unit, target, error):
    """A measure that raised: no value; it fails its target (if any) and says why."""
    return row(section, name, None, unit, target, False if target else None,
               error=f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:300])


# Each target by name; ``--target NAME=VALUE`` overrides one (tests set one out of reach to see the
# suite fail).
TARGETS = {"host": 2.0, "compile_s": 2.0, "compile_growth": 1.2, "bound": 1.2, "mpmd_speedup": 1.25,
           "tasks_per_s": 250_000.0}


def most(name, unit="×"):
    """The readable form of target ``name``, an upper limit ("≤ 2×")."""
    return f"≤ {TARGETS[name]:g}{unit}"


def least(name, unit="×"):
    """The readable form of target ``name``, a lower limit ("≥ 1.25×")."""
    value = TARGETS[name]
    return f"≥ {value:,.0f}{unit}" if value >= 1000 else f"≥ {value:g}{unit}"


def at_most(value, bound):
    return bool(value <= bound)


def at_least(value, bound):
    return bool(value >= bound)


def _times(fns, repeats, sample_s=0.01):
    """Warm each fn up, then time them alternately ``repeats`` times: seconds per call, each sample
    the mean over enough back-to-back calls to last about ``sample_s`` (a single call of a few
    microseconds is mostly timer and scheduler noise)."""
    calls = []
    for fn in fns:
        jax.block_until_ready(fn())                     # tracing, lowering, compiling
        jax.block_until_ready(fn())
        start = time.perf_counter()
        jax.block_until_ready(fn())
        calls.append(max(1, int(sample_s / max(time.perf_counter() - start, 1e-6))))
    times = [[] for _ in fns]
    for _ in range(repeats):
        for fn, n, ts in zip(fns, calls, times):
            start = time.perf_counter()
            for _ in range(n):
                jax.block_until_ready(fn())
            ts.append((time.perf_counter() - start) / n)
    return times


def _ratio_row(name, sim_fn, jit_fn, repeats, target=None, **detail):
    sims, jits = _times([sim_fn, jit_fn], repeats)
    t_sim, t_jit = statistics.median(sims), statistics.median(jits)
    ratio = t_sim / t_jit
    return row("a", name, ratio, "x", target, None if target is None else at_most(ratio, TARGETS["host"]),
               sim_s=t_sim, jit_s=t_jit, repeats=repeats, sim_times_s=sims, jit_times_s=jits,
               load_average_1m=os.getloadavg()[0], **detail)


# ------------------------------------------------------------------------------- (a) sim vs jit
def host_seed_example(repeats=9):
    """(a) The seed example rowsum((A*2+B)@W) with its tiles, sim vs XLA, both under jax.jit (the sim
    kernel: its replay inlined into XLA)."""
    make = dict((name, mk) for name, _, mk in DEMOS)["seed_example"]
    args = [jnp.asarray(a) for a in make()]
    kernel = pj.kernel(seed_example)
    sim = jax.jit(kernel)
    xla = jax.jit(pj.kernel(seed_example, backend="xla"))
    return _ratio_row("seed example rowsum((A*2+B)@W), 64x64", lambda: sim(*args), lambda: xla(*args), repeats,
                      target=most("host"))


def host_deepseek(which: str, s: Shape, repeats=3, target=None):
    """(a) One DeepSeek kernel at shape ``s``: sim vs the xla-backend kernel (same options), under jax.jit."""
    args = [jnp.asarray(a) for a in make_args(which, s)]
    sim = jax.jit(make_kernel(which, s, "sim"))
    xla = jax.jit(make_kernel(which, s, "xla"))
    return _ratio_row(f"{TITLES[which]}, {s.name}", lambda: sim(*args), lambda: xla(*args), repeats, target)


def nn_cases(backend: str, rows: int = 16, d: int = 32, seq: int = 40):
    """(name, loss function of the float args, args) per ``pj.nn`` training op (tests/test_nn.py's shapes)."""
    rng = np.random.default_rng(0)
    r = lambda *shape, scale=1.0: (rng.normal(size=shape) * scale).astype(np.float32)  # noqa: E731
    x, w, w2, b, g, beta = r(rows, d), r(d, d, scale=0.2), r(d, d, scale=0.2), r(d), r(d), r(d)
    labels = jnp.asarray(rng.integers(0, d, rows).astype(np.int32))
    q, k, v = r(2, seq, 16), r(2, seq, 16), r(2, seq, 16)
    nn = pj.nn
    ops = [("dense (relu)", lambda x, w, b: nn.dense(x, w, b, "relu", backend=backend), (x, w, b)),
           ("rms_norm", lambda x, g: nn.rms_norm(x, g, backend=backend), (x, g)),
           ("layer_norm", lambda x, g, c: nn.layer_norm(x, g, c, backend=backend), (x, g, beta)),
           ("softmax", lambda x: nn.softmax(x, backend=backend), (x,)),
           ("softmax_cross_entropy", lambda x: nn.softmax_cross_entropy(x, labels, backend=backend), (x,)),
           ("swiglu", lambda x, a, c: nn.swiglu(x, a, c, backend=backend), (x, w, w2)),
           ("flash_attention (causal)", lambda q, k, v: nn.flash_attention(q, k, v, backend=backend), (q, k, v))]
    return [(name, (lambda f: lambda *a: jnp.sum(jnp.square(f(*a))))(f), args) for name, f, args in ops]


def host_nn(repeats=9, only=None, **shape):
    """(a) Forward + backward of every ``pj.nn`` op (or those named in ``only``):
    jax.jit(jax.grad(loss)) with backend sim vs xla."""
    rows = []
    for (name, sim_loss, args), (_, xla_loss, _) in zip(nn_cases("sim", **shape), nn_cases("xla", **shape)):
        if only is not None and name not in only:
            continue
        args = [jnp.asarray(a) for a in args]
        argnums = tuple(range(len(args)))
        sim, xla = jax.jit(jax.grad(sim_loss, argnums)), jax.jit(jax.grad(xla_loss, argnums))
        try:
            rows.append(_ratio_row(f"pj.nn.{name} fwd+bwd, {tuple(args[0].shape)}", lambda: sim(*args),
                                   lambda: xla(*args), repeats))
        except Exception as e:  # noqa: BLE001  (a broken op is reported, the suite goes on)
            rows.append(failed_row("a", f"pj.nn.{name} fwd+bwd", "x", None, e))
    return rows


# ------------------------------------------------------------------------------ (b) compile time
def compile_seconds(which: str, shapes, repeats=1):
    """Seconds of ``make_kernel(...).lower(*specs).compile()`` at each of ``shapes`` (a list of
    ``repeats`` samples per shape), a fresh kernel each time, after one untimed compile at the first
    shape (the process's one-time costs). The shapes take turns within each repeat, so that a change of
    the machine's load hits them alike."""
    specs = [make_specs(which, s) for s in shapes]
    make_kernel(which, shapes[0]).lower(*specs[0]).compile()
    times = [[] for _ in shapes]
    for _ in range(repeats):
        for s, spec, ts in zip(shapes, specs, times):
            gc.collect()                                 # start each from the same heap: less noise
            start = time.perf_counter()
            make_kernel(which, s).lower(*spec).compile()
            ts.append(time.perf_counter() - start)
    return times


def compile_times(kvs=(8192, 32768, 65536, 131072), kernels=KERNELS, base=SEED, repeats=3):
    """(b) Lower + compile time per kernel and KV length; targets at 64K (≤ 2 s) and 128K / 8K (≤ 1.2)."""
    rows = []
    for which in kernels:
        try:
            samples = dict(zip(kvs, compile_seconds(which, [base.at_kv(kv) for kv in kvs], repeats)))
            seconds = {kv: min(ts) for kv, ts in samples.items()}
        except Exception as e:  # noqa: BLE001
            rows.append(failed_row("b", f"{TITLES[which]} lower+compile", "s", most("compile_s", " s"), e))
            continue
        for kv in kvs:
            target = most("compile_s", " s") if kv == 65536 else None
            rows.append(row("b", f"{TITLES[which]} lower+compile, KV {kv_text(kv)}", seconds[kv], "s", target,
                            at_most(seconds[kv], TARGETS["compile_s"]) if target else None, repeats=repeats, times_s=samples[kv]))
        lo, hi = min(kvs), max(kvs)
        if lo != hi:
            target = most("compile_growth") if (lo, hi) == (8192, 131072) else None
            growth = seconds[hi] / seconds[lo]
            rows.append(row("b", f"{TITLES[which]} compile time {kv_text(hi)} / {kv_text(lo)}", growth, "x", target,
                            at_most(growth, TARGETS["compile_growth"]) if target else None))
    return rows


# ----------------------------------------------------------------------------------- (c) makespan
def makespans(s: Shape = SEED, kernels=KERNELS):
    """(c) Makespan / lower bound per kernel (compute=False); also the prolog with its caches donated
    and sparse attention with its default tiles; DIA (caches donated, as benchmarks/deepseek_v32.py)
    also under the SPMD policy."""
    cases = [(k, {}, TITLES[k]) for k in kernels if k != "dia"]
    cases.append(("prolog", {"donate": True}, "Indexer Prolog, caches donated"))
    if ATTENTION_TILES:
        cases.append(("attention", {"attention_tiles": None}, "sparse attention, default tiles (vector Gather)"))
    cases.append(("dia", {"donate": True}, "DIA, caches donated"))
    rows = []
    for which, kw, title in cases:
        if which not in kernels:
            continue
        name = f"{title}, {s.name}: makespan / lower bound"
        try:
            compiled = make_kernel(which, s, **kw).lower(*make_specs(which, s)).compile()
            args = make_args(which, s)
            mpmd = compiled.profile(*args, compute=False)
            ratio = mpmd.makespan_us / mpmd.lower_bound_us
            rows.append(row("c", name, ratio, "x", most("bound"), at_most(ratio, TARGETS["bound"]), makespan_us=mpmd.makespan_us,
                            lower_bound_us=mpmd.lower_bound_us, tasks=mpmd.tasks))
            if which == "dia":
                spmd = compiled.profile(*args, policy="spmd", compute=False)
                speedup = spmd.makespan_us / mpmd.makespan_us
                rows.append(row("c", f"DIA, {s.name}: SPMD / MPMD makespan", speedup, "x", least("mpmd_speedup"),
                                at_least(speedup, TARGETS["mpmd_speedup"]), mpmd_us=mpmd.makespan_us, spmd_us=spmd.makespan_us))
        except Exception as e:  # noqa: BLE001
            rows.append(failed_row("c", name, "x", most("bound"), e))
    return rows


# ---------------------------------------------------------------------------------- (d) executor
def executor_throughput(tasks=100_000):
    """(d) Tasks per second of the scheduler on a layered DAG: the task graph built from the tasks'
    regions, then dispatched on the cost model (no task bodies)."""
    with contextlib.redirect_stdout(sys.stderr):     # runtime.py's own line: keep stdout for the table
        rate = RT.throughput(tasks)
    return [row("d", f"scheduler end to end (graph + dispatch), {tasks:,}-task DAG", rate, "tasks/s",
                least("tasks_per_s", " tasks/s"), at_least(rate, TARGETS["tasks_per_s"]))]


# ------------------------------------------------------------------------------------------ output
def machine_info():
    def git(*cmd):
        try:
            return subprocess.run(["git", *cmd], cwd=HERE, capture_output=True, text=True, timeout=10).stdout.strip()
        except Exception:  # noqa: BLE001
            return None
    return {"platform": platform.platform(), "machine": platform.machine(), "processor": platform.processor(),
            "cpu_count": os.cpu_count(), "python": platform.python_version(), "jax": jax.__version__,
            "jaxlib": getattr(sys.modules.get("jaxlib"), "__version__", None), "numpy": np.__version__,
            "jax_backend": jax.default_backend(), "ptojax": getattr(pj, "__version__", None),
            "git_commit": git("rev-parse", "--short", "HEAD"),
            "git_dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
            "load_average_1m": os.getloadavg()[0]}


def fmt_value(r):
    v, unit = r["value"], r["unit"]
    if v is None:
        return "not measured (" + r["detail"].get("error", "?") + ")"
    if unit == "tasks/s":
        return f"{v:,.0f} tasks/s"
    if unit == "s":
        return f"{v:.2f} s"
    text = f"{v:.2f}×" if v < 100 else f"{v:,.0f}×"
    det = r["detail"]
    if "sim_s" in det:
        text += f" (sim {_seconds(det['sim_s'])}, jit {_seconds(det['jit_s'])})"
    elif "lower_bound_us" in det:
        text += f" ({det['makespan_us']:.1f} / {det['lower_bound_us']:.1f} µs, {det['tasks']} tasks)"
    elif "spmd_us" in det:
        text += f" ({det['spmd_us']:.1f} / {det['mpmd_us']:.1f} µs)"
    return text


def _seconds(s):
    return f"{s:.2f} s" if s >= 1 else f"{s * 1e3:.2f} ms"


def markdown(rows):
    lines = []
    for key, title in SECTIONS.items():
        part = [r for r in rows if r["section"] == key]
        if not part:
            continue
        lines += ["", f"### {title}", "", "| what | measured | target | result |", "|---|---|---|---|"]
        for r in part:
            result = "—" if r["passed"] is None else ("PASS" if r["passed"] else "FAIL")
            lines.append(f"| {r['name']} | {fmt_value(r)} | {r['target'] or '—'} | {result} |")
    return "\n".join(lines)


def result(mode, machine, rows, seconds):
    verdicts = [r["passed"] for r in rows]
    return {"format": FORMAT, "mode": mode, "machine": machine, "seconds": seconds, "rows": rows,
            "summary": {"passed": verdicts.count(True), "failed": verdicts.count(False),
                        "no_target": verdicts.count(None)}}


# -------------------------------------------------------------------------------------------- main
def measures(mode: str, executor_tasks: int = 100_000):
    """The measures of a mode, in order: (label, section, target, thunk returning rows); ``target`` is
    what a measure that raises fails."""
    def seed_shape(k):
        return lambda: [host_deepseek(k, SEED, repeats=3, target=most("host"))]

    def small(k):
        return lambda: [host_deepseek(k, SMALL, repeats=9)]

    out = [("seed example", "a", most("host"), lambda: [host_seed_example()])]
    out += [(f"{TITLES[k]}, small", "a", None, small(k)) for k in KERNELS]
    out += [("pj.nn", "a", None, host_nn)]
    if mode != "quick":
        out += [("pj.nn, training shape", "a", None, functools.partial(host_nn, repeats=3, **TRAINING))]
        out += [(f"{TITLES[k]}, seed shape", "a", most("host"), seed_shape(k)) for k in KERNELS
                if k != "dia" or mode == "full"]
    kvs = (8192, 32768) if mode == "quick" else (8192, 32768, 65536, 131072)
    out.append(("compile", "b", None, functools.partial(compile_times, kvs, repeats=3 if mode == "quick" else 11)))
    if mode != "quick":
        out.append(("makespans", "c", None, makespans))
    out.append(("executor", "d", least("tasks_per_s", " tasks/s"),
                functools.partial(executor_throughput, executor_tasks)))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--quick", action="store_true", help="small shapes, compile at 8K/32K, executor")
    group.add_argument("--full", action="store_true", help="everything, DIA sim vs jit at the seed's shape too")
    ap.add_argument("--json", default="benchmark-results.json", help="where to write the rows (JSON)")
    ap.add_argument("--target", action="append", default=[], metavar="NAME=VALUE",
                    help=f"override a target ({', '.join(TARGETS)})")
    ap.add_argument("--executor-tasks", type=int, default=100_000, metavar="N",
                    help="tasks of the executor measure's DAG (default 100 000)")
    ap.add_argument("--only", action="append", default=[], metavar="LABEL",
                    help="run only the measures whose label starts with LABEL (e.g. executor, compile)")
    a = ap.parse_args(argv)
    for setting in a.target:
        name, _, value = setting.partition("=")
        if name not in TARGETS:
            ap.error(f"--target {setting}: no target {name!r}; the targets: {', '.join(TARGETS)}")
        try:
            TARGETS[name] = float(value)
        except ValueError:
            ap.error(f"--target {setting}: {value!r} is not a number")
    if a.executor_tasks < 1:
        ap.error(f"--executor-tasks {a.executor_tasks}: the executor's DAG needs one task at least")
    if not Path(a.json).resolve().parent.is_dir():
        ap.error(f"--json {a.json}: no directory {str(Path(a.json).resolve().parent)!r} to write the rows in")
    mode = "quick" if a.quick else "full" if a.full else "default"
    machine = machine_info()
    print(f"# ptojax benchmark suite ({mode})\n")
    print(f"machine: {machine['platform']}, {machine['cpu_count']} CPUs, python {machine['python']}, "
          f"jax {machine['jax']} ({machine['jax_backend']}), load average {machine['load_average_1m']:.2f}, "
          f"ptojax {machine['ptojax']} @ {machine['git_commit']}{' (modified)' if machine['git_dirty'] else ''}",
          flush=True)
    start, rows = time.perf_counter(), []
    chosen = [m for m in measures(mode, a.executor_tasks) if not a.only or any(m[0].startswith(o) for o in a.only)]
    if not chosen:
        ap.error(f"--only {a.only}: no measure of mode {mode} has such a label")
    for label, section, target, thunk in chosen:
        t0 = time.perf_counter()
        try:
            rows += thunk()
        except Exception as e:  # noqa: BLE001  (one broken measure must not lose the others)
            rows.append(failed_row(section, label, "", target, e))
        print(f"  [{label}: {time.perf_counter() - t0:.1f} s]", file=sys.stderr, flush=True)
    seconds = time.perf_counter() - start
    machine["load_average_1m_end"] = os.getloadavg()[0]
    out = result(mode, machine, rows, seconds)
    print(markdown(rows))
    s = out["summary"]
    print(f"\n{s['passed']} PASS, {s['failed']} FAIL, {s['no_target']} without a target; {seconds:.0f} s (load "
          f"average {machine['load_average_1m']:.2f} at the start, {machine['load_average_1m_end']:.2f} at the end)")
    Path(a.json).write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    busiest = max([machine["load_average_1m"], machine["load_average_1m_end"]]
                  + [r["detail"].get("load_average_1m", 0.0) for r in rows])
    if busiest > (machine["cpu_count"] or 1):
        print(f"NOTE: the machine was busy (load average up to {busiest:.1f} on {machine['cpu_count']} CPUs): host "
              f"times are noisy; XLA:CPU's threads wait for the scheduler, which can favour the simulator.")
    print(f"wrote {a.json}")
    return out


def exit_status(out) -> int:
    """1 when a target failed or a measure raised, else 0."""
    raised = any("error" in r["detail"] for r in out["rows"])
    return 1 if out["summary"]["failed"] or raised else 0


if __name__ == "__main__":
    sys.exit(exit_status(main()))
