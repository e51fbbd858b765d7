"""Fuzz regression (benchmarks/fuzz_campaign.py --seed 17122026 --max-ops 16): a concat along a last axis of
four of a (16, 8, 3) and a (16, 8, 1) tensor was taken for an interleave of four unit-column pieces (the tile
pass's interleave rule counted the result's columns, not its pieces') and failed its level check."""
# TypeError: cannot reshape array of shape (16, 8, 3) (size 384) into shape (16, 8) (size 128)
# inputs: float32[16, 8, 3], float32[16, 8, 1], float32[1, 8, 4]
#   concat {'axis': 2, 'swap': False, 'y': 1} {'vec': (32,)}
#   concat {'axis': 0, 'swap': False, 'y': 2} {'vec': (4, 8)}
#   silu {} {'vec': (4, 16)}
#   reciprocal {} 
#   abs {} 
#   sqrt {}

SPEC = {'seed': 0, 'inputs': [((16, 8, 3), 'float32', ('uniform', -2.0, 2.0)), ((16, 8, 1), 'float32', ('uniform', -2.0, 2.0)), ((1, 8, 4), 'float32', ('uniform', -2.0, 2.0))], 'steps': [('concat', {'axis': 2, 'swap': False, 'y': 1}, {'vec': (32,)}), ('concat', {'axis': 0, 'swap': False, 'y': 2}, {'vec': (4, 8)}), ('silu', {}, {'vec': (4, 16)}), ('reciprocal', {}, None), ('abs', {}, None), ('sqrt', {}, None)]}
