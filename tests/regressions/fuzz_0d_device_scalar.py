"""Fuzz regression (found by benchmarks/fuzz_campaign.py)."""
# PtoOrchestrationError: 'pto.abs' on a GM tensor outside a block (0-d work on a core's result ran on the host)

SPEC = {'seed': 3, 'inputs': [((7,), 'float32', ('uniform', -2.0, 2.0))], 'steps': [('sum', {'axis': 0, 'keepdims': False}, {'vec': (8,)}), ('abs', {}, None)]}
