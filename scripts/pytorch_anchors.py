#!/usr/bin/env python3
"""PyTorch's attention on the tutorial's shapes, timed the way the chapters are timed: the
anchors the results compare against (OUT_DIR/anchors.csv), after the GPU's ceilings.

  python3 scripts/pytorch_anchors.py OUT_DIR [options] | tee anchors.log
  python3 plots/ceilings_from_anchors.py anchors.log OUT_DIR/ceilings.csv
  python3 scripts/pytorch_anchors.py --list          # the plan, without PyTorch or a GPU

What it measures (needs PyTorch with CUDA and a GPU; scripts/gpu_run.py runs it in its
`anchors` step):

  - the ceilings first: scripts/measure_ceilings.py's four lines (device-to-device copy
    bandwidth; bf16, fp16 and float32 matrix-product rates), which
    plots/ceilings_from_anchors.py turns into ceilings.csv;
  - torch.nn.functional.scaled_dot_product_attention under each backend, one at a time
    (torch.nn.attention.sdpa_kernel): FLASH_ATTENTION (FlashAttention-2), CUDNN_ATTENTION,
    EFFICIENT_ATTENTION (memory-efficient) and MATH (PyTorch's own unfused composition);
  - a plain three-kernel version: S = (scale·Q)·Kᵀ (one matrix product over the grid),
    softmax(S) (the causal mask, when asked for, as a masked_fill over the grid first),
    P·V. Float32 products without TF32, like the chapters' CUDA cores.

Every shape holds 16384 tokens like the tour: B = 16384/N, H = 2048/d, N in {1024, 4096,
16384}, d in {64, 128}, causal and not, float32 and bf16 (options narrow or widen that).
Each case is timed with CUDA events: warm-up calls, then the median of repeated calls, each
preceded (outside the events) by a write of twice the L2's size, so that no call finds the
previous one's data in the L2. Forward: the median of the forward alone. Backward: the
median of forward+backward (torch.autograd.grad of Q, K, V for a random dO) minus the
forward's median. TFLOP/s count as the FlashAttention papers do: forward 4·B·H·N²·d,
halved with the causal mask; backward 2.5× the forward. A case that does not fit in the
GPU's free memory, or that a backend does not support (FLASH_ATTENTION and CUDNN_ATTENTION
have no float32 kernels), is skipped with a printed reason: the run goes on.

anchors.csv (docs/contracts.md, the results files): one row per measured case, columns
backend,dtype,causal,B,H,N,d,fwd_ms,fwd_tflops,bwd_ms,bwd_tflops; backend is one of
flash(FA2), cudnn, mem_efficient, math, torch-naive(3 kernels); dtype bfloat16, float16 or
float32; causal True or False.
"""
import argparse
import csv
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
COLUMNS = ["backend", "dtype", "causal", "B", "H", "N", "d", "fwd_ms", "fwd_tflops",
           "bwd_ms", "bwd_tflops"]
# (name in anchors.csv, torch.nn.attention.SDPBackend member; None: the three kernels)
BACKENDS = [("flash(FA2)", "FLASH_ATTENTION"), ("cudnn", "CUDNN_ATTENTION"),
            ("mem_efficient", "EFFICIENT_ATTENTION"), ("math", "MATH"),
            ("torch-naive(3 kernels)", None)]
DTYPES = ("bfloat16", "float16", "float32")
TOKENS, HEAD_SPACE = 16384, 2048  # B·N and H·d of every shape, as in the tour
ELEMENT_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


