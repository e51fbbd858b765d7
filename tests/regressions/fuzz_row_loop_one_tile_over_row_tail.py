"""Fuzz regression (found by benchmarks/fuzz_campaign.py): a row loop candidate whose column-tiled member is
one tile over all the rows while its reduction is a row block and a row tail — ``rowloop.fuse`` took
``tuple()`` of ``_segments``'s None (parts that do not follow the row regions) and raised a TypeError
(fixed: None means not a row loop; the partition keeps the stages)."""
# TypeError: 'NoneType' object is not iterable
# inputs: float32[32, 16, 1], float32[4], bfloat16[7, 2], bfloat16[1, 8]
#   reshape {'shape': (32, 16)} {'vec': (32,)}
#   topk {'k': 5, 'axis': -2, 'largest': False, 'indices': True} {'vec': (32,)}
#   sum {'axis': -1, 'keepdims': True} {'vec': (3, 8)}
#   silu {} {'vec': (2, 16)}
#   view {'shape': (4, 4), 'offsets': (0, 0), 'valid_shape': (1, 1)} {'vec': (32,)}
#   amax {'axis': -2, 'keepdims': True} {'vec': (1, 32)}
#   sub {'y': 1, 'swap': False} {'vec': (2, 24)}
#   view {'shape': (1, 2), 'offsets': (0, 0), 'valid_shape': (1, 2)} {'vec': (24,)}
#   cast {'dtype': 'bfloat16', 'rounding': 'rint', 'saturate': True} {'vec': (1, 48)}
#   concat {'axis': 0, 'swap': False, 'y': 2} {'vec': (4, 16)}

SPEC = {'seed': 945, 'inputs': [((32, 16, 1), 'float32', ('uniform', -2.0, 2.0)), ((4,), 'float32', ('uniform', -2.0, 2.0)), ((7, 2), 'bfloat16', ('uniform', -2.0, 2.0)), ((1, 8), 'bfloat16', ('uniform', -2.0, 2.0))], 'steps': [('reshape', {'shape': (32, 16)}, {'vec': (32,)}), ('topk', {'k': 5, 'axis': -2, 'largest': False, 'indices': True}, {'vec': (32,)}), ('sum', {'axis': -1, 'keepdims': True}, {'vec': (3, 8)}), ('silu', {}, {'vec': (2, 16)}), ('view', {'shape': (4, 4), 'offsets': (0, 0), 'valid_shape': (1, 1)}, {'vec': (32,)}), ('amax', {'axis': -2, 'keepdims': True}, {'vec': (1, 32)}), ('sub', {'y': 1, 'swap': False}, {'vec': (2, 24)}), ('view', {'shape': (1, 2), 'offsets': (0, 0), 'valid_shape': (1, 2)}, {'vec': (24,)}), ('cast', {'dtype': 'bfloat16', 'rounding': 'rint', 'saturate': True}, {'vec': (1, 48)}), ('concat', {'axis': 0, 'swap': False, 'y': 2}, {'vec': (4, 16)}), ('permute', {'dims': (1, 0)}, {'vec': (16, 48)}), ('topk', {'k': 8, 'axis': -1, 'largest': True, 'indices': False}, {'vec': (8, 48)}), ('relu', {}, {'vec': (3, 32)}), ('minimum', {'y': 3, 'swap': True}, None)]}
