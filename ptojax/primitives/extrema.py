"""The JVP of ``amax`` / ``amin``: the tangent averaged over the elements equal to the result (as
``jnp.max``'s). A module of its own because it combines reductions with elementwise comparisons, and
``elementwise.py`` sits above ``reduce.py`` (its transposes are sums)."""
from __future__ import annotations

from .._jax import ad
from . import cast as _cast
from . import elementwise, layout
from .reduce import reduced_shape, amax_p, amin_p, sum_p


def _extremum_jvp(g, ans, x, *, axes, keepdims, skip_nan=False):
    kept = layout.reshape(ans, reduced_shape(x.shape, axes, True))
    mask = _cast.cast(elementwise.eq(x, kept), g.dtype)
    picked = sum_p.bind(elementwise.mul(g, mask), axes=axes, keepdims=keepdims)
    return elementwise.div(picked, sum_p.bind(mask, axes=axes, keepdims=keepdims))


ad.defjvp2(amax_p, _extremum_jvp)
ad.defjvp2(amin_p, _extremum_jvp)
