"""Fuzz regression (found by benchmarks/fuzz_campaign.py)."""
# ptoas rejected @topk: 'pto.tmuls' op expects src and dst to have the same valid_shape[0]
# (a k = 1 top-k of one column: its values are a value per row, a column tile)

SPEC = {'seed': 0, 'inputs': [((2, 1), 'float32', ('uniform', -2.0, 2.0))], 'steps': [('topk', {'k': 1, 'axis': 1, 'largest': False, 'indices': False}, None)]}
