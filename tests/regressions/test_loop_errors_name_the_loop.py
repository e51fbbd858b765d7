"""An error in JAX's own part of a loop (fori_loop's counter compare, of int16 bounds) names the user's
``lax.fori_loop`` line; it named ``lax.while_loop`` at the line calling the kernel."""
import inspect

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import ptojax as pj


def _int16_bounds(x):
    return lax.fori_loop(jnp.int16(1), jnp.int16(4), lambda i, c: c + i.astype(jnp.float32), x)


def test_a_fori_loops_counter_error_names_the_fori_loop_line():
    lines, first = inspect.getsourcelines(_int16_bounds)
    line = first + next(n for n, text in enumerate(lines) if "lax.fori_loop" in text)
    with pytest.raises(pj.PtoDtypeError, match=rf"lax.fori_loop at .*test_loop_errors_name_the_loop.py:{line} "
                                               r"\(_int16_bounds\): pto.lt: operand of dtype int16"):
        pj.kernel(_int16_bounds)(np.ones((7, 8), np.float32))
