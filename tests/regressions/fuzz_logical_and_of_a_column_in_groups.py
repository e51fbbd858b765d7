"""Fuzz regression (found by benchmarks/fuzz_campaign.py, seed 226): the logical and of an f32 compare
over (8, 13, 2) and a (1, 13, 1) bool under a (2, 4, 24) tile — the bool's tile is a (4, 1) column
whose rows repeat in groups (rows 0..3 twice) and whose values broadcast across the 2 columns, which
neither a row / column expansion nor a grouped copy of rows reaches alone (fixed: the operand is
broadcast across its row first, ``trowexpand``, then those rows in groups: isel/broadcast.py
``operand``)."""
# PtoUnsupportedError: pto realize: program 'logical_and': pto.tlogical_and broadcasting [4, 1] to [8, 2] (no real PTO form yet) in `pto.tlogical_and ins(%t5 : !pto.tile_buf<loc=vec, dtype=i1, rows=8, cols=32, v_row=8, v_col=2, blayout=row_major, slayout=none_box, fractal=512, pad=0>, %t8 : !`
# inputs: float32[8, 13, 2], float32[8, 13, 2], bool[1, 13, 1], float32[8, 13, 2]
#   eq {'y': 1, 'swap': False} {'vec': (2, 24)}
#   and {'y': 2} {'vec': (2, 4, 24)}
#   select {'y': 3, 'scalar': 0.5} {'vec': (1, 4, 8)}

SPEC = {'seed': 226, 'inputs': [((8, 13, 2), 'float32', ('uniform', -2.0, 2.0)), ((8, 13, 2), 'float32', ('uniform', -2.0, 2.0)), ((1, 13, 1), 'bool', ('bool',)), ((8, 13, 2), 'float32', ('uniform', -2.0, 2.0))], 'steps': [('eq', {'y': 1, 'swap': False}, {'vec': (2, 24)}), ('and', {'y': 2}, {'vec': (2, 4, 24)}), ('select', {'y': 3, 'scalar': 0.5}, {'vec': (1, 4, 8)})]}
