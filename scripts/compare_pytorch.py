#!/usr/bin/env python3
"""The chapters' kernels against PyTorch's attention, on the same GPU, the same shapes, in
one run: OUT_DIR/vs_pytorch.csv and a short table of how far each of ours is from
FlashAttention-2.

  python3 scripts/compare_pytorch.py --out DIR [--lib build/common/libflashtut.so]
          [--dtypes bf16,fp16,float32] [--sizes 1024,4096] [--dims 128] [--causal 1]
          [--backward] [--impls torch_flash,ch07_fastest] [--reps 20] [--warmup 5]
  python3 scripts/compare_pytorch.py --list [...]   # the plan, without PyTorch or a GPU

Needs PyTorch with CUDA, a GPU, and libflashtut.so (built by `cmake --workflow --preset
test`; --lib or FLASHTUT_LIB choose another). Ours are called through the Python module in
python/flashtut, that is through the library's C API, on the tensors PyTorch allocated.

What runs, for each dtype and shape (16384 tokens like the tour: B = 16384/N, H = 2048/d,
N in {1024, 4096, 16384}, d in {64, 128}, causal and not; the options narrow it):

  - PyTorch: scaled_dot_product_attention under each backend, FLASH_ATTENTION
    (torch_flash, FlashAttention-2), CUDNN_ATTENTION (torch_cudnn), EFFICIENT_ATTENTION
    (torch_efficient), MATH (torch_math), and the plain three kernels, matmul, softmax,
    matmul (torch_naive); float32 products without TF32. A backend that refuses a case
    (FLASH_ATTENTION and CUDNN_ATTENTION have no float32 kernels) or a case that does not
    fit in the free memory is skipped with a printed reason.
  - ours: chapter 07's forward (ch07_fastest) in bf16 and fp16, chapter 06's when the
    library exports it, chapter 04's fast forward (ch04_fast) in float32; with --backward
    also chapter 05's flash backward (ch05_flash) in float32, after chapter 04's forward,
    and chapter 08's (ch08_<variant>) in bf16 and fp16, after chapter 07's.

Timing is contract 3 of docs/contracts.md, with scripts/measure_ceilings.py's bench():
warm-up calls, then --reps calls each timed alone with CUDA events, each preceded outside
the events by a write of twice the L2's size; the median goes in `ms`, the fastest and
slowest in ms_min and ms_max. After that write the GPU also spins for about a millisecond
(torch.cuda._sleep), still outside the events, so that the CPU has queued the timed call
before the GPU reaches it: the events then time the GPU's work, not Python's launch
latency, for PyTorch's rows and ours alike. PyTorch's backward is, as in
scripts/pytorch_anchors.py, the median of forward+backward (torch.autograd.grad) minus the
forward's median (`timed` = fwd+bwd-fwd; no ms_min/ms_max); ours is the backward call
alone (`timed` = call), after its forward has written O and L. The forward is timed with
inputs that require gradients, so that PyTorch's backends write their log-sum-exp, as
ours always do. TFLOP/s count as the FlashAttention papers do: 4·B·H·N²·d for the
forward, halved with the causal mask, the backward 2.5× that.

Correctness, before timing: every output is compared with a float64 reference, PyTorch's
MATH backend on float64 copies of at most --ref-heads heads (the first and last of the
B·H; all of them when there are that few), with L computed in float64 beside it.
`rel_err` is the worst tensor's relative L2 error ‖got − ref‖₂/‖ref‖₂ over those heads: the
worse of O and L for our forwards (PyTorch's return no L: O alone), of dQ, dK and dV for a
backward. (plots/results/h200/vs_pytorch.csv, measured at 8808e5b, predates this: there
every forward row of ours pools O with L in one norm, where L's norm hides O's error, and
every backward row pools dQ, dK and dV; rel_err_vs_torch shows O's error alone.) Ours
are also compared, whole, with the first PyTorch backend that ran the case
(`rel_err_vs_torch`, against `torch_ref`), and checked for NaN or Inf everywhere. The run
fails (exit 1, naming each) if any of ours has rel_err above 1e-2 in bf16 or fp16 or above
1e-4 in float32, a NaN or Inf, or a CUDA error; PyTorch's errors are recorded, not judged.

vs_pytorch.csv (docs/contracts.md, the results files): one row per implementation, pass
and problem, the contract's columns

  impl,pass,dtype,batch,heads,seq_len,head_dim,causal,ms,tflops,rel_err

then rel_err_vs_torch, torch_ref, ms_min, ms_max, iters, timed, ratio_vs_torch_flash
(torch_flash's ms on the same pass, dtype and shape over this row's: above 1 is faster
than FlashAttention-2, empty where torch_flash has no row) and gpu. dtype is bf16, fp16
or float32; causal 0 or 1.

Exit codes: 0 every row measured and ours correct; 1 a check failed or nothing was
measured; 2 bad usage, no library, or no PyTorch; 3 PyTorch sees no GPU.
"""
import argparse
import csv
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
try:
    import flashtut
