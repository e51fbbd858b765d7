"""The error family: types, trace-time raising, and messages that name the op and the values."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj


@pytest.mark.parametrize("cls,base", [(pj.PtoShapeError, ValueError), (pj.PtoDtypeError, TypeError),
                                      (pj.PtoArgumentError, ValueError),
                                      (pj.PtoUnsupportedError, NotImplementedError),
                                      (pj.PtoCapacityError, ValueError), (pj.PtoVerifyError, AssertionError),
                                      (pj.PtoTaskError, RuntimeError), (pj.PtoOrchestrationError, RuntimeError),
                                      (pj.PtoAsmError, ValueError), (pj.PtoExecutionError, RuntimeError)])
def test_error_types_derive_from_builtins(cls, base):
    assert issubclass(cls, pj.PtoError) and issubclass(cls, base)


def test_shape_error_is_raised_while_tracing_not_running():
    calls = []

    def f(a, b):
        calls.append(1)
        return pj.ops.matmul(a, b)

    with pytest.raises(pj.PtoShapeError) as err:
        jax.jit(f).lower(jax.ShapeDtypeStruct((8, 64), jnp.float16), jax.ShapeDtypeStruct((32, 16), jnp.float16))
    assert calls == [1]
    assert str(err.value) == ("pto.matmul: contracting dims differ: a (8, 64) gives K=64, b (32, 16) gives K=32 "
                              "(transpose_a=False, transpose_b=False)")  # quoted verbatim in docs/concepts.md


def test_dtype_error_names_the_op_and_both_operands():
    with pytest.raises(pj.PtoDtypeError, match=r"pto\.sub: operands must share one dtype, got float16\[4\], "
                                               r"bfloat16\[4\]"):
        jax.make_jaxpr(pj.ops.sub)(jnp.ones(4, jnp.float16), jnp.ones(4, jnp.bfloat16))


def test_unsupported_dtype_is_rejected():
    with pytest.raises(pj.PtoDtypeError, match=r"pto\.exp: operand of dtype uint8 \(shape \(3,\)\) is not supported"):
        pj.ops.exp(jnp.ones(3, jnp.uint8))


def test_scalars_only_is_an_argument_error():
    with pytest.raises(pj.PtoArgumentError, match=r"pto\.add: needs at least one tensor operand"):
        pj.ops.add(1.0, 2.0)


def test_wrong_operand_count():
    with pytest.raises(pj.PtoArgumentError, match=r"pto\.mul: takes 2 operands, got 3"):
        pj.ops.mul(jnp.ones(2), jnp.ones(2), jnp.ones(2))


# ------------------------------------------------------------------------ errors in the user's terms
SUPPORTED = "supported: float32, float16, bfloat16, int8, int32, bool"


def _at(fn, offset: int) -> str:
    """``file:line (name)`` of the line ``offset`` lines below ``fn``'s ``def``."""
    return f"{fn.__code__.co_filename}:{fn.__code__.co_firstlineno + offset} ({fn.__name__})"


NO_COMPLEX = ("the cores have no complex numbers: compute with the real and imaginary parts as float32 arrays (an FFT "
              "as matmuls by the cos / sin DFT matrices), or outside the kernel")


def _lowering_error(fn, *shapes):
    with pytest.raises(pj.PtoError) as err:
        pj.lower(fn, *[jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes])
    return err


def test_an_internal_conversion_names_the_users_jnp_call_and_line():
    def kernel(x):
        y = x * 2.0
        return jnp.fft.fft(y).real   # converts to complex64 first, inside fft's own jit

    err = _lowering_error(kernel, (8, 8))
    assert err.type is pj.PtoUnsupportedError
    assert str(err.value) == (f"jnp.fft.fft at {_at(kernel, 2)}: primitive 'convert_element_type' makes "
                              f"complex64[8,8], and {NO_COMPLEX}")


def test_an_unsupported_lax_primitive_names_the_lax_call():
    def kernel(x):
        return jax.lax.lgamma(x)

    err = _lowering_error(kernel, (8, 8))
    assert err.type is pj.PtoUnsupportedError
    assert str(err.value) == f"lax.lgamma at {_at(kernel, 1)}: primitive 'lgamma' has no ptojax translation"


def test_a_jitted_jnp_function_is_named_from_its_body():
    def kernel(x):
        return jnp.linalg.det(x)     # jnp.linalg.det is a jit of its own: no frame of it above the user's line

    err = _lowering_error(kernel, (8, 8))
    assert str(err.value) == f"jnp.linalg.det at {_at(kernel, 1)}: primitive 'lu' has no ptojax translation"


