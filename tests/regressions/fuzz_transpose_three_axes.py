"""Fuzz regression (benchmarks/fuzz_campaign.py --seed 20261204 --max-ops 12): a transpose by
(0, 2, 3, 1) took a [1, 2, 3, 2] input tile, whose three long axes ttrans cannot rotate; the tile now
cuts input axes to 1 (the outermost first) until its long axes keep their order or two swap."""
# AssertionError: pto realize: program 'transpose': pto.ttrans permuting [1, 2, 3, 2] by [0, 2, 3, 1] (no real PTO form yet) in `pto.ttrans ins(%t5 : !pto.tile_buf<loc=vec, dtype=f32, rows=6, cols=8, v_row=6, v_col=2, blayout=row_major, slayout=none_box, fractal=512, pad=0>) outs(%t6 : !p`
# inputs: float16[1], float16[16], float16[17]
#   abs {} {'vec': (64,)}
#   concat {'axis': 0, 'swap': True, 'y': 1} {'vec': (16,)}
#   abs {} {'vec': (48,)}
#   div {'y': 2, 'swap': True} 
#   expand {'shape': (3, 17)} {'vec': (16,)}
#   expand {'shape': (3, 3, 17)} {'vec': (16, 4, 16)}
#   expand {'shape': (3, 3, 3, 17)} {'vec': (1, 64)}
#   abs {} {'vec': (16,)}
#   cast {'dtype': 'float32', 'rounding': 'rint', 'saturate': True} {'vec': (32,)}
#   view {'shape': (1, 2, 2, 8), 'offsets': (1, 1, 1, 10), 'valid_shape': (1, 2, 1, 7)} {'vec': (8, 3, 32)}

SPEC = {'seed': 52759, 'inputs': [((1,), 'float16', ('uniform', -2.0, 2.0)), ((16,), 'float16', ('uniform', -2.0, 2.0)), ((17,), 'float16', ('uniform', -2.0, 2.0))], 'steps': [('abs', {}, {'vec': (64,)}), ('concat', {'axis': 0, 'swap': True, 'y': 1}, {'vec': (16,)}), ('abs', {}, {'vec': (48,)}), ('div', {'y': 2, 'swap': True}, None), ('expand', {'shape': (3, 17)}, {'vec': (16,)}), ('expand', {'shape': (3, 3, 17)}, {'vec': (16, 4, 16)}), ('expand', {'shape': (3, 3, 3, 17)}, {'vec': (1, 64)}), ('abs', {}, {'vec': (16,)}), ('cast', {'dtype': 'float32', 'rounding': 'rint', 'saturate': True}, {'vec': (32,)}), ('view', {'shape': (1, 2, 2, 8), 'offsets': (1, 1, 1, 10), 'valid_shape': (1, 2, 1, 7)}, {'vec': (8, 3, 32)}), ('concat', {'axis': -2, 'swap': False}, None), ('permute', {'dims': (0, 2, 3, 1)}, {'vec': (3, 2, 24)})]}
