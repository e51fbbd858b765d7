"""Fuzz regression (found by tests/test_fuzz.py's CI property)."""
# PtoasError: ptoas rejected @clip_bitwise_and: 'pto.tand' op expects src0, src1, and dst to use
# row-major layout (an int32 column, argmax's result, and-ed as i16 halves of its col_major tile)

SPEC = {'seed': 0, 'inputs': [((1,), 'float32', ('uniform', -2.0, 2.0)), ((), 'int32', ('ints', -1000, 1000))],
        'steps': [('argmax', {'axis': 0, 'keepdims': False}, None), ('clip', {'lo': 0, 'hi': 3}, None),
                  ('bitwise_and', {'y': 1, 'swap': False}, None)]}
