"""Interleaved columns: ``x[..., j::k]`` and a RoPE's ``x.reshape(..., n, 2)[..., j]`` for k of 2 or 4 are
selected from tiles of whole k-column groups in UB (``tgather``'s mask pattern), and ``jnp.stack(pieces,
-1).reshape(..., k * n)`` (the rotated pairs written back) is made in UB by a ``tscatter`` per piece, both
in the program of the ops beside them — not as copy programs of one-column tiles through GM. Numbers
equal NumPy's bit for bit, eager and under ``jax.jit``; ptoas accepts the text; pto-isa's CPU simulator
runs it and agrees bit for bit. A dtype or width the selection cannot take keeps the copies."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from helpers import BF16, F16, F32, I32, rand, same_bits, specials
from ptojax.ascend import crosscheck as xc
from vendor_tools import needed, tools

_FIXTURES = (tools,)                                   # autouse: pins PTOAS / PTO_ISA_ROOT


def pairs(x, c, s):
    """A RoPE's rotation of interleaved pairs, read as (..., n, 2)."""
    xr = x.reshape(*x.shape[:-1], x.shape[-1] // 2, 2)
    a, b = xr[..., 0], xr[..., 1]
    return a * c - b * s, a * s + b * c


def strided(x, c, s):
    a, b = x[..., 0::2], x[..., 1::2]
    return a * c - b * s, a * s + b * c


def rope(x, c, s):
    """The whole interleaved RoPE: pairs rotated and written back in place."""
    return jnp.stack(pairs(x, c, s), -1).reshape(x.shape)


def stack4(x, c, s):
    return jnp.stack([x[..., 3::4] * c, x[..., 1::4], c - s, x[..., 0::4]], -1).reshape(x.shape)


def fourth(x, c, s):
    return x[..., 3::4] * c + x[..., 1::4] * s


def names(program):
    return {e.primitive.name for e in program.body.jaxpr.eqns}


def ops_of(compiled, op):
    return [e for prog in compiled.lowering.programs for e in prog.body.jaxpr.eqns if e.primitive.name == f"pto.{op}"]


CASES = {      # name: (fn, x shape, dtype)
    "pairs 77x6x128 f32": (pairs, (77, 6, 128), F32),
    "strided 40x64 f32": (strided, (40, 64), F32),
    "strided 33x32 f16": (strided, (33, 32), F16),
    "strided 9x3x64 bf16": (strided, (9, 3, 64), BF16),
    "every fourth 24x128 f32": (fourth, (24, 128), F32),
    "pairs 1000x16 f32": (pairs, (1000, 16), F32),
    "rope 77x6x128 f32": (rope, (77, 6, 128), F32),
    "rope 300x64 f16": (rope, (300, 64), F16),
    "rope 5x4x64 bf16": (rope, (5, 4, 64), BF16),
    "stack of four 24x128 i32": (stack4, (24, 128), I32),
    "stack of four 40x256 f16": (stack4, (40, 256), F16),
}


@pytest.mark.parametrize("name", list(CASES))
def test_interleaved_columns_are_selected_in_the_readers_program(name):
    fn, shape, dtype = CASES[name]
    k = 4 if fn in (fourth, stack4) else 2
    x = jnp.asarray(specials(shape, dtype, seed=1) if dtype != I32 else rand(shape, I32, seed=1))
    half = (*shape[:-1], shape[-1] // k)
    c, s = rand(half, dtype, seed=2, low=-1, high=1), rand(half, dtype, seed=3, low=-1, high=1)
    compiled = pj.kernel(fn).lower(x, c, s).compile()
    programs = compiled.lowering.programs
    assert len(programs) <= 2                                                  # full and tail row blocks
    wanted = {"pto.tdeinterleave", "pto.tmul"} | ({"pto.tinterleave"} if fn in (rope, stack4) else set())
    assert all(names(p) >= wanted for p in programs), [names(p) for p in programs]
    # each product and difference rounded on its own, as the simulated chip computes them (NumPy on the
    # dtype; XLA's CPU code fuses a * c - b * s into one fma)
    want = fn(*(np.asarray(a) for a in (x, c, s)))
    same_bits(compiled(x, c, s), want)
    same_bits(jax.jit(pj.kernel(fn))(x, c, s), want)
    if dtype == BF16:                           # (the vendor simulator's bf16 is not the chip's: assembled only)
        assert "TSCATTER" in compiled.ptoas() or fn is not rope
    else:
        results = xc.run(list(xc.jobs_of(compiled.code)), seed=0)
        assert results and all(r.status == "exact" for r in results), [(r.function, r.status) for r in results]


@pytest.mark.parametrize("dtype", [F32, F16, BF16, I32])
@pytest.mark.parametrize("j,k", [(0, 2), (1, 2), (2, 4)])
def test_a_strided_slice_is_the_same_bits(dtype, j, k):
    x = jnp.asarray(specials((20, 64), F32, seed=4).astype(dtype) if dtype != I32 else rand((20, 64), I32, seed=4))
    fn = lambda x: x[:, j::k]                                                   # noqa: E731
    compiled = pj.kernel(fn).lower(x).compile()
    assert ops_of(compiled, "tdeinterleave")
    same_bits(compiled(x), jax.jit(fn)(x))


@pytest.mark.parametrize("shape,dtype", [((8, 12), F32), ((8, 24), F16), ((8, 64), jnp.int8), ((8, 64), jnp.bool_)],
                         ids=["f32 rows of 24 bytes", "f16 rows of 24 bytes", "int8", "bool"])
def test_what_the_selection_cannot_take_keeps_the_copy(shape, dtype):
    x = jnp.asarray(rand(shape, F32, seed=5) > 0 if dtype == jnp.bool_ else rand(shape, F32, seed=5).astype(dtype))
    fn = lambda x: x[:, 1::2]                                                   # noqa: E731
    compiled = pj.kernel(fn).lower(x).compile()
    assert not ops_of(compiled, "tdeinterleave") and [p.name for p in compiled.lowering.programs] == ["view"]
    same_bits(compiled(x), jax.jit(fn)(x))


def test_it_composes_with_vmap_jit_and_a_gradient_in_the_kernel():
    x, c, s = (rand((4, 16, 32), F32, seed=i) for i in (6, 7, 8))
    c, s = c[..., :16], s[..., :16]
    loss = lambda x, c, s: sum(jnp.sum(y * y) for y in strided(x, c, s))        # noqa: E731
    np.testing.assert_allclose(pj.kernel(jax.grad(loss))(x, c, s), jax.grad(loss)(x, c, s), rtol=1e-5, atol=1e-5)
    got = jax.jit(jax.vmap(pj.kernel(strided)))(x, c, s)
    for g, w in zip(got, jax.vmap(strided)(x, c, s)):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_pairs_of_a_computed_tensor_are_selected_from_its_rows():
    """``y[..., j]`` of a ``(..., n, 2)`` value an op computed (not a view of an argument): selected from the
    ``(..., 2n)`` rows it is stored as, not copied column by column."""
    def fn(x):
        y = x.reshape(40, 64, 2) * 2.0 + 1.0
        return y[..., 0] - y[..., 1]
    x = jnp.asarray(specials((40, 128), F32, seed=9))
    compiled = pj.kernel(fn).lower(x).compile()
    assert ops_of(compiled, "tdeinterleave")
    assert all("pto.tdeinterleave" in names(p) for p in compiled.lowering.programs if "view" in p.name)   # no copies
    same_bits(compiled(x), fn(np.asarray(x)))


@pytest.mark.parametrize("m", [1, 17, 128])
def test_a_polymorphic_interleave_is_the_vendor_simulators(m):
    """Under a symbolic row count the positions tile of ``tinterleave`` takes the block's valid rows
    (``set_validshape``): PTOAS typed it ``v_row=?`` with no value, and pto-isa scattered one row of 128;
    eager calls of a partial last block failed (the engine read the source's valid rows only)."""
    f = pj.kernel(lambda a, b: jnp.stack([a, b], -1).reshape(a.shape[0], -1), polymorphic_shapes=("m, 32", "m, 32"))
    a, b = (rand((m, 32), F32, seed=s) for s in (10, 11))
    want = np.stack([a, b], -1).reshape(m, 64)
    same_bits(f(a, b), want)
    same_bits(jax.jit(f)(a, b), want)
    text = f.compiled_for(a, b).as_text("pto")
    (r,) = xc.run([(text, "concat", 1)], inputs=[[a.ravel(), b.ravel(), np.full(m * 64, 7, np.float32),
                                                   np.array(m, np.int32)]])
    assert r.status == "exact", r.status


def test_the_gradient_of_an_interleaved_rope_is_interleaved_in_ub_too():
    """``jax.vjp`` of ``x.reshape(..., n, 2)[..., j]`` pads each cotangent entry to a pair (``lax.pad`` of the
    unit dim) and adds the two: an interleave with zeros, and the add on the rows it was reshaped from — one
    program per row block, as the forward."""
    x, g = (rand((77, 6, 128), F32, seed=s) for s in (12, 13))
    c, s = (rand((77, 6, 64), F32, seed=k) for k in (14, 15))
    bwd = lambda x, c, s, g: jax.vjp(lambda x: rope(x, c, s), x)[1](g)[0]        # noqa: E731
    compiled = pj.kernel(bwd).lower(x, c, s, g).compile()
    assert len(compiled.lowering.programs) <= 2
    assert all(names(p) >= {"pto.tdeinterleave", "pto.tinterleave"} for p in compiled.lowering.programs)
    np.testing.assert_allclose(compiled(x, c, s, g), jax.jit(bwd)(x, c, s, g), rtol=1e-6, atol=1e-6)
    results = xc.run(list(xc.jobs_of(compiled.code)), seed=0)
    assert results and all(r.status == "exact" for r in results), [(r.function, r.status) for r in results]
