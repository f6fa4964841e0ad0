#!/usr/bin/env python3
"""GPU tests of python/flashtut/autograd.py (ctest python_autograd_gpu): chapter 09's forward on a Hopper GPU (07's elsewhere)
and chapter 10's backward on Hopper (08's elsewhere) called the way a
model calls them, eagerly and replayed from a CUDA graph, against a float64 reference, and
against finite differences.

  python3 python/tests/test_autograd_gpu.py [-v]   # the library: $FLASHTUT_LIB, else build/

Exit 77 (ctest reports it as skipped) with the reason printed where the tests cannot run:
no PyTorch, a PyTorch without CUDA or no GPU, a GPU older than sm_80 (chapters 07 and 08
need one), no library.

- Eager: q, k and v are views of one [B, N, 3·H·d] projection, as a model makes them, and
  the output reaches the loss through its transpose (so dO arrives strided, as in a
  model). N = 1, 17, 1000 (not multiples of the tiles), d = 64 and 128, causal and not,
  bf16 and fp16. o, dQ, dK and dV are held to the contract's same-precision rule: relative
  L2 error against float64 at most min(1e-2, max(floor, 2 × the error of the same dtype's
  unfused computation)), the cap where that error is not finite or the reference is zero.
  This is common/harness/testing.hpp's rule without two allowances the C++ tests add, so it is
  stricter: the baseline is summed in one order (the C++ takes the worse of two), and there
  is no lse-recompute term (on these standard-normal inputs |L| is small and that term is
  under the floor; testing.hpp says why).
- CUDA graph: the forward and backward captured once (torch.cuda.graph), then replayed on a
  second set of inputs. Before that replay, o, the library's own dQ, dK and dV (held
  through hooks on q, k and v) and the projection's gradient are poisoned with NaN. After
  it, they must be finite and right for the new inputs under the same rule, and dQ, dK, dV
  must match an eager call on the same inputs element by element. So a replay that read
  the capture's stale inputs, a skipped tile or rows left from the previous replay fail,
  even where the graph's memory pool let another captured operation write over the poison
  first. The replay's o must also equal the eager call's bit for bit, because the forward
  is deterministic. One case runs chapter 08's cut tiles (its workspace zeroed by a
  cudaMemsetAsync inside the graph), one is the training script's shape.
- Finite differences: contiguous q, k, v (chapter 10's backward on Hopper), N = 33, d = 64
  and 128, causal and not: each gradient's length against the float64 loss's central
  difference along it.
"""
import math
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
import flashtut as ft

SKIP = 77  # ctest's SKIP_RETURN_CODE for this test


def skip_reason():
    """Why these tests cannot run here, or None."""
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed (pip install torch): the GPU tests of flashtut.autograd skip"
    if not torch.cuda.is_available():
        return (f"PyTorch {torch.__version__} sees no CUDA GPU: the GPU tests of "
                f"flashtut.autograd skip")
    major, minor = torch.cuda.get_device_capability()
    if (major, minor) < (8, 0):
        return (f"{torch.cuda.get_device_name()} is sm_{major}{minor}: chapters 07 and 08 "
                f"need sm_80 or newer, so the GPU tests of flashtut.autograd skip")
    try:
        ft.library_path()
    except ft.LibraryError as e:
        return f"no library: {e}"
    return None


# Unit roundoff of each storage type, and the contract's cap (common/harness/testing.hpp).
UNIT_ROUNDOFF = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}
FLOAT32_ROUNDOFF = 2.0 ** -24
CAP = 1e-2


def error_floor(dtype_name):
    """common/harness/testing.hpp's error_floor: one rounding of the stored value plus 16 float32
    roundings, under which the ratio of two tiny errors is rounding luck."""
    return UNIT_ROUNDOFF[dtype_name] + 16 * FLOAT32_ROUNDOFF


def attention_by_formula(torch, q, k, v, do, causal, scale, store):
    """o, dq, dk, dv by the formulas of common/reference/precision.hpp, computed in q's dtype (float64
    for the reference, float32 for the unfused baseline), `store` applied to every value the
    unfused computation stores (S, P, O, dV, dP, dS, dQ, dK); D stays in the compute dtype."""
    s = store(scale * (q @ k.mT))
    if causal:
        n = q.shape[-2]
        above = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
        s = s.masked_fill(above, float("-inf"))
    p = store(torch.softmax(s, dim=-1))  # safe softmax: subtracts the row max first
    o = store(p @ v)
    big_d = (do * o).sum(-1, keepdim=True)
    dv = store(p.mT @ do)
    dp = store(do @ v.mT)
    ds = store(p * (dp - big_d))
    dq = store(scale * (ds @ k))
    dk = store(scale * (ds.mT @ q))
    return o, dq, dk, dv


def rel_l2(torch, got, ref):
    """‖got − ref‖ / ‖ref‖ (‖got − ref‖ when ref is all zeros), NaN when got is not finite."""
    got, ref = got.double(), ref.double()
    if not bool(torch.isfinite(got).all()):
        return float("nan")
    diff = (got - ref).norm().item()
    norm = ref.norm().item()
    return diff / norm if norm > 0 else diff


