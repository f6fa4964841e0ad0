#!/usr/bin/env python3
"""CPU tests of python/flashtut/autograd.py (ctest python_autograd): what can be checked
without a GPU.

  python3 python/tests/test_autograd.py [-v] [unittest args]

- without PyTorch: ``import flashtut.autograd`` fails with a message that says to install it,
  while ``import flashtut`` still works and does not import torch (run in a subprocess that
  hides torch, so this part runs whether or not PyTorch is installed);
- with PyTorch (CPU is enough; skipped with a message otherwise):
  - ``flashtut.autograd`` is found as an attribute of the package, and only then is torch
    imported;
  - every argument the kernels cannot take is refused by :func:`attention` with the error
    and the message that say what to change, on CPU tensors, before the library is loaded
    or any pass is called (``flashtut.forward``, ``backward`` and ``load`` are replaced by
    stand-ins that fail the test if reached);
  - the Function's plumbing, with ``flashtut.forward``/``backward`` replaced by a float64
    reference on the CPU and the device check lifted: the impls it asks for (ch07, ch08),
    causal and scale passed through, transposed views (as from a Linear) passed as they are
    and any other layout made contiguous, gradients equal to autograd's through
    ``F.scaled_dot_product_attention``'s math, None for inputs that need none, no double
    backward.

Exit status: 0 every case ran and passed; 1 a case failed; 77 (ctest: skipped) the cases
that need no PyTorch passed, but most of the file, the cases that need it, was skipped.
"""
import os
import subprocess
import sys
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
import flashtut as ft

try:
    import torch
    import torch.nn.functional as F
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False

NO_TORCH = ("PyTorch is not installed for this Python (pip install torch; the CPU build is "
            "enough): the tests of flashtut.autograd's checks and plumbing are skipped")
need_torch = unittest.skipUnless(HAVE_TORCH, NO_TORCH)
SKIP = 77  # ctest's SKIP_RETURN_CODE for this test (chapters/tour/CMakeLists.txt)


def exit_status(result, have_torch):
    """1 when a case failed; else 77 (ctest: skipped) without PyTorch, whose cases are most of
    this file, so that ctest does not say passed for what did not run; else 0."""
    if not result.wasSuccessful():
        return 1
    return 0 if have_torch else SKIP


