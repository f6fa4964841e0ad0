#!/usr/bin/env python3
"""CPU tests of flashtut.ops (ctest python_ops): the operators' fake implementations and
flashtut.attention's checks, with PyTorch's fake tensors standing in for CUDA ones, so that
what torch.compile sees (shapes, dtypes, strides; no data pointer read while tracing) is
tested without a GPU; the forward operator's choice of chapter 11 for decode steps and the
backward operator's expansion, on CPU tensors with a stand-in for the library; SDPA's causal
masks as objects. Exit 77 (skipped, saying why) without PyTorch.

  python3 python/tests/test_ops.py [-v]
"""
import os
import sys
import types
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
except ImportError:
    print("test_ops: skipped: PyTorch is not installed (pip install torch)")
    sys.exit(77)

import flashtut
import flashtut.ops as ops

BF16 = torch.bfloat16


def cuda(*shape, dtype=BF16, grad=False):
    t = torch.empty(*shape, dtype=dtype, device="cuda")
    return t.requires_grad_(grad)


class Registered(unittest.TestCase):
    def test_the_operators_exist_with_their_schemas(self):
        fwd = torch.ops.flashtut.attention_forward.default
        bwd = torch.ops.flashtut.attention_backward.default
        self.assertIn("bool is_causal, float? scale, SymInt causal_align", str(fwd._schema))
        self.assertIn("-> (Tensor, Tensor, Tensor)", str(bwd._schema))
        self.assertIs(flashtut.attention, ops.attention)
        self.assertEqual(flashtut.__version__.split(".")[1], str(flashtut.API_VERSION))


class Fake(unittest.TestCase):
    """The fake implementations, as torch.compile runs them: outputs shaped and laid out as
    the library writes them."""

    def test_forward_shapes_with_grouped_heads_and_two_lengths(self):
        with FakeTensorMode():
            q, k = cuda(2, 8, 64, 128), cuda(2, 2, 300, 128)
            o, lse = torch.ops.flashtut.attention_forward(q, k, k, True, None, 1)
            self.assertEqual((tuple(o.shape), o.dtype), ((2, 8, 64, 128), BF16))
            self.assertEqual((tuple(lse.shape), lse.dtype), ((2, 8, 64), torch.float32))
            self.assertTrue(o.is_contiguous())

    def test_views_get_outputs_in_token_major_memory(self):
        with FakeTensorMode():
            qkv = cuda(2, 64, 3, 4, 64)  # a projection [B, N, 3, H, d]
            q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
            o, _ = torch.ops.flashtut.attention_forward(q, k, v, False, None, 0)
            self.assertEqual(o.stride(), (64 * 4 * 64, 64, 4 * 64, 1))  # [B, N, H, d] memory
            dq, dk, dv = torch.ops.flashtut.attention_backward(o, q, k, v, o, o[..., 0].float(),
                                                                False, None, 0)
            self.assertEqual(dq.stride(), o.stride())
            self.assertEqual(dk.shape, k.shape)

    def test_attention_traces_on_fake_tensors_and_records_its_gradient(self):
        # What torch.compile does: the whole call on fake tensors, no data pointer read. (The
        # backward itself runs on the GPU test: autograd's engine wants a real device.)
        with FakeTensorMode():
            q, k, v = (cuda(2, 4, 128, 64, grad=True) for _ in range(3))
            o = flashtut.attention(q, k, v, is_causal=True)
            self.assertEqual(o.shape, q.shape)
            self.assertIsNotNone(o.grad_fn)

    def test_grouped_heads_with_gradients_reach_the_operator_as_they_are(self):
        # No expansion in the graph: q, k and v are the operator's inputs themselves (the
        # backward operator sums over each group, in chapter 10's kernel or after chapter 08's).
        with FakeTensorMode():
            q = cuda(1, 8, 64, 64, grad=True)
            k, v = (cuda(1, 2, 64, 64, grad=True) for _ in range(2))
            o = flashtut.attention(q, k, v, enable_gqa=True)
            self.assertEqual(o.shape, q.shape)
            inputs = {type(f).__name__ for f, _ in o.grad_fn.next_functions if f is not None}
            self.assertEqual(inputs, {"AccumulateGrad"})

    def test_backward_shapes_with_grouped_heads_and_two_lengths(self):
        with FakeTensorMode():
            q, k = cuda(2, 8, 64, 128), cuda(2, 2, 300, 128)
            o, lse = torch.ops.flashtut.attention_forward(q, k, k, True, None, 0)
            dq, dk, dv = torch.ops.flashtut.attention_backward(o, q, k, k, o, lse, True, None, 0)
            self.assertEqual((dq.shape, dk.shape, dv.shape), (q.shape, k.shape, k.shape))

    def test_views_the_kernels_cannot_read_are_copied_by_their_strides(self):
        with FakeTensorMode():
            ok = cuda(2, 64, 4, 64).transpose(1, 2)  # a projection's view: read in place
            self.assertIs(ops._ready(ok), ok)
            odd = cuda(2, 4, 64, 68)[..., :64]  # rows 136 bytes apart: not a multiple of 16
            self.assertIsNot(ops._ready(odd), odd)
            self.assertTrue(ops._ready(odd).is_contiguous())
            flipped = cuda(2, 4, 64, 64).transpose(2, 3)  # head_dim not contiguous
            self.assertTrue(ops._ready(flipped).is_contiguous())


