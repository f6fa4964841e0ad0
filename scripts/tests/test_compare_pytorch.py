"""CPU tests of scripts/compare_pytorch.py (ctest scripts_compare_pytorch): everything that
runs without PyTorch or a GPU. The command line and its plan, the rows (FLOPs, ratios to
torch_flash, the tolerances), vs_pytorch.csv against the contract's columns, the summary
table; and, where numpy is installed, one whole run of measure() on a stand-in for torch
built on numpy (attention computed for real on tiny shapes, CUDA events replaced by a
clock each fake operation advances), with our passes replaced by numpy ones: every case
of the plan gets its row, refusals become skips, and a wrong result fails the run.
The real library is used for the workspace queries (FLASHTUT_LIB; CMake sets it).
"""
import contextlib
import csv
import importlib.util
import io
import math
import os
import re
import subprocess
import sys
import tempfile
import types
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "scripts", "compare_pytorch.py")
import compare_pytorch as cp
import flashtut
import pytorch_anchors as pa

HAVE_TORCH = importlib.util.find_spec("torch") is not None
HAVE_NUMPY = importlib.util.find_spec("numpy") is not None
LIB = os.environ.get("FLASHTUT_LIB") or os.path.join(ROOT, "build", "common", "libflashtut.so")
HAVE_LIB = os.path.isfile(LIB)


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          env={**os.environ, "FLASHTUT_LIB": LIB})


