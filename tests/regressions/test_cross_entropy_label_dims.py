"""``pj.nn.softmax_cross_entropy`` of (2, 5, 9) logits takes labels of the logits' leading dims (2, 5);
its docstring said "(N,)" labels of the flattened batch, which it refused with no word of what it wants."""
import numpy as np
import pytest

import ptojax as pj


def test_labels_take_the_leading_dims_and_the_refusal_says_so():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 5, 9)).astype(np.float32)
    labels = rng.integers(0, 9, (2, 5)).astype(np.int32)
    flat = logits.reshape(10, 9)
    want = np.mean(np.log(np.exp(flat).sum(-1)) - flat[np.arange(10), labels.reshape(-1)])
    np.testing.assert_allclose(float(pj.nn.softmax_cross_entropy(logits, labels)), want, rtol=1e-5)
    with pytest.raises(pj.PtoShapeError, match=r"labels \(10,\) do not match logits \(2, 5, 9\): labels take the "
                                               r"logits' leading dims, \(2, 5\)"):
        pj.nn.softmax_cross_entropy(logits, labels.reshape(-1))
