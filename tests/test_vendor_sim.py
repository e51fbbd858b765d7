"""The engine against the vendor: every program of a zoo of kernels — one or more per instruction kind
selection emits — run on random GM inputs by ``ascend/engine.py`` (``tile_semantics``) and by
pto-isa's CPU simulator (``ascend/cpusim.py``: ptoas's C++ built with ``-D__CPU_SIM``), every pointer
argument compared afterwards (``ascend/crosscheck.py``). All simulated programs share one g++
translation unit (one more compile when g++ rejects some: they are dropped and reported).

What the table printed here says (``pytest -s tests/test_vendor_sim.py``), as of this test:

* every program that runs on both sides agrees BIT FOR BIT (``texp``/``tlog``/``trsqrt`` in double,
  rounded once, as the simulator computes them, whether or not ``jax_enable_x64`` is on);
* where the simulator rejects what selection prints, the reason is one of :data:`KNOWN_REJECTIONS`
  (the pto-isa source lines are quoted there); for two of them a "vendor variant" of the same text
  (the form the simulator takes) runs too, and agrees bit for bit — the engine's semantics are right,
  the selection's encoding is what the simulator refuses;
* top-k / sort / merge_topk (``tci`` / ``tsort32`` / ``tmrgsort`` / ``tgather``; f32 and f16, largest
  and smallest, merge rounds, a staged top-k's merge program; i8 sorted in f32) run in the simulator
  and agree bit for bit; :func:`test_sort_padding_is_minus_inf` checks the ``-inf`` padding of the
  sort row against data at ``±inf``;
* bf16 programs are skipped: pto-isa's CPU ``bfloat16_t`` is ``_Float16`` under C++20;
* whole kernels whose text the simulator once refused (a row sum of a tail tile, a matmul bias with
  an N tail, cross entropy's sum into a 0-d tensor, an f16 row sum and mean whose f32 column is
  copied to the f16 column's pitch) run call by call in both, bit for bit, and against NumPy
  references (:func:`_text_and_simulator`); their bf16 twins against NumPy and ptoas only.

Skipped when ptoas / pto-isa / a C++20 compiler are missing, except in CI (``CI=true``): fails.
"""
import re
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax.ascend import textbatch, tile_semantics
from ptojax.ascend import crosscheck as xc
from ptojax.ascend.ptoas import PtoasError, assemble
from vendor_tools import needed, tools  # noqa: F401 - tools: autouse fixture

O = pj.ops

pytestmark = needed

#: Why pto-isa's CPU simulator refuses some of selection's text: (pattern of the error, explanation).
KNOWN_REJECTIONS = {
    "TCMP: dst data type must be uint8_t/uint32_t": (
        "tcmp mask tiles are i8; include/pto/cpu/TCmp.h:99-101 static_asserts a uint8_t/uint32_t dst "
        "(tcmps has no such check). The ui8 variant agrees bit for bit."),
    "TCOLMAX: Not supported data type": (
        "include/pto/cpu/TColMax.hpp static_asserts f16/f32/bf16/i8/u8 only; pto-isa's docs/isa/TCOLMAX.md "
        "lists half, float, int16_t, int32_t for the A2/A3 implementation, so an i32 column max keeps tcolmax."),
    "TROWEXPAND: invalid src1 shape": (
        "the R x 1 operand of trowexpand{sub,mul,div} is a row_major R x (32 B) tile with v_col=1; "
        "include/pto/cpu/TRowExpandOp.hpp:78-86 asserts row_major src1 has v_col == 32/sizeof(T) (it reads "
        "src1[r, c % v_col]: a brcb'd block) or is col_major R x 1. The col_major variant agrees bit for bit."),
}

# ------------------------------------------------------------------------------------------ kernels
def tiled(fn, **tile):
    def g(*args):
        with pj.tile(**tile):
            return fn(*args)
    return g


