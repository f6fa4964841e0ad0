#!/usr/bin/env python3
"""GPU tests of flashtut.ops (ctest python_ops_gpu): the operators as PyTorch checks custom
operators (torch.library.opcheck), flashtut.attention and its gradients against a float64
reference (grouped heads, two lengths, causal and not; chapter 08's backward, which the
operator expands grouped heads for, forced on any GPU), decode steps through chapter 11's
kernel (a spy on the forward it calls), a small model under torch.compile(fullgraph=True)
against the same model run eagerly, and the forward and backward captured in a CUDA graph
and replayed on new inputs. Exit 77 (skipped, saying why) without PyTorch, CUDA, an sm_80
GPU or the library.

  FLASHTUT_LIB=build/common/libflashtut.so python3 python/tests/test_ops_gpu.py [-v]
"""
import math
import os
import sys
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))


def skip(why):
    print(f"test_ops_gpu: skipped: {why}")
    sys.exit(77)


try:
    import torch
except ImportError:
    skip("PyTorch is not installed")
if not torch.cuda.is_available():
    skip("no CUDA GPU")
if torch.cuda.get_device_capability() < (8, 0):
    skip("chapters 07 and 08 need an sm_80 GPU or newer")
import flashtut
try:
    flashtut.load()
except flashtut.LibraryError as e:
    skip(str(e))
import flashtut.ops

torch.manual_seed(0)


