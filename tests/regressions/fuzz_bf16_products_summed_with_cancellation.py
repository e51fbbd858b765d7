"""Fuzz regression (found by benchmarks/fuzz_campaign.py --seed 14122026): a bf16 product summed along a
row of 17 with cancellation (exact sum 0.0532, terms up to 4): the cores round each product to bf16 and
sum in f32, as the tensor level's reference does, but the levels were evaluated with XLA's excess
precision on, which keeps the unrounded products (0.0674), and verify failed. Levels are evaluated
with each op's result rounded to its dtype."""
# PtoVerifyError: pto verify: level 'tile' output 0 (bfloat16[7, 1]) differs from the level before at (4, 0): 0.05322265625 vs 0.0673828125 (rtol 0.032, atol 0.01); 1 element(s) out of tolerance
# inputs: bfloat16[7, 17], bfloat16[1, 17]
#   mul {'y': 1, 'swap': False} {'vec': (8, 32)}
#   sum {'axis': -1, 'keepdims': True} {'vec': (2, 16)}

SPEC = {'seed': 44, 'inputs': [((7, 17), 'bfloat16', ('uniform', -2.0, 2.0)), ((1, 17), 'bfloat16', ('uniform', -2.0, 2.0))], 'steps': [('mul', {'y': 1, 'swap': False}, {'vec': (8, 32)}), ('sum', {'axis': -1, 'keepdims': True}, {'vec': (2, 16)})]}