def kernels():
    """{family: (fn, *args)}: at least one program per instruction kind selection emits."""
    from kernels import seed_kernel

    r = np.random.default_rng(0)
    f32 = lambda *s: r.standard_normal(s).astype(np.float32)   # noqa: E731
    f16 = lambda *s: r.standard_normal(s).astype(np.float16)   # noqa: E731
    i32 = lambda *s: r.integers(-50, 50, s).astype(np.int32)   # noqa: E731
    i8 = lambda *s: r.integers(-128, 128, s).astype(np.int8)   # noqa: E731
    X, Y = f32(32, 64), f32(32, 64)
    return {
        "seed example": (seed_kernel, f16(64, 64), f16(64, 64), f16(64, 32)),
        "elementwise f32": (tiled(lambda x, y: (x + y) * x - y / (O.abs(y) + 1) + jnp.maximum(x, y) - jnp.minimum(x, -y),
                                  vec=(16, 32)), X, Y),
        "unary f32": (tiled(lambda x: (jnp.exp(x), jnp.log(jnp.abs(x) + 0.5), jnp.sqrt(jnp.abs(x)),
                                       O.rsqrt(jnp.abs(x) + 1), 1 / (x + 3), -x, jax.nn.relu(x)), vec=(16, 64)), X),
        "elementwise f16": (tiled(lambda x, y: (x * y + x - y, jnp.maximum(x, y), jnp.exp(x)), vec=(16, 32)),
                            f16(32, 64), f16(32, 64)),
        "elementwise i32": (tiled(lambda x, y: (x + y) * 3 - jnp.maximum(x, y) + jnp.minimum(x, 2) - jnp.abs(y),
                                  vec=(8, 32)), i32(16, 64), i32(16, 64)),
        "bitwise i32": (tiled(lambda x, y: (x & y, x | y, x ^ y), vec=(8, 32)), i32(16, 64), i32(16, 64)),
        "elementwise i8": (tiled(lambda x, y: O.add(x, y) * 3 - O.neg(x), vec=(8, 32)), i8(16, 64), i8(16, 64)),
        "tile-scalar": (tiled(lambda x: (x * 3.0 + 1.5, x / 4.0, 2.0 / (jnp.abs(x) + 1), jnp.maximum(x, 0.5),
                                         jnp.minimum(x, -0.5)), vec=(16, 64)), X),
        "compare-where f32": (tiled(lambda x, y: (jnp.where(x > y, x, y * 2), jnp.where(x <= 0.5, x, 1.0),
                                                  jnp.where(x == y, 1.0, x)), vec=(16, 64)), X, Y),
        "compare-where i32": (tiled(lambda x: O.where(O.gt(x, 0), x, O.mul(x, -2)), vec=(8, 32)), i32(16, 64)),
        "cast f32<->f16": (tiled(lambda x: (x.astype(jnp.float16) * 2).astype(jnp.float32), vec=(16, 64)), X),
        "cast f32->int": (tiled(lambda x: (O.cast(x * 40, jnp.int8, rounding="floor"), O.cast(x * 40, jnp.int32),
                                           O.cast(x * 40, jnp.int32, rounding="ceil"),
                                           O.cast(x * 40, jnp.int32, rounding="round")), vec=(8, 64)), X),
        "cast int->f32": (tiled(lambda x: x.astype(jnp.float32) * 0.5, vec=(8, 32)), i32(16, 64)),
        "row reductions": (tiled(lambda x: (jnp.max(x, 1), jnp.min(x, 1), jnp.sum(x, 1),
                                            O.prod(x * 0.1 + 1, 1, keepdims=True)), vec=(16, 64)), X),
        "col reductions": (tiled(lambda x: (jnp.sum(x, 0), jnp.min(x, 0), jnp.argmax(x, 0)), vec=(32, 16)), X),
        "col sum i32": (tiled(lambda x: jnp.sum(x, 0), vec=(16, 32)), i32(16, 64)),   # TCOLSUM takes floats only
        "argmax rows": (tiled(lambda x: jnp.argmax(x, 1), vec=(16, 64)), X),
        "broadcasts": (tiled(lambda x, r, c: (x - r[:, None], x * r[:, None], x / (jnp.abs(r[:, None]) + 1),
                                              x + c[None, :], x * c[None, :], x - c[None, :],
                                              jnp.broadcast_to(r[:, None], x.shape)), vec=(16, 64)), X, f32(32), f32(64)),
        "transpose": (tiled(lambda x: x.T, vec=(16, 16)), X),
        "masks of two widths": (tiled(lambda x, b, h, i: (O.logical_and(O.gt(x, 0.0), b), O.where(O.gt(h, 0.0), i, 7)),
                                      vec=(8, 8)), f32(16, 8), r.random((16, 8)) < 0.5, f16(16, 8), i32(16, 8)),
        "logical of a constant and a broadcast": (tiled(lambda x, r: (O.logical_and(O.gt(x, 0.0), False),
                                                                     O.logical_or(O.gt(x, 0.5), O.lt(r, 0.0))),
                                                       vec=(8, 32)), f32(16, 32), f32(1, 32)),
        "column broadcast in groups": (tiled(lambda x, y: jnp.broadcast_to(
            O.fmod(O.sum(x, -1, keepdims=True), O.abs(O.amax(y, -1, keepdims=True)) + 1), (2, 4, 16)),
            vec=(2, 4, 16)), f32(2, 4, 16), f32(2, 1, 16)),
        "column regrouped as rows": (tiled(lambda x: jnp.broadcast_to(O.permute(O.sum(x, -1, keepdims=True), (0, 2, 1)),
                                                                      (2, 3, 8)), vec=(2, 8, 16)), f32(2, 8, 16)),
        "rows regrouped as a column": (tiled(lambda x: jnp.broadcast_to(O.permute(x, (0, 2, 1)), (2, 8, 4)),
                                             vec=(2, 8, 8)), f32(2, 1, 8)),
        "matmul K loop": (tiled(lambda a, b: O.matmul(a, b), cube=(32, 32, 32)), f16(64, 64), f16(64, 32)),
        "matmul bias, dn B": (tiled(lambda a, b, c: O.matmul(a, b, transpose_b=True, bias=c), cube=(32, 32, 32)),
                              f16(64, 64), f16(32, 64), f32(32)),
        "matmul f16 out, dn A": (tiled(lambda a, b: O.matmul(a, b, out_dtype=jnp.float16, transpose_a=True),
                                       cube=(32, 32, 32)), f16(64, 32), f16(64, 32)),
        "matmul int8": (lambda a, b: O.matmul(a, b), i8(32, 64), i8(64, 32)),
        "quantize": (tiled(lambda x: O.dequantize(*O.quantize(x)), vec=(4, 64)), f16(8, 64)),
        "softmax": (tiled(jax.nn.softmax, vec=(16, 64)), X),
        "layer norm": (tiled(lambda x, g, b: O.layer_norm(x, g, b), vec=(16, 64)), X, f32(64), f32(64)),
        "rms norm": (tiled(lambda x, g: O.rms_norm(x, g), vec=(16, 64)), X, f32(64)),
        "activations f32": (tiled(lambda x: (O.gelu(x), O.silu(x), O.tanh(x), O.sigmoid(x)), vec=(16, 64)), X),
        "activations f16": (tiled(lambda x: (O.gelu(x), O.silu(x), O.sigmoid(x)), vec=(16, 64)), f16(32, 64)),
        "top-k f32": (lambda x: O.topk(x, 5), f32(3, 40)),
        "top-k f32 smallest": (lambda x: O.topk(x, 5, largest=False), f32(3, 40)),
        "top-k f16": (lambda x: O.topk(x, 5), f16(3, 40)),
        "top-k f16 smallest": (lambda x: O.topk(x, 5, largest=False), f16(3, 40)),
        "top-k k33 merge round f32": (lambda x: O.topk(x, 33), f32(2, 300)),
        "top-k k33 merge round f16 smallest": (lambda x: O.topk(x, 33, largest=False), f16(2, 300)),
        "top-k tiled rows": (tiled(lambda x: O.topk(x, 8), vec=(8, 64)), f32(16, 64)),
        "sort": (tiled(lambda x: O.sort(x, 1)[0], vec=(8, 64)), f32(16, 64)),
        "sort f16 axis 0": (lambda x: O.sort(x, 0), f16(21, 16)),
        "staged top-k + merge_topk f32": (tiled(lambda x: O.topk(x, 64), vec=(1, 1024)), f32(2, 4096)),
        "staged top-k + merge_topk f16 smallest": (tiled(lambda x: O.topk(x, 16, largest=False), vec=(1, 1024)),
                                                   f16(2, 4096)),
        "staged top-k k1 + merge_topk of one-value lists": (tiled(lambda x: O.topk(x, 1), vec=(1, 16)), f32(2, 64)),
        "top-k i8 (sorted in f32)": (tiled(lambda x: O.topk(x, 4), vec=(4, 32)), i8(4, 32)),
        "top-k i8 smallest k1 (a column)": (tiled(lambda x: O.topk(x, 1, largest=False), vec=(3, 64)), i8(3, 40)),
        "top-k i8 axis 0": (tiled(lambda x: O.topk(x, 3, axis=0), vec=(32, 32)), i8(32, 4)),
        "staged top-k i8 + merge_topk": (tiled(lambda x: O.topk(x, 2), vec=(2, 32)), i8(2, 64)),
        "gather rows": (tiled(lambda x, i: O.gather(x, i, 0), vec=(8,)), f32(16, 64),
                        np.array([3, 1, 0, 7, 5, 5, 0, 2], np.int32)),
        "bf16 (skipped)": (tiled(lambda x: O.cast(O.exp(O.cast(x, jnp.float32)), jnp.bfloat16) + x, vec=(16, 16)),
                           f32(16, 32).astype(jnp.bfloat16)),
    }