class WithoutTorch(unittest.TestCase):
    """Runs in a subprocess where `import torch` fails, whatever this machine has."""

    def run_hidden(self, code):
        # sys.modules["torch"] = None makes every `import torch` raise ImportError.
        prog = ("import sys; sys.modules['torch'] = None; \n"
                + code)
        return subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True,
                              env={**os.environ, "FLASHTUT_LIB": "/nonexistent/libflashtut.so"})

    def test_import_says_to_install_torch(self):
        r = self.run_hidden("import flashtut\nprint(flashtut.API_VERSION)\n"
                            "try:\n    import flashtut.autograd\n"
                            "except ImportError as e:\n    print('ImportError:', e)\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("ImportError: flashtut.autograd", r.stdout)
        self.assertIn("pip install torch", r.stdout)
        self.assertIn("import flashtut) works without it", r.stdout)

    def test_the_attribute_says_so_too(self):
        r = self.run_hidden("import flashtut\ntry:\n    flashtut.autograd\n"
                            "except ImportError as e:\n    print('ImportError:', e)\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("pip install torch", r.stdout)

    def test_other_attributes_are_still_attribute_errors(self):
        r = self.run_hidden("import flashtut\nprint(hasattr(flashtut, 'no_such_name'))\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["False"])


@need_torch
class LazyImport(unittest.TestCase):
    def test_import_flashtut_leaves_torch_alone_until_autograd_is_asked_for(self):
        code = ("import sys; import flashtut; "
                "a = 'torch' in sys.modules; m = flashtut.autograd; "
                "print(a, 'torch' in sys.modules, m.__name__, callable(m.attention), "
                "flashtut._lib is None)")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={**os.environ, "FLASHTUT_LIB": "/nonexistent/libflashtut.so"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["False", "True", "flashtut.autograd", "True", "True"])

    def test_import_as_submodule(self):
        import flashtut.autograd as fa
        self.assertIs(ft.autograd, fa)
        self.assertEqual(fa.BACKWARD_IMPL, "ch08")
        self.assertIn(fa.BACKWARD_IMPL, ft.backwards())
        self.assertEqual(ft.backwards()[fa.BACKWARD_IMPL].pairs_with, ft.forwards()["ch07"].name)  # a pair
        self.assertEqual(fa.forward_impl("cpu"), "ch07")  # the library's checks then refuse it
        # Hopper gets chapter 09's forward, every other GPU chapter 07's (sm_90a machine code
        # runs on 9.x alone); both compute what chapter 08's backward reads.
        chosen = {cap: ft.forward_for(cap) for cap in [(8, 0), (8, 9), (9, 0), (10, 0), (12, 0)]}
        self.assertEqual(chosen, {(8, 0): "ch07", (8, 9): "ch07", (9, 0): "ch09",
                                  (10, 0): "ch07", (12, 0): "ch07"})
        for cap, impl in chosen.items():
            f, ch07 = ft.forwards()[impl], ft.forwards()["ch07"]
            self.assertLessEqual(f.min_sm, cap[0] * 10 + cap[1], impl)
            self.assertEqual((f.head_dims, f.dtypes, f.lengths, f.grouped, f.strided),
                             (ch07.head_dims, ch07.dtypes, ch07.lengths, ch07.grouped, ch07.strided), impl)
        # Hopper's backward is chapter 10's, views or not; chapter 08's everywhere else.
        chosen = {(cap, c): ft.backward_for(cap, c) for cap in [(8, 0), (9, 0), (10, 0)] for c in (True, False)}
        self.assertEqual(chosen, {((8, 0), True): "ch08", ((8, 0), False): "ch08", ((9, 0), True): "ch10",
                                  ((9, 0), False): "ch10", ((10, 0), True): "ch08", ((10, 0), False): "ch08"})
        self.assertEqual(fa.backward_impl("cpu", True), fa.BACKWARD_IMPL)
        if "ch10" in ft.backwards():  # the same problems as chapter 08's, and two lengths, grouped heads
            b, ch08 = ft.backwards()["ch10"], ft.backwards()["ch08"]
            self.assertEqual((b.head_dims, b.dtypes, b.lengths, b.grouped), (ch08.head_dims, ch08.dtypes, True, True))
        if "ch10" in ft.backwards():
            self.assertTrue(ft.backwards()["ch10"].strided)  # views, as chapter 08's
        self.assertNotIn("autograd", ft.__all__)  # `from flashtut import *` stays torch-free


def never(*args, **kwargs):
    raise AssertionError("the library was reached: the checks must refuse this first")


def tensors(shape=(2, 3, 16, 64), dtype=None, device="cpu", n=3):
    dtype = dtype or torch.bfloat16
    return [torch.randn(*shape, dtype=dtype, device=device) for _ in range(n)]


@need_torch
class Checks(unittest.TestCase):
    """Each refusal on CPU tensors, before flashtut.forward/backward or load are reached."""

    def setUp(self):
        import flashtut.autograd as fa
        self.fa = fa
        patches = [mock.patch.object(ft, "forward", never), mock.patch.object(ft, "backward", never),
                   mock.patch.object(ft, "load", never)]
        for p in patches:
            p.start()
            self.addCleanup(p.stop)

    def raises(self, exc, text, *args, **kw):
        with self.assertRaises(exc) as c:
            self.fa.attention(*args, **kw)
        self.assertIn(text, str(c.exception))
        return str(c.exception)

    def test_cpu_tensors(self):
        self.raises(ValueError, "query is on cpu: the kernels run on a CUDA device: pass "
                                "query.cuda()", *tensors())
        self.raises(ValueError, "is on cpu", *tensors(dtype=torch.float16), is_causal=True)

    def test_dtypes(self):
        msg = self.raises(TypeError, "query is torch.float32: flashtut's attention (chapters 07 "
                                     "and 08, the tensor cores) computes bf16 or fp16",
                          *tensors(dtype=torch.float32))
        self.assertIn('torch.autocast("cuda", dtype=torch.bfloat16)', msg)
        self.assertIn("query.bfloat16() (or query.half())", msg)
        self.raises(TypeError, "query is torch.float64", *tensors(dtype=torch.float64))
        q, k, v = tensors()
        self.raises(TypeError, "value is torch.float32", q, k, v.float())
        self.raises(TypeError, "key is torch.float16 but query is torch.bfloat16", q, k.half(), v)

    def test_head_dims(self):
        for d in (32, 48, 96, 256):
            self.raises(ValueError, f"head_dim {d} is not supported: chapters 07 and 08 compute "
                                    f"head_dim 64 or 128", *tensors(shape=(1, 2, 8, d)))
        for d in (64, 128):  # accepted: the device is what is refused next
            self.raises(ValueError, "is on cpu", *tensors(shape=(1, 2, 8, d)))

    def test_shapes(self):
        self.raises(ValueError, "query has shape (3, 16, 64): expected 4 dimensions",
                    *tensors(shape=(3, 16, 64)))
        q, k, v = tensors()
        self.raises(ValueError, "key has shape (2, 3, 17, 64) but query (2, 3, 16, 64)",
                    q, torch.randn(2, 3, 17, 64, dtype=q.dtype), v)
        self.raises(ValueError, "value has shape (2, 1, 16, 64)", q, k,
                    torch.randn(2, 1, 16, 64, dtype=q.dtype))

    def test_not_supported(self):
        q, k, v = tensors()
        self.raises(NotImplementedError, "attn_mask is not supported", q, k, v,
                    attn_mask=torch.ones(16, 16, dtype=torch.bool))
        self.raises(NotImplementedError, "attn_mask is not supported", q, k, v,
                    torch.zeros(16, 16))  # positional, as in SDPA
        self.raises(NotImplementedError, "dropout_p=0.1 is not supported", q, k, v, dropout_p=0.1)
        self.raises(NotImplementedError, "enable_gqa is not supported", q, k, v, enable_gqa=True)
        # The defaults, spelled out, are accepted (then the device is refused).
        self.raises(ValueError, "is on cpu", q, k, v, None, 0.0, False, None, enable_gqa=False)

    def test_scale_and_flags(self):
        q, k, v = tensors()
        self.raises(ValueError, "scale must be a positive finite number", q, k, v, scale=0.0)
        self.raises(ValueError, "scale must be a positive finite number", q, k, v, scale=-1.0)
        self.raises(ValueError, "scale must be a positive finite number", q, k, v,
                    scale=float("nan"))
        self.raises(TypeError, "scale must be a Python number or None", q, k, v,
                    scale=torch.tensor(0.125))
        self.raises(TypeError, "is_causal must be True or False", q, k, v, is_causal="yes")
        self.raises(ValueError, "is on cpu", q, k, v, scale=0.125, is_causal=True)

    def test_not_tensors(self):
        q, k, v = tensors()
        self.raises(TypeError, "key must be a torch.Tensor, got list", q, [1.0], v)

    def test_cpu_autocast_changes_nothing(self):
        # CUDA autocast casts CUDA inputs only; CPU tensors keep their dtype and are refused.
        with torch.autocast("cpu", dtype=torch.bfloat16):
            self.raises(TypeError, "query is torch.float32", *tensors(dtype=torch.float32))


def reference_forward(q, k, v, *, causal, scale, impl):
    """flashtut.forward's contract (o like q, lse float32 [B, H, N]), in float64 on the CPU."""
    q64, k64, v64 = q.double(), k.double(), v.double()
    s = (q64 @ k64.transpose(-1, -2)) * (scale if scale is not None else q.shape[-1] ** -0.5)
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    o = torch.exp(s - lse[..., None]) @ v64
    return o.to(q.dtype), lse.float()


def reference_backward(q, k, v, o, lse, do, *, causal, scale, impl):
    """flashtut.backward's contract, by autograd in float64 through the same math."""
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    with torch.enable_grad():
        o64 = F.scaled_dot_product_attention(q64, k64, v64, is_causal=causal, scale=scale)
        grads = torch.autograd.grad(o64, (q64, k64, v64), do.double())
    return tuple(g.to(q.dtype) for g in grads)


@need_torch
class Plumbing(unittest.TestCase):
    """The Function around stand-ins for the two passes, on CPU tensors."""

    def setUp(self):
        import flashtut.autograd as fa
        self.fa = fa
        self.calls = []

        def fwd(q, k, v, **kw):
            self.calls.append(("forward", kw["impl"], kw["causal"], kw["scale"],
                               [t.is_contiguous() for t in (q, k, v)],
                               [tuple(t.stride()) for t in (q, k, v)]))
            return reference_forward(q, k, v, **kw)

        def bwd(q, k, v, o, lse, do, **kw):
            self.calls.append(("backward", kw["impl"], kw["causal"], kw["scale"],
                               [t.is_contiguous() for t in (q, k, v, o, lse, do)], do.dtype))
            return reference_backward(q, k, v, o, lse, do, **kw)

        for p in (mock.patch.object(ft, "forward", fwd), mock.patch.object(ft, "backward", bwd),
                  mock.patch.object(ft, "load", never)):
            p.start()
            self.addCleanup(p.stop)
        # The CPU stands in for the GPU here: lift the last check (the device), keep the rest.
        p = mock.patch.object(fa, "_check_device", lambda tensors_: None)
        p.start()
        self.addCleanup(p.stop)

    @staticmethod
    def inputs(b=2, h=3, n=33, d=64, dtype=None):
        """q, k, v as a model makes them: a [B, N, 3·H·d] projection, split and transposed
        to [B, H, N, d] views (not contiguous), and the leaf they come from."""
        g = torch.Generator().manual_seed(0)
        x = torch.randn(b, n, 3 * h * d, generator=g).to(dtype or torch.bfloat16).requires_grad_()
        q, k, v = (t.view(b, n, h, d).transpose(1, 2) for t in x.split(h * d, dim=2))
        return x, q, k, v

    def compare(self, causal, scale, dtype=None):
        """attention() on transposed views against float64 SDPA math on the same values: o
        and the gradient of the projection's output, for a random weighting of o."""
        dtype = dtype or torch.bfloat16
        x, q, k, v = self.inputs(dtype=dtype)
        self.assertFalse(q.is_contiguous())
        o = self.fa.attention(q, k, v, is_causal=causal, scale=scale)
        w = torch.randn(o.shape, generator=torch.Generator().manual_seed(1))
        y = o.transpose(1, 2)  # the model's next step: its gradient arrives strided
        (y * w.transpose(1, 2).to(dtype)).sum().backward()
        gx = x.grad.clone()
        x.grad = None
        q2, k2, v2 = (t.detach().double().requires_grad_() for t in (q, k, v))
        o_ref = F.scaled_dot_product_attention(q2, k2, v2, is_causal=causal, scale=scale)
        (o_ref * w.double()).sum().backward()
        g_ref = torch.cat([g.transpose(1, 2).reshape(x.shape[0], x.shape[1], -1)
                           for g in (q2.grad, k2.grad, v2.grad)], dim=2)
        tol = dict(rtol=2e-2, atol=2e-2)  # bf16/fp16 roundings; a wrong wiring is O(1) off
        torch.testing.assert_close(o.double(), o_ref.detach(), **tol)
        torch.testing.assert_close(gx.double(), g_ref, **tol)
        return o

    def test_impls_flags_and_layout(self):
        self.compare(causal=True, scale=None)
        (f, b) = self.calls
        # The projection's views reach the kernels as they are: no copy of q, k, v.
        n, hd = 33, 3 * 64
        self.assertEqual(f, ("forward", "ch07", True, None, [False, False, False],
                             [(n * 3 * hd, 64, 3 * hd, 1)] * 3))
        self.assertEqual(b[:4], ("backward", "ch08", True, None))
        self.assertEqual(b[4][:3], [False] * 3)
        self.assertEqual(b[4][3:5], [True, True])  # o (this stand-in's) and lse

    def test_a_view_the_kernels_cannot_read_is_copied(self):
        x, q, k, v = self.inputs()
        q = q.transpose(2, 3).contiguous().transpose(2, 3)  # head_dim strided: not a view they read
        self.fa.attention(q, k, v, is_causal=True)
        self.assertEqual(self.calls[0][4], [True, False, False])

    def test_non_causal_with_a_scale(self):
        self.compare(causal=False, scale=0.2)
        self.assertEqual([c[:4] for c in self.calls],
                         [("forward", "ch07", False, 0.2), ("backward", "ch08", False, 0.2)])

    def test_output_is_contiguous_and_like_query(self):
        o = self.compare(causal=True, scale=None)
        self.assertTrue(o.is_contiguous())
        self.assertEqual(o.shape, (2, 3, 33, 64))

    def test_expanded_gradient(self):
        # o.sum() sends back an expanded (zero-stride) gradient: it must arrive contiguous.
        _, q, k, v = self.inputs()
        self.fa.attention(q, k, v, is_causal=True).sum().backward()
        self.assertEqual(self.calls[1][4][-1], True)

    def test_needs_input_grad(self):
        _, q, k, v = self.inputs()
        q, k, v = (t.detach().contiguous() for t in (q, k, v))
        k.requires_grad_()  # only k wants a gradient
        self.fa.attention(q, k, v, is_causal=True).sum().backward()
        self.assertIsNone(q.grad)
        self.assertIsNone(v.grad)
        self.assertIsNotNone(k.grad)
        self.assertEqual([c[0] for c in self.calls], ["forward", "backward"])

    def test_no_backward_call_without_gradients(self):
        _, q, k, v = self.inputs()
        q, k, v = (t.detach() for t in (q, k, v))
        o = self.fa.attention(q, k, v, is_causal=True)
        self.assertFalse(o.requires_grad)
        with torch.no_grad():
            self.fa.attention(q, k, v)
        self.assertEqual([c[0] for c in self.calls], ["forward", "forward"])

    def test_dtypes_travel(self):
        for dtype in (torch.bfloat16, torch.float16):
            self.calls.clear()
            o = self.compare(causal=True, scale=None, dtype=dtype)
            self.assertEqual(o.dtype, dtype)
            self.assertEqual(self.calls[1][5], dtype)  # the gradient in o's dtype

    def test_once_differentiable(self):
        _, q, k, v = self.inputs()
        o = self.fa.attention(q, k, v, is_causal=True)
        (gq,) = torch.autograd.grad(o.sum(), q, create_graph=True)
        with self.assertRaises(RuntimeError):  # no double backward through chapter 08
            gq.sum().backward()


class ExitStatus(unittest.TestCase):
    """What ctest is told: skipped without PyTorch, failed on any failure, whatever PyTorch."""

    @staticmethod
    def result(failures=0, errors=0, skipped=0):
        r = unittest.TestResult()
        r.failures = [(None, "a failure")] * failures
        r.errors = [(None, "an error")] * errors
        r.skipped = [(None, NO_TORCH)] * skipped
        return r

    def test_skipped_without_torch(self):
        self.assertEqual(exit_status(self.result(skipped=19), have_torch=False), SKIP)

    def test_passed_with_torch(self):
        self.assertEqual(exit_status(self.result(), have_torch=True), 0)

    def test_a_failure_fails_with_or_without_torch(self):
        for have_torch in (False, True):
            self.assertEqual(exit_status(self.result(failures=1, skipped=19), have_torch), 1)
            self.assertEqual(exit_status(self.result(errors=1), have_torch), 1)

    def test_the_script_exits_77_without_torch(self):
        # This file, run where `import torch` fails: its cases without PyTorch pass, the
        # rest skip, and the exit status says skipped. (FT_AUTOGRAD_NESTED: this case does
        # not run itself again in there.)
        if os.environ.get("FT_AUTOGRAD_NESTED"):
            self.skipTest("the nested run of this file")
        prog = (f"import sys, runpy; sys.modules['torch'] = None; sys.argv = [{__file__!r}]; "
                f"runpy.run_path({__file__!r}, run_name='__main__')")
        r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True,
                           env={**os.environ, "FT_AUTOGRAD_NESTED": "1"})
        self.assertEqual(r.returncode, SKIP, r.stderr)
        self.assertIn("OK (skipped=", r.stderr)
        self.assertIn("skipped: the cases that need PyTorch", r.stderr)


if __name__ == "__main__":
    if not HAVE_TORCH:
        print(f"note: {NO_TORCH}", file=sys.stderr)
    run = unittest.main(exit=False).result
    status = exit_status(run, HAVE_TORCH)
    if status == SKIP:
        need = sum(1 for _, why in run.skipped if why == NO_TORCH)
        print(f"python_autograd: skipped: the cases that need PyTorch ({need} of "
              f"{run.testsRun}) did not run; the {run.testsRun - len(run.skipped)} without it "
              f"passed", file=sys.stderr)
    sys.exit(status)