except ImportError:  # neither installed nor on PYTHONPATH
    sys.exit("compare_pytorch.py needs the flashtut package: `pip install .` in the repository, or "
             "PYTHONPATH=python in a built tree (python/README.md)")
import measure_ceilings
import pytorch_anchors as pa

COLUMNS = ["impl", "pass", "dtype", "batch", "heads", "seq_len", "head_dim", "causal", "ms",
           "tflops", "rel_err"]
EXTRA = ["rel_err_vs_torch", "torch_ref", "ms_min", "ms_max", "iters", "timed",
         "ratio_vs_torch_flash", "gpu", "heads_kv"]

# PyTorch's five, in the contract's order, each with the anchors' name for it (what
# pa.grid_bytes_needed() knows) and its SDPBackend member (None: the three kernels).
TORCH_IMPLS = ["torch_flash", "torch_cudnn", "torch_efficient", "torch_math", "torch_naive"]
ANCHOR_NAME = dict(zip(TORCH_IMPLS, (name for name, _ in pa.BACKENDS)))
SDP_MEMBER = dict(zip(TORCH_IMPLS, (member for _, member in pa.BACKENDS)))

# The repository's dtype names (contract 1) and PyTorch's.
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "float32": "float32"}
FT_DTYPE = {"float32": flashtut.DTYPE_FLOAT32, "bf16": flashtut.DTYPE_BF16,
            "fp16": flashtut.DTYPE_FP16}
TOLERANCE = {"bf16": 1e-2, "fp16": 1e-2, "float32": 1e-4}  # contract 2
ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "float32": 4}


def csv_name(spec):
    """chNN_<variant>, the results files' name of one of the module's implementations."""
    return f"ch{spec.chapter}_{spec.variant}"


# The chapters whose recommended implementation is not compared by default: the three-pass
# float32 ones, whose N×N grid does not fit in the GPU's memory at the comparison's sizes.
UNFUSED_CHAPTERS = ("01", "02", "03")


# --order: how ours follow one another within a shape (PyTorch's backends always go first).
ORDERS = ("registry", "impls", "reverse")


def registry():
    """The implementations of libflashtut's registry (flashtut.implementations(), from
    $FLASHTUT_LIB or the build's library); [] when no library can be loaded, so that --help
    and --list still work without one."""
    try:
        return flashtut.implementations()
    except (flashtut.LibraryError, OSError):
        return []


def our_impls(impls):
    """CSV name -> (pass, name) of every implementation this script can run: all the
    registry lists, but a backward whose paired forward is not a chapter's recommended one
    (the materializing baseline's, which keeps P in its workspace): flashtut.backward reruns
    such a forward in every call, so its time would not be the backward's."""
    headline = {i.name for i in impls if i.alias}
    return {i.name: (i.kind, i.name) for i in impls
            if i.kind == "forward" or i.pairs_with in headline}


def default_ours(impls):
    """Every chapter's recommended forward and backward (its alias), the unfused float32
    chapters aside: what a run compares unless --impls says otherwise."""
    return [i.name for i in impls if i.alias and i.chapter not in UNFUSED_CHAPTERS]


_REGISTRY = registry()
OURS = our_impls(_REGISTRY)
DEFAULT_OURS = default_ours(_REGISTRY)


def use_library(path):
    """Takes our implementations' names from the library at `path` (--lib) instead of the
    default one read at import, so that --impls is checked against the library the run
    calls. A library that cannot be loaded leaves them as they are: main() reports it."""
    global _REGISTRY, OURS, DEFAULT_OURS
    try:
        flashtut.load(path)
        impls = flashtut.implementations()
    except (flashtut.LibraryError, OSError):
        return
    _REGISTRY, OURS, DEFAULT_OURS = impls, our_impls(impls), default_ours(impls)


def spec_of(name):
    """The module's Impl behind one of our CSV names."""
    kind, key = OURS[name]
    return (flashtut.forwards() if kind == "forward" else flashtut.backwards())[key]


def runs_in(name, dtype):
    """Whether one of ours computes in `dtype` (the module's table says)."""
    return FT_DTYPE[dtype] in spec_of(name).dtypes


