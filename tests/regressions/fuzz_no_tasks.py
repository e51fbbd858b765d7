"""Fuzz regression (found by the CI fuzz set, tests/test_fuzz.py)."""
# a kernel with no task (a reshape to its own shape): the scheduler's empty graph

SPEC = {'seed': 0, 'inputs': [((1,), 'float32', ('uniform', -2.0, 2.0))], 'steps': [('reshape', {'shape': (1,)}, None)]}
