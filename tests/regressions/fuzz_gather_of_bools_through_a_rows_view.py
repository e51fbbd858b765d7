"""Fuzz regression (found by benchmarks/fuzz_campaign.py --seed 15122026): a row gather of a bool tensor
of three dims read its operand through a rows view (every dim but the last flattened) typed ``i1``,
where the function takes booleans as bytes (``!pto.ptr<i8>``): ptoas rejected the text ("use of value
'%arg0' expects different type than prior uses"). The rows view takes the bytes' type."""
# PtoasError: ptoas rejected @gather_2, line 237:34: `%xrv5 = pto.make_tensor_view %arg0, shape = [%xk6, %c1], strides = [%c1, %xk4] : !pto.tensor_view<3x1xi1>`: error: use of value '%arg0' expects different type than prior uses: '!pto.ptr<i1>' vs '!pto.ptr<i8>'
# inputs: int8[40], int8[3, 1, 40], int32[1], int32[5]
#   reshape {'shape': (1, -1)} {'vec': (64,)}
#   le {'y': 1, 'swap': True} {'vec': (1, 1, 128)}
#   gather {'y': 2, 'axis': -1} {'vec': (3, 16)}
#   gather {'y': 3, 'axis': 0}

SPEC = {'seed': 2, 'inputs': [((40,), 'int8', ('ints', -128, 128)), ((3, 1, 40), 'int8', ('ints', -128, 128)), ((1,), 'int32', ('ints', -1, 41)), ((5,), 'int32', ('ints', -1, 4))], 'steps': [('reshape', {'shape': (1, -1)}, {'vec': (64,)}), ('le', {'y': 1, 'swap': True}, {'vec': (1, 1, 128)}), ('gather', {'y': 2, 'axis': -1}, {'vec': (3, 16)}), ('gather', {'y': 3, 'axis': 0}, None)]}
