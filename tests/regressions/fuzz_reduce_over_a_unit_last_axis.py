"""Fuzz regression (found by benchmarks/fuzz_campaign.py): a max over the unit last axis of a (33, 13, 1) tile without keepdims."""
# PtoUnsupportedError: pto realize: program 'amax': no copy of a 1x429 tile into a 33x13 one
# inputs: float32[33, 13, 1], float32[33, 13, 1], float32[33, 13, 1], float32[33, 13, 1], int32[33]
#   mul {'y': 1, 'swap': False} {'vec': (2, 8)}
#   maximum {'y': 2, 'swap': True} {'vec': (4, 16)}
#   minimum {'y': 3, 'swap': False} {'vec': (24,)}
#   cast {'dtype': 'float16', 'rounding': 'rint', 'saturate': True} {'vec': (3, 2, 32)}
#   amax {'axis': -1, 'keepdims': False} 
#   argmax {'axis': -1, 'keepdims': False} {'vec': (16,)}
#   reshape {'shape': (33,)} {'vec': (32,)}
#   reshape {'shape': (33,)} 
#   relu {} {'vec': (24,)}
#   clip {'lo': 2, 'hi': 5} 

SPEC = {'seed': 9, 'inputs': [((33, 13, 1), 'float32', ('uniform', -2.0, 2.0)), ((33, 13, 1), 'float32', ('uniform', -2.0, 2.0)), ((33, 13, 1), 'float32', ('uniform', -2.0, 2.0)), ((33, 13, 1), 'float32', ('uniform', -2.0, 2.0)), ((33,), 'int32', ('ints', -1000, 1000))], 'steps': [('mul', {'y': 1, 'swap': False}, {'vec': (2, 8)}), ('maximum', {'y': 2, 'swap': True}, {'vec': (4, 16)}), ('minimum', {'y': 3, 'swap': False}, {'vec': (24,)}), ('cast', {'dtype': 'float16', 'rounding': 'rint', 'saturate': True}, {'vec': (3, 2, 32)}), ('amax', {'axis': -1, 'keepdims': False}, None), ('argmax', {'axis': -1, 'keepdims': False}, {'vec': (16,)}), ('reshape', {'shape': (33,)}, {'vec': (32,)}), ('reshape', {'shape': (33,)}, None), ('relu', {}, {'vec': (24,)}), ('clip', {'lo': 2, 'hi': 5}, None), ('clip', {'lo': 0, 'hi': 3}, None), ('minimum', {'y': 4, 'swap': False}, None), ('relu', {}, {'vec': (8,)}), ('neg', {}, {'vec': (24,)}), ('expand', {'shape': (3, 33)}, {'vec': (8,)})]}
