"""A polymorphic sim kernel computing with its row count as a value (``x * (x.shape[0] % 256)``,
``x.shape[0] // 1024``, ``min(x.shape[0], 100)``) took the value it has at the two template row counts
(512 and 768), where they agree, and gave wrong numbers at other sizes (0 for ``17 % 256``). Such a kernel
is refused at its symbolic trace, under ``polymorphic_shapes`` and ``jax.export`` alike; at a concrete
size it runs."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src import core

import ptojax as pj

KERNELS = {"mod": lambda x: x * (x.shape[0] % 256), "floordiv": lambda x: x + (x.shape[0] // 1024),
           "min": lambda x: x * core.min_dim(x.shape[0], 100), "rows": lambda x: x * x.shape[0]}
MESSAGE = r"computes with the symbolic row count as a value \({}: .*pass the value as an argument"


@pytest.mark.parametrize("name, dim", [("mod", r"mod\(m, 256\)"), ("floordiv", r"floordiv\(m, 1024\)"),
                                       ("min", r"min\(m, 100\)"), ("rows", "m")])
def test_the_row_count_as_a_value_is_refused(name, dim):
    fn = KERNELS[name]
    with pytest.raises(pj.PtoUnsupportedError, match=MESSAGE.format(dim)):
        pj.kernel(fn, polymorphic_shapes=("m, 64",))(np.ones((17, 64), np.float32))
    m, = jax.export.symbolic_shape("m")
    with pytest.raises(pj.PtoUnsupportedError, match=MESSAGE.format(dim)):
        jax.export.export(jax.jit(pj.kernel(fn)))(jax.ShapeDtypeStruct((m, 64), jnp.float32))
    x = np.ones((300, 64), np.float32)
    np.testing.assert_array_equal(np.asarray(pj.kernel(fn)(x)), np.asarray(fn(x)))    # a concrete size runs
