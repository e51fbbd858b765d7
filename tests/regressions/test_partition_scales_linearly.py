"""Partition looks only at related groups: a kernel of n independent ops (an optimizer update of n
parameter arrays) lowered in time quadratic in n (n = 800: 12.8 s; every pair of groups compared for
a sibling merge, every group's escaping results found by a scan of the whole jaxpr). Counted, not
timed: the pair checks grow with the ops' relations, not with n squared."""
import numpy as np
import pytest

import ptojax as pj
from ptojax.lowering import partition


def _independent(*xs):
    return tuple(x * 2.0 for x in xs)


def _summed(*xs):
    total = xs[0] * 2.0
    for x in xs[1:]:
        total = total + x * 2.0
    return total


@pytest.mark.parametrize("fn", [_independent, _summed], ids=["independent", "summed"])
def test_pair_checks_grow_linearly_in_the_ops(fn, monkeypatch):
    calls = {"_sibling": 0, "_joins": 0, "_readers": 0}
    for name in calls:
        real = getattr(partition, name, None)

        def counted(*args, real=real, name=name):
            calls[name] += 1
            return real(*args)
        monkeypatch.setattr(partition, name, counted, raising=False)
    counts = {}
    for n in (16, 64):
        for name in calls:
            calls[name] = 0
        xs = [np.full((64, 64), i, np.float32) for i in range(n)]
        pj.lower(fn, *xs)
        counts[n] = dict(calls)
        np.testing.assert_array_equal(np.asarray(pj.kernel(fn)(*xs)), np.asarray(fn(*xs)))
    for name in ("_sibling", "_joins"):
        assert counts[64][name] <= 4 * counts[16][name] + 8, (name, counts)     # quadratic: 16x
    assert counts[64]["_readers"] <= 2, counts
