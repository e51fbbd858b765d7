"""Regressions from a probe of polymorphic (symbolic row count) kernels.

* ``jax.vmap`` of a polymorphic kernel that runs through the host callback (an iota of the rows, a
  scatter into a static buffer) raised JAX's internal ``NotImplementedError`` (no ``vmap_method``).
* Row-local ops a template lowering made constants of the row count for, refused as "changes with the
  row count" or a ``TracerBoolConversionError`` reported as a traced-argument error: the row numbers of
  ``jnp.take_along_axis`` / ``jnp.take`` along the columns, ``jnp.var``'s ``where(True, v, nan)``, and
  ``jnp.searchsorted``'s comparison of every entry, which put the array's axis before the rows.
* ``jnp.argsort`` was refused: its payload, an iota made on the cores, was not recognised as one.
* ``pj.ops.merge_topk`` of lists along the symbolic rows failed with a capacity error whose advice could
  not help; it is refused as a reduction along the rows, naming the op.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj

RNG = np.random.default_rng(0)
TABLE = jnp.linspace(-2, 2, 16).astype(jnp.float32)
COLS = np.array([3, 0, 31, 7], np.int32)

CASES = {
    "take_along_axis of top-k indices": lambda x: jnp.take_along_axis(x, jax.lax.top_k(x, 6)[1], axis=-1),
    "jnp.take along the columns": lambda x: jnp.take(x, COLS, axis=1),
    "jnp.flip along the columns": lambda x: jnp.flip(x, axis=1),
    "jnp.var": lambda x: jnp.var(x, axis=-1),
    "jnp.searchsorted": lambda x: jnp.searchsorted(TABLE, x).astype(jnp.int32),
    "jnp.argsort": lambda x: jnp.argsort(x, axis=-1).astype(jnp.int32),
    "jnp.argsort descending": lambda x: jnp.argsort(x, axis=-1, descending=True).astype(jnp.int32),
}


@pytest.mark.parametrize("name", CASES)
def test_row_local_ops_compile_for_a_symbolic_row_count(name):
    body = CASES[name]

    def fn(x):
        with pj.tile(vec=(8, 32)):
            return body(x)
    kernel = pj.kernel(fn, polymorphic_shapes=("m, 32",))
    for m in (1, 7, 33):
        x = RNG.standard_normal((m, 32)).astype(np.float32)
        np.testing.assert_allclose(np.asarray(kernel(x)), np.asarray(jax.jit(body)(x)), rtol=1e-6, atol=1e-6,
                                   err_msg=f"{name} at {m} rows")


def test_vmap_of_a_polymorphic_kernel_on_the_host():
    def causal(x):
        with pj.tile(vec=(16, 64)):
            visible = jnp.arange(x.shape[0])[:, None] >= jnp.arange(64)[None, :]
            return jnp.where(visible, x, -1.0)
    xs = RNG.standard_normal((3, 17, 64)).astype(np.float32)
    kernel = pj.kernel(causal, polymorphic_shapes=("m, 64",))
    want = jax.vmap(causal)(xs)
    np.testing.assert_array_equal(np.asarray(jax.vmap(kernel)(xs)), np.asarray(want))
    np.testing.assert_array_equal(np.asarray(jax.jit(jax.vmap(kernel))(xs)), np.asarray(want))


def test_merge_topk_along_the_symbolic_rows_is_refused_naming_it():
    kernel = pj.kernel(lambda v, i: pj.ops.merge_topk(v, i, 6), polymorphic_shapes=("m, 32", "m, 32"))
    v = RNG.standard_normal((7, 32)).astype(np.float32)
    with pytest.raises(pj.PtoUnsupportedError, match=r"pto.merge_topk of float32\[m, 32\] runs along the symbolic rows "
                                                     r"m \(axis 0\).*merge lists of a static axis"):
        kernel(v, np.tile(np.arange(32, dtype=np.int32), (7, 1)))


def test_an_f16_rank3_last_axis_sum_stores_through_its_flattened_view():
    """Its row sums are stored through a flattened ``[8·m, 1]`` view of the result at 8 times the block's
    row offset: refused, naming only SSA values of the text ("the rows of window %p11_c are not one
    row tile of a block"); f32 and the static kernel compiled. Such a window holds 8x the block's valid
    rows now."""
    def fn(x):
        with pj.tile(vec=(8, 8, 16)):
            return jnp.sum(x, -1)

    kernel = pj.kernel(fn, polymorphic_shapes=("m, 8, 16",))
    for m in (1, 7, 33):
        x = np.random.default_rng(m).standard_normal((m, 8, 16)).astype(np.float16)
        np.testing.assert_allclose(np.asarray(kernel(x), np.float32), np.asarray(jax.jit(fn)(x), np.float32),
                                   rtol=2e-3, atol=2e-3)
    assert kernel.compiles == 1


def test_a_program_whose_rows_the_dynamic_text_cannot_follow_says_what_to_do():
    def fn(x):
        with pj.tile(vec=(112, 64)):           # a tail at every template row count
            return jnp.exp(x)

    with pytest.raises(pj.PtoUnsupportedError, match=r"pj.kernel 'fn': .*; the dynamic PTO-AS cannot follow the "
                                                     r"row count through this program: call the kernel without "
                                                     r"polymorphic_shapes \(one compile per row count\)$"):
        pj.kernel(fn, polymorphic_shapes=("m, 64",))(np.ones((9, 64), np.float32))


def test_tiles_per_block_auto_is_one_tile_per_task_with_a_symbolic_row_count():
    """``"auto"`` has no size to price under polymorphic_shapes: one tile per task, as documented (the
    static compile of one size may choose more); an int > 1 is refused, naming the programs."""
    def seed(a, b, w):
        with pj.tile(vec=(32, 32)), jax.named_scope("Scale"):
            x = a * 2.0 + b
        with pj.tile(cube=(64, 64, 32)), jax.named_scope("Linear"):
            return pj.ops.matmul(x, w)

    specs = [jax.ShapeDtypeStruct((64, 64), jnp.float32)] * 2 + [jax.ShapeDtypeStruct((64, 32), jnp.float32)]
    poly = ("m, 64", "m, 64", None)
    args = [np.ones((2048, 64), np.float32)] * 2 + [np.ones((64, 32), np.float32)]
    one = pj.kernel(seed, polymorphic_shapes=poly).compiled_for(*specs).profile(m=2048)
    for per in ("auto", {"Linear": "auto"}):
        auto = pj.kernel(seed, polymorphic_shapes=poly, options={"tiles_per_block": per})
        assert auto.compiled_for(*specs).profile(m=2048).tasks == one.tasks
        np.testing.assert_array_equal(auto(*args), pj.kernel(seed)(*args))
    with pytest.raises(pj.PtoUnsupportedError, match=r"pj.kernel 'seed': blocks of several tiles "
                       r"\(tiles_per_block > 1: .*\) are not supported with a symbolic row count"):
        pj.kernel(seed, polymorphic_shapes=poly, options={"tiles_per_block": 2}).compiled_for(*specs)