class ExpandForOneHeadCount(unittest.TestCase):
    """The backward operator's work for a backward of one head count (chapter 08's): key and
    value expanded for it, dK and dV summed over each group, on CPU tensors with a float64
    stand-in for the library's backward that refuses grouped heads as chapter 08 does."""

    def test_the_group_sums_are_the_grouped_gradients(self):
        g = torch.Generator().manual_seed(0)
        q, do = (torch.randn(2, 6, 33, 64, generator=g).to(BF16) for _ in range(2))
        k, v = (torch.randn(2, 2, 33, 64, generator=g).to(BF16) for _ in range(2))
        calls = []

        def one_head_count(q, k, v, o, lse, do, *, causal, scale, impl, causal_align):
            calls.append((impl, tuple(k.shape)))
            if k.shape[1] != q.shape[1]:
                raise AssertionError("chapter 08's backward takes one head count")
            q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
            with torch.enable_grad():
                o64 = torch.nn.functional.scaled_dot_product_attention(q64, k64, v64, is_causal=causal)
                grads = torch.autograd.grad(o64, (q64, k64, v64), do.double())
            return tuple(t.to(q.dtype) for t in grads)

        ch08 = types.SimpleNamespace(lengths=False, grouped=False)
        with mock.patch.object(ops, "backward_impl", lambda device, contiguous: "ch08"), \
                mock.patch.object(flashtut, "backwards", lambda: {"ch08": ch08}), \
                mock.patch.object(flashtut, "backward", one_head_count):
            dq, dk, dv = ops._backward(do, q, k, v, do, None, True, None, 0)
            with self.assertRaisesRegex(NotImplementedError, "key length 17 != query length 33"):
                ops._backward(do, q, k[:, :, :17], v[:, :, :17], do, None, True, None, 0)
        self.assertEqual(calls, [("ch08", (2, 6, 33, 64))])  # expanded for it
        q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
        o64 = torch.nn.functional.scaled_dot_product_attention(q64, k64, v64, is_causal=True, enable_gqa=True)
        o64.backward(do.double())
        self.assertEqual((dk.shape, dv.shape, dk.dtype), (k.shape, v.shape, BF16))
        for name, got, want in (("dq", dq, q64.grad), ("dk", dk, k64.grad), ("dv", dv, v64.grad)):
            err = float((got.double() - want).norm() / want.norm())
            self.assertLess(err, 1e-2, name)  # bf16's rounding; a wrong group is O(1) off


