"""Fuzz regression (benchmarks/fuzz_campaign.py --seed 4122026 --max-ops 16): an i32 top-k along axis 2 of
(3, 1, 21, 5) (no real form then), then, moved last and staged, a merge program over 6-D GM views
(3, 1, 5, 1, 4, 6) that crashed Huawei's ptoas (exit -11); views now drop unit dims past 5 dims."""
# AssertionError: pto realize: program 'topk': pto.ttopk along axis 2 of a [1, 1, 21, 5] i32 tile (i32 sorts along the last axis) (no real PTO form yet) in `pto.ttopk ins(%t4 : !pto.tile_buf<loc=vec, dtype=i32, rows=21, cols=8, v_row=21, v_col=5, blayout=row_major, slayout=none_box, fractal=512, pad=0>) outs(%t5 : !`
# inputs: int8[32, 1], int8[2, 32, 1], int8[1, 5, 32], int32[5], int32[1, 1, 5], int32[3, 1, 16, 5], int32[3, 1, 21, 1]
#   maximum {'y': 1, 'swap': False} {'vec': (2, 1, 96)}
#   sub {'scalar': -3, 'swap': False} {'vec': (8, 4, 128)}
#   abs {} {'vec': (4, 96)}
#   matmul {'y': 2, 'bias': 3, 'out_dtype': None, 'transpose_a': True, 'transpose_b': True} {'cube': (64, 32, 48)}
#   sum {'axis': 0, 'keepdims': True} {'vec': (8, 8)}
#   fmod {'scalar': -6, 'swap': False} {'vec': (2, 8, 16)}
#   mul {'y': 4, 'swap': False} 
#   expand {'shape': (3, 1, 5, 5)} 
#   neg {} {'vec': (8, 8, 8)}
#   concat {'axis': -2, 'swap': False, 'y': 5} {'vec': (8,)}

SPEC = {'seed': 139, 'inputs': [((32, 1), 'int8', ('ints', -128, 128)), ((2, 32, 1), 'int8', ('ints', -128, 128)), ((1, 5, 32), 'int8', ('ints', -128, 128)), ((5,), 'int32', ('ints', -1000, 1000)), ((1, 1, 5), 'int32', ('ints', -1000, 1000)), ((3, 1, 16, 5), 'int32', ('ints', -1000, 1000)), ((3, 1, 21, 1), 'int32', ('ints', -1000, 1000))], 'steps': [('maximum', {'y': 1, 'swap': False}, {'vec': (2, 1, 96)}), ('sub', {'scalar': -3, 'swap': False}, {'vec': (8, 4, 128)}), ('abs', {}, {'vec': (4, 96)}), ('matmul', {'y': 2, 'bias': 3, 'out_dtype': None, 'transpose_a': True, 'transpose_b': True}, {'cube': (64, 32, 48)}), ('sum', {'axis': 0, 'keepdims': True}, {'vec': (8, 8)}), ('fmod', {'scalar': -6, 'swap': False}, {'vec': (2, 8, 16)}), ('mul', {'y': 4, 'swap': False}, None), ('expand', {'shape': (3, 1, 5, 5)}, None), ('neg', {}, {'vec': (8, 8, 8)}), ('concat', {'axis': -2, 'swap': False, 'y': 5}, {'vec': (8,)}), ('bitwise_or', {'y': 6, 'swap': True}, {'vec': (2, 3, 32)}), ('topk', {'k': 6, 'axis': 2, 'largest': False, 'indices': True}, {'vec': (8, 8)})]}
