"""The documented error of ``x ** y`` (docs/ops.md): ``exp(y log |x|)`` rounds ``log |x|`` and the product
to float32, each costing up to ``|y log x|`` ulp, so up to about ``2 |y log x|`` (the docs said
``|y log x|``; these bases exceed it)."""
import numpy as np
import pytest

import ptojax as pj

WORST = [(1.2476673e-29, 1.0 / 3), (2.6096278e-15, 2.5), (8.163178e-24, 1.5), (3.0e-38, -0.75), (7.0e37, 0.9)]


@pytest.mark.parametrize("base,y", WORST, ids=str)
def test_pow_is_within_the_documented_bound(base, y):
    x = np.full((1, 8), base, np.float32)
    got = float(np.asarray(pj.kernel(lambda v: v ** y)(x))[0, 0])
    true = np.float64(np.float32(base)) ** np.float64(np.float32(y))
    ulp = float(np.spacing(np.float32(true)))
    bound = 2 * abs(float(np.float32(y)) * np.log(np.float64(np.float32(base)))) + 2
    assert abs(got - true) <= bound * ulp


def test_pow_of_tiles_over_random_data_is_within_the_documented_bound():
    rng = np.random.default_rng(3)
    x = np.exp(rng.uniform(-80, 80, (16, 256))).astype(np.float32)
    y = rng.uniform(-1.0, 1.0, (16, 256)).astype(np.float32)
    got = np.asarray(pj.kernel(lambda a, b: a ** b)(x, y), np.float64)
    true = x.astype(np.float64) ** y.astype(np.float64)
    ulp = np.spacing(true.astype(np.float32)).astype(np.float64)
    bound = 2 * np.abs(y * np.log(x.astype(np.float64))) + 2
    assert np.all(np.abs(got - true) <= bound * ulp)


def test_the_documented_example():
    """ops.md: ``1.2476673e-29 ** (1/3)``: 30 ulp (within the bound of about 2 |y log x| = 44)."""
    x = np.full((1, 8), 1.2476673e-29, np.float32)
    got = float(np.asarray(pj.kernel(lambda v: v ** (1.0 / 3))(x))[0, 0])
    true = np.float64(np.float32(1.2476673e-29)) ** np.float64(np.float32(1.0 / 3))
    assert round(abs(got - true) / float(np.spacing(np.float32(true)))) == 30
