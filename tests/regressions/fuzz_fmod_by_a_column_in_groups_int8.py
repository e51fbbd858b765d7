"""Fuzz regression (found by benchmarks/fuzz_campaign.py, seed 1085): an int8 ``fmod`` of a (3, 3, 32, 3)
tensor by a (1, 1, 32, 1) one under an (8, 16, 64) tile — the divisor's tile is a (16, 1) column whose
rows repeat in groups of the (48, 3) output and whose values broadcast across its columns (fixed: the
operand is broadcast across its row first, ``trowexpand``, then those rows in groups: isel/broadcast.py
``operand``, now the binary rule's fallback too)."""
# PtoUnsupportedError: pto realize: program 'fmod': pto.tfmod broadcasting [16, 1] to [48, 3] (no real PTO form yet) in `pto.tfmod ins(%t5 : !pto.tile_buf<loc=vec, dtype=i8, rows=48, cols=32, v_row=48, v_col=3, blayout=row_major, slayout=none_box, fractal=512, pad=0>, %t8 : !pto.t`
# inputs: int8[3, 32, 3], int8[1, 1, 32, 1], int8[3, 3, 32, 3], int8[3, 3, 32, 3], int8[32, 3, 3, 3], int8[3, 3, 3], int8[32, 3, 3, 3]
#   expand {'shape': (3, 3, 32, 3)} {'vec': (64,)}
#   add {'scalar': -5, 'swap': True} {'vec': (96,)}
#   fmod {'y': 1, 'swap': False} {'vec': (8, 16, 64)}
#   where {'y': 2, 'threshold': 3} {'vec': (128,)}
#   add {'y': 3, 'swap': False} 
#   expand {'shape': (3, 3, 32, 3)} {'vec': (1, 8, 32)}
#   permute {'dims': (2, 0, 1, 3)} {'vec': (64,)}
#   neg {} {'vec': (8, 3, 64)}
#   fmod {'y': 4, 'swap': False} 
#   where {'y': 5, 'threshold': 1} 

SPEC = {'seed': 1085, 'inputs': [((3, 32, 3), 'int8', ('ints', -128, 128)), ((1, 1, 32, 1), 'int8', ('ints', -128, 128)), ((3, 3, 32, 3), 'int8', ('ints', -128, 128)), ((3, 3, 32, 3), 'int8', ('ints', -128, 128)), ((32, 3, 3, 3), 'int8', ('ints', -128, 128)), ((3, 3, 3), 'int8', ('ints', -128, 128)), ((32, 3, 3, 3), 'int8', ('ints', -128, 128))], 'steps': [('expand', {'shape': (3, 3, 32, 3)}, {'vec': (64,)}), ('add', {'scalar': -5, 'swap': True}, {'vec': (96,)}), ('fmod', {'y': 1, 'swap': False}, {'vec': (8, 16, 64)}), ('where', {'y': 2, 'threshold': 3}, {'vec': (128,)}), ('add', {'y': 3, 'swap': False}, None), ('expand', {'shape': (3, 3, 32, 3)}, {'vec': (1, 8, 32)}), ('permute', {'dims': (2, 0, 1, 3)}, {'vec': (64,)}), ('neg', {}, {'vec': (8, 3, 64)}), ('fmod', {'y': 4, 'swap': False}, None), ('where', {'y': 5, 'threshold': 1}, None), ('where', {'y': 6, 'threshold': 0}, {'vec': (3, 128)})]}
