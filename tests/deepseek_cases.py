"""The DeepSeek-V3.2 tests' small shapes (B=2, MTP1, 4 heads, paged KV up to 512, top-k 64), CANN's
sparse-attention criterion and the sparse-attention reference."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from examples.deepseek_v32 import kernels as K  # noqa: E402
from examples.deepseek_v32 import reference as R  # noqa: E402

B, S1, H, Q_LORA, N, D, TOPK = 2, 2, 256, 128, 4, 128, 64
SEQ = [500, 300]                       # KV lengths (the new tokens are the last S1 of each)
MAX_BLOCKS = 4                         # 512 positions per batch in the block table


def int8_close(got, want):
    """CANN's int8 criterion: within 1 LSB on at most 0.5 % of the elements."""
    diff = np.abs(np.asarray(got, np.int32) - np.asarray(want, np.int32))
    assert diff.max() <= 1, f"int8 differs by {diff.max()} LSB"
    assert (diff > 0).mean() <= 0.005, f"{(diff > 0).mean():.2%} of int8 elements differ by 1 LSB"


def fp16_close(got, want):
    """fp16 scales and weights: atol 2.5e-5 + rtol 1e-3 (one fp16 ulp at the scales' O(0.1))."""
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), atol=2.5e-5, rtol=1e-3)


def cann_close(got, want, rtol=5e-3, atol=1e-4, max_ratio=0.005):
    """CANN's sparse-attention criterion: isclose(rtol 5e-3, atol 1e-4) on all but 0.5 % of the elements."""
    bad = ~np.isclose(np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=rtol, atol=atol)
    assert bad.mean() <= max_ratio, f"{bad.mean():.2%} of the elements outside rtol {rtol}"


def sfa_ref(q, kv, idx, table, lens, qr, kr):
    """Sparse attention by the plain-JAX reference, in float32."""
    return np.asarray(R.sparse_attention(q, kv, idx, table, lens, scale_value=K.SOFTMAX_SCALE, query_rope=qr,
                                         kr_cache=kr), np.float32)
