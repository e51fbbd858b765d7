"""Findings of a probe of the extension surfaces (about 225 cases: registered tile ops, scopes, options):
a registered op given a (32, 1) column tile saw it as a (1, 32) row; one with a bool result failed every
task; an op removed and registered again kept its old semantics in a kernel compiled before; a sum over
3 rows under a tile of 2 never finished lowering (a chunk of 1); two refusals gave the wrong reason."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax.lowering.reduce import chunk_for

T = pj.tiles


@pytest.fixture
def registered():
    names = []

    def register(name, **kw):
        names.append(name)
        return T.register_op(name, **kw)
    yield register
    for name in dict.fromkeys(names):
        if name in T.CUSTOM:
            T.unregister_op(name)


def test_a_registered_op_sees_a_column_tile_as_a_column(registered):
    rng = np.random.default_rng(0)
    x, s = rng.uniform(-2, 2, (64, 64)).astype(np.float32), rng.uniform(-2, 2, (64, 1)).astype(np.float32)
    seen = []
    op = registered("tcolumn_mul_probe", reference=lambda a, b: a * b,
                    numpy=lambda a, b: (seen.append(b.shape), a * b)[1])

    def f(x, s):
        def body(i, ins, outs):
            a = T.load(ins[0], i, T.window((32, 32)))
            b = T.load(ins[1], (i[0], 0), T.window((32, 1)))
            return [T.store(outs[0], op(a, b), i, T.window((32, 32)))]
        return T.grid(body, (2, 2), (x, s), jax.ShapeDtypeStruct(x.shape, x.dtype))

    for got in (pj.kernel(f)(x, s), jax.jit(pj.kernel(f))(x, s)):
        np.testing.assert_array_equal(got, x * s)
    assert set(seen) == {(32, 1)}


def test_a_registered_op_may_give_a_bool_tile(registered):
    x = np.random.default_rng(0).uniform(-2, 2, (32, 64)).astype(np.float32)
    op = registered("tpositive_probe", reference=lambda t: t > 0, numpy=lambda t: t > 0,
                    abstract=lambda a: jax.ShapeDtypeStruct(a.shape, jnp.bool_))

    def f(x):
        def body(i, ins, outs):
            w = T.window((32, 32))
            return [T.store(outs[0], op(T.load(ins[0], i, w)), i, w)]
        return T.grid(body, (1, 2), x, jax.ShapeDtypeStruct(x.shape, jnp.bool_))

    for got in (pj.kernel(f)(x), jax.jit(pj.kernel(f))(x)):
        np.testing.assert_array_equal(got, x > 0)


def test_an_op_registered_again_is_what_a_kernel_compiled_before_runs(registered):
    x = np.random.default_rng(0).uniform(-2, 2, (32, 64)).astype(np.float32)

    def f(x):
        def body(i, ins, outs):
            w = T.window((32, 32))
            return [T.store(outs[0], T.compute("tbump_probe", T.load(ins[0], i, w)), i, w)]
        return T.grid(body, (1, 2), x, jax.ShapeDtypeStruct(x.shape, x.dtype))

    registered("tbump_probe", reference=lambda t: t + 1, numpy=lambda t: t + 1)
    k = pj.kernel(f)
    np.testing.assert_array_equal(k(x), x + 1)
    T.unregister_op("tbump_probe")
    registered("tbump_probe", reference=lambda t: t * 3, numpy=lambda t: t * 3)
    np.testing.assert_array_equal(k.lower(x).compile()(x), x * 3)
    np.testing.assert_array_equal(k(x), x * 3)


@pytest.mark.parametrize("n", range(2, 40))
@pytest.mark.parametrize("limit, step", [(1, 1), (2, 1), (3, 1), (8, 8), (16, 8)])
def test_a_chunk_shrinks_the_axis(n, limit, step):
    assert 1 < chunk_for(n, limit, step) and chunk_for(n, limit, step) % step == 0


def test_a_sum_over_more_rows_than_the_tile_holds_lowers():
    b = np.random.default_rng(2).integers(-100, 100, (3, 16, 32)).astype(np.int32)

    def f(b):
        with pj.tile(vec=(2, 16, 32)):
            return jnp.sum(b, axis=0)
    np.testing.assert_array_equal(pj.kernel(f)(b), b.sum(0))


def test_a_cube_grid_made_so_by_a_gm_reader_says_so(registered):
    table, idx = np.ones((100, 32), np.float32), np.zeros((64, 8), np.int32)
    g = registered("tgrows_mat_probe", reference=lambda t, i: jnp.take(t, i.reshape(-1), axis=0), reads_gm=True,
                   loc="mat", abstract=lambda t, i: jax.ShapeDtypeStruct((int(np.prod(i.shape)), t.shape[1]), t.dtype))

    def f(table, idx):
        def body(i, ins, outs):
            it = T.load(ins[1], (i[0], 0), T.window((1, 8)))
            return [T.store(outs[0], g(ins[0], it), (i[0], 0), T.window((8, 32)))]
        return T.grid(body, (64, 1), (table, idx), jax.ShapeDtypeStruct((512, 32), table.dtype))

    with pytest.raises(pj.PtoArgumentError, match="cube grid because pto.tgrows_mat_probe reads GM into 'mat'"):
        pj.kernel(f)(table, idx)


def test_map_tiles_of_a_symbolic_shape_names_the_reason(registered):
    op = registered("tpoly_probe", reference=lambda t: t + 1)
    with pytest.raises(pj.PtoUnsupportedError, match="takes no symbolic dimension"):
        pj.kernel(lambda x: T.map_tiles(op, x, (32, 64)), polymorphic_shapes=("n, 64",))(np.ones((64, 64), np.float32))