class DecodeSteps(unittest.TestCase):
    """The forward operator's choice (ops._forward) on CPU tensors, with a stand-in for the
    library's forward that records what it was given: a decode step (flashtut.decodes) with
    a contiguous cache goes to chapter 11, everything else to forward_impl's chapter."""

    def run_forward(self, q, k, v, is_causal=False, causal_align=flashtut.CAUSAL_TOP_LEFT):
        calls = []

        def stand_in(q, k, v, *, causal, scale, impl, causal_align):
            calls.append((impl, q.is_contiguous(), causal, causal_align))
            return torch.zeros(q.shape, dtype=q.dtype), torch.zeros(q.shape[:3])

        with mock.patch.object(ops, "forward_impl", lambda device: "ch09"), \
                mock.patch.object(flashtut, "forward", stand_in):
            o, _ = ops._forward(q, k, v, is_causal, None, causal_align)
        return calls[0], o

    def test_a_new_token_against_the_cache_goes_to_chapter_11(self):
        q, kv = torch.zeros(2, 32, 1, 128, dtype=BF16), torch.zeros(2, 8, 4096, 128, dtype=BF16)
        self.assertEqual(self.run_forward(q, kv, kv)[0][0], "ch11")
        rows = torch.zeros(2, 32, 4, 128, dtype=BF16)  # speculative decoding's rows, causal
        call, _ = self.run_forward(rows, kv, kv, True, flashtut.CAUSAL_BOTTOM_RIGHT)
        self.assertEqual(call, ("ch11", True, True, flashtut.CAUSAL_BOTTOM_RIGHT))

    def test_chapter_11_gets_q_contiguous_and_the_output_keeps_the_promised_layout(self):
        # q cut from a projection [B, N, H, d]: chapter 11 reads [B, H, N, d], so q is copied
        # for it (4 rows), and o comes back in the layout the fake implementation promised.
        proj = torch.zeros(2, 4, 32, 128, dtype=BF16)
        q, kv = proj.transpose(1, 2), torch.zeros(2, 8, 4096, 128, dtype=BF16)
        call, o = self.run_forward(q, kv, kv)
        self.assertEqual(call[:2], ("ch11", True))
        self.assertEqual(o.stride(), ops._layout_like(q, False).stride())

    def test_everything_else_goes_to_the_forward_chapter(self):
        kv = torch.zeros(2, 8, 4096, 128, dtype=BF16)
        one, prefill = torch.zeros(2, 32, 1, 128, dtype=BF16), torch.zeros(2, 32, 17, 128, dtype=BF16)
        self.assertEqual(self.run_forward(prefill, kv, kv)[0][0], "ch09")     # 17 rows
        self.assertEqual(self.run_forward(one, kv, kv, True)[0][0], "ch09")   # causal, top-left
        same = torch.zeros(2, 8, 8, 128, dtype=BF16)
        self.assertEqual(self.run_forward(torch.zeros(2, 32, 8, 128, dtype=BF16), same, same)[0][0], "ch09")
        # views of a longer cache (a static cache filled to 300 rows): the forward chapters
        # read them in place
        cache = torch.zeros(2, 8, 512, 128, dtype=BF16)
        view = cache[:, :, :300]
        self.assertEqual(self.run_forward(one, view, view)[0][0], "ch09")


class CausalMasksAsObjects(unittest.TestCase):
    """flashtut.attention takes SDPA's causal masks as objects (CausalBias): the operator gets
    is_causal and the mask's alignment, no mask tensor."""

    def call(self, q_len, kv_len, mask, is_causal=False):
        from torch.nn.attention import bias
        seen = []

        def record(q, k, v, is_causal, scale, causal_align):
            seen.append((is_causal, causal_align))
            return q.new_empty(q.shape), q.new_empty(q.shape[:3], dtype=torch.float32)

        mask = getattr(bias, mask)(q_len, kv_len)  # a tensor subclass: made outside fake mode
        with FakeTensorMode(), mock.patch.object(ops, "attention_forward", record):
            q, k = cuda(1, 8, q_len, 64), cuda(1, 2, kv_len, 64)
            flashtut.attention(q, k, k, attn_mask=mask, is_causal=is_causal, enable_gqa=True)
        return seen[0]

    def test_lower_right_is_the_decodes_alignment(self):
        self.assertEqual(self.call(4, 300, "causal_lower_right"), (True, flashtut.CAUSAL_BOTTOM_RIGHT))
        self.assertEqual(self.call(4, 300, "causal_upper_left"), (True, flashtut.CAUSAL_TOP_LEFT))

    def test_no_graph_break_without_a_mask(self):
        # torch.compile(fullgraph=True) traces _causal_bias on every call of attention()
        q, k = torch.zeros(1, 8, 4, 64), torch.zeros(1, 8, 300, 64)
        traced = torch.compile(lambda q, k: ops._causal_bias(None, True, q, k)[1:], fullgraph=True,
                               backend="eager")
        self.assertEqual(traced(q, k), (True, flashtut.CAUSAL_TOP_LEFT))

    def test_refused_with_is_causal_or_for_other_lengths(self):
        with self.assertRaisesRegex(ValueError, "pass is_causal=False with it"):
            self.call(4, 300, "causal_lower_right", is_causal=True)
        from torch.nn.attention.bias import causal_lower_right
        mask = causal_lower_right(4, 299)
        with FakeTensorMode():
            q, k = cuda(1, 8, 4, 64), cuda(1, 8, 300, 64)
            with self.assertRaisesRegex(ValueError, "causal mask for 4 queries and 299 keys, but "
                                                    "query has 4 rows and key 300"):
                flashtut.attention(q, k, k, attn_mask=mask)


