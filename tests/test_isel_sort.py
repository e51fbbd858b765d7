"""Selection of ``ttopk`` / ``tsort`` / ``tmrgsort`` (``ptojax/ascend/isel/sort.py``): the real
``tci`` / ``tsort32`` / ``tmrgsort`` / ``tgather`` text is run by the real-text engine
(``ptojax/ascend/engine.py``, each instruction = ``tile_semantics.SEMANTICS``; ``pto.subset`` row
views with ``?`` valid rows, ``ui32`` tiles and ``tmrgsort``'s list form with its ``vector<4xi16>``
output included) and compared with ``np.sort`` / ``jax.lax.top_k`` / ptojax's own semantics: values
exactly, indices exactly where the values are distinct (ties: the lower index first, which is the
rule tsort32 / tmrgsort keep). ``ptoas`` itself (when present) checks the text."""
import contextlib
import math
import os
import re
import shutil
import subprocess
import tempfile

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import ptojax as pj
from ptojax.ascend import compile_kernel, engine, isel
import plan_semantics as ptojax_semantics
from ptojax.ascend.isel import sort as sort_rules
from vendor_tools import assert_no_float_int_views

RNG = np.random.default_rng(7)
PTOAS = os.environ.get("PTOAS", "/work/shared/tools/ptoas/bin/ptoas")


def run_program(fn, *args):
    """Select ``fn``'s one program, check the text with ptoas when there is one, run it on the
    engine; returns (GM outputs, the text)."""
    low = pj.lower(fn, *args)
    ak = compile_kernel(low)
    assert len(ak.kernels) == 1, [k for k in ak.kernels]
    ((program, _), kernel), = ak.kernels.items()
    text = isel.module([kernel])
    if shutil.which(PTOAS) or os.path.exists(PTOAS):
        with tempfile.TemporaryDirectory() as d:      # one per call: pytest-xdist workers run at once
            with open(os.path.join(d, "k.pto"), "w") as f:
                f.write(text)
            r = subprocess.run([PTOAS, "--pto-arch=a3", "--enable-insert-sync", os.path.join(d, "k.pto"), "-o",
                                os.path.join(d, "k.cpp")], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]
    expected = jax.tree_util.tree_leaves(jax.eval_shape(fn, *args))
    outs = [np.zeros(e.shape, e.dtype) for e in expected]
    gm = [np.ascontiguousarray(a) for a in args] + outs
    engine.run_grid(text, re.sub(r"[^A-Za-z0-9_]", "_", program), gm, math.prod(kernel.grid))
    return outs, text


def check_topk(x, k, largest, values, indices):
    """Values exactly; each index points at its value; indices unique and, where the values are
    distinct, equal to the reference (a stable sort: the lower index first on ties)."""
    want_v, want_i = ptojax_semantics.topk(x, k=k, axis=x.ndim - 1, largest=largest)
    np.testing.assert_array_equal(values, want_v)
    n = x.shape[-1]
    real = indices < n
    assert np.all(real | (indices == -1)) and np.all(indices >= -1)
    np.testing.assert_array_equal(np.take_along_axis(x, np.where(real, indices, 0), -1)[real], values[real])
    np.testing.assert_array_equal(indices, want_i)


# ------------------------------------------------------------------------------------------ top-k
TOPK_CASES = {
    "f32 3x40 k5": (RNG.standard_normal((3, 40)).astype(np.float32), 5, True),
    "f32 1x100 k7 smallest": (RNG.standard_normal((1, 100)).astype(np.float32), 7, False),
    "f32 4x256 k20 (one merge round)": (RNG.standard_normal((4, 256)).astype(np.float32), 20, True),
    "f32 2x300 k33 (round + 3 lists)": (RNG.standard_normal((2, 300)).astype(np.float32), 33, True),
    "f16 16x256 k8": (RNG.standard_normal((16, 256)).astype(np.float16), 8, True),
    "f16 5x90 k9 smallest": (RNG.standard_normal((5, 90)).astype(np.float16), 9, False),
    "bf16 6x64 k16": (RNG.standard_normal((6, 64)).astype(ml_dtypes.bfloat16), 16, True),
    "bf16 5x40 k1 (a column, sorted in f32)": (RNG.standard_normal((5, 40)).astype(ml_dtypes.bfloat16), 1, False),
    "f32 ties": (RNG.integers(0, 4, (3, 70)).astype(np.float32), 12, True),
    "f32 ties smallest, -inf": (np.where(RNG.random((2, 50)) < 0.3, -np.inf,
                                         RNG.integers(-3, 3, (2, 50))).astype(np.float32), 40, False),
    "f32 -inf rows": (np.full((2, 40), -np.inf, np.float32), 6, True),
}