# ------------------------------------------------------------------ vendor variants of the same text
def vendor_variant(func_text: str) -> str | None:
    """Selection's text in the form the simulator accepts where it refuses selection's own
    (:data:`KNOWN_REJECTIONS`): tcmp masks as ui8; trowexpand* R x 1 operands col_major. None when
    nothing changes."""
    out = func_text
    for line in func_text.splitlines():
        if re.search(r"pto\.trowexpand(sub|mul|div|add|max|min) ", line):
            for t in re.findall(r"!pto\.tile_buf<[^>]*v_col=1, blayout=row_major[^>]*>", line):
                m = re.search(r"rows=(\d+), cols=\d+, v_row=(\d+), v_col=1", t)
                out = out.replace(t, t.replace(m.group(0), f"rows={m.group(1)}, cols=1, v_row={m.group(2)}, v_col=1")
                                  .replace("blayout=row_major", "blayout=col_major"))
        if re.search(r"pto\.tcmp ", line):
            t = re.findall(r"!pto\.tile_buf<[^>]*>", line)[-1]
            out = out.replace(t, t.replace("dtype=i8", "dtype=ui8"))
    return None if out == func_text else out


def _variant_jobs(jobs):
    """(text, name, blocks) of the vendor variants ptoas accepts, named ``<name>__vendor``."""
    out = []
    for text, name, blocks in jobs:
        ftext = xc.functions(text)[name]
        v = vendor_variant(ftext)
        if v is None:
            continue
        patched = set(re.findall(r"(%[\w.]+) = pto\.alloc_tile : [^\n]*blayout=col_major", v)) - set(
            re.findall(r"(%[\w.]+) = pto\.alloc_tile : [^\n]*blayout=col_major", ftext))
        uses = [m.group(1) for line in v.splitlines() if set(re.findall(r"%[\w.]+", line)) & patched
                for m in [re.match(r"\s*(?:%\S+ = )?pto\.([\w.]+)", line)] if m]
        if not set(uses) <= {"alloc_tile", "tload", "trowexpandsub", "trowexpandmul", "trowexpanddiv", "trowsum",
                             "trowmax", "trowmin"}:
            continue          # a col_major R x 1 operand of an elementwise op: the simulator refuses that too
        header = next(line for line in text.splitlines() if line.lstrip().startswith("module"))
        module = f"{header}\n{v.replace(f'@{name}(', f'@{name}__vendor(', 1)}\n}}\n"
        try:
            assemble(module)
        except PtoasError:
            continue          # e.g. the R x 1 tile also feeds an op that needs row_major
        out.append((module, f"{name}__vendor", blocks))
    return out


