"""Hand-written tile kernels (``pj.tiles``) that ran wrong, crashed or failed late now run right or are
refused when traced, naming the grid and the rule: a store into an input (it wrote into the caller's
array), a loop counter not stepped by one (run as if it were), casts of an accumulator the FIXPIPE
cannot do (truncated or wrapped integers), matmul biases that are not one row (failed in a task),
``a @ b`` of fp16 tiles (an fp16 accumulator ptoas rejects), and malformed grids."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj

T = pj.tiles
W = T.window((32, 32))
FIXED = lambda shape: T.window(shape, index=(None, None))  # noqa: E731
RNG = np.random.default_rng(5)
X16 = RNG.uniform(-1, 1, (32, 64)).astype(np.float16)
W16 = RNG.uniform(-1, 1, (64, 32)).astype(np.float16)


def _cube(body_out, *extra, out_dtype=np.float32):
    """A one-point cube grid over X16 @ W16; ``body_out(a, b, ins)`` gives the stored tile."""
    def fn(x, w, *rest):
        def body(i, ins, outs):
            a = T.mov(T.load(ins[0], i, FIXED((32, 64)), "mat"), "left")
            b = T.mov(T.load(ins[1], i, FIXED((64, 32)), "mat"), "right")
            return [T.store(outs[0], body_out(a, b, ins, i), i, FIXED((32, 32)))]
        return T.grid(body, (1,), (x, w, *rest), jax.ShapeDtypeStruct((32, 32), out_dtype))
    return fn


def test_a_store_into_an_input_is_refused_and_the_callers_array_kept():
    x = RNG.uniform(-1, 1, (64, 64)).astype(np.float32)
    x0 = x.copy()

    def kern(x):
        def body(i, ins, outs):
            t = T.load(ins[0], i, W)
            T.store(ins[0], T.mul(t, 100.0), i, W)
            return [T.store(outs[0], t, i, W)]
        return T.grid(body, (2, 2), x, jax.ShapeDtypeStruct((64, 64), np.float32))

    with pytest.raises(pj.PtoArgumentError, match=r"'body': pto.tstore writes into input 0 \(ins\[0\]\)"):
        pj.kernel(kern)(x)
    np.testing.assert_array_equal(x, x0)


def test_a_loop_counter_not_stepped_by_one_is_refused():
    def step_by_two(a, b, ins, i):
        def step(c, _):
            kk, acc = c
            return (kk + 2, T.matmul_acc(acc, a, b)), None
        return jax.lax.scan(step, (jnp.int32(1), T.matmul(a, b)), None, length=3)[0][1]

    with pytest.raises(pj.PtoUnsupportedError, match="an int32 counter stepped by one"):
        pj.lower(_cube(step_by_two), X16, W16)


@pytest.mark.parametrize("dtype, kw", [(np.int32, {}), (np.int32, {"rounding": "floor"}),
                                       (np.int8, {}), (np.float16, {"saturate": False})])
def test_an_accumulator_cast_the_fixpipe_cannot_do_is_refused(dtype, kw):
    with pytest.raises(pj.PtoUnsupportedError, match=r"the FIXPIPE converts an accumulator on its way out of L0C "
                                                     r"from float32 to float16 or bfloat16 only"):
        pj.lower(_cube(lambda a, b, ins, i: T.cast(T.matmul(a, b), dtype, **kw), out_dtype=dtype), X16, W16)


def test_fp16_tiles_multiplied_with_at_accumulate_in_float32():
    got = pj.kernel(_cube(lambda a, b, ins, i: a @ b, out_dtype=np.float16))(X16, W16)
    want = (X16.astype(np.float32) @ W16.astype(np.float32)).astype(np.float16)
    np.testing.assert_allclose(np.asarray(got, np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("shape", [(32, 32), (32, 1), (1, 32)])
def test_a_bias_that_is_not_one_row_is_added_after_the_product(shape):
    bias = RNG.uniform(-1, 1, shape).astype(np.float32)
    for out_dtype in (None, jnp.float16):
        def fn(x, w, b):
            with pj.tile(cube=(32, 64, 32)):
                return pj.ops.matmul(x, w, bias=b, out_dtype=out_dtype)
        want = X16.astype(np.float32) @ W16.astype(np.float32) + bias
        got = np.asarray(pj.kernel(fn)(X16, W16, bias), np.float32)
        tol = 1e-5 if out_dtype is None else 2e-3
        np.testing.assert_allclose(got, want.astype(out_dtype or np.float32).astype(np.float32), rtol=tol, atol=tol)


def test_a_hand_written_bias_must_be_one_mat_row():
    def with_bias(shape, loc="mat"):
        def out(a, b, ins, i):
            t = T.load(ins[2], i, FIXED(shape), "mat")
            return T.matmul(a, b, bias=t if loc == "mat" else T.mov(t, loc))
        return _cube(out)

    b = RNG.uniform(-1, 1, (32, 32)).astype(np.float32)
    with pytest.raises(pj.PtoShapeError, match=r"the matmul's bias is a \(32, 32\) tile; the cube adds one row"):
        pj.lower(with_bias((32, 32)), X16, W16, b)
    with pytest.raises(pj.PtoArgumentError, match=r"bias \(a 'mat' tile of one row.*\) is a 'left' tile"):
        pj.lower(with_bias((1, 32), "left"), X16, W16, b[:1])


def test_an_accumulation_of_another_shape_is_refused_when_traced():
    def out(a, b, ins, i):
        small = T.mov(T.load(ins[0], i, FIXED((16, 64)), "mat"), "left")
        return T.matmul_acc(T.matmul(a, b), small, b)
    with pytest.raises(pj.PtoShapeError, match=r"pto.tmatmul_acc: the accumulator is float32\[32, 32\] but a "
                                               r"float16\[16, 64\] @ b float16\[64, 32\] is float32\[16, 32\]"):
        pj.lower(_cube(out), X16, W16)


def _copy(body, dtype=np.float32, **kw):
    x = np.ones((64, 64), np.float32)
    return lambda: pj.lower(lambda x: T.grid(body, (2, 2), x, jax.ShapeDtypeStruct((64, 64), dtype), **kw), x)


@pytest.mark.parametrize("make, error, message", [
    (_copy(lambda i, ins, outs: [outs[0]], np.uint16), pj.PtoDtypeError, "output 0 is uint16, which no tile holds"),
    (_copy(lambda i, ins, outs: None), pj.PtoArgumentError, "the body returned None for output 0"),
    (_copy(lambda i, ins, outs: [T.store(outs[0], T.load(ins[0], (0.5, 1.7), W), i, W)]), pj.PtoArgumentError,
     "a load/store index is 0.5, not an integer"),
    (_copy(lambda i, ins, outs: [T.store(outs[0], T.load(ins[0], i, W) @ T.load(ins[0], i, W), i, W)]),
     pj.PtoArgumentError, "it is a cube grid because its body multiplies tiles"),
    (_copy(lambda i, ins, outs: [T.store(outs[0], jax.lax.fori_loop(0, i[0] + 1, lambda k, t: t * 2.0,
                                                                    T.load(ins[0], i, W)), i, W)]),
     pj.PtoUnsupportedError, "a loop whose trip count is not static"),
    (_copy(lambda i, ins, outs: [T.store(outs[0], T.load(ins[0], i, W), i, W)], np.float16, fill=1e6),
     pj.PtoArgumentError, "fill=1000000.0 is not a value of output 0's dtype float16"),
    (_copy(lambda i, ins, outs: [T.store(outs[0], T.load(ins[0], i, W), i, W)], name="a b"),
     pj.PtoArgumentError, "name 'a b' must be a string without spaces"),
], ids=["dtype", "none", "float-index", "vector-matmul", "while", "fill", "name"])
def test_malformed_grids_are_refused_naming_the_rule(make, error, message):
    with pytest.raises(error, match=re.escape(message)):
        make()


def test_a_grid_name_starting_with_a_digit_is_a_valid_symbol():
    x = np.ones((64, 64), np.float32)
    fn = lambda x: T.grid(lambda i, ins, outs: [T.store(outs[0], T.load(ins[0], i, W), i, W)],  # noqa: E731
                          (2, 2), x, jax.ShapeDtypeStruct((64, 64), np.float32), name="1abc")
    compiled = pj.kernel(fn).lower(x).compile()
    assert "func.func @_1abc(" in compiled.as_text("pto")
    np.testing.assert_array_equal(np.asarray(compiled(x)), x)
