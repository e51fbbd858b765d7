"""Fuzz regression (benchmarks/fuzz_campaign.py --seed 20261204 --max-ops 12): a bf16 top-k along the
middle axis of [2, 3, 24] took a vec tile of (2, 3, 24), which the top-k along a leading axis (sorted in
the tile's transpose) cannot select; the tile now takes 1 on every axis but the sorted one and the last."""
# AssertionError: pto realize: program 'topk': pto.ttopk along axis 1 of a [2, 3, 24] tile (no real PTO form yet) in `pto.ttopk ins(%t5 : !pto.tile_buf<loc=vec, dtype=bf16, rows=6, cols=32, v_row=6, v_col=24, blayout=row_major, slayout=none_box, fractal=512, pad=0>) outs(%t6 : `
# inputs: bfloat16[3, 24]
#   tanh {} {'vec': (32,)}
#   expand {'shape': (2, 3, 24)} {'vec': (2, 8, 48)}
#   neg {} {'vec': (8, 64)}
#   relu {} {'vec': (1, 48)}
#   topk {'k': 3, 'axis': 1, 'largest': False, 'indices': False} {'vec': (4, 1, 64)}

SPEC = {'seed': 19120, 'inputs': [((3, 24), 'bfloat16', ('uniform', -2.0, 2.0))], 'steps': [('tanh', {}, {'vec': (32,)}), ('expand', {'shape': (2, 3, 24)}, {'vec': (2, 8, 48)}), ('neg', {}, {'vec': (8, 64)}), ('relu', {}, {'vec': (1, 48)}), ('topk', {'k': 3, 'axis': 1, 'largest': False, 'indices': False}, {'vec': (4, 1, 64)})]}