# ---------------------------------------------------------------------------------------- the run
REQUIRED_KINDS = {
    "tload", "tstore", "tmov", "tadd", "tsub", "tmul", "tdiv", "tmax", "tmin", "tabs", "tneg", "tand", "tor", "txor",
    "tadds", "tmuls", "tdivs", "tmaxs", "tmins", "texpands", "texp", "tlog", "tsqrt", "trsqrt", "trecip",
    "tcmps gt", "tcmps le", "tcmp gt", "tcmp eq", "tsel", "trowsum", "trowmax", "trowmin", "trowprod", "trowargmax",
    "tcolsum", "tcolmin", "tcolargmax", "trowexpand", "trowexpandsub", "trowexpandmul", "trowexpanddiv",
    "tcolexpandadd", "tcolexpandsub", "tcolexpandmul", "ttrans", "tmatmul", "tmatmul.acc", "tmatmul.bias",
    "tci", "tsort32", "tmrgsort", "tgather",
    "tgetval", "subset", "tcvt f32->f16 RINT", "tcvt f16->f32 RINT", "tcvt f32->i32 RINT", "tcvt f32->i32 CEIL",
    "tcvt f32->i32 ROUND", "tcvt f32->i8 FLOOR", "tcvt i32->f32 RINT", "tcvt i8->i16 RINT", "tcvt i16->i8 RINT"}


@pytest.mark.long
def test_engine_matches_the_vendor_simulator():
    """One run (one g++ translation unit, plus one recompile when g++ drops rejected programs), many
    checks: kept in one test so that pytest-xdist does not run it twice."""
    t0 = time.time()
    jobs, family = [], []
    for fam, (fn, *args) in kernels().items():
        for job in xc.jobs_of(pj.kernel(fn).lower(*args).compile().code):
            family.append(fam)
            jobs.append(job)
    for job in _variant_jobs(jobs):
        family.append("vendor variant")
        jobs.append(job)
    t1 = time.time()
    results = xc.run(jobs, seed=0)
    t2 = time.time()
    for fam, r in zip(family, results):
        r.family = fam
    lines = [f"\nengine vs pto-isa CPU simulator: {len(results)} programs; lowering {t1 - t0:.1f} s, "
             f"engine + simulator {t2 - t1:.1f} s", xc.table(results), "", xc.kind_table(results), ""]
    for r in results:
        if r.sim_error or r.engine_error:
            reason = next((k for k in KNOWN_REJECTIONS if k in (r.sim_error or "")), None)
            lines.append(f"{r.family} / {r.function}: {r.status}: "
                         + (f"[known] {reason}" if reason else (r.engine_error or r.sim_error)[:800]))

    lines.append(f"total {time.time() - t0:.1f} s")
    print("\n".join(lines))

    # 1. every program that ran on both sides agrees bit for bit
    both = [r for r in results if r.engine is not None and r.sim is not None]
    assert len(both) >= 55, len(both)
    assert not {f"{r.family} / {r.function}": r.errors() for r in both if r.status != "exact"}
    # 2. the engine runs everything selection prints
    assert not {r.function: r.engine_error for r in results if r.engine_error}
    # 3. the simulator rejects selection's text only for the known reasons ...
    assert not {f"{r.family} / {r.function}": r.sim_error for r in results if r.family != "vendor variant"
                and r.sim_error and not any(k in r.sim_error for k in KNOWN_REJECTIONS)}
    # ... and where it does (tcmp / trowexpand*), the vendor variant of the same text ran and agrees (1.)
    variants = {r.function: r for r in results if r.family == "vendor variant" and r.sim is not None}
    assert not [f"{r.family} / {r.function}" for r in results if r.family != "vendor variant" and r.sim_error
                and any(k in r.sim_error for k in ("TCMP", "TROWEXPAND")) and f"{r.function}__vendor" not in variants]
    # 4. every kind in REQUIRED_KINDS was checked against the simulator somewhere
    checked = {k for k, row in xc.by_kind(results).items() if row["functions"]}
    assert REQUIRED_KINDS <= checked, sorted(REQUIRED_KINDS - checked)
    # 5. bf16 programs are skipped, with the reason
    bf16 = [r for r in results if r.family == "bf16 (skipped)"]
    assert bf16 and all(r.status == "skipped" and "_Float16" in r.skipped for r in bf16)
    # 6. top-k / sort / merge_topk (f32, f16, i8 sorted in f32; largest, smallest; merge rounds; a staged
    #    top-k's merge program) run in the simulator and agree bit for bit
    sorting = [r for r in results if r.family.startswith(("top-k", "sort", "staged top-k"))]
    assert {r.family for r in sorting} == {f for f in kernels() if f.startswith(("top-k", "sort", "staged top-k"))}
    assert any(r.function.startswith("merge_topk") for r in sorting)
    assert not {f"{r.family} / {r.function}": r.status for r in sorting if r.status != "exact"}


