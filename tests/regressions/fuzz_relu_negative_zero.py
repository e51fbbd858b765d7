"""Fuzz regression (found by benchmarks/fuzz_campaign.py --seed 8122026 --max-ops 16): relu(-0.0) is +0.0 as in XLA."""
# AssertionError: 
# Arrays are not equal
# output 0: infinities
# inf values mismatch:
#  ACTUAL: array([ inf,  inf,  inf,  inf,  inf,  inf,  inf,  inf,  inf,  inf,  inf,
#         inf,  inf,  inf,  inf,  inf,  inf,  inf,  inf,  inf,  inf,  inf,
#         inf,  inf,  inf,  inf,  inf,  inf,  inf,  inf,  inf,  inf,  inf,...
#  DESIRED: array([inf, inf, inf, inf, inf, inf, inf, inf, inf, inf, inf, inf, inf,
#        inf, inf, inf, inf, inf, inf, inf, inf, inf, inf, inf, inf, inf,
#        inf, inf, inf, inf, inf, inf, inf, inf, inf, inf, inf, inf, inf,...
# inputs: float16[8, 31, 1], float16[8, 31, 1], float16[31, 1]
#   minimum {'y': 1, 'swap': True} {'vec': (16, 2, 32)}

SPEC = {'seed': 966, 'inputs': [((8, 31, 1), 'float16', ('uniform', -2.0, 2.0)), ((8, 31, 1), 'float16', ('uniform', -2.0, 2.0)), ((31, 1), 'float16', ('uniform', -2.0, 2.0))], 'steps': [('minimum', {'y': 1, 'swap': True}, {'vec': (16, 2, 32)}), ('relu', {}, {'vec': (32,)}), ('div', {'y': 2, 'swap': True}, {'vec': (2, 8, 16)})]}
