"""Calibration of the cost model against published A2/A3 figures, through ``profile()`` on kernels
written as a user writes them (``pj.kernel(f).lower(...).compile().profile(compute=False)``).

Run: ``python benchmarks/calibration.py`` prints the table of docs/calibration.md (tests/test_calibration.py
checks that the doc holds this table and asserts each band); the exit status is 1 when a point falls
outside its band.

Points (published on one A3 die):

- pto-isa ``kernels/manual/a2a3/gemm_performance``: fp16 GEMM, fp32 accumulation, 1536³ 38.8 µs, 3072³
  206.7 µs, 6144³ 1 506 µs, 7680³ 3 168 µs; base tile (m, k, n) = (128, 64, 256) on a 4×6 core grid --
  here ``pj.tile(cube=(128, 64, 256))``, one task per output tile. Band ±15 %.
- pto-isa ``kernels/manual/a2a3/topk``: top-1000 of 1 024 per row (TSORT32 + TMRGSORT), fp32 rows 4 800 /
  3 456 / 2 304 in 324.1 / 238.8 / 161.4 µs, fp16 4 800 rows 326.9 µs -- here ``pj.ops.topk`` with one
  row per vector tile and the rows split evenly over the 48 vector cores (``tiles_per_block`` =
  rows / 48). Band ±20 %.
- PyPTO's matmul guide: 6144³ fp16 in 1.6 ms after its L2-hit optimisation -- the GEMM above. Band ±15 %.
- PyPTO's QuantIndexerProlog at B=4, MTP1, KV 64K over its three tuning steps: 76 µs (vector tile fix),
  56 µs (cube tiles m16, k512/1024, n128/64/32), 49 µs (L1 reuse) -- the DeepSeek-V3.2 Indexer Prolog of
  ``examples/deepseek_v32`` with each step's tiles (``PYPTO_PROLOG_STEPS`` in
  ``benchmarks/deepseek_v32.py``) and the caches updated in place. Band ±20 % each.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import sys
from pathlib import Path

import jax
import jax.numpy as jnp

import ptojax as pj
from ptojax import ops as O

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from examples.deepseek_v32 import kernels as K  # noqa: E402
from examples.deepseek_v32 import reference as R  # noqa: E402
from benchmarks import deepseek_v32 as D  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Point:
    name: str
    source: str
    published_us: float
    band: float                     # the allowed |predicted / published - 1|
    setting: str                    # the tiling, as a user states it
    make: object                    # target name -> (pj.kernel, arguments: specs, or arrays where data steers)


def gemm(n: int, target: str = "a3", dtype=jnp.float16):
    def matmul(a, b):
        with pj.tile(cube=(128, 64, 256)):
            return pj.ops.matmul(a, b)

    spec = jax.ShapeDtypeStruct((n, n), dtype)
    return pj.kernel(matmul, target=target), (spec, spec)


def topk(rows: int, target: str = "a3", dtype=jnp.float32, k: int = 1000, width: int = 1024):
    def top(x):
        with pj.tile(vec=(1, width)):
            return O.topk(x, k)

    per_core = math.ceil(rows / 48)
    return (pj.kernel(top, target=target, options={"tiles_per_block": {"DEFAULT": per_core}}),
            (jax.ShapeDtypeStruct((rows, width), dtype),))


def indexer_prolog(tiles, options, target: str = "a3", kv: int = 65536):
    """The Indexer Prolog at B=4, S1=2 (MTP1), KV ``kv`` per batch with ``tiles`` and ``options``, key
    caches updated in place."""
    args, _ = R.prolog_inputs(D.B, D.S1, D.H, D.Q_LORA, D.N_IDX, [kv] * D.B)
    kernel = pj.kernel(functools.partial(K.indexer_prolog, n_heads=D.N_IDX, tiles=tiles), target=target,
                       options=options, donate_argnums=(13, 14))
    return kernel, args


GEMM_SOURCE = "pto-isa kernels/manual/a2a3/gemm_performance"
TOPK_SOURCE = "pto-isa kernels/manual/a2a3/topk"
POINTS = (
    *(Point(f"GEMM fp16 {n}³", GEMM_SOURCE, us, 0.15, "cube (128, 64, 256)", lambda target, n=n: gemm(n, target))
      for n, us in ((1536, 38.8), (3072, 206.7), (6144, 1506.0), (7680, 3168.0))),
    Point("GEMM fp16 6144³, L2-hit order", "PyPTO matmul performance guide", 1600.0, 0.15, "cube (128, 64, 256)",
          lambda target: gemm(6144, target)),
    *(Point(f"top-1000 of 1024, {rows} rows {name}", TOPK_SOURCE, us, 0.20, f"vec (1, 1024), {math.ceil(rows / 48)} rows/task",
            lambda target, rows=rows, dtype=dtype: topk(rows, target, dtype))
      for rows, dtype, name, us in ((4800, jnp.float32, "fp32", 324.1), (3456, jnp.float32, "fp32", 238.8),
                                    (2304, jnp.float32, "fp32", 161.4), (4800, jnp.float16, "fp16", 326.9))),
    *(Point(f"QuantIndexerProlog, B=4 MTP1 KV 64K, step {i}", "PyPTO QuantIndexerProlog performance case", us, 0.20,
            f"{step}, caches in place", lambda target, tiles=tiles, options=options: indexer_prolog(tiles, options, target))
      for i, (step, us, tiles, options) in enumerate(D.PYPTO_PROLOG_STEPS, 1)),
)


def predict(point: Point, target: str = "a3"):
    """The profile of ``point``'s kernel on ``target`` (compute=False: the timeline only)."""
    kernel, args = point.make(target)
    compiled = kernel.lower(*args).compile()
    if all(isinstance(a, jax.ShapeDtypeStruct) for a in args):
        return compiled.profile(compute=False)
    return compiled.profile(*args, compute=False)


def within(point: Point, predicted_us: float) -> bool:
    return abs(predicted_us / point.published_us - 1.0) <= point.band + 1e-12


def row(point: Point, profile) -> str:
    ratio = profile.makespan_us / point.published_us
    verdict = "yes" if within(point, profile.makespan_us) else "**no**"
    return (f"| {point.name} | {point.setting} | {point.published_us:,.1f} | {profile.makespan_us:,.1f} | "
            f"{ratio:.2f} | ±{point.band:.0%} | {verdict} | {profile.binding} | {point.source} |")


HEADER = ("| point | tiling | published µs | predicted µs | ratio | band | within | bound by | source |\n"
          "|---|---|---|---|---|---|---|---|---|")


def table(profiles=None) -> str:
    """The markdown table of every point; ``profiles``: point name -> profile, computed if missing."""
    profiles = dict(profiles or {})
    lines = [HEADER]
    for point in POINTS:
        if point.name not in profiles:
            profiles[point.name] = predict(point)
        lines.append(row(point, profiles[point.name]))
    return "\n".join(lines)


def main() -> int:
    profiles = {p.name: predict(p) for p in POINTS}
    print(table(profiles))
    missed = [p.name for p in POINTS if not within(p, profiles[p.name].makespan_us)]
    if missed:
        print(f"\nFAIL: outside the band: {', '.join(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