def csv_list(values, convert=str):
    """'1024,4096' '16384' -> [1024, 4096, 16384]: lists given with commas, spaces or both."""
    out = []
    for v in values:
        out += [convert(x) for x in v.split(",") if x.strip()]
    return out


def parse_args(argv):
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--lib")
    lib = early.parse_known_args(argv)[0].lib
    if lib:
        use_library(lib)
    ap = argparse.ArgumentParser(
        description="Times the chapters' kernels (through python/flashtut) and PyTorch's "
                    "attention backends on the tutorial's shapes (CUDA events, warm-up, "
                    "median, L2 flushed), checks ours against a float64 reference, and "
                    "writes OUT/vs_pytorch.csv.",
        epilog="Needs PyTorch with CUDA, a GPU and libflashtut.so, except for --help and "
               "--list. Lists take commas or spaces: --sizes 1024,4096 or --sizes 1024 4096.")
    ap.add_argument("--out", metavar="DIR", help="where vs_pytorch.csv goes (required)")
    ap.add_argument("--lib", metavar="PATH", help="libflashtut.so (default: $FLASHTUT_LIB, "
                    "else build/common/libflashtut.so)")
    ap.add_argument("--dtypes", nargs="+", default=["bf16"], metavar="T",
                    help="any of bf16, fp16, float32 (default: bf16)")
    ap.add_argument("--sizes", nargs="+", default=["1024,4096,16384"], metavar="N")
    ap.add_argument("--dims", nargs="+", default=["64,128"], metavar="D")
    ap.add_argument("--causal", nargs="+", default=["0,1"], metavar="C", help="0, 1 or both")
    ap.add_argument("--shapes", nargs="+", metavar="B,H,N,d,C[,Hkv]",
                    help="these shapes instead of --sizes x --dims x --causal (16384 tokens, "
                         "H = 2048/d): batch, heads, tokens, head dim, causal 0 or 1, and "
                         "optionally key/value heads (grouped-query; forward only), e.g. "
                         "--shapes 8,12,1024,64,1 4,32,8192,128,1,8")
    ap.add_argument("--backward", action="store_true",
                    help="also the backward: PyTorch's (fwd+bwd minus fwd) and ours (ch05_flash, ch08)")
    ap.add_argument("--impls", nargs="+", metavar="NAME",
                    help="only these (default: " + ", ".join(TORCH_IMPLS + DEFAULT_OURS) +
                         "); ours: any of " + (", ".join(OURS) or "the library's list "
                                               "(none loaded now)"))
    ap.add_argument("--order", choices=ORDERS, default="registry",
                    help="the order ours run in within a shape, after PyTorch's backends: the "
                         "library's registry (the default), the order --impls names them in, "
                         "or the registry's reversed. A kernel's place in the run can move its "
                         "time (docs/methodology.md): two runs in opposite orders control for it")
    ap.add_argument("--reps", type=int, default=20, help="timed calls (default 20; PyTorch's "
                    "forward+backward: half as many)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed calls first (default 5)")
    ap.add_argument("--ref-heads", type=int, default=4, metavar="K",
                    help="heads the float64 reference computes (default 4)")
    ap.add_argument("--list", action="store_true", help="print the plan and exit (no PyTorch)")
    args = ap.parse_args(argv)
    try:
        args.dtypes = csv_list(args.dtypes)
        args.sizes = csv_list(args.sizes, int)
        args.dims = csv_list(args.dims, int)
        args.causal = csv_list(args.causal, int)
        args.impls = csv_list(args.impls) if args.impls else None
    except ValueError as e:
        ap.error(f"not a number: {e}")
    try:
        args.shapes = [tuple(int(x) for x in item.split(",")) for item in args.shapes or []]
    except ValueError as e:
        ap.error(f"--shapes: not a number: {e}")
    if any(len(sh) not in (5, 6) or min(sh[:4]) < 1 or sh[4] not in (0, 1) for sh in args.shapes):
        ap.error("--shapes takes B,H,N,d,C[,Hkv]: four positive numbers, causal 0 or 1, and "
                 "optionally the key/value heads")
    if any(len(sh) == 6 and (sh[5] < 1 or sh[1] % sh[5]) for sh in args.shapes):
        ap.error("--shapes: the key/value heads (the sixth number) must divide the heads")
    bad = [t for t in args.dtypes if t not in DTYPES]
    if bad:
        ap.error(f"unknown dtype {bad[0]!r}: choose bf16, fp16 or float32")
    if not args.dtypes or not args.sizes or not args.dims or not args.causal:
        ap.error("--dtypes, --sizes, --dims and --causal need at least one value")
    if any(x < 1 for x in args.sizes + args.dims) or args.reps < 1 or args.warmup < 0 \
            or args.ref_heads < 1:
        ap.error("sizes, head dims, --reps and --ref-heads must be positive, --warmup not negative")
    if any(c not in (0, 1) for c in args.causal):
        ap.error("--causal takes 0 and 1")
    if args.impls:
        unknown = [n for n in args.impls if n not in TORCH_IMPLS and n not in OURS]
        if unknown:
            ap.error(f"unknown impl {unknown[0]!r}: choose from " + ", ".join(TORCH_IMPLS + list(OURS)))
    if args.order == "impls" and not args.impls:
        ap.error("--order impls needs --impls (the order to run ours in)")
    if not args.list and not args.out:
        ap.error("--out DIR is required (or --list)")
    return args