def test_sort_padding_is_minus_inf():
    """The sort row is padded with -inf (``texpands`` of the lowest finite value, doubled), index -1:
    data at -inf (the largest-k) or +inf (the smallest-k, sorted negated) tie with the padding and
    come first by index in the simulator too, so k = n returns every element and no padding."""
    import plan_semantics as semantics

    r = np.random.default_rng(1)
    cases = []
    for dtype in (np.float32, np.float16):
        for largest in (True, False):
            x = r.integers(-3, 3, (2, 40)).astype(dtype)
            x[r.random(x.shape) < 0.4] = -np.inf if largest else np.inf
            cases.append((x, largest))
    jobs, inputs = [], []
    for x, largest in cases:
        fn = pj.kernel(lambda a, largest=largest: O.topk(a, 40, largest=largest))
        (job,) = xc.jobs_of(fn.lower(x).compile().code)
        params = xc.pointer_params(xc.functions(job[0])[job[1]])
        assert params[0][1] == x.dtype and params[0][2] == x.size
        inputs.append([x.reshape(-1)] + [np.zeros(n, dt) for _, dt, n in params[1:]])
        jobs.append(job)
    for (x, largest), res in zip(cases, xc.run(jobs, inputs=inputs)):
        assert res.status == "exact", (x.dtype, largest, res.sim_error or res.engine_error or res.errors())
        want_v, want_i = semantics.topk(x, k=40, axis=1, largest=largest)
        np.testing.assert_array_equal(res.sim[1].reshape(want_v.shape), want_v)
        np.testing.assert_array_equal(res.sim[2].reshape(want_i.shape), want_i)


def test_sorts_order_subnormals_as_the_simulator():
    """Subnormals, their negatives and signed zeros in a top-k and a sort: the engine compares sort keys
    as integers (XLA:CPU took the subnormals for zeros), so it orders them as the simulator's C++ does."""
    r = np.random.default_rng(2)
    tiny = np.float32(1e-40) * r.integers(1, 50, (2, 64)).astype(np.float32)
    x = np.where(r.random((2, 64)) < 0.5, tiny, -tiny).astype(np.float32)
    x[:, :4] = [0.0, -0.0, 1.0, -1.0]
    jobs, inputs = [], []
    for fn in (lambda a: O.topk(a, 16), lambda a: O.sort(a, axis=-1)):
        (job,) = xc.jobs_of(pj.kernel(fn).lower(x).compile().code)
        params = xc.pointer_params(xc.functions(job[0])[job[1]])
        inputs.append([x.reshape(-1)] + [np.zeros(n, dt) for _, dt, n in params[1:]])
        jobs.append(job)
    for res in xc.run(jobs, inputs=inputs):
        assert res.status == "exact", res.sim_error or res.engine_error or res.errors()
    values, _ = pj.kernel(lambda a: O.topk(a, 16))(x)
    np.testing.assert_array_equal(np.asarray(values), -np.sort(-x, axis=-1)[:, :16])


def test_float32_matmuls_keep_subnormals_as_the_simulator():
    """An f32 product or K-chain partial sum below 2^-126: XLA:CPU flushed it to zero (1e-40 * 2 gave 0,
    1e-40 * -inf NaN), the simulator's fmaf keeps it; the engine's exact fma chain takes such operands.
    The check on the operands also lets ordinary f32 matmuls stay on XLA."""
    r = np.random.default_rng(3)
    a = (r.standard_normal((16, 32)) * 1e-20).astype(np.float32)
    b = (r.standard_normal((32, 16)) * 1e-20).astype(np.float32)
    a[0, 0], b[0, :3] = 1e-40, [1e30, -np.inf, 2.0]
    b[1:4, 3] = [3.0, -3.0, 1e-30]                            # cancellation, then a tiny remainder
    (job,) = xc.jobs_of(pj.kernel(lambda x, y: O.matmul(x, y)).lower(a, b).compile().code)
    params = xc.pointer_params(xc.functions(job[0])[job[1]])
    (res,) = xc.run([job], inputs=[[a.reshape(-1), b.reshape(-1)] + [np.zeros(n, dt) for _, dt, n in params[2:]]])
    assert res.status == "exact", res.sim_error or res.engine_error or res.errors()
    assert np.count_nonzero(np.abs(res.sim[2]) < np.finfo(np.float32).tiny) > 100      # subnormals, kept
    assert tile_semantics._subnormal_free(r.standard_normal((8, 8)).astype(np.float32), np.ones((8, 8), np.float32))


