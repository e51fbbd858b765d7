"""pj.tiles bodies: a registered op's default abstract is checked against its reference (a reference
of another shape was stored as traced by ``backend="xla"``, the rows it left out at the fill value),
and Python control flow on a tile or an index names the body and the line (it blamed the kernel's
arguments, or was JAX's bare TracerBoolConversionError)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj

T = pj.tiles
W32 = T.window((32, 32))
X = np.random.default_rng(1).uniform(-1, 1, (64, 64)).astype(np.float32)


def _grid_of(op):
    return lambda a: T.grid(lambda i, ins, outs: [T.store(outs[0], op(T.load(ins[0], i, W32)), i, W32)],
                            (2, 2), a, jax.ShapeDtypeStruct(a.shape, a.dtype))


@pytest.mark.parametrize("reference, got", [(lambda t: t[:16] * 2, r"float32\[16, 32\]"),
                                            (lambda t: (t * 2).astype(jnp.float16), r"float16\[32, 32\]")],
                         ids=["shape", "dtype"])
def test_a_reference_unlike_the_default_abstract_is_refused_when_traced(reference, got):
    op = T.register_op("tprobe_default_abstract", reference=reference)
    try:
        for run in (lambda: pj.lower(_grid_of(op), X), lambda: pj.kernel(_grid_of(op), backend="xla")(X),
                    lambda: jax.jit(_grid_of(op))(X)):
            with pytest.raises(pj.PtoArgumentError, match=r"pj.tiles.tprobe_default_abstract: the default abstract "
                               rf"\(the first operand's\) declares float32\[32, 32\] for operands \(float32\[32, 32\]\), "
                               rf"but reference returns {got}"):
                run()
    finally:
        T.unregister_op("tprobe_default_abstract")


def test_a_reference_like_the_default_abstract_computes():
    op = T.register_op("tprobe_twice", reference=lambda t: t * 2)
    try:
        np.testing.assert_array_equal(pj.kernel(_grid_of(op))(X), X * 2)
    finally:
        T.unregister_op("tprobe_twice")


def _python_if(i, ins, outs):
    t = T.load(ins[0], i, W32)
    if T.rowsum(t)[0, 0] > 0:
        t = t * 2.0
    return [T.store(outs[0], t, i, W32)]


def _python_range(i, ins, outs):
    t = T.load(ins[0], i, W32)
    for _ in range(i[0]):
        t = t * 2.0
    return [T.store(outs[0], t, i, W32)]


@pytest.mark.parametrize("body, line", [(_python_if, "if T.rowsum"), (_python_range, "for _ in range")],
                         ids=["if", "range"])
def test_python_control_flow_on_a_tile_names_the_body_and_line(body, line):
    import inspect
    lines, first = inspect.getsourcelines(body)
    at = first + next(n for n, text in enumerate(lines) if line in text)
    grid = lambda a: T.grid(body, (2, 2), a, jax.ShapeDtypeStruct(a.shape, a.dtype))
    for run in (lambda: grid(X), lambda: pj.kernel(grid)(X)):
        with pytest.raises(pj.PtoArgumentError, match=rf"pj.tiles.grid '{body.__name__}' at .*test_tile_body_checks.py:"
                           rf"{at} \({body.__name__}\): the body needs the value of a tile or a grid index"):
            run()
