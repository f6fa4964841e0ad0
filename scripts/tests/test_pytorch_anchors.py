"""CPU tests of scripts/pytorch_anchors.py (ctest scripts_pytorch_anchors): everything that
runs without PyTorch or a GPU. The command line, the plan of cases, the FLOP count, the log
line gpu_run.py greps, and the CSV writer on made-up rows, read back by the reader the plots
and the docs use (plots/results_csv.py) and compared with the committed anchors.csv's header.
"""
import csv
import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "scripts", "pytorch_anchors.py")
import pytorch_anchors as pa
import results_csv

HAVE_TORCH = importlib.util.find_spec("torch") is not None


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


class CommandLine(unittest.TestCase):
    def test_help_needs_no_torch(self):
        r = run("--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        for word in ("anchors.csv", "--sizes", "--backends", "L2 flushed"):
            self.assertIn(word, r.stdout)

    def test_the_plan_is_the_tutorials_shapes(self):
        r = run("--list")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        # 2 dtypes x 2 head dims x causal and not x 3 lengths x 5 implementations
        self.assertEqual(len(lines), 2 * 2 * 2 * 3 * 5)
        for backend in ("flash(FA2)", "cudnn", "mem_efficient", "math", "torch-naive(3 kernels)"):
            self.assertTrue(any(l.startswith(backend + " ") for l in lines), backend)
        for causal, b, h, n, d in pa.shapes([1024, 4096, 16384], [64, 128], [0, 1]):
            self.assertEqual((b * n, h * d), (16384, 2048))
        self.assertIn("torch-naive(3 kernels)   float32   causal=1 B= 1 H=16 N= 16384 d=128", lines)

    def test_bad_arguments_are_refused(self):
        self.assertEqual(run("--sizes", "0").returncode, 2)
        self.assertEqual(run("--backends", "tinyflash").returncode, 2)

    @unittest.skipIf(HAVE_TORCH, "PyTorch is installed here")
    def test_without_torch_it_says_so(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = run(tmp)
            self.assertEqual(r.returncode, 2)
            self.assertIn("needs PyTorch", r.stderr)
            self.assertFalse(os.path.exists(os.path.join(tmp, "anchors.csv")))


class Rows(unittest.TestCase):
    def test_flops_as_the_papers_count(self):
        self.assertEqual(pa.flops(4, 32, 4096, 64, False), 4 * 4 * 32 * 4096**2 * 64)
        self.assertEqual(pa.flops(4, 32, 4096, 64, True), 2 * 4 * 32 * 4096**2 * 64)
        r = pa.row("cudnn", "bfloat16", False, 1, 16, 16384, 128, fwd_ms=2.0, bwd_ms=5.0)
        f = 4 * 16 * 16384**2 * 128
        self.assertAlmostEqual(r["fwd_tflops"], f / 2.0 / 1e9)
        self.assertAlmostEqual(r["bwd_tflops"], 2.5 * f / 5.0 / 1e9)

    def test_log_line_is_what_gpu_run_greps(self):
        import re
        r = pa.row("mem_efficient", "float32", True, 4, 32, 4096, 64, 20.0, 50.0)
        self.assertRegex(pa.line(r), re.compile(r"mem_efficient +torch\.float32"))
        self.assertIn("causal=1 B= 4 H=32 N=  4096 d= 64 fwd   20.000 ms", pa.line(r))
        self.assertIn("skipped: out of memory",
                      pa.skipped("math", "float32", False, 1, 32, 16384, 64, "out of memory"))

    def test_grids_are_counted_only_where_they_exist(self):
        self.assertEqual(pa.grid_bytes_needed("flash(FA2)", "bfloat16", 1, 32, 16384), 0)
        self.assertEqual(pa.grid_bytes_needed("torch-naive(3 kernels)", "bfloat16", 1, 32, 16384),
                         4 * 32 * 16384**2 * 2)
        self.assertEqual(pa.grid_bytes_needed("math", "bfloat16", 1, 32, 16384), 4 * 32 * 16384**2 * 4)

    def test_first_line_of_an_error(self):
        self.assertEqual(pa.first_line(RuntimeError("No available kernel.\nmore")), "No available kernel.")
        self.assertEqual(pa.first_line(RuntimeError("")), "RuntimeError")


class CsvWriter(unittest.TestCase):
    def test_fake_rows_read_back_as_the_plots_and_docs_read_them(self):
        rows = [pa.row("flash(FA2)", "bfloat16", False, 1, 16, 16384, 128, 6.42, 17.9),
                pa.row("torch-naive(3 kernels)", "float32", True, 4, 16, 4096, 128, 23.2, 35.4),
                pa.row("math", "bfloat16", True, 16, 32, 1024, 64, 1.5, 4.0)]
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "anchors.csv")
            pa.write_csv(path, rows)
            back = results_csv.read(path)
            with open(path, newline="") as fh:
                raw = list(csv.DictReader(fh))
        self.assertEqual(len(back), 3)
        self.assertEqual([r["backend"] for r in back], ["flash(FA2)", "torch-naive(3 kernels)", "math"])
        self.assertEqual([r["causal"] for r in back], [False, True, True])
        self.assertAlmostEqual(back[0]["fwd_ms"], 6.42)
        self.assertAlmostEqual(back[1]["bwd_tflops"], rows[1]["bwd_tflops"])
        # scripts/update_readme.py compares the text: "True"/"False", N and d as integers.
        self.assertEqual([(r["causal"], r["N"], r["d"]) for r in raw],
                         [("False", "16384", "128"), ("True", "4096", "128"), ("True", "1024", "64")])

    def test_header_is_the_committed_files(self):
        committed = os.path.join(ROOT, "plots", "results", "h200", "anchors.csv")
        with open(committed, newline="") as fh:
            header = next(csv.reader(fh))
        self.assertEqual(header, pa.COLUMNS)
        self.assertEqual(pa.COLUMNS, results_csv.REQUIRED["anchors.csv"])


class FakeTensor:
    """Shape only: enough of a tensor for pytorch_anchors.measure() to run its control flow."""

    def __init__(self, *shape, dtype=None):
        self.shape, self.dtype = tuple(shape), dtype

    def __matmul__(self, other):
        return FakeTensor(*self.shape[:-1], other.shape[-1], dtype=self.dtype)

    def __mul__(self, _):
        return self

    def transpose(self, a, b):
        s = list(self.shape)
        s[a], s[b] = s[b], s[a]
        return FakeTensor(*s, dtype=self.dtype)

    def masked_fill(self, *_):
        return self

    def triu_(self, _):
        return self

    def fill_(self, _):
        return self

    def copy_(self, _):
        return self

    def numel(self):
        n = 1
        for x in self.shape:
            n *= x
        return n


def fake_torch(fail):
    """A stand-in for the torch module; fail(backend, dtype, n) raises what PyTorch would."""
    import types
    torch = types.ModuleType("torch")
    for name in ("bfloat16", "float16", "float32", "uint8", "bool"):
        setattr(torch, name, name)
    torch.__version__ = "0.fake"
    torch.device = lambda name: name
    torch.empty = lambda *shape, dtype=None, device=None: FakeTensor(*shape, dtype=dtype)
    torch.empty_like = lambda t: FakeTensor(*t.shape, dtype=t.dtype)
    torch.randn = lambda *shape, dtype=None, device=None, requires_grad=False: FakeTensor(*shape, dtype=dtype)
    torch.randn_like = torch.empty_like
    torch.ones = lambda *shape, dtype=None, device=None: FakeTensor(*shape, dtype=dtype)
    torch.softmax = lambda t, dim: t

    class OutOfMemoryError(RuntimeError):
        pass

    class Event:
        def __init__(self, enable_timing):
            pass

        def record(self):
            pass

        def elapsed_time(self, _):
            return 2.0

    props = types.SimpleNamespace(name="Fake GPU", multi_processor_count=1, L2_cache_size=1 << 20)
    torch.cuda = types.SimpleNamespace(
        OutOfMemoryError=OutOfMemoryError, Event=Event, synchronize=lambda: None,
        empty_cache=lambda: None, is_available=lambda: True, mem_get_info=lambda: (100e9, 141e9),
        get_device_properties=lambda _: props)
    torch.backends = types.SimpleNamespace(cudnn=types.SimpleNamespace(version=lambda: 1),
                                           cuda=types.SimpleNamespace(matmul=types.SimpleNamespace()))
    torch.autograd = types.SimpleNamespace(grad=lambda out, inputs, grad: inputs)
    state = {}

    class sdpa_kernel:
        def __init__(self, backend):
            self.backend = backend

        def __enter__(self):
            state["backend"] = self.backend

        def __exit__(self, *_):
            state.pop("backend")

    def sdpa(q, k, v, is_causal=False):
        fail(state["backend"], q.dtype, q.shape[2], torch)
        return FakeTensor(*q.shape, dtype=q.dtype)

    nn = types.ModuleType("torch.nn")
    functional = types.ModuleType("torch.nn.functional")
    functional.scaled_dot_product_attention = sdpa
    attention = types.ModuleType("torch.nn.attention")
    attention.sdpa_kernel = sdpa_kernel
    attention.SDPBackend = types.SimpleNamespace(FLASH_ATTENTION="FLASH_ATTENTION", MATH="MATH",
                                                 CUDNN_ATTENTION="CUDNN_ATTENTION",
                                                 EFFICIENT_ATTENTION="EFFICIENT_ATTENTION")
    torch.nn, nn.functional, nn.attention = nn, functional, attention
    return torch, {"torch": torch, "torch.nn": nn, "torch.nn.functional": functional,
                   "torch.nn.attention": attention}


class WithoutAGpu(unittest.TestCase):
    """measure() and main() on a stand-in for PyTorch: every case runs or is skipped with a
    reason, and anchors.csv gets exactly the measured ones."""

    def test_every_case_runs_or_is_skipped_with_a_reason(self):
        import contextlib
        import io

        def fail(backend, dtype, n, torch):
            if backend in ("FLASH_ATTENTION", "CUDNN_ATTENTION") and dtype == "float32":
                raise RuntimeError("No available kernel. Aborting execution.\nmore")
            if backend == "CUDNN_ATTENTION" and n == 4096:
                raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 8 GiB")

        torch, modules = fake_torch(fail)
        saved = {name: sys.modules.get(name) for name in modules}
        sys.modules.update(modules)
        out = io.StringIO()
        try:
            with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(out):
                code = pa.main([tmp, "--reps", "3", "--warmup", "1"])
                back = results_csv.read(os.path.join(tmp, "anchors.csv"))
        finally:
            for name, module in saved.items():
                if module is None:
                    sys.modules.pop(name, None)
                else:
                    sys.modules[name] = module
        log = out.getvalue()
        self.assertEqual(code, 0, log)
        self.assertIn("ceiling copy", log)  # measure_ceilings.ceilings() ran first
        self.assertIn("ceiling matmul fp32(no tf32)", log)
        self.assertFalse(torch.backends.cuda.matmul.allow_tf32)
        skipped = [l for l in log.splitlines() if " skipped: " in l]
        # float32: flash and cudnn unsupported at 12 shapes each; cudnn bf16 at N=4096: out of
        # memory (4 shapes); math at N=16384, d=64 (4 grids of 4-byte scores, 137 GB, over 90%
        # of the 100 GB free): 4 shapes; the three kernels in float32 there too: 2 shapes.
        self.assertEqual(sum("No available kernel." in l for l in skipped), 24, log)
        self.assertEqual(sum("out of memory: CUDA out of memory" in l for l in skipped), 4, log)
        self.assertEqual(sum(l.startswith("math ") and "needs about" in l for l in skipped), 4, log)
        self.assertEqual(sum(l.startswith("torch-naive") and "needs about" in l for l in skipped), 2, log)
        self.assertEqual(len(back), 120 - len(skipped))
        r = back[0]
        self.assertEqual((r["backend"], r["dtype"], r["causal"], r["N"], r["d"]),
                         ("flash(FA2)", "bfloat16", False, 1024, 64))
        # Every median is the fake 2 ms: the backward is (forward+backward) - forward = 0,
        # floored at 1e-6 ms; the forward's TFLOP/s is the papers' count over 2 ms.
        self.assertAlmostEqual(r["fwd_ms"], 2.0)
        self.assertAlmostEqual(r["fwd_tflops"], pa.flops(16, 32, 1024, 64, False) / 2.0 / 1e9)


if __name__ == "__main__":
    unittest.main()
