"""Matmul forms a user writes with ``jnp`` / ``lax`` / ``pj.ops``, checked for what they cost as much as
for their numbers:

* an fp16 / bf16 result converts on its way out of L0C (FIXPIPE): codegen gives the converted value
  no L0C tile of its own, so the calibration's cube tile (128, 64, 256), whose f32 accumulator fills
  L0C's 128 KiB alone, compiles for an fp16 ``a @ b`` too;
* a permutation that moves only dims of size 1 is a reshape (no transpose grid);
* ``pj.ops.matmul``'s transposed operands (both ``transpose_a`` and ``transpose_b``) cost what the plain
  form costs (the cube's ``dn``-view load);
* a product of two dtypes the cube does not multiply is refused with the cast that fixes it.

Numbers against ``jax.jit(fn)`` (``pj.tile`` is metadata outside ``pj.kernel``): exact for integers and
layout ops, close for floats; the real text is assembled by ``ptoas`` (level2 and level3) where it is
found."""
from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import ptojax as pj
from helpers import BF16, F16, F32, I8, rand
from ptojax.ascend.ptoas import assemble, find_ptoas
from ptojax.primitives.layout import moves_data
from ptojax.primitives.matmul import mixed_dtype_remedy

HAVE_PTOAS = bool(find_ptoas()) or os.environ.get("CI") == "true"
S = jax.ShapeDtypeStruct


def tiled(cube, fn):
    def kernel(a, b):
        with pj.tile(cube=cube):
            return fn(a, b)
    return kernel


def assemble_both(compiled):
    """ptoas accepts the real text with PTOAS's memory plan (level2) and with ptojax's own (level3)."""
    if HAVE_PTOAS:
        compiled.ptoas()
        assemble(compiled.code.pto(level="level3"), level="level3")


