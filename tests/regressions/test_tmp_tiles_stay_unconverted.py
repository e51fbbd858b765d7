"""A bf16 (or int8) instruction widened to f32 (i16) converted every narrow operand, its tmp scratch tile
too: a bf16 row max over 16 x 1024 read a tile nothing wrote (``tcvt`` of an uninitialised tmp) and took a
bf16 and an f32 copy of it. A tmp operand is now a wide tile of its own, and no function reads a tile
that nothing wrote."""
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from helpers import BF16
from ptojax.ascend.isel import liveness

OPS = {"max-rows": lambda a: jnp.max(a, 1), "min-cols": lambda a: jnp.min(a, 0), "sum-cols": lambda a: jnp.sum(a, 0),
       "argmax-rows": lambda a: jnp.argmax(a, 1), "argmin-cols": lambda a: jnp.argmin(a, 0), "min-all": jnp.min,
       "cumsum": lambda a: jnp.cumsum(a, 1), "sort": lambda a: jnp.sort(a, 1), "prod-rows": lambda a: jnp.prod(a, 1)}


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16, np.int32, np.int8])
def test_no_function_reads_a_tile_nothing_wrote(dtype):
    x = np.random.default_rng(0).integers(-3, 4, (130, 257)).astype(dtype)
    for name, fn in OPS.items():
        text = pj.kernel(fn).lower(x).as_text("pto")
        for function, body in liveness.functions(text).items():
            assert not liveness._analyse(body)[1], (name, function)

