"""Fuzz regression (found by tests/test_fuzz.py): ``fmod`` of a (2, 2, 1) block by a (2, 1, 1) one —
a column whose values repeat in groups, which no aligned row subset of a column reaches (fixed: the
operand is broadcast through a work tile of one value per row, ``ttrans`` there and back)."""
# PtoUnsupportedError: pto realize: program 'fmod': pto.tfmod broadcasting both operands ([2, 2, 1],
# [2, 1, 1]) (no real PTO form yet)

SPEC = {'seed': 0, 'inputs': [((32, 5, 1), 'float32', ('uniform', -2.0, 2.0)), ((32, 1, 1), 'float32', ('uniform', -2.0, 2.0))], 'steps': [('fmod', {'y': 1, 'swap': False}, {'vec': (2, 2, 8)})]}
