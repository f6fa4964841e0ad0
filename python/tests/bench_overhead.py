#!/usr/bin/env python3
"""How much CPU time flashtut's Python layer spends per call, without a GPU.

  python3 python/tests/bench_overhead.py            # the flashtut/ next to this file
  python3 python/tests/bench_overhead.py --rev 938aab2  # the module as committed there

Not a test (ctest does not run it): a measurement, for python/README.md's "What a call
costs". Needs PyTorch (the CPU build is enough) and a C compiler.

What is real and what stands in:

- The library is a stub built here from common/api/flashtut.h: every pass returns 0 at once, the
  workspace queries give chapter 07's (0) and chapter 08's (B·H·N·d + B·H·N floats) sizes. So
  what is timed is Python + ctypes (the real argument conversion and call), not the kernels.
- The tensors are real CPU torch tensors, small ([2, 2, 64, 64] bf16) so that allocating
  one is a quick malloc, of the order of what PyTorch's caching allocator costs on a GPU
  (a free-list lookup), not a CPU allocation of megabytes. flashtut's "on a CUDA device"
  test is lifted (one line of the module's source, substituted in a copy; autograd's
  _check_device, as the tests do).
- torch.cuda's own Python runs (torch.cuda.device, current_stream, _get_device_index,
  _lazy_init), with the C calls under it that need a driver replaced by Python no-ops, and
  torch.cuda.Stream by a small Python class; a CPU device passed to them is mapped to
  cuda:0; torch.cuda.is_available() and get_device_properties() answer at once (what
  torch.autocast("cuda") asks). Their C halves (a cudaGetDevice or so) are not timed.
- Not timed: the GPU, the library's C++ side, the copies the caller's layout needs (inputs
  here are contiguous), autocast's dtype casts (CUDA tensors only; attention() skips them
  when the inputs already have the autocast dtype, as they do in a model).

Each figure is the best of 7 repetitions of the mean of 2,000 calls (1,000 for a forward and
backward), in µs per call: the best, as timeit does, because on a shared machine the others
measure the neighbours too.
"""
import argparse
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

STUB_C = r"""
#include <string.h>
#include "flashtut.h"
int ft_api_version(void) { return FT_API_VERSION; }
size_t ft_problem_size(void) { return sizeof(ft_problem); }
const char* ft_last_error(void) { return ""; }
/* The registry: chapter 07's fastest forward and chapter 08's fastest backward. */
int ft_impl_count(void) { return 2; }
int ft_impl_info_at(int i, ft_impl_info* info) {
  memset(info, 0, sizeof *info);
  info->pass = i == 0 ? "forward" : "backward";
  info->name = i == 0 ? "ch07_fastest" : "ch08_fastest";
  info->alias = i == 0 ? "ch07" : "ch08";
  info->chapter = i == 0 ? "07" : "08";
  info->variant = "fastest";
  info->what = "stub";
  info->pairs_with = i == 0 ? "" : "ch07_fastest";
  info->dtypes = (1u << FT_DTYPE_BF16) | (1u << FT_DTYPE_FP16);
  info->head_dims[0] = 64, info->head_dims[1] = 128, info->num_head_dims = 2;
  info->min_sm = 80, info->strided = 1;
  return i == 0 || i == 1 ? 0 : -1;
}
size_t ft_forward_workspace_bytes(const char* impl, ft_problem p) { (void)impl; (void)p; return 0; }
int ft_forward(const char* impl, ft_problem p, const void* Q, const void* K, const void* V,
               void* O, float* lse, void* ws, cudaStream_t s) { return 0; }
int ft_forward_strided(const char* impl, ft_problem p, const ft_layout* l, const void* Q,
                       const void* K, const void* V, void* O, float* lse, void* ws,
                       cudaStream_t s) { return 0; }
size_t ft_backward_workspace_bytes(const char* impl, ft_problem p) {
  size_t rows = (size_t)p.batch * p.heads_q * p.len_q;
  (void)impl;
  return rows * p.head_dim * 4 + rows * 4;
}
int ft_backward(const char* impl, ft_problem p, const void* Q, const void* K, const void* V,
                const void* O, const float* lse, const void* dO, void* dQ, void* dK, void* dV,
                void* ws, cudaStream_t s) { return 0; }
int ft_backward_strided(const char* impl, ft_problem p, const ft_layout* l, const void* Q,
                        const void* K, const void* V, const void* O, const float* lse,
                        const void* dO, void* dQ, void* dK, void* dV, void* ws,
                        cudaStream_t s) { return 0; }
"""

