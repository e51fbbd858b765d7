"""Fuzz regression (found by benchmarks/fuzz_campaign.py)."""
# ptoas rejected @expand: 'pto.tcolexpand' op expects src and dst to have the same valid_shape[1]
# (one value expanded over a column tile: the column's row, filled)

SPEC = {'seed': 0, 'inputs': [((3, 1), 'float32', ('uniform', -2.0, 2.0)), ((3, 1), 'float32', ('uniform', -2.0, 2.0))], 'steps': [('neg', {}, {'vec': (8,)}), ('fmod', {'y': 1, 'swap': False}, None), ('expand', {'shape': (2, 3, 1)}, {'vec': (2, 1, 8)})]}
