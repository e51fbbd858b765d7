"""Fuzz regression (found by tests/test_fuzz.py): the logical and of a float32 compare and a bool input
on a (33, 8, 1) column — the f32 compare's packed mask was one byte per row (8 f32 elements per 32 bytes)
and the bool's, compared as i16, two (16 per 32 bytes): ptoas rejected the ``tand`` of masks of different
valid widths (fixed: masks and the tiles selected through them are aliased to one width)."""
# ptoas rejected @gt_logical_and, line 43:5: `pto.tand ...`: error: 'pto.tand' op expects src1 and dst to
# have the same valid_shape

SPEC = {'seed': 2, 'inputs': [((33, 8, 1), 'float32', ('uniform', -2.0, 2.0)), ((33, 8, 1), 'bool', ('bool',))], 'steps': [('gt', {'scalar': -2.0, 'swap': False}, None), ('and', {'y': 1}, None)]}