class Case:
    """One problem: the projection x [B, N, 3·H·d] and the output weights w [B, N, H, d], in
    the dtype, drawn from a seeded generator; q, k, v are views of x."""

    def __init__(self, torch, b, h, n, d, causal, dtype, seed):
        self.torch, self.b, self.h, self.n, self.d = torch, b, h, n, d
        self.causal, self.dtype = causal, dtype
        g = torch.Generator(device="cuda").manual_seed(seed)
        self.x = torch.randn(b, n, 3 * h * d, device="cuda", generator=g).to(dtype)
        self.w = torch.randn(b, n, h, d, device="cuda", generator=g).to(dtype)

    def views(self, x):
        """q, k, v as [B, H, N, d] views of x (strided: rows 3·H·d elements apart); of the
        projection's gradient, likewise dq, dk, dv."""
        b, n, h, d = self.b, self.n, self.h, self.d
        return [t.view(b, n, h, d).transpose(1, 2) for t in x.split(h * d, dim=2)]

    def expected(self, x, w):
        """(reference, baseline): o, dq, dk, dv in float64, and the same dtype's unfused
        computation (float32 arithmetic, stored values rounded to the dtype)."""
        torch = self.torch
        scale = self.d ** -0.5
        do = w.transpose(1, 2)
        q, k, v = self.views(x)
        ref = attention_by_formula(torch, *(t.double() for t in (q, k, v, do)), self.causal,
                                   scale, lambda t: t)
        dtype = self.dtype
        base = attention_by_formula(torch, *(t.float() for t in (q, k, v, do)), self.causal,
                                    scale, lambda t: t.to(dtype).float())
        return ref, base

    def failures(self, o, gx, x, w, what):
        """The tensors over the rule, as messages (empty when all pass)."""
        ref, base = self.expected(x, w)
        name = self.dtype_name
        out = []
        for label, got, r, u in zip(("o", "dq", "dk", "dv"), [o] + self.views(gx), ref, base):
            err, baseline = rel_l2(self.torch, got, r), rel_l2(self.torch, u, r)
            if r.norm().item() == 0 or not math.isfinite(baseline):
                limit = CAP
            else:
                limit = min(CAP, max(error_floor(name), 2 * baseline))
            if not err <= limit:  # NaN fails too
                out.append(f"{what} {label}: rel_err {err:.3e} over {limit:.3e} (unfused "
                           f"{name} {baseline:.3e})")
        return out

    @property
    def dtype_name(self):
        return str(self.dtype).replace("torch.", "")

    def __str__(self):
        return (f"B={self.b} H={self.h} N={self.n} d={self.d} causal={self.causal} "
                f"{self.dtype_name}")


def forward_backward(fa, case, x, w, grads=None):
    """The model's use: attention on views of x, its output weighted by w through the
    transpose a model applies next; returns o (the backward has filled x.grad). With a list
    `grads`, hooks on q, k and v put there the gradients the library returned, before
    autograd copies them into x.grad."""
    q, k, v = case.views(x)
    if grads is not None:
        grads[:] = [None] * 3
        for i, t in enumerate((q, k, v)):
            t.register_hook(lambda g, i=i: grads.__setitem__(i, g))
    o = fa.attention(q, k, v, is_causal=case.causal)
    (o.transpose(1, 2) * w).sum().backward()
    return o