def selected(args, exported=None):
    """(PyTorch's names, ours) this run measures, ours in --order's order. `exported`: the module keys the library
    exports (None: not known, e.g. no library loaded for --list); a default of ours the
    library lacks (chapter 06 while it is being written) is left out, one asked for by
    --impls is kept, and skipped with its reason when it runs."""
    names = args.impls or TORCH_IMPLS + [n for n in DEFAULT_OURS
                                         if exported is None or OURS[n][1] in exported]
    torch_names = [n for n in TORCH_IMPLS if n in names]
    ours = [n for n in OURS if n in names and (args.backward or OURS[n][0] == "forward")]
    if args.order == "impls":
        ours.sort(key=args.impls.index)
    elif args.order == "reverse":
        ours.reverse()
    return torch_names, ours


def shapes_of(args):
    """(causal, B, H, N, d, H_kv) of every case in the order they run: --shapes as given
    (H_kv = H unless a sixth number says otherwise), else the tutorial's 16384-token grid
    (pytorch_anchors.shapes)."""
    if args.shapes:
        return [(bool(sh[4]),) + tuple(sh[:4]) + (sh[5] if len(sh) == 6 else sh[1],) for sh in args.shapes]
    return [shape + (shape[2],) for shape in pa.shapes(args.sizes, args.dims, args.causal)]


def plan(args, exported=None):
    """[(dtype, causal, B, H, N, d, H_kv, [(impl, pass), ...])] in the order the run goes."""
    torch_names, ours = selected(args, exported)
    cases = []
    for dtype in args.dtypes:
        for causal, b, h, n, d, hkv in shapes_of(args):
            backward = args.backward and hkv == h  # grouped heads: the forward only, here
            todo = [(t, "forward") for t in torch_names]
            if backward:
                todo += [(t, "backward") for t in torch_names]
            todo += [(o, OURS[o][0]) for o in ours if runs_in(o, dtype) and (backward or OURS[o][0] == "forward")]
            cases.append((dtype, causal, b, h, n, d, hkv, todo))
    return cases


