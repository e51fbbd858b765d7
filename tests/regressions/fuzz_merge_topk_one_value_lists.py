"""Fuzz regression: a top-k with k = 1 over a 32-wide row in tiles of 8 (four chunks, each leaving one
value and index, then ``merge_topk`` of the four one-value lists). The merge's candidates are column
tiles (a value per row, whose elementwise form is the 1×4 row of their bytes), but the sort row's data
view was four lists of one value each (4×1 in 32-byte segments): ptoas rejected the ``tmuls`` copying
one into the other. Fixed: column candidates are first spread one per 32-byte row (``ttrans``), so a
sorted row's lists are an aligned 4×1 window (a window of the column's row would not be 32-byte
aligned, which pto-isa's C++ asserts); and a k = 1 result sorted in another dtype (bf16 in f32) is
moved into its column before it converts back (ptoas rejected that ``tcvt`` too)."""
# ptoas rejected @merge_topk, line 111:5: `pto.tmuls ins(%xa18, %xk17 : !pto.tile_buf<loc=vec, dtype=f32,
# rows=1, cols=4, v_row=1, v_col=4, ...>, f32) outs(%xa4 : ...)`: error: 'pto.tmuls' op expects src and dst
# to have the same valid_shape[0]

SPEC = {'seed': 8463, 'inputs': [((32,), 'float32', ('uniform', -2.0, 2.0))], 'steps': [('topk', {'k': 1, 'axis': -1, 'largest': True, 'indices': True}, {'vec': (8,)})]}
