"""Fuzz regression (found by benchmarks/fuzz_campaign.py): host code named a constant `_F32`, the
name its generated lines used for float32, once the namespace held 32 entries (fixed: they use `_np.float32`)."""
# PtoTaskError: pto runtime: task 0 'neg+maximum+neg+amin+neg+abs+add+log+clip+clip+clip(0)' on AIV (core AIV 0) failed: TypeError: Cannot interpret '<function _numeric_op.<locals>.run at 0x7fd3f3026340>' as a data type
# inputs: float16[8], float16[8]
#   neg {} {'vec': (64,)}
#   maximum {'y': 1, 'swap': False} {'vec': (48,)}
#   neg {} {'vec': (48,)}
#   amin {'axis': -1, 'keepdims': True} {'vec': (64,)}
#   neg {} 
#   log {} 
#   clip {'lo': 1.0, 'hi': 2.5} {'vec': (48,)}
#   clip {'lo': -0.5, 'hi': 1.0} 
#   clip {'lo': -2.0, 'hi': -0.5} {'vec': (16,)}

SPEC = {'seed': 2, 'inputs': [((8,), 'float16', ('uniform', -2.0, 2.0)), ((8,), 'float16', ('uniform', -2.0, 2.0))], 'steps': [('neg', {}, {'vec': (64,)}), ('maximum', {'y': 1, 'swap': False}, {'vec': (48,)}), ('neg', {}, {'vec': (48,)}), ('amin', {'axis': -1, 'keepdims': True}, {'vec': (64,)}), ('neg', {}, None), ('log', {}, None), ('clip', {'lo': 1.0, 'hi': 2.5}, {'vec': (48,)}), ('clip', {'lo': -0.5, 'hi': 1.0}, None), ('clip', {'lo': -2.0, 'hi': -0.5}, {'vec': (16,)})]}
