"""Finding of a probe of the vendor's tools on 443 kernels (761 programs cross-checked, none differing):
the A5 text of an int8 ``max`` / ``min`` / ``clip`` against a scalar filled the scalar into an i16 tile, as
A2/A3 code computes int8 in i16, but took the i8 tile as it is (A5 has an i8 ``tmax``): ptoas refused
``'pto.tmax' op expects src0 and src1 to have the same element type``. The scalar's tile takes the
dtype the instruction computes in on each arch now."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from vendor_tools import tools

_FIXTURES = (tools,)                  # (the vendor tools, pinned)


@pytest.mark.usefixtures("tools")
@pytest.mark.parametrize("dtype", [np.int8, np.int32])
@pytest.mark.parametrize("fn", [lambda a: jnp.maximum(a, 100), lambda a: jnp.minimum(3, a),
                                lambda a: jnp.clip(a, -5, 5)], ids=["max", "min", "clip"])
def test_integer_max_min_with_a_scalar_assembles_for_a3_and_a5(fn, dtype):
    x = np.random.default_rng(0).integers(-128, 128, (9, 40)).astype(dtype)
    compiled = pj.kernel(fn).lower(x).compile()
    np.testing.assert_array_equal(compiled(x), jax.jit(fn)(x))
    for arch in ("a3", "a5"):
        cpp = compiled.ptoas(arch=arch)
        assert "TMAX(" in cpp or "TMIN(" in cpp