# ------------------------------------------------------------------------------ the helper itself
def test_pointer_params_and_inputs():
    text = """module attributes {pto.target_arch = "a3"} {
  func.func @k(%arg0: !pto.ptr<f32>, %arg1: !pto.ptr<i32>, %arg2: !pto.ptr<f16>) attributes {} {
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c16 = arith.constant 16 : index
    %v0 = pto.make_tensor_view %arg0, shape = [%c8, %c16], strides = [%c1, %c8] {layout = #pto.layout<dn>} : !pto.tensor_view<8x16xf32>
    %v1 = pto.make_tensor_view %arg1, shape = [%c8], strides = [%c1] : !pto.tensor_view<8xi32>
    %v2 = pto.make_tensor_view %arg2, shape = [%c8, %c8], strides = [%c16, %c1] : !pto.tensor_view<8x8xf16>
    %t = pto.alloc_tile : !pto.tile_buf<loc=vec, dtype=i32, rows=1, cols=8, v_row=1, v_col=8, blayout=row_major, slayout=none_box, fractal=512, pad=0>
    %p = pto.partition_view %v1, offsets = [%c1], sizes = [%c8] : !pto.tensor_view<8xi32> -> !pto.partition_tensor_view<8xi32>
    pto.tload ins(%p : !pto.partition_tensor_view<8xi32>) outs(%t : !pto.tile_buf<loc=vec, dtype=i32, rows=1, cols=8, v_row=1, v_col=8, blayout=row_major, slayout=none_box, fractal=512, pad=0>)
    %x = pto.tgetval ins(%t, %c1 : !pto.tile_buf<loc=vec, dtype=i32, rows=1, cols=8, v_row=1, v_col=8, blayout=row_major, slayout=none_box, fractal=512, pad=0>, index) outs : i32
    pto.tlog ins(%t : f32) outs(%t : f32)
    return
  }
}
"""
    assert list(xc.functions(text)) == ["k"]
    params = xc.pointer_params(xc.functions(text)["k"])
    assert [(p, dt.name, n) for p, dt, n in params] == [("%arg0", "float32", 128), ("%arg1", "int32", 8),
                                                         ("%arg2", "float16", 120)]
    a, i, h = xc.random_inputs(xc.functions(text)["k"], np.random.default_rng(0), index_high=3)
    assert a.min() >= 0.25 and h.dtype == np.float16 and i.dtype == np.int32 and 0 <= i.min() and i.max() < 3
    assert xc.kinds(xc.functions(text)["k"]) == ("tload", "tgetval", "tlog")


def test_compare():
    s = np.array([1.0, 2.0, np.nan, 0.0], np.float32)
    e = s.copy()
    assert xc.compare(e, s)["exact"]
    e[1] = np.nextafter(e[1], np.float32(3))
    c = xc.compare(e, s)
    assert not c["exact"] and c["ok"] and c["max_ulp"] == 1
    e[3] = 1e-3
    assert not xc.compare(e, s)["ok"]
    assert not xc.compare(np.array([1, 2], np.int8), np.array([1, 3], np.int8))["ok"]
    e = s.copy()
    e[2] = 0.0
    assert not xc.compare(e, s)["ok"]          # NaN against a number


# ---------------------------------------------- the engine and the replay against the vendor, one instruction
def same_instruction_kernels():
    """{name: (kernel, input, the real instruction)}: kernels of one program that runs the instruction
    (no expansion), on inputs where float32 math would be an ulp off."""
    r = np.random.default_rng(7)
    x = (r.standard_normal((32, 64)) * 4).astype(np.float32)
    positive = r.uniform(0.01, 100.0, (32, 64)).astype(np.float32)
    return {"texp f32": (tiled(jnp.exp, vec=(8, 64)), x, "texp"),
            "texp f16": (tiled(jnp.exp, vec=(8, 64)), (x / 2).astype(np.float16), "texp"),
            "tlog": (tiled(jnp.log, vec=(8, 64)), positive, "tlog"),
            "trsqrt": (tiled(O.rsqrt, vec=(8, 64)), positive, "trsqrt"),
            "trowsum": (tiled(lambda v: jnp.sum(v, -1), vec=(8, 64)), x, "trowsum")}


@pytest.mark.parametrize("x64", [False, True])
def test_the_engine_and_the_replay_compute_the_simulators_bits_on_the_same_instruction(x64):
    """``texp`` / ``tlog`` / ``trsqrt`` (in double, rounded once) and a row sum (left to right), run by
    the engine and by the jitted replay, give pto-isa's CPU simulator's bits on the kernel's own
    inputs, element for element (float32 exp / log / 1/sqrt and pairwise sums differ from it in the
    last bit), with ``jax_enable_x64`` off or on."""
    cases = same_instruction_kernels()
    jobs, inputs, replays = [], [], []
    with jax.enable_x64(x64):
        for name, (fn, x, op) in cases.items():
            compiled = pj.kernel(fn).lower(x).compile()
            (text, func, blocks), = xc.jobs_of(compiled._code())
            assert op in xc.kinds(xc.functions(text)[func]), name
            out = np.asarray(compiled.run(x)[0])
            replays.append((out, np.asarray(jax.jit(compiled)(x))))
            jobs.append((text, func, blocks))
            inputs.append([x.ravel(), np.zeros(out.size, out.dtype)])
    for name, r, (out, replayed) in zip(cases, xc.run(jobs, inputs=inputs), replays):
        assert r.sim is not None, f"{name}: {r.sim_error}"
        assert r.status == "exact", (name, r.worst())
        sim = r.sim[1].reshape(out.shape)
        np.testing.assert_array_equal(out.view(np.uint8), sim.view(np.uint8), err_msg=name)
        np.testing.assert_array_equal(replayed.view(np.uint8), sim.view(np.uint8), err_msg=name)


