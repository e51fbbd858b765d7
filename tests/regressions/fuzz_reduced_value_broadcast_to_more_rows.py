"""Fuzz regression: a reduced (8, 2) value divided by a (2, 8, 2) tensor, the op broadcasting it to more
elements. The row-form rewrite of the Tensor level kept the quotient in the reduction's ``keepdims``
shape (1, 8, 2) and reshaped the (2, 8, 2) operand to it (fixed: an elementwise result stays in row form
only where no reduced operand is broadcast to more elements)."""
# PtoShapeError: pto.reshape: cannot reshape (2, 8, 2) (32 elements) to (1, 8, 2) (16 elements)

SPEC = {'seed': 3, 'inputs': [((24, 8, 2), 'float32', ('uniform', -2.0, 2.0)), ((2, 8, 2), 'float32', ('uniform', -2.0, 2.0))], 'steps': [('sum', {'axis': 0, 'keepdims': False}, {'vec': (32,)}), ('permute', {'dims': (0, 1)}, None), ('div', {'y': 1, 'swap': False}, None), ('clip', {'lo': -1.5, 'hi': 0.0}, {'vec': (8,)})]}