def ref_heads(count, k):
    """Which of the B·H heads the float64 reference computes: all when there are at most k,
    else the first k//2 and the last k - k//2."""
    if count <= k:
        return list(range(count))
    return list(range(k // 2)) + list(range(count - (k - k // 2), count))


def make_row(impl, pass_, dtype, causal, b, h, n, d, ms, rel_err, *, rel_err_vs_torch=None,
             torch_ref="", ms_min=None, ms_max=None, iters=None, timed="call", gpu="", heads_kv=None):
    """One vs_pytorch.csv row (a dict with COLUMNS + EXTRA as keys)."""
    f = pa.flops(b, h, n, d, causal) * (2.5 if pass_ == "backward" else 1.0)
    return {"impl": impl, "pass": pass_, "dtype": dtype, "batch": b, "heads": h, "seq_len": n,
            "head_dim": d, "causal": 1 if causal else 0, "ms": ms,
            "tflops": f / ms / 1e9 if ms and ms > 0 else None, "rel_err": rel_err,
            "rel_err_vs_torch": rel_err_vs_torch, "torch_ref": torch_ref, "ms_min": ms_min,
            "ms_max": ms_max, "iters": iters, "timed": timed, "ratio_vs_torch_flash": None,
            "gpu": gpu, "heads_kv": h if heads_kv is None else heads_kv}


def problem_key(r):
    return (r["pass"], r["dtype"], r["batch"], r["heads"], r["seq_len"], r["head_dim"], r["causal"],
            r.get("heads_kv", r["heads"]))


def add_ratios(rows):
    """Fills ratio_vs_torch_flash: torch_flash's ms on the same pass, dtype and shape over
    the row's ms (None where torch_flash has no row there)."""
    flash = {problem_key(r): r["ms"] for r in rows if r["impl"] == "torch_flash" and r["ms"]}
    for r in rows:
        ref = flash.get(problem_key(r))
        r["ratio_vs_torch_flash"] = ref / r["ms"] if ref and r["ms"] else None
    return rows


def is_ours(r):
    return not r["impl"].startswith("torch_")


def failures(rows):
    """Messages for each of our rows over its tolerance, or not finite."""
    out = []
    for r in rows:
        if not is_ours(r):
            continue
        e, tol = r["rel_err"], TOLERANCE[r["dtype"]]
        if e is None or not math.isfinite(e) or e > tol:
            out.append(f"{r['impl']} {r['pass']} {r['dtype']} B={r['batch']} H={r['heads']} "
                       f"N={r['seq_len']} d={r['head_dim']} causal={r['causal']}: rel_err "
                       f"{e if e is not None else 'not computed'} over the tolerance {tol:g}")
    return out


def _text(value):
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ("nan" if value != value else repr(value))
    return str(value)


def write_csv(path, rows):
    """vs_pytorch.csv: the header (COLUMNS then EXTRA), then one line per row; an unmeasured
    number is an empty field."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(COLUMNS + EXTRA)
        for r in rows:
            w.writerow([_text(r[c]) for c in COLUMNS + EXTRA])


def _num(x, fmt):
    return format(x, fmt) if x is not None else "—"


def line(r):
    """The log line of one measured row."""
    return (f"{r['impl']:18s} {r['pass']:8s} {r['dtype']:7s} causal={r['causal']} "
            f"B={r['batch']:2d} H={r['heads']:2d} N={r['seq_len']:6d} d={r['head_dim']:3d} "
            f"{_num(r['ms'], '9.3f')} ms {_num(r['tflops'], '6.1f')} TF/s rel_err "
            f"{_num(r['rel_err'], '.1e')}")


def skipped(impl, pass_, dtype, causal, b, h, n, d, reason):
    return (f"{impl:18s} {pass_:8s} {dtype:7s} causal={int(causal)} B={b:2d} H={h:2d} "
            f"N={n:6d} d={d:3d} skipped: {reason}")


def summary(rows):
    """The table printed at the end: each of our rows, its time, its ratio to torch_flash
    and to the fastest PyTorch row on the same pass, dtype and shape."""
    best = {}
    for r in rows:
        if not is_ours(r) and r["ms"]:
            k = problem_key(r)
            if k not in best or r["ms"] < best[k]["ms"]:
                best[k] = r
    out = [f"{'impl':18s} {'pass':8s} {'dtype':7s} {'N':>6s} {'d':>4s} {'causal':>6s} "
           f"{'ms':>9s} {'TFLOP/s':>8s} {'rel_err':>8s} {'vs flash':>9s}  fastest PyTorch (ratio)"]
    for r in rows:
        if not is_ours(r):
            continue
        b = best.get(problem_key(r))
        ratio = r["ratio_vs_torch_flash"]
        fastest = f"{b['impl']} {b['ms']:.3f} ms ({b['ms'] / r['ms']:.2f}x)" if b and r["ms"] else "—"
        out.append(f"{r['impl']:18s} {r['pass']:8s} {r['dtype']:7s} {r['seq_len']:6d} "
                   f"{r['head_dim']:4d} {r['causal']:6d} {_num(r['ms'], '9.3f')} "
                   f"{_num(r['tflops'], '8.1f')} {_num(r['rel_err'], '8.1e')} "
                   f"{(format(ratio, '.2f') + 'x') if ratio else '—':>9s}  {fastest}")
    out.append("vs flash: torch_flash's time over ours (above 1x: faster than PyTorch's "
               "FlashAttention-2); fastest PyTorch: the same against PyTorch's fastest row")
    return "\n".join(out)


def three_kernels(torch, q, k, v, causal):
    """S = (scale·Q)·Kᵀ, softmax(S) (the causal mask as a masked_fill over the grid first),
    P·V: the unfused version, the grid in device memory (as scripts/pytorch_anchors.py)."""
    s = (q * q.shape[-1] ** -0.5) @ k.transpose(-1, -2)
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu_(1),
                          float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def rel_l2(pairs):
    """‖got − ref‖₂/‖ref‖₂ over (got, ref) tensor pairs, in float64; NaN or Inf anywhere in
    a `got` gives inf."""
    num = den = 0.0
    for got, ref in pairs:
        g, r = got.double(), ref.double()
        num += float(((g - r) ** 2).sum())
        den += float((r ** 2).sum())
    if not math.isfinite(num):
        return math.inf
    return math.sqrt(num / den) if den > 0 else (0.0 if num == 0 else math.inf)


def measure(torch, args, exported):
    """Runs the plan; returns (rows, problems): the measured rows and the messages of what
    went wrong with ours (CUDA errors, a reference that could not be computed)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(0)
    gpu = props.name
    l2 = getattr(props, "L2_cache_size", 0) or 64 * 2**20
    print(f"device {gpu} {props.multi_processor_count} SMs L2 {l2} torch {torch.__version__} "
          f"cudnn {torch.backends.cudnn.version()} libflashtut {flashtut.library_path(args.lib)}",
          flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 products on the CUDA cores
    flush_buf = torch.empty(2 * l2, dtype=torch.uint8, device=dev)
    calls = [0]

    def flush():  # a write of twice the L2's size, a new value each time, then the spin
        calls[0] += 1
        flush_buf.fill_(calls[0] & 0xFF)
        measure_ceilings.cover(torch)

    def timed(fn, reps):
        """(median, min, max, count) of reps calls, each timed alone by bench()."""
        measure_ceilings.bench(fn, reps=1, warm=args.warmup, flush=flush)  # warm-up
        times = sorted(measure_ceilings.bench(fn, reps=1, warm=0, flush=flush)
                       for _ in range(reps))
        return times[len(times) // 2], times[0], times[-1], len(times)

    torch_names, ours = selected(args, exported)
    rows, problems = [], []
    for dtype in args.dtypes:
        dt = getattr(torch, DTYPES[dtype])
        for causal, b, h, n, d, hkv in shapes_of(args):
            shape = (dtype, causal, b, h, n, d)
            backward = args.backward and hkv == h  # grouped heads: the forward only, here
            gqa = {"enable_gqa": True} if hkv < h else {}  # SDPA's grouped-query switch
            inputs = (b * h + 2 * b * hkv) * n * d * ELEMENT_BYTES[dtype]
            torch.manual_seed(0)
            q, k, v = (torch.randn(b, heads, n, d, dtype=dt, device=dev, requires_grad=True)
                       for heads in (h, hkv, hkv))
            d_out = torch.randn(b, h, n, d, dtype=dt, device=dev)
            heads = ref_heads(b * h, args.ref_heads)

            def pick(t, cols=True):  # the reference's heads of a [B, H, N(, d)] tensor
                flat = t.detach().reshape(b * h, n, d) if cols else t.detach().reshape(b * h, n)
                return [flat[i] for i in heads]

            try:
                ref = reference(torch, F, sdpa_kernel, SDPBackend.MATH, q, k, v, d_out, causal,
                                heads, backward)
            except (RuntimeError, torch.cuda.OutOfMemoryError) as e:
                ref = None
                problems.append(f"float64 reference for {dtype} causal={int(causal)} B={b} H={h} "
                                f"N={n} d={d}: {pa.first_line(e)}")
                print("reference failed: " + problems[-1], flush=True)
            torch.cuda.empty_cache()
            torch_o = torch_grads = None  # the first PyTorch backend's outputs
            torch_o_name = torch_grads_name = ""

            for name in torch_names:
                free, _ = torch.cuda.mem_get_info()
                need = 4 * inputs + pa.grid_bytes_needed(ANCHOR_NAME[name], DTYPES[dtype], b, h, n)
                if need > 0.9 * free:
                    print(skipped(name, "forward", *shape, f"needs about {need / 1e9:.1f} GB, "
                                  f"{free / 1e9:.1f} GB free"), flush=True)
                    continue
                member = SDP_MEMBER[name]
                if member is None:
                    def fwd(causal=causal):
                        if hkv == h:
                            return three_kernels(torch, q, k, v, causal)
                        g = h // hkv  # each key/value head repeated for its query heads
                        return three_kernels(torch, q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1), causal)
                else:
                    def fwd(causal=causal, backend=getattr(SDPBackend, member)):
                        with sdpa_kernel(backend):
                            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa)
                stage = "forward"
                try:
                    out = fwd()  # also raises here when the backend cannot run this case
                    err = rel_l2(zip(pick(out), ref["o"])) if ref else None
                    if torch_o is None:
                        torch_o, torch_o_name = out.detach(), name
                    del out
                    ms, lo, hi, count = timed(fwd, args.reps)
                    r = make_row(name, "forward", dtype, causal, b, h, n, d, ms, err, ms_min=lo,
                                 ms_max=hi, iters=count, gpu=gpu, heads_kv=hkv)
                    rows.append(r)
                    print(line(r), flush=True)
                    if backward:
                        stage = "backward"
                        grads = torch.autograd.grad(fwd(), (q, k, v), d_out)
                        err = max(rel_l2(zip(pick(g), ref[key])) for g, key in
                                  zip(grads, ("dq", "dk", "dv"))) if ref else None
                        if torch_grads is None:
                            torch_grads, torch_grads_name = grads, name
                        del grads
                        both, _, _, count = timed(
                            lambda: torch.autograd.grad(fwd(), (q, k, v), d_out),
                            max(1, args.reps // 2))
                        r = make_row(name, "backward", dtype, causal, b, h, n, d,
                                     max(both - ms, 1e-6), err, iters=count,
                                     timed="fwd+bwd-fwd", gpu=gpu)
                        rows.append(r)
                        print(line(r), flush=True)
                except torch.cuda.OutOfMemoryError as e:
                    print(skipped(name, stage, *shape, "out of memory: " + pa.first_line(e)),
                          flush=True)
                except RuntimeError as e:  # e.g. "No available kernel" for this dtype or shape
                    print(skipped(name, stage, *shape, f"{type(e).__name__}: {pa.first_line(e)}"),
                          flush=True)
                finally:
                    fwd = None
                    torch.cuda.empty_cache()

            qd, kd, vd = q.detach(), k.detach(), v.detach()
            for name in ours:
                kind, key = OURS[name]
                spec = spec_of(name)
                if not runs_in(name, dtype) or (kind == "backward" and not backward):
                    continue
                if exported is not None and key not in exported:
                    print(skipped(name, kind, *shape, f"{key} is not in this build of "
                                  f"libflashtut"), flush=True)
                    continue
                try:
                    # Refuses (a skip, below) what the implementation does not support.
                    nbytes = flashtut.workspace_bytes(key, flashtut.problem(
                        b, h, n, d, causal=causal, dtype=FT_DTYPE[dtype], heads_kv=hkv), kind)
                    free, _ = torch.cuda.mem_get_info()
                    need = nbytes + inputs // 3 * (1 if kind == "forward" else 4)  # O (+ dQ, dK, dV)
                    if need > 0.9 * free:
                        print(skipped(name, kind, *shape, f"needs about {need / 1e9:.1f} GB, "
                                      f"{free / 1e9:.1f} GB free"), flush=True)
                        continue
                    if kind == "forward":
                        def call(key=key):
                            return flashtut.forward(qd, kd, vd, causal=causal, impl=key)
                        o, lse = call()
                        whole = (o, lse)
                        got = [pick(o), pick(lse, False)]
                        want = [ref["o"], ref["lse"]] if ref else None
                        vs = rel_l2([(o, torch_o)]) if torch_o is not None else None
                        vs_name = torch_o_name if torch_o is not None else ""
                    else:
                        o, lse = flashtut.forward(qd, kd, vd, causal=causal, impl=spec.pairs_with)

                        def call(key=key, o=o, lse=lse):
                            return flashtut.backward(qd, kd, vd, o, lse, d_out, causal=causal,
                                                     impl=key)
                        whole = call()
                        got = [pick(g) for g in whole]
                        want = [ref["dq"], ref["dk"], ref["dv"]] if ref else None
                        vs = (rel_l2(zip(whole, torch_grads)) if torch_grads is not None else None)
                        vs_name = torch_grads_name if torch_grads is not None else ""
                    finite = all(bool(torch.isfinite(t).all()) for t in whole)
                    # The worst tensor's error, each over the reference's heads (O and L,
                    # or dQ, dK and dV, are not pooled: L's norm would hide O's error).
                    err = (max(rel_l2(zip(g, w)) for g, w in zip(got, want)) if want else None) \
                        if finite else math.inf
                    del whole, got
                    ms, lo, hi, count = timed(call, args.reps)
                    r = make_row(name, kind, dtype, causal, b, h, n, d, ms, err,
                                 rel_err_vs_torch=vs, torch_ref=vs_name, ms_min=lo, ms_max=hi,
                                 iters=count, gpu=gpu, heads_kv=hkv)
                    rows.append(r)
                    print(line(r) + (f" (vs {vs_name} {vs:.1e})" if vs is not None else ""),
                          flush=True)
                except flashtut.FlashtutError as e:
                    if e.code is None or e.code == -1:  # refused before any launch
                        print(skipped(name, kind, *shape, str(e)), flush=True)
                    else:
                        problems.append(f"{name} {kind} {dtype} causal={int(causal)} B={b} H={h} "
                                        f"N={n} d={d}: {e}")
                        print("FAILED: " + problems[-1], flush=True)
                except torch.cuda.OutOfMemoryError as e:
                    print(skipped(name, kind, *shape, "out of memory: " + pa.first_line(e)),
                          flush=True)
                finally:
                    o = lse = call = None
                    torch.cuda.empty_cache()
            q = k = v = qd = kd = vd = d_out = torch_o = torch_grads = ref = None
            torch.cuda.empty_cache()
    return rows, problems


def reference(torch, F, sdpa_kernel, math_backend, q, k, v, d_out, causal, heads, backward):
    """The float64 reference of the chosen heads (indices into the B·H axis), one head at a
    time: O from PyTorch's MATH backend on float64 copies, L = logsumexp of the scaled
    scores in float64, and with `backward` dQ, dK, dV by autograd through the same. Returns
    {"o": [...], "lse": [...], "dq": [...], ...}, one [N, d] (L: [N]) tensor per head."""
    b, h, n, d = q.shape
    hkv = k.shape[1]  # query head i reads key/value head i // (h / hkv) of its batch
    out = {"o": [], "lse": [], "dq": [], "dk": [], "dv": []}
    for i in heads:
        kv = i // h * hkv + i % h // (h // hkv)
        q64 = q.detach().reshape(b * h, n, d)[i].double()[None, None].requires_grad_(backward)
        k64, v64 = (t.detach().reshape(b * hkv, n, d)[kv].double()[None, None].requires_grad_(backward)
                    for t in (k, v))
        with sdpa_kernel(math_backend):
            o64 = F.scaled_dot_product_attention(q64, k64, v64, is_causal=causal)
        with torch.no_grad():
            s = (q64 @ k64.transpose(-1, -2)) * d ** -0.5
            if causal:
                s.masked_fill_(torch.ones(n, n, dtype=torch.bool, device=q.device).triu_(1),
                               float("-inf"))
            out["lse"].append(torch.logsumexp(s, dim=-1)[0, 0])
            del s
        if backward:
            do64 = d_out.reshape(b * h, n, d)[i].double()[None, None]
            for key, g in zip(("dq", "dk", "dv"), torch.autograd.grad(o64, (q64, k64, v64), do64)):
                out[key].append(g[0, 0])
        out["o"].append(o64.detach()[0, 0])
    return out


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.list:
        try:
            flashtut.load(args.lib)
            exported = set(flashtut.available()) | set(flashtut.available("backward"))
        except flashtut.LibraryError as e:
            print(f"compare_pytorch: note: {e}; listing every default", file=sys.stderr)
            exported = None
        for dtype, causal, b, h, n, d, hkv, todo in plan(args, exported):
            for impl, pass_ in todo:
                print(f"{impl:18s} {pass_:8s} {dtype:7s} causal={int(causal)} B={b:2d} H={h:2d} "
                      f"N={n:6d} d={d:3d}" + (f" H_kv={hkv}" if hkv != h else ""))
        return 0
    # The library must exist (checked without loading it), then torch, then the library:
    # loading it before `import torch` crashed that import on the H200 machine
    # (flashtut.load imports torch first too).
    try:
        flashtut.library_path(args.lib)
    except flashtut.LibraryError as e:
        print(f"compare_pytorch: error: {e}", file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError as e:
        print(f"compare_pytorch: error: needs PyTorch with CUDA ({e})", file=sys.stderr)
        return 2
    try:
        flashtut.load(args.lib)
        exported = set(flashtut.available()) | set(flashtut.available("backward"))
    except flashtut.LibraryError as e:
        print(f"compare_pytorch: error: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("compare_pytorch: error: PyTorch sees no CUDA GPU", file=sys.stderr)
        return 3
    os.makedirs(args.out, exist_ok=True)
    rows, problems = measure(torch, args, exported)
    add_ratios(rows)
    path = os.path.join(args.out, "vs_pytorch.csv")
    write_csv(path, rows)
    print(f"wrote {path}: {len(rows)} rows\n")
    print(summary(rows))
    bad = problems + failures(rows)
    for msg in bad:
        print(f"compare_pytorch: FAILED: {msg}", file=sys.stderr)
    if not rows:
        print("compare_pytorch: error: nothing was measured", file=sys.stderr)
    return 1 if bad or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