def reference(q, k, v, causal, bottom_right=False):
    """float64 attention with grouped heads and SDPA's (top-left) causal mask, or with
    bottom_right the decode's (row i sees keys up to i + N_k - N_q)."""
    q, k, v = (t.double() for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = (t.repeat_interleave(group, dim=1) for t in (k, v))
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        nq, nk = s.shape[-2:]
        hidden = torch.ones(nq, nk, dtype=torch.bool, device=s.device).triu(1 + (nk - nq if bottom_right else 0))
        s = s.masked_fill(hidden, -math.inf)
    return torch.softmax(s, -1) @ v


def rel(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


def qkv(b, hq, hk, nq, nk, d, grad=False):
    q = torch.randn(b, hq, nq, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, hk, nk, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    return tuple(t.requires_grad_(grad) for t in (q, k, v))


class Operators(unittest.TestCase):
    def test_opcheck(self):
        # Schema, fake implementation, autograd registration and dispatch, as PyTorch checks
        # custom operators.
        q, k, v = qkv(2, 4, 4, 128, 128, 64, grad=True)
        torch.library.opcheck(torch.ops.flashtut.attention_forward.default,
                              (q, k, v, True, None, 0))
        q, k, v = qkv(1, 4, 2, 64, 200, 128)
        torch.library.opcheck(torch.ops.flashtut.attention_forward.default,
                              (q, k, v, False, 0.1, 1), test_utils=("test_schema", "test_faketensor"))
        # The backward operator on grouped heads (and two lengths where its kernel takes them).
        n_k = 200 if flashtut.ops.backward_computes(q.device).lengths else 64
        q, k, v = qkv(1, 4, 2, 64, n_k, 128)
        o, lse = torch.ops.flashtut.attention_forward(q, k, v, True, None, 0)
        torch.library.opcheck(torch.ops.flashtut.attention_backward.default,
                              (torch.randn_like(o), q, k, v, o, lse, True, None, 0),
                              test_utils=("test_schema", "test_faketensor"))


TWO_LENGTHS = ((1, 4, 2, 16, 300, 128), (2, 4, 4, 300, 16, 64))  # (B, H, H_kv, N_q, N_k, d)


class Attention(unittest.TestCase):
    def check(self, shape, causal, grad):
        q, k, v = qkv(*shape, grad=grad)
        ctx = torch.enable_grad() if grad else torch.no_grad()
        with ctx:
            o = flashtut.attention(q, k, v, is_causal=causal, enable_gqa=shape[1] != shape[2])
        ref = reference(q, k, v, causal) if not grad else None
        if grad:
            qd, kd, vd = (t.detach().double().requires_grad_() for t in (q, k, v))
            ref = reference(qd, kd, vd, causal)
            do = torch.randn_like(o)
            (o.float() * do.float()).sum().backward()
            (ref * do.double()).sum().backward()
            for name, a, b in (("dq", q.grad, qd.grad), ("dk", k.grad, kd.grad), ("dv", v.grad, vd.grad)):
                self.assertLess(rel(a, b), 1e-2, f"{name} {shape} causal={causal}")
        self.assertLess(rel(o, ref), 1e-2, f"o {shape} causal={causal}")

    def test_against_float64(self):
        for shape in ((2, 4, 4, 300, 300, 64), (1, 8, 2, 1000, 1000, 128), (2, 6, 1, 17, 17, 64)):
            for causal in (False, True):
                for grad in (False, True):
                    with self.subTest(shape=shape, causal=causal, grad=grad):
                        self.check(shape, causal, grad)

    def test_two_lengths_without_gradients(self):
        for shape in TWO_LENGTHS:
            for causal in (False, True):
                with self.subTest(shape=shape, causal=causal):
                    self.check(shape, causal, False)

    def test_two_lengths_with_gradients(self):
        # Chapter 10's backward (Hopper) computes them; chapter 08's refuses them at the call.
        if not flashtut.ops.backward_computes(torch.device("cuda")).lengths:
            with self.assertRaisesRegex(NotImplementedError, "key length 300 != query length 16"):
                self.check(TWO_LENGTHS[0], True, True)
            return
        for shape in TWO_LENGTHS:
            for causal in (False, True):
                with self.subTest(shape=shape, causal=causal):
                    self.check(shape, causal, True)

    def test_grouped_heads_through_chapter_08s_backward(self):
        # The expansion and the sum over each group that the backward operator does for a
        # backward of one head count (chapter 08's, on any GPU), and its refusal of two lengths
        # also when the operator is called directly (as in a compiled graph).
        impls, backward = [], flashtut.backward

        def spy(*args, impl, **kw):
            impls.append(impl)
            return backward(*args, impl=impl, **kw)

        with mock.patch.object(flashtut.ops, "backward_impl", lambda device, contiguous: "ch08"), \
                mock.patch.object(flashtut, "backward", spy):
            for shape in ((1, 8, 2, 1000, 1000, 128), (2, 6, 1, 17, 17, 64)):
                for causal in (False, True):
                    with self.subTest(shape=shape, causal=causal):
                        self.check(shape, causal, True)
            self.assertEqual(set(impls), {"ch08"})
            # the expanded path's outputs laid out as its fake implementation says
            q, k, v = qkv(1, 8, 2, 128, 128, 64)
            o, lse = torch.ops.flashtut.attention_forward(q, k, v, True, None, 0)
            torch.library.opcheck(torch.ops.flashtut.attention_backward.default,
                                  (torch.randn_like(o), q, k, v, o, lse, True, None, 0),
                                  test_utils=("test_schema", "test_faketensor"))
            q, k, v = qkv(*TWO_LENGTHS[0])
            o, lse = torch.ops.flashtut.attention_forward(q, k, v, True, None, 0)
            with self.assertRaisesRegex(NotImplementedError, "key length 300 != query length 16"):
                torch.ops.flashtut.attention_backward(o, q, k, v, o, lse, True, None, 0)


class DecodeSteps(unittest.TestCase):
    """A decode step (flashtut.decodes: a few new rows against a longer, contiguous cache)
    reaches chapter 11's kernel through the operator, and comes back as the float64
    reference and laid out as the fake implementation says."""

    def forwards_run(self, fn):
        impls, forward = [], flashtut.forward

        def spy(*args, impl, **kw):
            impls.append(impl)
            return forward(*args, impl=impl, **kw)

        with mock.patch.object(flashtut, "forward", spy):
            out = fn()
        return out, impls

    def test_new_rows_against_the_cache_against_float64(self):
        # (B, H, H_kv, N_q, N_k, d): a token with grouped heads, one key/value head, and the
        # 4 and 16 rows speculative decoding verifies, causal from the bottom right.
        for shape in ((2, 32, 8, 1, 4097, 128), (1, 32, 1, 1, 1000, 64), (2, 8, 2, 4, 1000, 128),
                      (1, 16, 16, 16, 300, 64)):
            for causal in (False, True):
                with self.subTest(shape=shape, causal=causal), torch.no_grad():
                    q, k, v = qkv(*shape)
                    (o, _), impls = self.forwards_run(lambda: torch.ops.flashtut.attention_forward(
                        q, k, v, causal, None, flashtut.CAUSAL_BOTTOM_RIGHT))
                    self.assertEqual(impls, [flashtut.DECODE_IMPL])
                    self.assertLess(rel(o, reference(q, k, v, causal, bottom_right=True)), 1e-2)
        with torch.no_grad():  # flashtut.attention's call of a decode step (no mask)
            q, k, v = qkv(2, 32, 8, 1, 4097, 128)
            o, impls = self.forwards_run(lambda: flashtut.attention(q, k, v, enable_gqa=True))
            self.assertEqual(impls, [flashtut.DECODE_IMPL])
            self.assertLess(rel(o, reference(q, k, v, False)), 1e-2)

    def test_q_cut_from_a_projection_and_the_operators_checks(self):
        # A model's q: four rows of a [B, N, H, d] projection (chapter 11 reads a contiguous
        # copy); o in the token-major layout the fake implementation promised.
        proj = torch.randn(2, 4, 32, 128, device="cuda", dtype=torch.bfloat16)
        q = proj.transpose(1, 2)
        _, k, v = qkv(2, 32, 8, 4, 2048, 128)
        with torch.no_grad():
            (o, _), impls = self.forwards_run(lambda: torch.ops.flashtut.attention_forward(
                q, k, v, True, None, flashtut.CAUSAL_BOTTOM_RIGHT))
        self.assertEqual(impls, [flashtut.DECODE_IMPL])
        self.assertEqual(o.stride(), flashtut.ops._layout_like(q, False).stride())
        self.assertLess(rel(o, reference(q, k, v, True, bottom_right=True)), 1e-2)
        torch.library.opcheck(torch.ops.flashtut.attention_forward.default,
                              (q, k, v, True, None, flashtut.CAUSAL_BOTTOM_RIGHT),
                              test_utils=("test_schema", "test_faketensor"))

    def test_a_view_of_a_longer_cache_goes_to_the_forward_chapter(self):
        _, k, v = qkv(1, 8, 8, 1, 512, 64)
        q = torch.randn(1, 8, 1, 64, device="cuda", dtype=torch.bfloat16)
        with torch.no_grad():
            o, impls = self.forwards_run(lambda: flashtut.attention(q, k[:, :, :300], v[:, :, :300]))
        self.assertEqual(impls, [flashtut.ops.forward_impl(q.device)])
        self.assertLess(rel(o, reference(q, k[:, :, :300], v[:, :, :300], False)), 1e-2)


class Model(torch.nn.Module):
    def __init__(self, width=512, heads=8, kv_heads=2):
        super().__init__()
        self.heads, self.kv_heads, self.d = heads, kv_heads, width // heads
        self.q = torch.nn.Linear(width, width)
        self.kv = torch.nn.Linear(width, 2 * kv_heads * self.d)
        self.out = torch.nn.Linear(width, width)

    def forward(self, x, attention):
        b, n, _ = x.shape
        q = self.q(x).view(b, n, self.heads, self.d).transpose(1, 2)
        k, v = self.kv(x).view(b, n, 2, self.kv_heads, self.d).unbind(2)
        o = attention(q, k.transpose(1, 2), v.transpose(1, 2), is_causal=True, enable_gqa=True)
        return self.out(o.transpose(1, 2).reshape(b, n, -1))


class Compile(unittest.TestCase):
    def test_fullgraph_compile_matches_eager(self):
        model = Model().cuda().bfloat16()
        x = torch.randn(2, 256, 512, device="cuda", dtype=torch.bfloat16)
        eager = model(x, flashtut.attention)
        compiled = torch.compile(model, fullgraph=True)
        out = compiled(x, flashtut.attention)
        self.assertLess(rel(out, eager), 2e-2)
        ref = model(x, torch.nn.functional.scaled_dot_product_attention)
        self.assertLess(rel(out, ref), 2e-2)
        out.float().sum().backward()  # the backward through the compiled graph
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        eager.float().sum().backward()
        for g, e in zip(grads, (p.grad for p in model.parameters())):
            self.assertLess(rel(g, e), 5e-2)


class Graphs(unittest.TestCase):
    def test_capture_and_replay(self):
        q, k, v = qkv(2, 4, 4, 512, 512, 64, grad=True)
        static = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm up outside the capture
            for _ in range(2):
                flashtut.attention(*static, is_causal=True).float().sum().backward()
        torch.cuda.current_stream().wait_stream(s)
        for t in static:
            t.grad = None
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            o = flashtut.attention(*static, is_causal=True)
            o.float().sum().backward()
        fresh = qkv(2, 4, 4, 512, 512, 64)
        for t, f in zip(static, fresh):
            t.data.copy_(f)
        graph.replay()
        torch.cuda.synchronize()
        with torch.no_grad():
            want = flashtut.attention(*fresh, is_causal=True)
        self.assertTrue(torch.equal(o, want), "the replay computes what an eager call does")


if __name__ == "__main__":
    unittest.main()