class CommandLine(unittest.TestCase):
    def test_help_needs_no_torch(self):
        r = run("--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        for word in ("vs_pytorch.csv", "--backward", "--dtypes", "L2 flushed", "--lib"):
            self.assertIn(word, r.stdout)

    def test_the_plan_is_the_tutorials_shapes(self):
        r = run("--list")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        # Every chapter's recommended forward that computes bf16 (the library's registry;
        # without a library, the two the plan always had).
        ours = ([n for n in cp.DEFAULT_OURS if cp.OURS[n][0] == "forward" and cp.runs_in(n, "bf16")]
                if HAVE_LIB else ["ch07_fastest", "ch06_warp_rows"])
        # bf16 by default: 2 head dims x causal and not x 3 lengths x (5 of PyTorch's + ours)
        self.assertEqual(len(lines), 2 * 2 * 3 * (5 + len(ours)))
        for impl in cp.TORCH_IMPLS + ours:
            self.assertTrue(any(l.startswith(impl + " ") for l in lines), impl)
        self.assertFalse(any(l.startswith("ch04_fast ") for l in lines))  # float32 only
        if "ch07_fastest" in ours:
            self.assertIn("ch07_fastest       forward  bf16    causal=1 B= 1 H=16 N= 16384 d=128", lines)

    def exported(self):
        flashtut.load(LIB)
        return set(flashtut.available()) | set(flashtut.available("backward"))

    def test_float32_and_the_backward_bring_chapters_04_and_05(self):
        r = run("--list", "--dtypes", "float32,bf16", "--sizes", "4096", "--dims", "64",
                "--causal", "1", "--backward")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertIn("ch04_fast          forward  float32 causal=1 B= 4 H=32 N=  4096 d= 64", lines)
        self.assertIn("ch05_flash         backward float32 causal=1 B= 4 H=32 N=  4096 d= 64", lines)
        self.assertIn("torch_flash        backward bf16    causal=1 B= 4 H=32 N=  4096 d= 64", lines)
        self.assertFalse(any(l.startswith("ch07_fastest") and "float32" in l for l in lines))
        self.assertFalse(any(l.startswith("ch05_flash") and "bf16" in l for l in lines))

    def test_lists_take_commas_or_spaces(self):
        a = cp.parse_args(["--list", "--sizes", "1024,4096", "16384", "--dtypes", "bf16", "fp16"])
        self.assertEqual(a.sizes, [1024, 4096, 16384])
        self.assertEqual(a.dtypes, ["bf16", "fp16"])
        self.assertEqual((a.dims, a.causal), ([64, 128], [0, 1]))

    def test_explicit_shapes_replace_the_grid(self):
        a = cp.parse_args(["--list", "--shapes", "8,12,1024,64,1", "1,32,32768,128,0"])
        self.assertEqual(cp.shapes_of(a), [(True, 8, 12, 1024, 64, 12), (False, 1, 32, 32768, 128, 32)])
        # Grouped heads: a sixth number; the forward only (no backward rows planned for it).
        g = run("--list", "--backward", "--impls", "torch_cudnn", "--shapes", "4,32,8192,128,1,8").stdout
        self.assertEqual(g.split(), "torch_cudnn forward bf16 causal=1 B= 4 H=32 N= 8192 d=128 H_kv=8".split())
        lines = run("--list", "--impls", "torch_cudnn", "--shapes", "4,16,2048,128,1").stdout.splitlines()
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("causal=1 B= 4 H=16 N=  2048 d=128", lines[0])
        for bad in ("8,12,1024,64", "8,12,1024,64,2", "0,12,1024,64,1", "8,x,1024,64,1", "4,32,8192,128,1,5"):
            r = run("--list", "--shapes", bad)
            self.assertEqual(r.returncode, 2, bad)
            self.assertIn("--shapes", r.stderr, bad)

    def test_order_sets_where_ours_run(self):
        """--order: ours in the registry's order (the default), in the order --impls names
        them, or reversed; PyTorch's backends first whatever the order."""
        names = [n for n in cp.OURS if cp.OURS[n][0] == "backward"][:2]
        if len(names) < 2:
            self.skipTest("the library's registry lists fewer than two backwards")
        first, second = names  # the registry's order
        base = ["--list", "--backward", "--impls", second, "torch_cudnn", first]
        of = lambda a: cp.selected(cp.parse_args(a))
        self.assertEqual(of(base), (["torch_cudnn"], [first, second]))
        self.assertEqual(of(base + ["--order", "impls"]), (["torch_cudnn"], [second, first]))
        self.assertEqual(of(base + ["--order", "reverse"]), (["torch_cudnn"], [second, first]))
        self.assertEqual(of(base[:3] + [first, second, "--order", "impls"])[1], [first, second])
        r = run("--list", "--order", "impls")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--order impls needs --impls", r.stderr)

    def test_bad_arguments_are_refused(self):
        for args in (["--list", "--dtypes", "fp8"], ["--list", "--sizes", "0"],
                     ["--list", "--impls", "tinyflash"], ["--list", "--causal", "2"],
                     ["--list", "--sizes", "many"], []):
            r = run(*args)
            self.assertEqual(r.returncode, 2, args)
        self.assertIn("--out DIR is required", run().stderr)

    def test_a_missing_library_says_how_to_build_it(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = run("--out", tmp, "--lib", os.path.join(tmp, "nope.so"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("cmake --workflow --preset test", r.stderr)

    @unittest.skipUnless(HAVE_LIB, "no libflashtut built")
    def test_impls_are_checked_against_the_library_lib_names(self):
        # No library where FLASHTUT_LIB points: the names --impls takes come from --lib's.
        name = next(n for n in cp.OURS if n.startswith("ch10_"))
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "FLASHTUT_LIB": os.path.join(tmp, "nope.so")}
            r = subprocess.run([sys.executable, SCRIPT, "--lib", LIB, "--list", "--backward", "--impls", name],
                               capture_output=True, text=True, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(any(l.startswith(name + " ") for l in r.stdout.splitlines()), r.stdout)

    @unittest.skipIf(HAVE_TORCH, "PyTorch is installed here")
    @unittest.skipUnless(HAVE_LIB, "no libflashtut built")
    def test_without_torch_it_says_so(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = run("--out", tmp)
            self.assertEqual(r.returncode, 2)
            self.assertIn("needs PyTorch", r.stderr)
            self.assertFalse(os.path.exists(os.path.join(tmp, "vs_pytorch.csv")))


class Rows(unittest.TestCase):
    def test_columns_are_the_contracts(self):
        with open(os.path.join(ROOT, "docs", "contracts.md"), encoding="utf-8") as fh:
            text = fh.read()
        m = re.search(r"\*\*vs_pytorch\.csv\*\*.*?```\n(.*?)\n```", text, re.S)
        self.assertIsNotNone(m, "docs/contracts.md has no vs_pytorch.csv header")
        self.assertEqual(cp.COLUMNS, m.group(1).strip().split(","))
        self.assertEqual(cp.TORCH_IMPLS, ["torch_flash", "torch_cudnn", "torch_efficient",
                                          "torch_math", "torch_naive"])
        self.assertFalse(set(cp.COLUMNS) & set(cp.EXTRA))

    def test_names_follow_the_chapters(self):
        if not HAVE_LIB:
            self.skipTest("no libflashtut: the script reads its implementations from the library")
        self.assertEqual(cp.OURS["ch07_fastest"], ("forward", "ch07_fastest"))
        self.assertEqual(cp.OURS["ch04_fast"], ("forward", "ch04_fast"))
        self.assertEqual(cp.OURS["ch05_flash"], ("backward", "ch05_flash"))
        self.assertNotIn("ch05_materialize", cp.OURS)  # its call reruns its own forward
        # Each chapter's recommended implementation but the unfused chapters 01-03's, forwards
        # first, in chapter order: the chapters 04-08 the comparison began with among them.
        self.assertEqual(cp.DEFAULT_OURS[:3], ["ch04_fast", "ch06_warp_rows", "ch07_fastest"])
        self.assertEqual([n for n in cp.DEFAULT_OURS if cp.OURS[n][0] == "backward"][:2],
                         ["ch05_flash", "ch08_fastest"])
        self.assertFalse(any(n.startswith(("ch01", "ch02", "ch03")) for n in cp.DEFAULT_OURS))
        for name in cp.DEFAULT_OURS:
            self.assertIn(name, cp.OURS)
        self.assertEqual(cp.ANCHOR_NAME["torch_efficient"], "mem_efficient")
        self.assertEqual(cp.SDP_MEMBER["torch_naive"], None)
        self.assertEqual(cp.SDP_MEMBER["torch_cudnn"], "CUDNN_ATTENTION")

    def test_flops_and_ratios(self):
        f = pa.flops(1, 16, 16384, 128, False)
        rows = [cp.make_row("torch_flash", "forward", "bf16", False, 1, 16, 16384, 128, 2.0, 3e-3),
                cp.make_row("torch_math", "forward", "bf16", False, 1, 16, 16384, 128, 8.0, 3e-3),
                cp.make_row("ch07_fastest", "forward", "bf16", False, 1, 16, 16384, 128, 2.5, 4e-3),
                cp.make_row("ch07_fastest", "forward", "bf16", True, 1, 16, 16384, 128, 1.5, 4e-3),
                cp.make_row("torch_flash", "backward", "bf16", False, 1, 16, 16384, 128, 5.0, 4e-3)]
        cp.add_ratios(rows)
        self.assertAlmostEqual(rows[2]["tflops"], f / 2.5 / 1e9)
        self.assertAlmostEqual(rows[4]["tflops"], 2.5 * f / 5.0 / 1e9)
        self.assertAlmostEqual(rows[2]["ratio_vs_torch_flash"], 0.8)
        self.assertAlmostEqual(rows[0]["ratio_vs_torch_flash"], 1.0)
        self.assertIsNone(rows[3]["ratio_vs_torch_flash"])  # no causal torch_flash row
        self.assertEqual(rows[3]["causal"], 1)
        table = cp.summary(rows)
        self.assertIn("0.80x", table)
        self.assertIn("torch_flash 2.000 ms (0.80x)", table)
        self.assertNotIn("torch_math   ", table)  # only ours get a line

    def test_tolerances_are_contract_2s(self):
        def row(dtype, err, impl="ch07_fastest"):
            return cp.make_row(impl, "forward", dtype, False, 1, 1, 64, 64, 1.0, err)
        self.assertEqual(cp.failures([row("bf16", 9e-3), row("fp16", 1e-2), row("float32", 9e-5)]), [])
        bad = cp.failures([row("bf16", 1.1e-2), row("float32", 2e-4), row("fp16", math.nan),
                           row("bf16", math.inf), row("bf16", None), row("bf16", 0.5, "torch_math")])
        self.assertEqual(len(bad), 5)
        self.assertIn("ch07_fastest forward bf16 B=1 H=1 N=64 d=64 causal=0: rel_err 0.011 over "
                      "the tolerance 0.01", bad[0])
        self.assertIn("not computed", bad[4])

    def test_reference_heads(self):
        self.assertEqual(cp.ref_heads(4, 4), [0, 1, 2, 3])
        self.assertEqual(cp.ref_heads(32, 4), [0, 1, 30, 31])
        self.assertEqual(cp.ref_heads(5, 3), [0, 3, 4])
        self.assertEqual(cp.ref_heads(16, 1), [15])

    def test_csv_reads_back(self):
        rows = [cp.make_row("torch_flash", "forward", "bf16", True, 4, 16, 4096, 128, 1.25, 3e-3,
                            ms_min=1.2, ms_max=1.3, iters=20, gpu="NVIDIA H200"),
                cp.make_row("ch04_fast", "forward", "float32", False, 4, 16, 4096, 128, 10.0,
                            1.5e-6, rel_err_vs_torch=2e-6, torch_ref="torch_efficient"),
                cp.make_row("torch_math", "backward", "bf16", True, 4, 16, 4096, 128, 30.0, None,
                            timed="fwd+bwd-fwd")]
        cp.add_ratios(rows)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "vs_pytorch.csv")
            cp.write_csv(path, rows)
            with open(path, newline="") as fh:
                raw = list(csv.reader(fh))
        self.assertEqual(raw[0], cp.COLUMNS + cp.EXTRA)
        back = [dict(zip(raw[0], r)) for r in raw[1:]]
        self.assertEqual([r["impl"] for r in back], ["torch_flash", "ch04_fast", "torch_math"])
        self.assertEqual([r["causal"] for r in back], ["1", "0", "1"])
        self.assertEqual(back[0]["dtype"], "bf16")
        self.assertEqual((back[0]["seq_len"], back[0]["head_dim"]), ("4096", "128"))
        self.assertAlmostEqual(float(back[0]["ms"]), 1.25)
        self.assertEqual(back[0]["ratio_vs_torch_flash"], "1.0")
        self.assertEqual(back[1]["ratio_vs_torch_flash"], "")  # not measured: empty
        self.assertEqual(back[2]["rel_err"], "")
        self.assertEqual(back[2]["timed"], "fwd+bwd-fwd")
        self.assertEqual(back[1]["torch_ref"], "torch_efficient")


# ---- A stand-in for torch on numpy ---------------------------------------------------------

def fake_torch(np, refuse):
    """A torch module big enough for compare_pytorch.measure(); refuse(backend, dtype) says
    whether a backend raises "No available kernel". Returns (torch, clock): every fake
    operation advances clock[0] by its cost in ms, and CUDA events read that clock."""
    clock = [0.0]
    COST = {"FLASH_ATTENTION": 1.0, "CUDNN_ATTENTION": 1.1, "EFFICIENT_ATTENTION": 1.5,
            "MATH": 4.0, None: 5.0}

    class Dtype:
        def __init__(self, name):
            self.name = name

        def __str__(self):
            return "torch." + self.name

    class Device:
        type = "cuda"

        def __str__(self):
            return "cuda:0"

    device = Device()
    float64 = Dtype("float64")

    class T:
        def __init__(self, a, dtype, requires_grad=False):
            self.a, self.dtype, self.requires_grad, self.device = np.asarray(a), dtype, requires_grad, device

        shape = property(lambda self: self.a.shape)

        def _new(self, a, dtype=None):
            return T(a, dtype or self.dtype)

        def detach(self):
            return self._new(self.a)

        def reshape(self, *s):
            return T(self.a.reshape(*s), self.dtype, self.requires_grad)

        def __getitem__(self, i):
            return T(self.a[i], self.dtype, self.requires_grad)

        def double(self):
            return self._new(self.a.astype(np.float64), float64)

        def requires_grad_(self, flag=True):
            self.requires_grad = flag
            return self

        def __matmul__(self, o):
            return self._new(self.a @ o.a)

        def repeat_interleave(self, g, dim):
            return self._new(np.repeat(self.a, g, axis=dim))

        def transpose(self, i, j):
            return self._new(np.swapaxes(self.a, i, j))

        def __mul__(self, x):
            return self._new(self.a * (x.a if isinstance(x, T) else x))

        __rmul__ = __mul__

        def __sub__(self, o):
            return self._new(self.a - o.a)

        def __pow__(self, p):
            return self._new(self.a ** p)

        def sum(self):
            return self._new(self.a.sum())

        def __float__(self):
            return float(self.a)

        def masked_fill_(self, mask, value):
            self.a = np.where(mask.a, value, self.a)
            return self

        def masked_fill(self, mask, value):
            return self._new(np.where(mask.a, value, self.a))

        def triu_(self, k):
            self.a = np.triu(self.a, k)
            return self

        def fill_(self, _):
            return self

        def all(self):
            return self._new(np.all(self.a))

        def __bool__(self):
            return bool(self.a)

        def is_contiguous(self):
            return True

        def data_ptr(self):
            return 1 << 20

    def softmax(t, dim):
        e = np.exp(t.a - t.a.max(axis=dim, keepdims=True))
        return t._new(e / e.sum(axis=dim, keepdims=True))

    def logsumexp(t, dim):
        m = t.a.max(axis=dim, keepdims=True)
        return t._new((m + np.log(np.exp(t.a - m).sum(axis=dim, keepdims=True))).squeeze(dim))

    def attention(q, k, v, causal):
        g = q.shape[1] // k.shape[1]  # grouped heads: each key/value head serves g query heads
        ka, va = (np.repeat(t.a, g, axis=1) if g > 1 else t.a for t in (k, v))
        s = (q.a @ np.swapaxes(ka, -1, -2)) * q.shape[-1] ** -0.5
        if causal:
            n = s.shape[-1]
            s = np.where(np.triu(np.ones((n, n), bool), 1), -np.inf, s)
        m = s.max(axis=-1, keepdims=True)
        e = np.exp(s - m)
        lse = (m + np.log(e.sum(axis=-1, keepdims=True)))[..., 0]
        return (e / e.sum(axis=-1, keepdims=True)) @ va, lse

    rng = [np.random.default_rng(0)]
    torch = types.ModuleType("torch")
    for name in ("bfloat16", "float16", "float32", "uint8", "bool"):
        setattr(torch, name, Dtype(name))
    torch.float64 = float64
    torch.__version__ = "0.fake"
    torch.device = lambda name: device
    torch.manual_seed = lambda s: rng.__setitem__(0, np.random.default_rng(s))
    torch.randn = lambda *shape, dtype=None, device=None, requires_grad=False: T(
        rng[0].standard_normal(shape), dtype, requires_grad)
    torch.empty = lambda *shape, dtype=None, device=None: T(np.zeros(shape), dtype)
    torch.ones = lambda *shape, dtype=None, device=None: T(np.ones(shape, bool), dtype)
    torch.softmax = softmax
    torch.logsumexp = logsumexp
    torch.isfinite = lambda t: t._new(np.isfinite(t.a))
    torch.no_grad = contextlib.nullcontext

    def grad(out, inputs, grad_out):
        clock[0] += 2.0
        return tuple(T(x.a.copy(), x.dtype) for x in inputs)  # a stand-in gradient: the input
    torch.autograd = types.SimpleNamespace(grad=grad)

    class OutOfMemoryError(RuntimeError):
        pass

    class Event:
        def __init__(self, enable_timing):
            self.t = None

        def record(self):
            self.t = clock[0]

        def elapsed_time(self, end):
            return end.t - self.t

    props = types.SimpleNamespace(name="Fake GPU", multi_processor_count=1, L2_cache_size=1 << 20)
    sleeps = []
    torch.cuda = types.SimpleNamespace(
        OutOfMemoryError=OutOfMemoryError, Event=Event, synchronize=lambda: None,
        empty_cache=lambda: None, is_available=lambda: True, mem_get_info=lambda: (100e9, 141e9),
        get_device_properties=lambda _: props, _sleep=sleeps.append)
    torch.backends = types.SimpleNamespace(cudnn=types.SimpleNamespace(version=lambda: 1),
                                           cuda=types.SimpleNamespace(matmul=types.SimpleNamespace()))
    state = {"backend": None}

    @contextlib.contextmanager
    def sdpa_kernel(backend):
        state["backend"] = backend
        yield
        state["backend"] = None

    def sdpa(q, k, v, is_causal=False, enable_gqa=False):
        backend = state["backend"]
        if k.shape[1] != q.shape[1] and not enable_gqa:
            raise RuntimeError("the heads of q and k differ (SDPA wants enable_gqa=True)")
        if refuse(backend, q.dtype.name):
            raise RuntimeError("No available kernel. Aborting execution.")
        clock[0] += COST[backend]
        return q._new(attention(q, k, v, is_causal)[0])

    real_softmax = softmax

    def naive_softmax(t, dim):  # the three kernels' softmax: charge the naive's cost once
        clock[0] += COST[None]
        return real_softmax(t, dim)
    torch.softmax = naive_softmax

    nn = types.ModuleType("torch.nn")
    nn.functional = types.ModuleType("torch.nn.functional")
    nn.functional.scaled_dot_product_attention = sdpa
    nn.attention = types.ModuleType("torch.nn.attention")
    nn.attention.SDPBackend = types.SimpleNamespace(**{m: m for m in COST if m})
    nn.attention.sdpa_kernel = sdpa_kernel
    torch.nn = nn
    torch._test = types.SimpleNamespace(T=T, attention=attention, sleeps=sleeps, clock=clock)
    return torch


@unittest.skipUnless(HAVE_NUMPY, "numpy is not installed")
@unittest.skipUnless(HAVE_LIB, "no libflashtut built (the workspace queries need it)")
@unittest.skipIf(HAVE_TORCH, "a real PyTorch is installed: the stand-in would shadow it")
class WholeRun(unittest.TestCase):
    """measure() and main() end to end on tiny shapes: 128 tokens, H·d = 128."""

    def run_script(self, argv, ours_error=0.0, ours_raises=None):
        import numpy as np
        torch = fake_torch(np, refuse=lambda backend, dtype: (
            backend in ("FLASH_ATTENTION", "CUDNN_ATTENTION") and dtype == "float32"))
        T, attention, clock = torch._test.T, torch._test.attention, torch._test.clock

        def forward(q, k, v, *, causal=False, scale=None, impl="ch07"):
            flashtut.check_tensors([("q", q), ("k", k), ("v", v)],
                                   dtypes=flashtut.forwards()[impl].dtypes)
            if ours_raises and impl in ours_raises:
                raise ours_raises[impl]
            clock[0] += 0.8
            o, lse = attention(q, k, v, causal)
            return T(o * (1 + ours_error), q.dtype), T(lse, torch.float32)

        def backward(q, k, v, o, lse, do, *, causal=False, scale=None, impl="ch05"):
            clock[0] += 1.6
            return tuple(T(x.a.copy(), x.dtype) for x in (q, k, v))

        # Every implementation counts as exported, whatever chapters this build has: the
        # passes are the numpy ones above; the workspace query is the library's where it can be.
        def workspace_bytes(impl, prob, kind="forward", real=flashtut.workspace_bytes):
            return real(impl, prob, kind)

        modules = {"torch": torch, "torch.nn": torch.nn, "torch.nn.functional": torch.nn.functional,
                   "torch.nn.attention": torch.nn.attention}
        out, err = io.StringIO(), io.StringIO()
        with tempfile.TemporaryDirectory() as tmp, \
                mock.patch.dict(sys.modules, modules), \
                mock.patch.object(pa, "TOKENS", 128), mock.patch.object(pa, "HEAD_SPACE", 128), \
                mock.patch.object(flashtut, "forward", forward), \
                mock.patch.object(flashtut, "backward", backward), \
                mock.patch.object(flashtut, "workspace_bytes", workspace_bytes), \
                mock.patch.object(flashtut, "available", lambda kind="forward": list(
                    (flashtut.forwards() if kind == "forward" else flashtut.backwards()))), \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cp.main(["--out", tmp, "--lib", LIB, "--reps", "3", "--warmup", "1"] + argv)
            path = os.path.join(tmp, "vs_pytorch.csv")
            rows = list(csv.DictReader(open(path, newline=""))) if os.path.exists(path) else None
        return rc, rows, out.getvalue(), err.getvalue(), torch

    def test_grouped_heads_run_the_forward_against_their_reference(self):
        rc, rows, out, err, _ = self.run_script(
            ["--shapes", "1,4,64,64,1,2", "--dtypes", "bf16", "--backward", "--ref-heads", "4",
             "--impls", "torch_flash", "torch_naive", "ch07_fastest"])
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(sorted((r["impl"], r["pass"]) for r in rows),
                         [("ch07_fastest", "forward"), ("torch_flash", "forward"), ("torch_naive", "forward")])
        for r in rows:
            self.assertEqual((r["heads"], r["heads_kv"]), ("4", "2"))
            self.assertLess(float(r["rel_err"]), 1e-2, r["impl"])  # against the grouped reference

    def test_every_case_gets_its_rows_and_ratios(self):
        rc, rows, out, err, torch = self.run_script(
            ["--sizes", "64", "--dims", "64", "--causal", "0,1", "--dtypes", "bf16,float32",
             "--backward", "--ref-heads", "2"])
        self.assertEqual(rc, 0, out + err)
        # bf16: 5 of PyTorch's x (forward, backward); float32: flash and cudnn refuse. Ours:
        # every chapter's recommended pass in each dtype it computes, two causal cases each,
        # unless this machine's library refused it before any launch (a skip, said so).
        torch_rows = [r for r in rows if r["impl"].startswith("torch_")]
        self.assertEqual(len(torch_rows), 2 * 10 + 2 * 6)
        for dtype in ("bf16", "float32"):
            for name in (n for n in cp.DEFAULT_OURS if cp.runs_in(n, dtype)):
                got = [r for r in rows if r["impl"] == name and r["dtype"] == dtype]
                if not got:
                    self.assertRegex(out, rf"{name} .* {dtype} .*skipped: ", (name, dtype))
                else:
                    self.assertEqual(len(got), 2, (name, dtype))
        passes = {(r["impl"], r["pass"]) for r in rows}
        self.assertIn(("ch08_fastest", "backward"), passes)
        self.assertNotIn(("ch08_fastest", "forward"), passes)
        self.assertEqual(out.count("skipped: RuntimeError: No available kernel"), 4)
        by = {(r["impl"], r["pass"], r["dtype"], r["causal"]): r for r in rows}
        ch07 = by[("ch07_fastest", "forward", "bf16", "1")]
        self.assertEqual((ch07["batch"], ch07["heads"], ch07["seq_len"], ch07["head_dim"]),
                         ("2", "2", "64", "64"))
        self.assertAlmostEqual(float(ch07["ms"]), 0.8)
        self.assertAlmostEqual(float(ch07["ratio_vs_torch_flash"]), 1.0 / 0.8)
        self.assertLess(float(ch07["rel_err"]), 1e-12)
        self.assertEqual(ch07["torch_ref"], "torch_flash")
        self.assertLess(float(ch07["rel_err_vs_torch"]), 1e-12)
        self.assertEqual((ch07["iters"], ch07["timed"], ch07["gpu"]), ("3", "call", "Fake GPU"))
        flash_bwd = by[("torch_flash", "backward", "bf16", "0")]
        self.assertAlmostEqual(float(flash_bwd["ms"]), 2.0)  # (1 + 2) - 1
        self.assertEqual(flash_bwd["timed"], "fwd+bwd-fwd")
        self.assertEqual(flash_bwd["ms_min"], "")
        ch05 = by[("ch05_flash", "backward", "float32", "0")]
        self.assertAlmostEqual(float(ch05["ms"]), 1.6)
        self.assertEqual(ch05["torch_ref"], "torch_efficient")
        self.assertEqual(ch05["ratio_vs_torch_flash"], "")  # no float32 torch_flash
        self.assertIn(("ch04_fast", "forward", "float32", "1"), by)
        self.assertNotIn(("ch04_fast", "forward", "bf16", "1"), by)
        # The summary at the end, the GPU spin after each flush.
        self.assertIn("vs flash", out)
        self.assertRegex(out, r"ch07_fastest +forward +bf16 +64 +64 +1 +0\.800 .* 1\.25x")
        self.assertRegex(out, r"ch05_flash .*torch_efficient 2\.000 ms \(1\.25x\)")
        self.assertTrue(torch._test.sleeps and all(c == cp.measure_ceilings.COVER_CYCLES for c in torch._test.sleeps))

    def test_a_wrong_result_fails_the_run(self):
        rc, rows, out, err, _ = self.run_script(
            ["--sizes", "64", "--dims", "64", "--causal", "1", "--impls", "torch_flash,ch07_fastest"],
            ours_error=0.05)
        self.assertEqual(rc, 1)
        self.assertEqual([r["impl"] for r in rows], ["torch_flash", "ch07_fastest"])
        self.assertGreater(float(rows[1]["rel_err"]), 1e-2)
        self.assertIn("FAILED: ch07_fastest forward bf16 B=2 H=2 N=64 d=64 causal=1: rel_err", err)

    def test_refusals_are_skips_and_cuda_errors_failures(self):
        refused = flashtut.FlashtutError("ft_forward", -1, "chapter 07 (tuned) needs sm_80")
        rc, rows, out, err, _ = self.run_script(
            ["--sizes", "64", "--dims", "64", "--causal", "0", "--impls", "torch_flash,ch07_fastest"],
            ours_raises={"ch07_fastest": refused})
        self.assertEqual(rc, 0, out + err)
        self.assertEqual([r["impl"] for r in rows], ["torch_flash"])
        self.assertIn("ch07_fastest       forward  bf16    causal=0 B= 2 H= 2 N=    64 d= 64 "
                      "skipped: ft_forward: chapter 07 (tuned) needs sm_80", out)
        crashed = flashtut.FlashtutError("ft_forward", 700, "an illegal memory access")
        rc, rows, out, err, _ = self.run_script(
            ["--sizes", "64", "--dims", "64", "--causal", "0", "--impls", "ch07_fastest"],
            ours_raises={"ch07_fastest": crashed})
        self.assertEqual(rc, 1)
        self.assertIn("FAILED: ch07_fastest forward bf16", err)
        self.assertIn("illegal memory access", err)


if __name__ == "__main__":
    unittest.main()
