"""Fuzz regression (found by benchmarks/fuzz_campaign.py)."""
# PtoasError: ptoas failed (exit -6): terminate called after throwing an instance of 'std::bad_alloc'
# (ptoas crashed on this text, or not, from run to run, depending on its input file's temporary path:
# the text now goes in on stdin; the text also moved a column sum's tile onto itself, which it no longer prints)

SPEC = {'seed': 3, 'inputs': [((8, 5), 'bfloat16', ('uniform', -2.0, 2.0)), ((5,), 'bfloat16', ('uniform', -2.0, 2.0))], 'steps': [('sum', {'axis': 0, 'keepdims': False}, {'vec': (16,)}), ('maximum', {'y': 1, 'swap': False}, {'vec': (16,)}), ('relu', {}, None), ('clip', {'lo': 1.0, 'hi': 2.5}, None), ('clip', {'lo': -2.0, 'hi': -0.5}, {'vec': (16,)}), ('relu', {}, None)]}