class Refusals(unittest.TestCase):
    def raises(self, exc, text, *args, **kw):
        with FakeTensorMode():
            with self.assertRaises(exc) as c:
                flashtut.attention(*[a() if callable(a) else a for a in args], **kw)
        self.assertIn(text, str(c.exception))

    def test_what_the_kernels_cannot_do(self):
        qkv = [lambda: cuda(1, 4, 64, 64)] * 3
        self.raises(NotImplementedError, "attn_mask is not supported", *qkv,
                    attn_mask=torch.ones(1))
        self.raises(NotImplementedError, "dropout_p=0.1 is not supported", *qkv, dropout_p=0.1)
        self.raises(ValueError, "pass enable_gqa=True", lambda: cuda(1, 4, 64, 64),
                    lambda: cuda(1, 2, 64, 64), lambda: cuda(1, 2, 64, 64))
        self.raises(ValueError, "not a multiple of key's 3", lambda: cuda(1, 4, 64, 64),
                    lambda: cuda(1, 3, 64, 64), lambda: cuda(1, 3, 64, 64), enable_gqa=True)
        self.raises(ValueError, "head_dim 96 is not supported", *[lambda: cuda(1, 4, 64, 96)] * 3)
        self.raises(TypeError, "computes bf16 or fp16", *[lambda: cuda(1, 4, 64, 64, dtype=torch.float32)] * 3)
        two_lengths = (lambda: cuda(1, 4, 64, 64, grad=True), lambda: cuda(1, 4, 100, 64),
                       lambda: cuda(1, 4, 100, 64))
        one_length = types.SimpleNamespace(lengths=False, grouped=False)  # chapter 08's backward
        with mock.patch.object(torch.cuda, "is_available", lambda: True), \
                mock.patch.object(ops, "backward_computes", lambda device: one_length):
            self.raises(NotImplementedError, "key length 100 != query length 64", *two_lengths)
        both = types.SimpleNamespace(lengths=True, grouped=True)  # chapter 10's, on Hopper
        with mock.patch.object(torch.cuda, "is_available", lambda: True), \
                mock.patch.object(ops, "backward_computes", lambda device: both), FakeTensorMode():
            o = flashtut.attention(*(t() for t in two_lengths))
            self.assertEqual(o.shape, (1, 4, 64, 64))
        # No driver to ask (fake tensors without a GPU): left to the backward operator.
        with mock.patch.object(torch.cuda, "is_available", lambda: False), \
                mock.patch.object(ops, "backward_computes", None), FakeTensorMode():
            self.assertEqual(flashtut.attention(*(t() for t in two_lengths)).shape, (1, 4, 64, 64))
        with self.assertRaises(ValueError) as c:
            flashtut.attention(*(torch.empty(1, 4, 64, 64, dtype=BF16) for _ in range(3)))
        self.assertIn("the kernels run on a CUDA device", str(c.exception))

    def test_the_operators_called_with_cpu_tensors_say_pass_cuda(self):
        # Not PyTorch's "Could not run 'flashtut::attention_forward' with arguments from the
        # 'CPU' backend": the operators' own CPU kernels refuse with flashtut's message.
        q = torch.empty(1, 4, 64, 64, dtype=BF16)
        lse = torch.empty(1, 4, 64)
        for call in (lambda: ops.attention_forward(q, q, q, False, None, 0),
                     lambda: torch.ops.flashtut.attention_forward(q, q, q, True, 0.5, 1),
                     lambda: ops.attention_forward(q.clone().requires_grad_(), q, q, False,
                                                   None, 0)):
            with self.assertRaises(ValueError) as c:
                call()
            self.assertIn("q is on cpu, the kernels run on a CUDA device: pass q.cuda()",
                          str(c.exception))
        with self.assertRaisesRegex(ValueError, r"do is on cpu, .*: pass do\.cuda\(\)"):
            torch.ops.flashtut.attention_backward(q, q, q, q, q, lse, False, None, 0)

    def test_fake_cpu_tensors_still_take_the_fake_implementation(self):
        # What torch.compile traces: the CPU kernels above must not replace the fake ones.
        with FakeTensorMode():
            q = torch.empty(1, 4, 64, 64, dtype=BF16)
            o, lse = ops.attention_forward(q, q, q, False, None, 0)
            self.assertEqual((tuple(o.shape), tuple(lse.shape)), ((1, 4, 64, 64), (1, 4, 64)))
            dq, _, _ = ops.attention_backward(o, q, q, q, o, lse, False, None, 0)
            self.assertEqual(dq.shape, q.shape)


if __name__ == "__main__":
    unittest.main()