@pytest.mark.parametrize("name", list(TOPK_CASES))
def test_topk_matches_reference(name):
    x, k, largest = TOPK_CASES[name]
    (values, indices), text = run_program(lambda a: pj.ops.topk(a, k, largest=largest), x)
    assert "pto.tsort32" in text and "pto.tgather" in text
    assert_no_float_int_views(text)
    check_topk(x, k, largest, values, indices)
    if largest and x.dtype == np.float32:
        ref_v, _ = jax.lax.top_k(x, k)
        np.testing.assert_array_equal(values, np.asarray(ref_v))


def test_sort_along_rows():
    x = RNG.standard_normal((7, 48)).astype(np.float32)
    (values, indices), _ = run_program(lambda a: pj.ops.sort(a, 1), x)
    np.testing.assert_array_equal(values, np.sort(x, axis=1))
    np.testing.assert_array_equal(indices, np.argsort(x, axis=1, kind="stable"))


def test_sort_along_axis0_transposes():
    x = RNG.standard_normal((21, 16)).astype(np.float32)
    (values, indices), text = run_program(lambda a: pj.ops.sort(a, 0), x)
    assert "pto.ttrans" in text
    assert_no_float_int_views(text)
    np.testing.assert_array_equal(values, np.sort(x, axis=0))
    np.testing.assert_array_equal(indices, np.argsort(x, axis=0, kind="stable"))