# What makes the module run on CPU tensors: (old text, new text), applied where present.
CPU_SUBSTITUTIONS = [
    ('if device != "cuda":', 'if device not in ("cuda", "cpu"):'),
]


def build_stub(tmp):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        sys.exit("bench_overhead: needs a C compiler (cc) for the stub library")
    src, lib = os.path.join(tmp, "stub.c"), os.path.join(tmp, "libstub.so")
    with open(src, "w") as fh:
        fh.write(STUB_C)
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")  # flashtut.h includes cuda_runtime.h
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-I", os.path.join(ROOT, "common", "api"),
                    "-I", os.path.join(cuda, "include"), "-o", lib, src], check=True)
    return lib


def module_copy(tmp, rev):
    """python/flashtut (working tree, or `git show REV:`) copied to tmp/flashtut with the
    CPU substitutions; returns the package's folder."""
    pkg = os.path.join(tmp, "pkg", "flashtut")
    os.makedirs(pkg)
    for name in ("__init__.py", "autograd.py"):
        if rev:
            text = subprocess.run(["git", "-C", ROOT, "show", f"{rev}:python/flashtut/{name}"],
                                  check=True, capture_output=True, text=True).stdout
        else:
            with open(os.path.join(ROOT, "python", "flashtut", name), encoding="utf-8") as fh:
                text = fh.read()
        for old, new in CPU_SUBSTITUTIONS:
            text = text.replace(old, new)
        with open(os.path.join(pkg, name), "w", encoding="utf-8") as fh:
            fh.write(text)
    return pkg


def fake_cuda(torch):
    """torch.cuda's Python layer with its driver calls stubbed (see the docstring)."""
    import torch.cuda as tc
    cuda0 = torch.device("cuda", 0)

    class Stream:  # torch.cuda.Stream's constructor needs a driver
        def __init__(self, stream_id=0, device_index=0, device_type=1, **_):
            self.stream_id, self.device_index = stream_id, device_index
            self.device_type = device_type

        @property
        def cuda_stream(self):
            return 0

    real_device, real_current_stream = tc.device, tc.current_stream

    class device(real_device):
        def __init__(self, d):
            super().__init__(cuda0 if getattr(d, "type", None) == "cpu" else d)

    def current_stream(d=None):
        return real_current_stream(cuda0 if getattr(d, "type", None) == "cpu" else d)

    class Properties:  # what torch.autocast asks (is_bf16_supported) of the device
        major, minor, name = 9, 0, "stand-in"

    tc._initialized = True
    tc.is_available = lambda: True
    tc.get_device_properties = lambda d=None: Properties
    tc.Stream = Stream
    tc._exchange_device = lambda idx: 0 if idx >= 0 else -1
    tc._maybe_exchange_device = lambda idx: idx
    tc.device, tc.current_stream = device, current_stream
    torch._C._cuda_getCurrentStream = lambda idx: (0, 0 if idx is None or idx < 0 else idx, 1)
    torch._C._cuda_getCurrentRawStream = lambda idx: 0
    torch._C._cuda_getDevice = lambda: 0


class Rows(list):
    """(name, µs) in the order measured; rows[name] = x appends."""
    def __setitem__(self, name, value):
        self.append((name, value))


def per_call(fn, n=2000, repeat=7):
    """The best over `repeat` of the mean µs of `n` calls of fn()."""
    fn()
    results = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        results.append((time.perf_counter() - t0) / n * 1e6)
    return min(results)


def timed_bodies(fa, run, n=2000, repeat=7):
    """µs in FlashAttention.forward's and .backward's bodies (what autograd calls), run()
    doing one forward and backward each time."""
    spent = {"forward": [], "backward": []}
    originals = {k: getattr(fa.FlashAttention, k) for k in spent}

    def wrap(kind, fn):
        def body(*args):
            t0 = time.perf_counter_ns()
            try:
                return fn(*args)
            finally:
                spent[kind].append(time.perf_counter_ns() - t0)
        return staticmethod(body)

    for kind, fn in originals.items():
        setattr(fa.FlashAttention, kind, wrap(kind, fn))
    try:
        run()
        means = {k: [] for k in spent}
        for _ in range(repeat):
            for v in spent.values():
                v.clear()
            for _ in range(n):
                run()
            for k, v in spent.items():
                means[k].append(sum(v) / len(v) / 1e3)
        return {k: min(v) for k, v in means.items()}
    finally:
        for kind, fn in originals.items():
            setattr(fa.FlashAttention, kind, staticmethod(fn))