# ------------------------------------ whole kernels: every call of the real text also in the simulator
def _text_and_simulator(fn, args, monkeypatch, functions=None):
    """Run ``fn``'s kernel from its real text twice — the second run replays
    the first's tapes — recording every function call with its arrays before and after; run every call
    in pto-isa's CPU simulator on the same arrays (one g++ compile). Asserts ptoas takes the module
    at level2 and level3 (A3 and A5), that the calls name ``functions`` (when given) and that every
    array after every call is the simulator's, bit for bit, in both runs. Returns the outputs of the
    first run."""
    compiled = pj.kernel(fn).lower(*args).compile()
    for arch in ("a3", "a5"):
        for level in ("level2", "level3"):
            compiled.ptoas(arch, level)             # a PtoasError names the program, line and message
    calls, interpret = [], textbatch.run

    def recorded(module, name, arrays, blocks):
        before = [np.array(a) for a in arrays]
        interpret(module, name, arrays, blocks)
        calls.append((name, list(blocks), before, [np.array(a) for a in arrays]))

    monkeypatch.setattr(textbatch, "run", recorded)
    outs = [compiled.run(*args)[0] for _ in range(2)]
    first = calls[:len(calls) // 2]
    assert len(calls) == 2 * len(first) and [c[0] for c in first] == [c[0] for c in calls[len(first):]]
    if functions is not None:
        assert {c[0] for c in first} >= set(functions), [c[0] for c in first]
    assert all(blocks == list(range(len(blocks))) for _, blocks, _, _ in first)
    text = compiled.code.pto("a3")
    jobs = [(text, name, len(blocks)) for name, blocks, _, _ in calls]
    results = xc.run(jobs, inputs=[before for _, _, before, _ in calls])
    bits = lambda a: np.ascontiguousarray(a).reshape(-1).view(np.uint8)    # noqa: E731
    for i, (r, (name, _, _, after)) in enumerate(zip(results, calls)):
        assert r.sim is not None, f"{name}: {r.sim_error}"
        for j, (a, s) in enumerate(zip(after, r.sim)):
            np.testing.assert_array_equal(bits(a), bits(s), err_msg=f"call {i} @{name} argument {j}")
    for g, w in zip(jax.tree.leaves(outs[0]), jax.tree.leaves(outs[1])):
        np.testing.assert_array_equal(bits(np.asarray(g)), bits(np.asarray(w)))
    return outs[0]


def _left_to_right(x):
    """Row sums as pto-isa's TRowSum adds them: left to right, from 0."""
    return np.cumsum(x, axis=-1, dtype=x.dtype)[..., -1]


def test_row_sum_of_a_tail_tile(monkeypatch):
    """13 rows in 8-row tiles: the tail program's source tile has 5 static rows, the ``R×1`` column
    8 (its bytes padded to 32); TRowSum.hpp:57 ``static_assert(TileSrc::Rows == TileDst::Rows)``. The
    sum goes into a 5-row ND tile and ``ttrans`` into the column's row. Also the normalisations'
    row sums (softmax) on the tail."""
    x = np.random.default_rng(3).standard_normal((13, 32)).astype(np.float32)
    fn = tiled(lambda x: (jnp.sum(x, -1), jax.nn.softmax(x)), vec=(8, 32))
    s, y = _text_and_simulator(fn, (x,), monkeypatch, functions=("sum_2", "amax_maximum_sub_exp_sum_div_2"))
    np.testing.assert_array_equal(np.asarray(s), _left_to_right(x))
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    np.testing.assert_allclose(np.asarray(y), e / e.sum(-1, keepdims=True), rtol=1e-6, atol=1e-7)


def test_a_nan_fill_is_the_positive_nan_in_the_simulator_too(monkeypatch):
    """An out-of-range gather with mode="fill" fills NaN: made as ``inf * 0`` (ptoas writes no NaN
    constant), which x86 makes the negative default NaN, then ``tneg``: jnp.nan's bits, as XLA and the
    jitted replay give (the eager engine gave 0xffc00000), and the simulator's."""
    kc = np.arange(160, dtype=np.float32).reshape(10, 16)
    b = np.array([1, 12, -20, 3, 0, 9, 10, 2], np.int32)
    fn = lambda kc, b: kc.at[b].get(mode="fill")                      # noqa: E731
    out = _text_and_simulator(fn, (kc, b), monkeypatch)
    want = np.asarray(jax.jit(fn)(kc, b))
    np.testing.assert_array_equal(np.asarray(out).view(np.uint32), want.view(np.uint32))
    np.testing.assert_array_equal(np.asarray(jax.jit(pj.kernel(fn))(kc, b)).view(np.uint32), want.view(np.uint32))


def test_matmul_bias_with_an_n_tail(monkeypatch):
    """N = 40 in 32-column cube tiles: the tail's bias row is 8 of a 16-column tile. ptoas prints a
    partly valid Bias tile as an alias ``uint64_t v = t.data()`` that does not compile, so the whole
    row moves to the bias table; tmatmul.bias reads its first N. Small integers: exact sums."""
    r = np.random.default_rng(4)
    a = r.integers(-4, 5, (32, 64)).astype(np.float16)
    b = r.integers(-4, 5, (64, 40)).astype(np.float16)
    c = r.integers(-50, 50, 40).astype(np.float32)
    for fn, bb in [(lambda a, b, c: O.matmul(a, b, bias=c), b),
                   (lambda a, b, c: O.matmul(a, b, transpose_b=True, bias=c), np.ascontiguousarray(b.T))]:
        out = _text_and_simulator(tiled(fn, cube=(32, 32, 32)), (a, bb, c), monkeypatch,
                                  functions=("matmul", "matmul_2"))        # the full tile and the tail
        np.testing.assert_array_equal(np.asarray(out), (a.astype(np.float64) @ b + c).astype(np.float32))
        monkeypatch.undo()


def test_softmax_cross_entropy_and_a_sum_to_a_scalar(monkeypatch):
    """pj.nn's cross entropy (log-softmax, then the mean of a 13-vector): the mean's sum of one row
    into a 0-d tensor. Its 1-row source against the 8-row column (TRowSum.hpp:57), and the 0-d GM
    view: ptoas prints it as a bare pointer, which TSTORE takes for no GlobalTensor (``'layout' is
    not a member of 'float*'``); it is a 1-element view."""
    from ptojax.nn._softmax import _xent_fwd_kernel

    r = np.random.default_rng(5)
    logits = r.standard_normal((13, 40)).astype(np.float32)
    labels = r.integers(0, 40, 13).astype(np.int32)
    loss, lse = _text_and_simulator(_xent_fwd_kernel, (logits, labels), monkeypatch,
                                    functions=("sum", "mul"))
    x = logits.astype(np.float64)
    want_lse = np.log(np.exp(x - x.max(-1, keepdims=True)).sum(-1)) + x.max(-1)
    np.testing.assert_allclose(np.asarray(lse), want_lse, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(loss), [np.mean(want_lse - x[np.arange(13), labels])], rtol=1e-6)
    monkeypatch.undo()
    v = r.standard_normal(24).astype(np.float32)
    total = _text_and_simulator(lambda v: jnp.sum(v), (v,), monkeypatch)
    assert np.asarray(total).shape == ()
    np.testing.assert_array_equal(np.asarray(total), _left_to_right(v))


def _half_row_sums(h, divisor=None):
    """An f16/bf16 row sum (``divisor``: a mean) as the kernel computes it: each value to f32, added left
    to right from 0 (TRowSum), divided in f32, rounded once to nearest even in ``h``'s dtype."""
    s = _left_to_right(h.astype(np.float32))
    return (s if divisor is None else s / np.float32(divisor)).astype(h.dtype)


def _float_int_views(text):
    """The ``treshape`` lines of ``text`` that view float bits as integers or back (pto-isa's CPU
    TReshape.hpp:43 static_asserts both element types float or both integer)."""
    kinds = [[d.startswith(("f", "bf")) for d in re.findall(r"dtype=(\w+)", line)]
             for line in text.splitlines() if "pto.treshape" in line]
    return [k for k in kinds if len(set(k)) > 1]


@pytest.mark.parametrize("rows", [16, 13], ids=["whole tiles", "a tail"])
def test_f16_row_sum_and_mean_into_an_f16_column(monkeypatch, rows):
    """An f16 row sum and mean in 8-row tiles, with and without a tail: summed in f32 into an 8-row
    column whose row (8 f32, 32 B) is copied into the f16 column's 16-element pitch for ``tcvt`` (equal
    physical shapes). That copy was ``tmuls`` on ``i32`` views of the f32 bits, which pto-isa's CPU
    ``treshape`` refuses (TReshape.hpp:43); it is a float ``tmuls`` by 1 now. Values over 2^-8..2^8, so
    that f32 sums round and their order shows."""
    r = np.random.default_rng(6)
    h = (r.standard_normal((rows, 64)) * 2.0 ** r.integers(-8, 9, (rows, 64))).astype(np.float16)
    fn = tiled(lambda h: (jnp.sum(h, axis=-1), jnp.mean(h, axis=-1)), vec=(8, 64))
    s, m = _text_and_simulator(fn, (h,), monkeypatch)
    assert not _float_int_views(pj.kernel(fn).lower(h).compile().code.pto("a3"))
    for got, want in ((s, _half_row_sums(h)), (m, _half_row_sums(h, 64))):
        assert np.asarray(got).dtype == np.float16
        np.testing.assert_array_equal(np.asarray(got).view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("rows", [16, 13], ids=["whole tiles", "a tail"])
def test_bf16_row_sum_and_mean_into_a_bf16_column(rows):
    """The bf16 twin of :func:`test_f16_row_sum_and_mean_into_an_f16_column`. The simulator computes
    bf16 as _Float16 (``crosscheck`` skips it), so: ptoas takes the text at level2 and level3, no
    ``treshape`` views float bits as integers, and the engine's bits are the NumPy reference's."""
    r = np.random.default_rng(7)
    h = (r.standard_normal((rows, 64)) * 2.0 ** r.integers(-8, 9, (rows, 64))).astype(jnp.bfloat16)
    fn = tiled(lambda h: (jnp.sum(h, axis=-1), jnp.mean(h, axis=-1)), vec=(8, 64))
    compiled = pj.kernel(fn).lower(h).compile()
    for arch in ("a3", "a5"):
        for level in ("level2", "level3"):
            compiled.ptoas(arch, level)
        assert not _float_int_views(compiled.code.pto(arch))
    s, m = compiled.run(h)[0]
    for got, want in ((s, _half_row_sums(h)), (m, _half_row_sums(h, 64))):
        assert np.asarray(got).dtype == jnp.bfloat16
        np.testing.assert_array_equal(np.asarray(got).view(np.uint16), want.view(np.uint16))


def test_logical_not_of_a_tail_tile_compiles_in_the_simulator():
    """``txors``'s tmp tile had the source mask's (a 1 x 32 alias) type, not the destination's, which
    pto-isa's TXORS_IMPL takes: g++ found no overload for the (8, 40) tail program under vec=(8, 32)."""
    x = np.random.default_rng(0).standard_normal((8, 40)).astype(np.float32)
    code = pj.kernel(tiled(lambda a: O.logical_not(a > 0.0), vec=(8, 32))).lower(x).compile().code
    results = xc.crosscheck(code)
    assert len(results) == 2 and all(r.status == "exact" for r in results), [r.sim_error for r in results]