def close(got, want, dtype):
    """Within one ulp of the output dtype at the result's magnitude (a K chain's order of f32 sums may
    round an fp16 / bf16 result the other way from XLA's)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    ulp = float(jnp.finfo(dtype).eps) * max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=0, atol=ulp)


# ------------------------------------------------------------------ fp16 / bf16 results and L0C
FORMS = {
    "a @ b": lambda a, b: a @ b,
    "pj.ops.matmul out_dtype": lambda a, b: pj.ops.matmul(a, b, out_dtype=a.dtype),
    "einsum ij,jk->ik": lambda a, b: jnp.einsum("ij,jk->ik", a, b),
}


@pytest.mark.parametrize("dtype", [F16, BF16], ids=["f16", "bf16"])
@pytest.mark.parametrize("form", list(FORMS))
def test_half_result_under_the_calibration_tile_compiles(form, dtype):
    """(128, 64, 256): left 16 KiB, right 32 KiB, the f32 accumulator 128 KiB, all of L0C. The fp16 /
    bf16 result is the accumulator converted by the store, not a second L0C tile (it was a dead
    ``alloc_tile <loc=acc, dtype=f16>`` that codegen counted: a PtoCapacityError)."""
    fn = tiled((128, 64, 256), FORMS[form])
    a, b = rand((256, 320), dtype, seed=1, low=-1, high=1), rand((320, 512), dtype, seed=2, low=-1, high=1)
    compiled = pj.kernel(fn).lower(a, b).compile()
    text = compiled.as_text("pto")
    assert "loc=acc, dtype=f32, rows=128, cols=256" in text
    assert "loc=acc, dtype=" + ("f16" if dtype == F16 else "bf16") not in text      # no tile for the result
    got = compiled(a, b)
    assert got.dtype == dtype
    close(got, jax.jit(fn)(a, b), dtype)
    assemble_both(compiled)


@pytest.mark.parametrize("cube", [(256, 64, 128), (128, 64, 256), (128, 128, 128)])
def test_half_result_k_chain_and_tasks(cube):
    """A K chain (tmatmul, tmatmul.acc …) into an fp16 result under tiles that fill L0C, batched, with
    a bias; the task functions (several grid points per task) assemble too."""
    fn = tiled(cube, lambda a, b: pj.ops.matmul(a, b, out_dtype=jnp.float16, bias=jnp.ones((256,), jnp.float32)))
    a, b = rand((2, 256, 512), F16, seed=3, low=-1, high=1), rand((2, 512, 256), F16, seed=4, low=-1, high=1)
    compiled = pj.kernel(fn).lower(a, b).compile()
    close(compiled(a, b), jax.jit(lambda a, b: (jnp.matmul(a, b, preferred_element_type=jnp.float32) + 1)
                                  .astype(jnp.float16))(a, b), F16)
    assemble_both(compiled)


def test_f32_result_fills_l0c_and_half_result_profiles_alike():
    """The fp16 result's program costs what the f32 one does at the calibration's tile: the store
    converts; nothing else changes (structural: same tasks, same makespan)."""
    specs = (S((512, 512), jnp.float16), S((512, 512), jnp.float16))
    half = pj.kernel(tiled((128, 64, 256), lambda a, b: a @ b)).lower(*specs).compile().profile()
    full = pj.kernel(tiled((128, 64, 256), lambda a, b: jnp.matmul(a, b, preferred_element_type=jnp.float32))
                     ).lower(*specs).compile().profile()
    assert half.tasks == full.tasks
    assert half.makespan_us <= full.makespan_us * 1.01


def test_an_accumulator_that_does_not_fit_is_still_refused():
    """The alias frees no space the accumulator needs: (256, 64, 256) wants 256 KiB of f32 in L0C."""
    fn = tiled((256, 64, 256), lambda a, b: a @ b)
    with pytest.raises(pj.PtoError, match="L0C"):
        pj.kernel(fn).lower(S((256, 256), jnp.float16), S((256, 256), jnp.float16)).compile()


# ------------------------------------------------------------------ permutations of size-1 dims
@pytest.mark.parametrize("shape, perm, moves", [
    ((1, 4096, 256), (1, 0, 2), False),
    ((4096, 1, 256), (0, 2, 1), False),
    ((256, 1, 256), (1, 0, 2), False),
    ((3, 1, 1, 5), (0, 2, 3, 1), False),
    ((3, 1, 5), (2, 1, 0), True),
    ((1, 1), (1, 0), False),
    ((2, 3), (1, 0), True),
])
def test_moves_data(shape, perm, moves):
    assert moves_data(shape, perm) is moves


@pytest.mark.parametrize("dtype", [F32, F16, I8], ids=["f32", "f16", "i8"])
@pytest.mark.parametrize("name, fn, shape", [
    ("jnp.transpose", lambda x: jnp.transpose(x, (1, 0, 2)), (1, 40, 24)),
    ("moveaxis", lambda x: jnp.moveaxis(x, 2, 0), (7, 24, 1)),
    ("pj.ops.permute", lambda x: pj.ops.permute(x, (0, 3, 1, 2)), (3, 1, 1, 24)),
    ("x.T of a row", lambda x: x.T, (1, 24)),
    ("swapaxes", lambda x: jnp.swapaxes(x, 0, 1), (5, 1, 24)),
])
def test_unit_dim_permutation_is_a_reshape(name, fn, shape, dtype):
    x = rand(shape, dtype, seed=5)
    low = pj.lower(fn, x)
    assert "pto.transpose" not in low.as_text("tensor")
    assert "transpose" not in low.as_text("block")
    got = pj.kernel(fn)(x)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(jax.jit(fn)(x)))


def test_a_permutation_that_moves_data_still_transposes():
    fn = lambda x: jnp.transpose(x, (2, 1, 0))              # noqa: E731
    x = rand((3, 1, 24), F32, seed=6)
    assert "pto.transpose" in pj.lower(fn, x).as_text("tensor")
    np.testing.assert_array_equal(np.asarray(pj.kernel(fn)(x)), np.asarray(jax.jit(fn)(x)))


def _profile(fn, *specs):
    return pj.kernel(fn).lower(*specs).compile().profile()


def test_dot_general_contracting_a_unit_dim_after_the_real_one_is_the_plain_matmul():
    """find_3: f16[1, M, K] x f16[K, 1, N] contracting (2, 0) with (0, 1) is [M, K] @ [K, N]; its
    operand permutations move only unit dims. It was a transpose grid of one task per row (M tasks,
    54x the plain makespan at M = 4096)."""
    m, k, n = 1024, 256, 256
    dn = (((2, 0), (0, 1)), ((), ()))
    fn = lambda a, b: lax.dot_general(a, b, dn)             # noqa: E731
    unit = _profile(fn, S((1, m, k), jnp.float16), S((k, 1, n), jnp.float16))
    plain = _profile(lambda a, b: a @ b, S((m, k), jnp.float16), S((k, n), jnp.float16))
    assert unit.tasks == plain.tasks
    assert unit.makespan_us == pytest.approx(plain.makespan_us, rel=1e-6)
    a, b = rand((1, 64, 48), F16, seed=7, low=-1, high=1), rand((48, 1, 32), F16, seed=8, low=-1, high=1)
    compiled = pj.kernel(fn).lower(a, b).compile()
    close(compiled(a, b), jax.jit(fn)(a, b), F16)
    assemble_both(compiled)


def test_unit_batch_dim_in_the_middle_costs_nothing():
    """b (K, 1, N) with its unit dim 1 a batch dim: the batch moves to the front as a reshape."""
    dn = (((2,), (0,)), ((0,), (1,)))
    fn = lambda a, b: lax.dot_general(a, b, dn)             # noqa: E731
    unit = _profile(fn, S((1, 1024, 256), jnp.float16), S((256, 1, 256), jnp.float16))
    plain = _profile(lambda a, b: a @ b, S((1024, 256), jnp.float16), S((256, 256), jnp.float16))
    assert unit.tasks == plain.tasks and unit.makespan_us == pytest.approx(plain.makespan_us, rel=1e-6)
    a, b = rand((1, 40, 24), I8, seed=9), rand((24, 1, 16), I8, seed=10)
    g = lambda a, b: lax.dot_general(a, b, dn, preferred_element_type=jnp.int32)   # noqa: E731
    np.testing.assert_array_equal(np.asarray(pj.kernel(g)(a, b)), np.asarray(jax.jit(g)(a, b)))


def test_int8_dot_general_with_unit_dims_everywhere_is_quick_and_exact():
    """Like the probe's seed-13 case (139 808 transpose tasks, 138 s): unit dims contracted after the
    real one on both operands, in another order on each: reshapes around one matmul."""
    dn = (((5, 2, 4), (2, 1, 3)), ((0,), (0,)))
    a = rand((2, 17, 1, 9, 1, 33), I8, seed=11)
    b = rand((2, 1, 33, 1, 8), I8, seed=12)
    fn = lambda a, b: lax.dot_general(a, b, dn, preferred_element_type=jnp.int32)   # noqa: E731
    low = pj.lower(fn, a, b)
    assert "pto.transpose" not in low.as_text("tensor")
    assert [e.params["spec"].parts[0].program.core for e in low.block.jaxpr.eqns
            if e.primitive.name == "pto.block_call"] == ["AIC"]
    np.testing.assert_array_equal(np.asarray(pj.kernel(fn)(a, b)), np.asarray(jax.jit(fn)(a, b)))


def test_unit_dim_permutations_under_vmap_and_grad():
    """``_front`` (vmap's batch dim to the front) past unit dims, and transposes' cotangents."""
    x = rand((5, 1, 24), F32, seed=13)
    f = jax.vmap(lambda r: r * 2.0, in_axes=1)
    np.testing.assert_array_equal(np.asarray(pj.kernel(f)(x)), np.asarray(jax.jit(f)(x)))
    g = jax.grad(lambda x: jnp.sum(jnp.transpose(x, (1, 0, 2)) * jnp.arange(24.0)))
    np.testing.assert_array_equal(np.asarray(pj.kernel(g)(x)), np.asarray(jax.jit(g)(x)))


# ------------------------------------------------------------------ transposed cube operands
@pytest.mark.parametrize("ta, tb", [(False, True), (True, False), (True, True)])
def test_transposed_operands_cost_the_plain_form(ta, tb):
    """Both of matmul's transposes load through a ``dn`` view (cube.py): the same tasks and makespan
    as ``a @ b`` (what a dot_general whose operand is already (K, M) / (N, K) in GM could use)."""
    specs = (S((768, 768), jnp.float16),) * 2
    plain = _profile(lambda a, b: a @ b, *specs)
    flipped = _profile(lambda a, b: pj.ops.matmul(a, b, transpose_a=ta, transpose_b=tb, out_dtype=jnp.float16),
                       *specs)
    assert flipped.tasks == plain.tasks
    assert flipped.makespan_us == pytest.approx(plain.makespan_us, rel=1e-6)


@pytest.mark.parametrize("name, fn", [
    ("a @ b.T", lambda a, b: a @ b.T), ("a.T @ b", lambda a, b: a.T @ b), ("a.T @ b.T", lambda a, b: a.T @ b.T),
    ("einsum ik,jk->ij", lambda a, b: jnp.einsum("ik,jk->ij", a, b)),
    ("swapaxes", lambda a, b: jnp.swapaxes(a, 0, 1) @ b)])
def test_transposed_jnp_forms_load_transposed_and_cost_the_plain_form(name, fn):
    """``a @ b.T`` (the linear layer's ``x @ W.T``), ``a.T @ b`` and their einsum spellings: the cube
    loads the transposed operand (matmul's transpose_a / transpose_b) and the transpose, unused, goes —
    no vector-core transpose through GM (it cost 1.86x at 1536^3); the numbers are XLA's."""
    specs = (S((768, 768), jnp.float16),) * 2
    plain, folded = _profile(lambda a, b: a @ b, *specs), _profile(fn, *specs)
    assert (folded.tasks, folded.makespan_us) == (plain.tasks, pytest.approx(plain.makespan_us, rel=1e-6)), name
    a, b = rand((96, 64), F16, seed=18, low=-1, high=1), rand((64, 96) if "a.T" in name or "swap" in name
                                                             else (96, 64), F16, seed=19, low=-1, high=1)
    if name in ("a.T @ b", "swapaxes"):
        a = rand((64, 96), F16, seed=18, low=-1, high=1)
    if name == "a.T @ b.T":
        a, b = rand((64, 96), F16, seed=18, low=-1, high=1), rand((96, 64), F16, seed=19, low=-1, high=1)
    close(pj.kernel(fn)(a, b), jax.jit(fn)(a, b), F16)
    close(jax.jit(pj.kernel(fn))(a, b), jax.jit(fn)(a, b), F16)
    assert "pto.transpose" not in pj.kernel(fn).lower(a, b).as_text("tensor")


def test_an_op_nothing_reads_is_not_computed():
    """``(x.T, x + 1)[1]``: the Tensor graph drops the transpose nobody reads (it ran a block call)."""
    x = rand((64, 64), F32, seed=20)
    low = pj.kernel(lambda x: (x.T, x + 1)[1]).lower(x)
    assert "pto.transpose" not in low.as_text("tensor") and len(low.lowering.programs) == 1


@pytest.mark.parametrize("dtype", [F32, F16, I8], ids=["f32", "f16", "i8"])
@pytest.mark.parametrize("ta, tb", [(True, False), (True, True)])
def test_transposed_a_numbers(dtype, ta, tb):
    """``transpose_a`` over batches and a K chain, int8 included (k a multiple of 32)."""
    a = rand((2, 160, 96), dtype, seed=14, low=-1, high=1)          # (batch, K, M)
    b = rand((2, 80, 160) if tb else (2, 160, 80), dtype, seed=15, low=-1, high=1)
    fn = tiled((32, 64, 32), lambda a, b: pj.ops.matmul(a, b, transpose_a=ta, transpose_b=tb))
    compiled = pj.kernel(fn).lower(a, b).compile()
    want = jax.jit(lambda a, b: jnp.matmul(jnp.swapaxes(a, -1, -2), jnp.swapaxes(b, -1, -2) if tb else b,
                                           preferred_element_type=jnp.int32 if dtype == I8 else jnp.float32,
                                           precision=lax.Precision.HIGHEST))(a, b)
    got = compiled(a, b)
    if dtype == I8:
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    else:
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    assemble_both(compiled)


# ------------------------------------------------------------------ dtypes the cube does not multiply
@pytest.mark.parametrize("x, y, remedy", [
    (I8, F16, "cast the int8 operand to float16 first (`x.astype(jnp.float16)`: exact)"),
    (F16, I8, "cast the int8 operand to float16 first (`x.astype(jnp.float16)`: exact)"),
    (I8, BF16, "`x.astype(jnp.bfloat16)`: exact"),
    (F16, F32, "cast both operands to float32 first (`x.astype(jnp.float32)`: exact)"),
    (np.dtype(np.int32), F32, "`x.astype(jnp.float32)`: exact where |x| <= 16777216"),
    (np.dtype(np.int32), np.dtype(np.int32), "the cube has no int32 multiply"),
    (I8, np.dtype(np.int32), "`x.astype(jnp.int8)`"),
])
def test_mixed_dtypes_are_refused_with_the_cast(x, y, remedy):
    assert remedy in mixed_dtype_remedy(x, y)
    with pytest.raises(pj.PtoDtypeError) as err:
        pj.lower(lambda a, b: pj.ops.matmul(a, b), np.ones((4, 32), x), np.ones((32, 4), y))
    message = str(err.value)
    assert message.startswith("pto.matmul: ") and remedy in message
    assert np.dtype(x).name in message and np.dtype(y).name in message


def test_the_remedy_for_int8_times_float16_is_exact():
    """What the message says to do computes XLA's ``int8 @ float16``."""
    a, b = rand((17, 64), I8, seed=16), rand((64, 5), F16, seed=17, low=-1, high=1)
    fn = lambda a, b: a.astype(jnp.float16) @ b             # noqa: E731
    close(pj.kernel(fn)(a, b), jax.jit(jnp.matmul)(a, b), F16)