def test_a_method_call_is_named_by_the_jnp_function_behind_it():
    def kernel(x):
        return x.sum(axis=0).astype(jnp.complex64)

    err = _lowering_error(kernel, (8, 8))
    assert str(err.value) == (f"jnp.astype at {_at(kernel, 1)}: primitive 'convert_element_type' makes complex64[8], "
                              f"and {NO_COMPLEX}")


def test_a_tile_refused_while_tiling_names_the_users_call_and_line():
    """The tiling pass works on the ops a jnp call decomposes into (argmax: compares; sum of bf16: a
    cast to f32): a tile it refuses names the user's call and line, as the Tensor level's errors do."""
    def argmax(x):
        with pj.tile(vec=(8, 100)):               # 100 bf16 = 200 bytes: not a multiple of 32
            return jnp.argmax(x, -1)

    def total(x):
        y = x + 1
        with pj.tile(vec=(8, 100)):
            return jnp.sum(y, -1)

    for kernel, call, line in ((argmax, "jnp.argmax", 2), (total, "jnp.sum", 3)):
        with pytest.raises(pj.PtoArgumentError) as err:
            pj.lower(kernel, jax.ShapeDtypeStruct((64, 1000), jnp.bfloat16))
        assert str(err.value).startswith(f"{call} at {_at(kernel, line)}: pto."), str(err.value)
        assert "vec tile (8, 100) has a last dim of 100 x 2 bytes (bfloat16) = 200 bytes" in str(err.value)


# ------------------------------------------------------------------------- arguments of a compiled kernel
def _compiled():
    def kernel(a, b, w):
        return pj.ops.matmul(a * 2.0 + b, w)

    args = (np.ones((64, 64), np.float16), np.ones((64, 64), np.float16), np.ones((64, 32), np.float16))
    return pj.kernel(kernel).lower(*args).compile(), args


def test_a_wrong_argument_count_names_both_counts_and_every_shape():
    compiled, (a, b, w) = _compiled()
    with pytest.raises(pj.PtoArgumentError) as err:
        compiled(a, b)
    assert str(err.value) == ("pj.kernel 'kernel': called with 2 arguments (float16[64, 64], float16[64, 64]), "
                              "compiled for 3: (a: float16[64, 64], b: float16[64, 64], w: float16[64, 32])")


def test_a_wrong_shape_or_dtype_names_each_argument_that_differs():
    compiled, (a, b, w) = _compiled()
    with pytest.raises(pj.PtoArgumentError) as err:
        compiled(a[:32], b, w.astype(np.float32))
    assert str(err.value) == ("pj.kernel 'kernel': argument 0 'a' is float16[32, 64], compiled for float16[64, 64]; "
                              "argument 2 'w' is float32[64, 32], compiled for float16[64, 32]; call the kernel object "
                              "itself to compile other shapes and dtypes")


def test_a_wrong_leaf_of_a_pytree_argument_is_named_by_its_path():
    f = pj.kernel(lambda params, x: x * params["scale"] + params["shift"])
    params = {"scale": np.ones((8, 32), np.float32), "shift": np.ones((32,), np.float32)}
    compiled = f.lower(params, np.ones((8, 32), np.float32)).compile()
    with pytest.raises(pj.PtoArgumentError) as err:
        compiled({**params, "shift": np.ones((32,), np.float16)}, np.ones((8, 32), np.float32))
    assert str(err.value) == ("pj.kernel '<lambda>': argument 0 'params'['shift'] is float16[32], compiled for "
                              "float32[32]; call the kernel object itself to compile other shapes and dtypes")


def test_a_reduction_over_axes_apart_reduces_one_run_at_a_time():
    """max over axes (0, 2) of one four-dim tile (a leading axis kept between them) had no real
    selection (a PtoUnsupportedError naming ``tamax``); like the three-dim one, it runs, exactly."""
    def reduce(vec):
        def fn(x):
            with pj.tile(vec=vec):
                return jnp.max(x, axis=(0, 2))
        return fn

    x = np.random.default_rng(0).standard_normal((4, 8, 64)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(pj.kernel(reduce((4, 8, 64)))(x)), x.max(axis=(0, 2)))
    y = np.random.default_rng(1).standard_normal((2, 4, 8, 64)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(pj.kernel(reduce((2, 4, 8, 64)))(y)), y.max(axis=(0, 2)))