def _autocast_nothing(torch):
    """What torch.amp.custom_bwd adds to a backward: entering and leaving the forward's
    autocast state."""
    def fn():
        with torch.autocast(device_type="cuda", enabled=True, dtype=torch.bfloat16):
            pass
    return fn


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rev", help="time python/flashtut as committed at this git revision "
                                  "(default: the working tree)")
    ap.add_argument("--shape", default="2,2,64,64", help="B,H,N,d (default 2,2,64,64)")
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(1)
    tmp = tempfile.mkdtemp()
    try:
        lib = build_stub(tmp)
        pkg = module_copy(tmp, args.rev)  # imported under its own name, not from python/
        spec = importlib.util.spec_from_file_location(
            "flashtut", os.path.join(pkg, "__init__.py"), submodule_search_locations=[pkg])
        ft = importlib.util.module_from_spec(spec)
        sys.modules["flashtut"] = ft
        spec.loader.exec_module(ft)
        fa = importlib.import_module("flashtut.autograd")
        fake_cuda(torch)
        fa._check_device = lambda tensors: None
        ft.load(lib)

        shape = tuple(int(x) for x in args.shape.split(","))
        q, k, v, do = (torch.randn(shape, dtype=torch.bfloat16) for _ in range(4))
        o, lse = ft.forward(q, k, v, causal=True)
        rows = Rows()
        rows["flashtut.forward (ch07)"] = per_call(lambda: ft.forward(q, k, v, causal=True))
        rows["flashtut.backward (ch08)"] = per_call(
            lambda: ft.backward(q, k, v, o, lse, do, causal=True, impl="ch08"))
        with torch.no_grad():
            rows["attention(), no grad"] = per_call(lambda: fa.attention(q, k, v, is_causal=True))
        qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
        rows["attention(), forward with grad"] = per_call(
            lambda: fa.attention(qg, kg, vg, is_causal=True))

        def step():
            fa.attention(qg, kg, vg, is_causal=True).backward(do)
            qg.grad = kg.grad = vg.grad = None
        rows["attention() forward + backward"] = per_call(step, n=1000)
        bodies = timed_bodies(fa, step, n=1000)
        rows["  FlashAttention.forward body"] = bodies["forward"]
        rows["  FlashAttention.backward body"] = bodies["backward"]

        # As a model passes them: q, k, v views of one [B, N, 3·H·d] projection, read in
        # place through the strided functions (o and the gradients laid out [B, N, H, d]).
        b_, h_, n_, d_ = shape
        x = torch.randn(b_, n_, 3 * h_ * d_, dtype=torch.bfloat16).requires_grad_()
        dov = torch.randn(b_, n_, h_, d_, dtype=torch.bfloat16).transpose(1, 2)

        def views_step():
            qv, kv, vv = (t.view(b_, n_, h_, d_).transpose(1, 2) for t in x.split(h_ * d_, dim=2))
            fa.attention(qv, kv, vv, is_causal=True).backward(dov)
            x.grad = None
        rows["attention() fwd + bwd, views"] = per_call(views_step, n=1000)
        bodies = timed_bodies(fa, views_step, n=1000)
        rows["  its forward body"] = bodies["forward"]
        rows["  its backward body"] = bodies["backward"]

        # As scripts/train_gpt.py calls it: under CUDA autocast, which leaves these CPU
        # tensors alone but which attention() sees on (and, in the module as of 938aab2,
        # the Function's custom_fwd/custom_bwd, whose cost the last row is).
        def autocast_step():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                o = fa.attention(qg, kg, vg, is_causal=True)
            o.backward(do)
            qg.grad = kg.grad = vg.grad = None
        rows["same, under autocast(\"cuda\")"] = per_call(autocast_step, n=1000)
        bodies = timed_bodies(fa, autocast_step, n=1000)
        rows["  its forward body"] = bodies["forward"]
        rows["  its backward body"] = bodies["backward"]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            rows["  torch.autocast(\"cuda\") enter+exit"] = per_call(_autocast_nothing(torch))

        # SDPA on the CPU: its math backend computes for real (tiny, but not nothing), so
        # this is indicative only of what PyTorch's own Python/C++ layer costs.
        with torch.no_grad():
            rows["SDPA (CPU), no grad"] = per_call(
                lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))

        def sdpa_step():
            F.scaled_dot_product_attention(qg, kg, vg, is_causal=True).backward(do)
            qg.grad = kg.grad = vg.grad = None
        rows["SDPA (CPU) forward + backward"] = per_call(sdpa_step, n=1000)

        print(f"bench_overhead: python/flashtut at {args.rev or 'the working tree'}, "
              f"torch {torch.__version__}, shape {shape} bf16, stub library, CPU tensors")
        for name, us in rows:
            print(f"  {name:34s} {us:8.1f} µs/call")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
