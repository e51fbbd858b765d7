"""Fuzz regression (found by benchmarks/fuzz_campaign.py --seed 11 --max-ops 4): a bitwise and of an
int32 (40,) row with a (3, 40) tensor — the bitwise rule gave ``tand`` operands of two valid shapes,
which ptoas rejects (fixed: a broadcast operand is expanded first, as for arithmetic)."""
# PtoasError: ptoas rejected @bitwise_and, line 26:5: `pto.tand ins(%xa3, %xa4 : ...`: error: 'pto.tand'
# op expects src0 and dst to have the same valid_shape

SPEC = {'seed': 137, 'inputs': [((40,), 'int32', ('ints', -1000, 1000)), ((3, 40), 'int32', ('ints', -1000, 1000))], 'steps': [('bitwise_and', {'y': 1, 'swap': False}, None)]}