# ------------------------------------------------------------------------------------- merge_topk
def _lists(shape, k, largest, dtype=np.float32):
    """Sorted candidate lists with distinct indices (as a staged top-k leaves them), some padded."""
    *lead, lists, n = shape
    v = (RNG.integers(-3, 3, shape) * 65536 + RNG.integers(0, 3, shape) if dtype == np.int32    # ties
         else RNG.standard_normal(shape)).astype(dtype)
    v = -np.sort(-v, axis=-1) if largest else np.sort(v, axis=-1)
    i = RNG.permutation(int(np.prod(shape))).reshape(shape).astype(np.int32)
    pad = ptojax_semantics._pad_value(np.dtype(dtype), largest)
    v[..., -1, n // 2:] = pad                          # the last list partly padding: (-inf | +inf, -1)
    i[..., -1, n // 2:] = -1
    return v, i


@pytest.mark.parametrize("shape,k,largest,dtype", [
    ((8, 4, 5), 5, True, np.float32), ((3, 2, 4, 16), 16, False, np.float32), ((2, 3, 40), 24, True, np.float32),
    ((4, 4, 64), 64, True, np.float32), ((1, 4, 1), 1, True, np.float32),
    ((3, 5, 1), 3, False, np.float32),                                                      # one-value lists
    ((8, 4, 5), 5, True, np.int32), ((2, 3, 40), 24, False, np.int32), ((3, 5, 1), 3, True, np.int32),
    ((2, 2, 8), 20, True, np.int32)])                                                       # k past the lists
def test_merge_topk_matches_reference(shape, k, largest, dtype):
    """int32 lists merge by 16-bit halves after a pass that orders the candidates by index (ties:
    the lower index first whatever list it is in)."""
    v, i = _lists(shape, k, largest, dtype)
    (values, indices), text = run_program(lambda a, b: pj.ops.merge_topk(a, b, k, largest=largest), v, i)
    assert "pto.tsort32" in text
    assert_no_float_int_views(text)
    want_v, want_i = ptojax_semantics.merge_topk(v, i, k=k, largest=largest)
    np.testing.assert_array_equal(values, want_v)
    np.testing.assert_array_equal(indices, want_i)


# -------------------------------------------------------------------------------------- the plan
def test_padded_lengths_and_rounds():
    assert sort_rules.padded_length(30) == (32, 1, 0)
    assert sort_rules.padded_length(40) == (64, 2, 0)
    assert sort_rules.padded_length(100) == (128, 1, 1)
    assert sort_rules.padded_length(300) == (384, 3, 1)
    assert sort_rules.padded_length(2048) == (2048, 1, 3)
    assert sort_rules.padded_length(8192) == (8192, 1, 4)
    assert sort_rules.padded_length(80, 64) == (128, 1, 1)
    assert sort_rules.rounds(384, 3, 1, "f32") == [("single", 64), ("lists", 3, 256)]
    assert sort_rules.rounds(1024, 2, 2, "f16") == [("single", 128), ("single", 512), ("lists", 2, 2048)]


def test_bf16_sort_and_top_k_keep_infinities():
    """bf16 sorts in f32 and converts back exactly: ±inf stay ±inf (a saturating conversion back made
    them ±3.39e38), along either axis, largest and smallest, eagerly and under jax.jit."""
    x = np.tile(np.array([1.0, np.inf, -np.inf, 3e38, -2.5, 0.0, 7.0, -1e30], np.float32), (8, 8))
    x[:, 3] = np.arange(8)
    x = x.astype(ml_dtypes.bfloat16)
    for fn in (lambda v: jnp.sort(v, -1), lambda v: jax.lax.top_k(v, 4), lambda v: jax.lax.top_k(-v, 3),
               lambda v: jnp.sort(v, 0)):
        want = [np.asarray(w).astype(np.float32) for w in jax.tree.leaves(fn(jnp.asarray(x)))]
        for run in (pj.kernel(fn), jax.jit(pj.kernel(fn))):
            for got, w in zip(jax.tree.leaves(run(x)), want):
                np.testing.assert_array_equal(np.asarray(got).astype(np.float32), w)


# ------------------------------------------------------------------------------------ int32 values
def _int32_rows(rows, n, seed):
    """int32 rows with the extremes, values equal in one 16-bit half only, and repeated values."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-2 ** 31, 2 ** 31, (rows, n), dtype=np.int64).astype(np.int32)
    edges = np.array([2 ** 31 - 1, -2 ** 31, 0, -1, 65535, 65536, -65536, -65537, 1 << 16 | 7, 3 << 16 | 7],
                     np.int32)
    x[0, :min(n, edges.size)] = edges[:n]
    if rows > 1:
        x[1] = rng.integers(-3, 3, n) * 65536 + rng.integers(0, 3, n)       # ties in each half and whole
    return x


@pytest.mark.parametrize("rows,n,k", [(3, 37, 5), (1, 7, 7), (4, 100, 100), (2, 300, 33), (1, 1000, 64)])
def test_int32_top_k_and_sort_equal_xla(rows, n, k):
    """int32 values sort by their 16-bit halves in two stable tsort32 passes (f32 holds 24 bits):
    sort, argsort and top_k (largest and smallest) equal XLA's, indices included (ties: the lower index
    first), eagerly and under jax.jit; ptoas accepts the text."""
    x = _int32_rows(rows, n, seed=n)
    fns = (lambda v: jax.lax.top_k(v, k), lambda v: jax.lax.top_k(-v, k),
           lambda v: jnp.sort(v, axis=-1), lambda v: jnp.argsort(v, axis=-1))
    for fn in fns:
        kernel = pj.kernel(fn)
        want = jax.tree.leaves(jax.jit(fn)(x))
        for run in (kernel, jax.jit(kernel)):
            for got, w in zip(jax.tree.leaves(run(x)), want):
                np.testing.assert_array_equal(np.asarray(got), np.asarray(w))
    compiled = pj.kernel(fns[0]).lower(x).compile()
    text = compiled.as_text("pto")
    assert text.count("pto.tsort32") >= 2 and "pto.tshrs" in text
    assert_no_float_int_views(text)
    if os.path.exists(PTOAS):
        compiled.ptoas()


@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.float16])
@pytest.mark.parametrize("shape,axis,tile", [((40, 16), 0, None), ((3, 24, 8), 1, None), ((12, 3, 16), 0, (4, 3, 16)),
                                             ((2, 3, 24), 1, (4, 1, 64))])
def test_top_k_and_sort_along_an_axis_before_the_last(shape, axis, tile, dtype):
    """Along the first or a middle axis: int32 (which sorts a tile's rows only) is sorted with the axis
    moved last; float tiles take 1 on the axes but the sorted one and the last (a [2, 3, 24] tile along
    axis 1 and i32 along axis 0 had no real PTO form). Equal to XLA, indices included; ptoas accepts."""
    x = (np.random.default_rng(len(shape) + axis).standard_normal(shape) * 50).astype(dtype)

    def fn(v):
        with pj.tile(vec=tile) if tile else contextlib.nullcontext():
            return pj.ops.topk(v, 3, axis=axis), jnp.sort(v, axis=axis)

    (values, indices), ordered = pj.kernel(fn)(x)
    rv, ri = jax.lax.top_k(jnp.moveaxis(x, axis, -1), 3)
    np.testing.assert_array_equal(np.asarray(values), np.moveaxis(np.asarray(rv), -1, axis))
    np.testing.assert_array_equal(np.asarray(indices), np.moveaxis(np.asarray(ri), -1, axis))
    np.testing.assert_array_equal(np.asarray(ordered), np.sort(x, axis=axis))
    if os.path.exists(PTOAS):
        pj.kernel(fn).lower(x).compile().ptoas()


@pytest.mark.parametrize("largest", [True, False])
def test_int32_top_k_past_the_row_pads(largest):
    """``k > n``: the tail is index -1 and the lowest (largest-k) or highest i32, as ptojax's top-k
    pads (the gathers of the two passes read -1 as 0: they took x[0] and index 0)."""
    x = _int32_rows(2, 5, seed=2)
    fn = lambda v: pj.ops.topk(v, 11, largest=largest)
    want = pj.kernel(fn, backend="xla")(x)
    for run in (pj.kernel(fn), jax.jit(pj.kernel(fn))):
        for got, w in zip(run(x), want):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(w))
    assert np.all(np.asarray(want[1])[:, 5:] == -1)


def test_int32_top_k_and_merge_equal_the_vendor_simulator():
    """pto-isa's CPU simulator runs the same text (ptoas's C++) to the same values and indices: a
    top-k, and a merge of lists with padding whose k goes past the candidates."""
    from ptojax.ascend import crosscheck as xc
    from vendor_tools import MISSING, IN_CI
    if MISSING and not IN_CI:
        pytest.skip("vendor tools not found: " + ", ".join(MISSING))
    x = _int32_rows(3, 70, seed=1)
    v, i = _lists((3, 3, 5), 20, True, np.int32)
    kernels = [(lambda a: jax.lax.top_k(a, 9), (x,)), (lambda a, b: pj.ops.merge_topk(a, b, 20), (v, i))]
    jobs, inputs = [], []
    for fn, args in kernels:
        (job,) = xc.jobs_of(pj.kernel(fn).lower(*args).compile().code)
        params = xc.pointer_params(xc.functions(job[0])[job[1]])
        jobs.append(job)
        inputs.append([a.reshape(-1) for a in args] + [np.zeros(n, dt) for _, dt, n in params[len(args):]])
    wants = [jax.lax.top_k(x, 9), ptojax_semantics.merge_topk(v, i, k=20, largest=True)]
    for result, (_, args), want in zip(xc.run(jobs, inputs=inputs), kernels, wants):
        assert result.status == "exact", result.sim_error or result.engine_error or result.errors()
        for got, w in zip(result.sim[len(args):], want):
            np.testing.assert_array_equal(got.reshape(np.shape(w)), np.asarray(w))
