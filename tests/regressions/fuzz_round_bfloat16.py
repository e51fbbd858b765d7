"""Fuzz regression: ``round`` of a bfloat16 vector, then argmax. ``pto.tround`` had no selection (for
any dtype: the real ISA has no rounding instruction, and A2/A3 compute no bf16 at all). Fixed: it is
selected in f32 (bf16 / f16 widened and narrowed back, exactly) as ``tcvt`` to i32 with RINT and back,
a zero result signed like x (``x * 0``), and x itself where |x| >= 2**23 (``tabs``, ``tcmps``, ``tsel``)."""
# pto realize: program 'round+argmax': pto.tround has no selection (no real PTO form yet) in
# `pto.tround ins(%t3 : !pto.tile_buf<loc=vec, dtype=bf16, rows=1, cols=32, v_row=1, v_col=31, ...>) outs(...)`

SPEC = {'seed': 2, 'inputs': [((31,), 'bfloat16', ('uniform', -2.0, 2.0))], 'steps': [('round', {}, {'vec': (64,)}), ('argmax', {'axis': 0, 'keepdims': False}, {'vec': (64,)}), ('abs', {}, None)]}