class AutogradGpu(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import torch
        import flashtut.autograd as fa
        cls.torch, cls.fa = torch, fa
        # Formulas in float32 mean float32: no TF32 in the baseline's products.
        torch.backends.cuda.matmul.allow_tf32 = False

    def test_eager_views_match_float64(self):
        torch = self.torch
        bad, seed = [], 0
        for dtype in (torch.bfloat16, torch.float16):
            for d in (64, 128):
                for n in (1, 17, 1000):
                    for causal in (False, True):
                        seed += 1
                        case = Case(torch, 2, 3, n, d, causal, dtype, seed)
                        x = case.x.clone().requires_grad_()
                        o = forward_backward(self.fa, case, x, case.w)
                        self.assertFalse(case.views(x)[0].is_contiguous())
                        bad += [f"{case}: {m}" for m in
                                case.failures(o.detach(), x.grad, case.x, case.w, "eager")]
        self.assertEqual(bad, [], "\n".join(bad))

    def test_contiguous_gradients_match_finite_differences(self):
        # Contiguous q, k, v: chapter 10's backward on a Hopper GPU (flashtut.backward_for),
        # chapter 08's elsewhere. For each of dq, dk, dv (g), the derivative of the loss
        # f = sum(o·w) along u = g/|g| is computed twice: from g (it is |g|), and as the central
        # difference of f in float64 at the same bf16-rounded inputs, (f(x+εu) − f(x−εu))/2ε,
        # ε = 1e-3 (its error, about ε² times f's third derivative and 1e-16/ε relative, is far
        # under bf16's). A right g agrees to its own rounding; a g off by a factor, in a wrong
        # direction or missing a tile's share does not.
        torch = self.torch
        F = torch.nn.functional
        bad = []
        for d in (64, 128):
            for causal in (False, True):
                g = torch.Generator(device="cuda").manual_seed(11 + d + causal)
                shape = (1, 2, 33, d)  # N = 33: no multiple of any tile
                q, k, v = (torch.randn(shape, device="cuda", generator=g).to(torch.bfloat16) for _ in range(3))
                w = torch.randn(shape, device="cuda", generator=g, dtype=torch.float64)
                leaves = [t.clone().requires_grad_() for t in (q, k, v)]
                o = self.fa.attention(*leaves, is_causal=causal)
                (o.double() * w).sum().backward()
                base = [t.double() for t in (q, k, v)]

                def f(args):
                    return (F.scaled_dot_product_attention(*args, is_causal=causal) * w).sum().item()

                for name, i in (("dq", 0), ("dk", 1), ("dv", 2)):
                    grad = leaves[i].grad.double()
                    norm = grad.norm().item()
                    if not norm > 0:
                        bad.append(f"d={d} causal={causal}: {name} is zero or not finite")
                        continue
                    u, eps = grad / norm, 1e-3
                    plus, minus = list(base), list(base)
                    plus[i], minus[i] = base[i] + eps * u, base[i] - eps * u
                    fd = (f(plus) - f(minus)) / (2 * eps)
                    if not abs(norm - fd) <= 2e-2 * norm:
                        bad.append(f"d={d} causal={causal}: {name}: |g| = {norm:.6g}, the loss's "
                                   f"central difference along g/|g| = {fd:.6g}")
        self.assertEqual(bad, [], "\n".join(bad))

    def check_graph(self, b, h, n, d, causal, dtype):
        torch, fa = self.torch, self.fa
        case = Case(torch, b, h, n, d, causal, dtype, seed=100 + n + d)
        other = Case(torch, b, h, n, d, causal, dtype, seed=200 + n + d)
        x = case.x.clone().requires_grad_()  # the graph's input tensors
        w = case.w.clone()
        # Warm-up on a side stream (PyTorch's rule for capture: lazy set-up happens outside).
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                x.grad = None
                forward_backward(fa, case, x, w)
        torch.cuda.current_stream().wait_stream(side)
        x.grad = None
        graph = torch.cuda.CUDAGraph()
        lib_grads = []  # the library's dq, dk, dv: tensors of the graph's memory
        with torch.cuda.graph(graph):
            o = forward_backward(fa, case, x, w, lib_grads)
        gx = x.grad
        self.assertTrue(all(g is not None for g in lib_grads), "the hooks saw no gradient")
        graph.replay()  # capture runs nothing: this is the first run of the captured work
        torch.cuda.synchronize()
        bad = case.failures(o.detach(), gx, case.x, case.w, "replay 1")
        # New inputs into the captured tensors, every output poisoned, replay.
        with torch.no_grad():
            x.copy_(other.x)
            w.copy_(other.w)
            for t in [o.detach(), gx] + lib_grads:
                t.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        bad += case.failures(o.detach(), gx, other.x, other.w, "replay 2 (new inputs)")
        # An eager call on the same inputs: o bit for bit (the forward is deterministic);
        # dq, dk, dv element by element (their atomics may add in another order: a few
        # units in the last place of the dtype, where a stale or skipped element is off by
        # the values' own size).
        x2 = other.x.clone().requires_grad_()
        eager_grads = []
        o2 = forward_backward(fa, case, x2, other.w, eager_grads)
        if not torch.equal(o.detach(), o2.detach()):
            bad.append("replay 2's o differs from an eager call's on the same inputs")
        for label, got, want in zip(("dq", "dk", "dv"), lib_grads, eager_grads):
            scale = want.abs().max().item()
            off = (got.float() - want.float()).abs()
            worst = off.max().item() if bool(torch.isfinite(got).all()) else float("nan")
            if not worst <= 2e-2 * scale:  # NaN fails too
                bad.append(f"replay 2's {label} differs from the eager call's by {worst:.3e} "
                           f"at most, over 2e-2 of its largest element ({scale:.3e})")
        self.assertEqual(bad, [], f"{case}:\n" + "\n".join(bad))

    def test_graph_cut_tiles(self):
        # Non-causal N = 1000, d = 64, B·H = 6: 48 key tiles of 8 query tiles each (Bc = Br
        # = 128), a grid smaller than one wave on a GPU of more than 48 SMs, where chapter
        # 08's plan (tail_split.hpp) cuts every tile in two: the slots zeroed by a
        # cudaMemsetAsync and store_shared_tiles both inside the graph.
        self.check_graph(2, 3, 1000, 64, False, self.torch.bfloat16)

    def test_graph_ragged_causal_fp16(self):
        self.check_graph(2, 3, 17, 128, True, self.torch.float16)

    def test_graph_training_shape(self):
        # scripts/train_gpt.py's attention: B = 8, H = 12, N = 1024, d = 64, causal, bf16.
        self.check_graph(8, 12, 1024, 64, True, self.torch.bfloat16)


if __name__ == "__main__":
    reason = skip_reason()
    if reason:
        print(f"test_autograd_gpu: skipped: {reason}", flush=True)
        sys.exit(SKIP)
    unittest.main()
