"""Fuzz regression (found by benchmarks/fuzz_campaign.py)."""
# ptoas rejected: 'pto.treshape' op expects src and dst to have the same total byte size
# (zero-filling a one-element byte column through an i16 alias: fill its row instead)

SPEC = {'seed': 0, 'inputs': [((16,), 'int32', ('ints', -1000, 1000)), ((16,), 'int32', ('ints', -1000, 1000)), ((16,), 'int32', ('ints', -1000, 1000)), ((1,), 'int32', ('ints', -1, 17))], 'steps': [('minimum', {'y': 1, 'swap': False}, None), ('ge', {'y': 2, 'swap': False}, None), ('gather', {'y': 3, 'axis': 0}, None)]}
