#!/usr/bin/env python3
"""The float64 reference (common/reference, through the C API's ft_reference_forward and
ft_reference_backward) against PyTorch's own attention in float64 on the CPU (ctest
python_reference_torch): two lengths either way round, grouped and multi-query heads, causal
top-left (SDPA's is_causal) and bottom-right (an explicit mask), rows that see no key (O = 0,
lse = -inf, dQ = 0), and the gradients through autograd. Exit 77 (skipped, saying why)
without PyTorch or the library.

  FLASHTUT_LIB=build/common/libflashtut.so python3 python/tests/test_reference_torch.py [-v]
"""
import ctypes
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import torch
except ImportError:
    print("test_reference_torch: skipped: PyTorch is not installed (pip install torch)")
    sys.exit(77)
import flashtut
try:
    LIB = flashtut.load()
except flashtut.LibraryError as e:
    print(f"test_reference_torch: skipped: {e}")
    sys.exit(77)

F = torch.nn.functional
# PyTorch's float64 results on the CPU (2.15) were seen to move by 1e-9 between two runs of the
# same computation, now and then on a loaded machine (python/tests/test_ring.py, CLOSE): the
# reference is held to 1e-8 of PyTorch's, which any error in the reference's algebra misses by far.
CLOSE = dict(rtol=1e-8, atol=1e-8)


def ptr(t):
    return ctypes.c_void_p(t.data_ptr())


def ours(b, hq, hk, nq, nk, d, causal, align, q, k, v, do):
    """O, lse, dQ, dK, dV of the C++ float64 reference."""
    p = flashtut.problem(b, hq, nq, d, causal=causal, heads_kv=hk, len_kv=nk, causal_align=align)
    o = torch.empty(b, hq, nq, d, dtype=torch.float64)
    lse = torch.empty(b, hq, nq, dtype=torch.float64)
    dq, dk, dv = torch.empty_like(o), torch.empty(b, hk, nk, d, dtype=torch.float64), \
        torch.empty(b, hk, nk, d, dtype=torch.float64)
    assert LIB.ft_reference_forward(p, ptr(q), ptr(k), ptr(v), ptr(o), ptr(lse)) == 0, flashtut.last_error()
    assert LIB.ft_reference_backward(p, ptr(q), ptr(k), ptr(v), ptr(do), ptr(dq), ptr(dk), ptr(dv)) == 0, \
        flashtut.last_error()
    return o, lse, dq, dk, dv


def visible(nq, nk, causal, align):
    """[nq, nk] bool: key j visible to query i (contract 1)."""
    i = torch.arange(nq)[:, None]
    j = torch.arange(nk)[None, :]
    if not causal:
        return torch.ones(nq, nk, dtype=torch.bool)
    return j <= i if align == flashtut.CAUSAL_TOP_LEFT else j <= i + nk - nq


class AgainstPyTorch(unittest.TestCase):
    CASES = [  # (B, H_q, H_kv, N_q, N_kv, d, causal, alignment)
        (2, 4, 4, 33, 33, 16, False, flashtut.CAUSAL_TOP_LEFT),
        (2, 4, 4, 33, 33, 16, True, flashtut.CAUSAL_TOP_LEFT),
        (1, 6, 2, 17, 40, 8, True, flashtut.CAUSAL_TOP_LEFT),
        (1, 6, 2, 17, 40, 8, True, flashtut.CAUSAL_BOTTOM_RIGHT),
        (1, 4, 1, 40, 17, 8, True, flashtut.CAUSAL_BOTTOM_RIGHT),  # 23 rows see nothing
        (2, 3, 3, 5, 9, 8, False, flashtut.CAUSAL_TOP_LEFT),
        (1, 8, 1, 1, 30, 16, True, flashtut.CAUSAL_BOTTOM_RIGHT),  # decoding: one new token
    ]

    def test_forward_and_gradients(self):
        torch.manual_seed(0)
        for case in self.CASES:
            b, hq, hk, nq, nk, d, causal, align = case
            with self.subTest(case=case):
                q = torch.rand(b, hq, nq, d) * 2 - 1
                k, v = (torch.rand(b, hk, nk, d) * 2 - 1 for _ in range(2))
                do = torch.rand(b, hq, nq, d) * 2 - 1
                o, lse, dq, dk, dv = ours(*case, q, k, v, do)
                mask = visible(nq, nk, causal, align)
                seen = mask.any(1)  # rows with at least one key: PyTorch gives NaN for the others
                rows = seen.nonzero().flatten()
                qd, kd, vd = (t.double().requires_grad_() for t in (q, k, v))
                qs = qd[:, :, rows]
                # The problem's scale, 1/sqrt(d), is a float32 in the library (ft_problem.scale):
                # the reference computes in float64 with that float32 value.
                scale = float(torch.tensor(d ** -0.5, dtype=torch.float32))
                ref = F.scaled_dot_product_attention(qs, kd, vd, attn_mask=mask[rows],
                                                     enable_gqa=hq != hk, scale=scale)
                kx = kd.detach().repeat_interleave(hq // hk, 1)
                s = (qs.detach() @ kx.transpose(-1, -2) * scale).masked_fill(~mask[rows], -float("inf"))
                ref_lse = torch.logsumexp(s, -1)
                (ref * do.double()[:, :, rows]).sum().backward()
                torch.testing.assert_close(o[:, :, rows], ref.detach(), **CLOSE)
                torch.testing.assert_close(lse[:, :, rows], ref_lse, **CLOSE)
                torch.testing.assert_close(dq, qd.grad, **CLOSE)
                torch.testing.assert_close(dk, kd.grad, **CLOSE)
                torch.testing.assert_close(dv, vd.grad, **CLOSE)
                empty = (~seen).nonzero().flatten()
                self.assertTrue(torch.all(o[:, :, empty] == 0))
                self.assertTrue(torch.all(lse[:, :, empty] == -float("inf")))
                self.assertTrue(torch.all(dq[:, :, empty] == 0))

    def test_refusals(self):
        p = flashtut.problem(1, 6, 8, 8, heads_kv=4)
        t = torch.zeros(1, 6, 8, 8)
        d = torch.zeros(1, 6, 8, 8, dtype=torch.float64)
        self.assertEqual(LIB.ft_reference_forward(p, ptr(t), ptr(t), ptr(t), ptr(d), ptr(d)), -1)
        self.assertIn("heads_q must be a multiple of heads_kv", flashtut.last_error())
        p = flashtut.problem(1, 2, 8, 8)
        self.assertEqual(LIB.ft_reference_forward(p, ptr(t), None, ptr(t), ptr(d), ptr(d)), -1)
        self.assertIn("K is NULL", flashtut.last_error())


if __name__ == "__main__":
    unittest.main()
