"""Fuzz regression (found by tests/test_fuzz.py): a bool (2, 8, 1) block permuted by (0, 2, 1) — the last
two axes swap, but as one of them has size 1 no element moves: a column of 16 values becomes two rows
of 8 (fixed: a permutation that keeps the order of the longer axes is a relayout, ``ttrans`` of
8-row blocks of a work tile of one value per row)."""
# PtoUnsupportedError: pto realize: program 'transpose': pto.ttrans permuting [2, 8, 1] by [0, 2, 1]
# (no real PTO form yet)

SPEC = {'seed': 0, 'inputs': [((3, 8, 1), 'float32', ('uniform', -2.0, 2.0))], 'steps': [('gt', {'scalar': 0.0, 'swap': False}, None), ('permute', {'dims': (0, 2, 1)}, {'vec': (2, 1, 8)})]}
