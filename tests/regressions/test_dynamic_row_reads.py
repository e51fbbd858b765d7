"""Regression: polymorphic kernels that read rows other than their block's own were refused with errors
that could not be acted on.

* ``jnp.max(x, axis=0)`` (and min, argmax, argmin, prod, sort over the rows) got a ``PtoCapacityError``
  from the internal 768-row template lowering ("use fewer rows or columns in its ops' vec tile"),
  whatever the tile; ``jnp.sum`` a PTO-window message.
* ``pj.ops.gather(x, idx)`` with ``x`` of the symbolic rows, ``x[0:1] + x``, ``jnp.flip`` / ``jnp.roll``
  along the rows got "pto dynamic rows: function 'gather': windows of 64 rows by %i0 …", naming PTO
  functions and SSA values and ending with unrelated advice ("a row tile must divide two of them").

The Tensor level traced with the symbol is now checked first: each is a ``PtoUnsupportedError`` that
names the kernel, the op and why (it reads rows outside a block's own row tile), and what to do. The
same kernels at static shapes, and the polymorphic ones the tile level takes, still match plain JAX."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from vendor_tools import PTOAS

pytestmark = pytest.mark.skipif(PTOAS is None, reason="needs ptoas")


def _x(rows, seed=0):
    return np.random.default_rng(seed).standard_normal((rows, 64)).astype(np.float32)


def _tiled(fn, vec):
    def kernel(*args):
        with pj.tile(vec=vec):
            return fn(*args)
    kernel.__name__ = fn.__name__
    return kernel


def _along_rows(f, name):
    def fn(x):
        return f(x, axis=0)
    fn.__name__ = name
    return fn


REDUCTIONS = [_along_rows(f, f"{f.__name__}0") for f in (jnp.max, jnp.min, jnp.argmax, jnp.prod, jnp.sort, jnp.sum,
                                                       jnp.cumsum)]


@pytest.mark.parametrize("fn", REDUCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("vec", [(32, 64), (8, 16), (1, 16)])
def test_a_reduction_over_the_rows_is_said_to_be_one(fn, vec):
    kernel = _tiled(fn, vec)
    x = _x(5) * 0.5
    np.testing.assert_allclose(np.asarray(pj.kernel(kernel)(x)), np.asarray(fn(x)), rtol=1e-6)   # static: fine
    with pytest.raises(pj.errors.PtoUnsupportedError) as err:
        pj.kernel(kernel, polymorphic_shapes=("m, 64",))(x)
    msg = str(err.value)
    assert msg.startswith(f"pj.kernel '{fn.__name__}': pto.")
    assert "runs along the symbolic rows m (axis 0), a reduction or scan along the symbolic row axis" in msg
    assert "without polymorphic_shapes" in msg and "row tile must divide" not in msg and "UB" not in msg


def gat2(x, idx):
    return pj.ops.gather(x, idx)


def head(x):
    return x[0:1] + x


def flip(x):
    return jnp.flip(x, 0)


def roll(x):
    return jnp.roll(x, 1, 0)


@pytest.mark.parametrize("fn, poly, why", [
    (gat2, ("m, 64", "m"), "pto.gather[axis=0] of float32[m, 64] moves whole rows of a tensor of the symbolic rows m"),
    (flip, ("m, 64",), "pto.gather[axis=0] of float32[m, 64] moves whole rows of a tensor of the symbolic rows m"),
    (head, ("m, 64",), "takes rows 0:1 of the symbolic rows m"),
    (roll, ("m, 64",), "takes rows mod(- 1, m):m of the symbolic rows m"),
], ids=lambda v: getattr(v, "__name__", None))
@pytest.mark.parametrize("vec", [(1, 64), (16, 64)])
def test_reading_other_rows_names_the_kernel_and_the_reason(fn, poly, why, vec):
    kernel = _tiled(fn, vec)
    x = _x(17)
    args = (x, np.random.default_rng(1).integers(0, 17, 17).astype(np.int32)) if fn is gat2 else (x,)
    np.testing.assert_array_equal(np.asarray(pj.kernel(kernel)(*args)), np.asarray(fn(*args)))   # static: fine
    with pytest.raises(pj.errors.PtoUnsupportedError) as err:
        pj.kernel(kernel, polymorphic_shapes=poly)(*args)
    msg = str(err.value)
    assert msg.startswith(f"pj.kernel '{fn.__name__}': ") and why in msg
    assert "reads rows outside a block's own row tile" in msg
    assert "row tile must divide" not in msg and "%" not in msg and "function '" not in msg


def test_what_stays_supported():
    """A gather of a static table by indices of the rows, a row-wise max and a column window."""
    table = _x(48, 3)

    def lookup(idx, y):
        with pj.tile(vec=(16, 64)):
            return pj.ops.gather(table, idx) + jnp.max(y, axis=-1, keepdims=True) + y[:, 0:64]

    kernel = pj.kernel(lookup, polymorphic_shapes=("m", "m, 128"))
    for rows in (1, 17, 40):
        idx = np.random.default_rng(rows).integers(0, 48, rows).astype(np.int32)
        y = np.random.default_rng(rows + 1).standard_normal((rows, 128)).astype(np.float32)
        want = table[idx] + y.max(-1, keepdims=True) + y[:, :64]
        np.testing.assert_allclose(np.asarray(kernel(idx, y)), want, rtol=1e-6)
    assert kernel.compiles == 1


def test_a_host_loop_names_the_kernel():
    def loop(x):
        return jax.lax.fori_loop(0, 3, lambda i, c: c * 2.0, x)

    with pytest.raises(pj.errors.PtoUnsupportedError, match=r"pj.kernel 'loop': the Block graph has a \w+ step "
                                                            r"\(control flow on the host"):
        pj.kernel(loop, polymorphic_shapes=("m, 64",))(_x(5))