def shapes(sizes, dims, causals):
    """(causal, B, H, N, d) of every case, in the order they run."""
    return [(bool(c), max(1, TOKENS // n), max(1, HEAD_SPACE // d), n, d)
            for d in dims for c in causals for n in sizes]


def flops(b, h, n, d, causal):
    """The forward's FLOPs as the papers count them (the backward: 2.5× this)."""
    return 4.0 * b * h * n * n * d * (0.5 if causal else 1.0)


def grid_bytes_needed(backend, dtype, b, h, n):
    """A generous estimate of the N×N grids a case keeps alive at once (0: it keeps none):
    the unfused paths hold S, P, dP and dS during the backward; MATH may compute in
    float32 whatever the input type."""
    grid = b * h * n * n
    if backend == "torch-naive(3 kernels)":
        return 4 * grid * ELEMENT_BYTES[dtype]
    if backend == "math":
        return 4 * grid * 4
    return 0


def write_csv(path, rows):
    """anchors.csv: the header, then one line per row (a dict with COLUMNS as keys)."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(COLUMNS)
        for r in rows:
            causal = r["causal"]
            w.writerow([r["backend"], r["dtype"], "True" if causal else "False",
                        int(r["B"]), int(r["H"]), int(r["N"]), int(r["d"]),
                        repr(float(r["fwd_ms"])), repr(float(r["fwd_tflops"])),
                        repr(float(r["bwd_ms"])), repr(float(r["bwd_tflops"]))])


def row(backend, dtype, causal, b, h, n, d, fwd_ms, bwd_ms):
    """One anchors.csv row from the two medians."""
    f = flops(b, h, n, d, causal)
    return {"backend": backend, "dtype": dtype, "causal": causal, "B": b, "H": h, "N": n, "d": d,
            "fwd_ms": fwd_ms, "fwd_tflops": f / fwd_ms / 1e9,
            "bwd_ms": bwd_ms, "bwd_tflops": 2.5 * f / bwd_ms / 1e9}


def line(r):
    """The log line of a measured row (gpu_run.py's summary greps these)."""
    return (f"{r['backend']:24s} torch.{r['dtype']:9s} causal={int(r['causal'])} B={r['B']:2d} "
            f"H={r['H']:2d} N={r['N']:6d} d={r['d']:3d} fwd {r['fwd_ms']:8.3f} ms "
            f"{r['fwd_tflops']:6.1f} TF/s  bwd {r['bwd_ms']:8.3f} ms {r['bwd_tflops']:6.1f} TF/s")


def skipped(backend, dtype, causal, b, h, n, d, reason):
    return (f"{backend:24s} torch.{dtype:9s} causal={int(causal)} B={b:2d} H={h:2d} N={n:6d} "
            f"d={d:3d} skipped: {reason}")


def first_line(error, width=160):
    """The first line of an exception's message, at most `width` characters."""
    lines = str(error).strip().splitlines()
    return lines[0][:width] if lines else type(error).__name__


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Times PyTorch's attention backends and a three-kernel version on the "
                    "tutorial's shapes (CUDA events, warm-up, median, L2 flushed) and writes "
                    "OUT_DIR/anchors.csv; prints the GPU's ceilings first.",
        epilog="Needs PyTorch with CUDA and a GPU, except for --help and --list.")
    ap.add_argument("out_dir", nargs="?", default=".", help="where anchors.csv goes (default: .)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096, 16384], metavar="N")
    ap.add_argument("--dims", type=int, nargs="+", default=[64, 128], metavar="D")
    ap.add_argument("--causal", type=int, nargs="+", default=[0, 1], choices=[0, 1])
    ap.add_argument("--dtypes", nargs="+", default=["bfloat16", "float32"], choices=DTYPES)
    ap.add_argument("--backends", nargs="+", default=[n for n, _ in BACKENDS],
                    choices=[n for n, _ in BACKENDS], metavar="NAME",
                    help="any of: " + ", ".join(n for n, _ in BACKENDS) + " (default: all)")
    ap.add_argument("--reps", type=int, default=20, help="timed calls per forward (default 20; "
                    "forward+backward: half as many)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed calls first (default 5)")
    ap.add_argument("--no-ceilings", action="store_true", help="skip the ceiling lines")
    ap.add_argument("--list", action="store_true", help="print the cases and exit (no PyTorch)")
    args = ap.parse_args(argv)
    bad = [x for x in args.sizes + args.dims if x < 1]
    if bad or args.reps < 1 or args.warmup < 0:
        ap.error("sizes, head dims and --reps must be positive, --warmup not negative")
    return args


def measure(torch, args):
    """Runs every case; returns the rows that were measured."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import measure_ceilings

    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 0) or 64 * 2**20
    print(f"device {props.name} {props.multi_processor_count} SMs L2 {l2} torch {torch.__version__} "
          f"cudnn {torch.backends.cudnn.version()}", flush=True)
    if not args.no_ceilings:
        measure_ceilings.ceilings(torch, dev)
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 products on the CUDA cores
    flush_buf = torch.empty(2 * l2, dtype=torch.uint8, device=dev)
    calls = [0]

    def flush():  # a write of twice the L2's size, a new value each time
        calls[0] += 1
        flush_buf.fill_(calls[0] & 0xFF)

    def time_ms(fn, reps):
        return measure_ceilings.bench(fn, reps=reps, warm=args.warmup, flush=flush)

    def three_kernels(q, k, v, causal):
        s = (q * q.shape[-1] ** -0.5) @ k.transpose(-1, -2)
        if causal:
            n = s.shape[-1]
            s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=dev).triu_(1), float("-inf"))
        return torch.softmax(s, dim=-1) @ v

    rows = []
    for dtype in args.dtypes:
        dt = getattr(torch, dtype)
        for causal, b, h, n, d in shapes(args.sizes, args.dims, args.causal):
            inputs = 3 * b * h * n * d * ELEMENT_BYTES[dtype]
            q = k = v = None
            for name, member in BACKENDS:
                if name not in args.backends:
                    continue
                free, _ = torch.cuda.mem_get_info()
                need = 4 * inputs + grid_bytes_needed(name, dtype, b, h, n)  # q,k,v, grads, O, dO
                if need > 0.9 * free:
                    print(skipped(name, dtype, causal, b, h, n, d,
                                  f"needs about {need / 1e9:.1f} GB, {free / 1e9:.1f} GB free"), flush=True)
                    continue
                try:
                    if q is None:
                        q, k, v = (torch.randn(b, h, n, d, dtype=dt, device=dev, requires_grad=True)
                                   for _ in range(3))
                    if member is None:
                        def fwd(q=q, k=k, v=v, causal=causal):
                            return three_kernels(q, k, v, causal)
                    else:
                        backend = getattr(SDPBackend, member)

                        def fwd(q=q, k=k, v=v, causal=causal, backend=backend):
                            with sdpa_kernel(backend):
                                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    out = fwd()  # also raises here when the backend cannot run this case
                    d_out = torch.randn_like(out)
                    del out
                    fwd_ms = time_ms(fwd, args.reps)
                    both_ms = time_ms(lambda: torch.autograd.grad(fwd(), (q, k, v), d_out),
                                      max(1, args.reps // 2))
                    r = row(name, dtype, causal, b, h, n, d, fwd_ms, max(both_ms - fwd_ms, 1e-6))
                    rows.append(r)
                    print(line(r), flush=True)
                except torch.cuda.OutOfMemoryError as e:
                    print(skipped(name, dtype, causal, b, h, n, d, "out of memory: " + first_line(e)),
                          flush=True)
                except RuntimeError as e:  # e.g. "No available kernel" for this dtype or shape
                    print(skipped(name, dtype, causal, b, h, n, d, f"{type(e).__name__}: {first_line(e)}"),
                          flush=True)
                finally:
                    out = d_out = fwd = None
                    torch.cuda.empty_cache()
            q = k = v = None
            torch.cuda.empty_cache()
    return rows


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.list:
        for dtype in args.dtypes:
            for causal, b, h, n, d in shapes(args.sizes, args.dims, args.causal):
                for name in args.backends:
                    print(f"{name:24s} {dtype:9s} causal={int(causal)} B={b:2d} H={h:2d} N={n:6d} d={d:3d}")
        return 0
    try:
        import torch
    except ImportError as e:
        print(f"pytorch_anchors: error: needs PyTorch with CUDA ({e})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("pytorch_anchors: error: PyTorch sees no CUDA GPU", file=sys.stderr)
        return 3
    os.makedirs(args.out_dir, exist_ok=True)
    rows = measure(torch, args)
    path = os.path.join(args.out_dir, "anchors.csv")
    write_csv(path, rows)
    print(f"wrote {path}: {len(rows)} rows")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
