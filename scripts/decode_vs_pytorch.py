#!/usr/bin/env python3
"""Chapter 11's decode beside PyTorch's attention backends on decode shapes, in one process:
the time of one decode step, the bytes it must read (the K/V cache once, Q and O), the
bandwidth that makes, and the error of each against float32 math.

  python3 scripts/decode_vs_pytorch.py --out DIR [--lib build/common/libflashtut.so]
      [--shapes B,Hq,Hkv,Nq,Nk ...] [--impls ch11_grouped ch11_batched_v] [--iters 20]
      [--flashinfer] [--graph]

A shape: batch B, Hq query heads on Hkv key/value heads, Nq query rows a sequence (the new
tokens) against Nk cached keys, d = 128, bf16, causal from the bottom right (query row i
sees keys up to Nk − Nq + i, the decode position). Default: the chapter's grid, its shapes
whose cache is at most 40 GB.

PyTorch's side: ``F.scaled_dot_product_attention`` under each ``SDPBackend`` alone (FLASH,
EFFICIENT, CUDNN, MATH), with ``enable_gqa=True`` for grouped heads. SDPA's ``is_causal`` is
aligned top-left, so Nq = 1 runs without a mask (one query row sees every key: the same
thing) and Nq > 1 passes the bottom-right mask as a boolean ``attn_mask``; a backend that
refuses the shape (a mask, grouped heads) is written as refused, with its reason.

FlashInfer's side (--flashinfer, when ``import flashinfer`` works): the serving library's
paged kernels over the same tokens, copied once into its "HND" page pool ([pages, Hkv, page
size, d]) in pages of 16 tokens, each sequence's pages in order, planned once outside the
timing as a server plans a step for all its layers. (With one page of Nk tokens a
sequence, the pool would be the [B, Hkv, Nk, d] cache itself, but FlashInfer's decode then
ran 3.4× slower than PyTorch's at B = 1, 32 heads, 131,072 keys; its scheduler cuts a
sequence's keys into chunks of whole pages, which one page leaves nothing to cut.)
Nq = 1: its decode wrapper on the CUDA cores (``flashinfer_decode``) and on the tensor cores
(``flashinfer_decode_tc``); Nq > 1: its prefill wrapper, causal (FlashInfer aligns the mask
bottom-right, as here). Its kernels are
compiled at their first call (JIT, nvcc): minutes the first time on a machine.

Timing (contract 3, measure_ceilings.bench): CUDA events around each call; before each, outside
the events, a 256 MB buffer written so the cache starts outside L2 and a spin of about a
millisecond (measure_ceilings.cover) so the call is queued before the GPU reaches it (a decode
at B = 1 takes tens of microseconds, as long as a launch from Python); the median of
``--iters`` after 3 warm-up calls. The error: relative L2
against the MATH backend in float32 on the same bf16 values (when it fits).

CUDA graphs (--graph): where launches decide the time (short caches), what a graph changes.
Each of PyTorch's backends that accepted the shape and each of ours is captured once as a
CUDA graph (``torch.cuda.CUDAGraph``, after a warm-up call on a side stream, as PyTorch asks)
and timed four more ways, into DIR/decode_graphs.csv (column ``timing``):

- ``graph``: the replay, timed as the call is (flush and spin first: the GPU's own time);
- ``loop``: ``--iters`` calls back to back, no flush or spin between, the time from the first
  to the last over their count: the pace of a generation loop that issues one decode step
  after another from Python, the CPU's launch time included (the cache may stay in L2 from
  one call to the next, as it would not between a real model's layers);
- ``loop_graph``: the same loop of replays;
- ``call_again``: the plain call timed once more, as at first, after all of the above (the
  graph freed): where ``graph`` differs from the call, this says whether the replay or the
  GPU's state since the first timing (its clocks, after the loops) made the difference.

FlashInfer's wrappers are left out of this (replaying them needs their ``use_cuda_graph``
buffers, fixed at construction).

Writes DIR/decode_vs_pytorch.csv and prints a table: per shape, each implementation's time,
GB/s, and our best over the fastest PyTorch backend that accepted the shape.
"""
import argparse
import csv
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
sys.path.insert(0, HERE)
import measure_ceilings  # noqa: E402  (bench, cover: contract 3's timing)
from paths import unwritable  # noqa: E402  (scripts/paths.py)

D = 128
GRID = [(b, 32, kv, q, n) for q in (1, 4) for kv in (32, 8, 1) for b in (1, 16, 128)
        for n in (1024, 8192, 32768, 131072)]
MAX_CACHE = 40e9  # bytes: larger caches are left out of the default grid
FLUSH_BYTES = 256 << 20
BACKENDS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH")


def cache_bytes(b, hkv, n):
    return 2 * b * hkv * n * D * 2  # K and V, bf16


def shape_arg(text):
    try:
        b, hq, hkv, nq, nk = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not B,Hq,Hkv,Nq,Nk") from None
    if min(b, hq, hkv, nq, nk) < 1 or hq % hkv or nq > nk:
        raise argparse.ArgumentTypeError(f"{text!r}: positive sizes, Hkv dividing Hq, Nq <= Nk")
    return b, hq, hkv, nq, nk


def make_parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for decode_vs_pytorch.csv")
    ap.add_argument("--lib", help="libflashtut.so (default: flashtut's own search)")
    ap.add_argument("--shapes", nargs="+", type=shape_arg, help="B,Hq,Hkv,Nq,Nk (default: the grid)")
    ap.add_argument("--impls", nargs="+", default=["ch11"],
                    help="the tutorial's decodes, as flashtut.forwards() names them (default: ch11, "
                         "chapter 11's fastest)")
    ap.add_argument("--iters", type=int, default=20, help="timed calls a measurement")
    ap.add_argument("--flashinfer", action="store_true",
                    help="FlashInfer's decode and prefill kernels too (needs flashinfer; compiled at first use)")
    ap.add_argument("--graph", action="store_true",
                    help="also time each call replayed from a CUDA graph, and loops of back-to-back calls "
                         "and replays (DIR/decode_graphs.csv)")
    return ap


def parse_args(argv, ap=None):
    """The flags, checked as far as they can be without the library (main checks --impls)."""
    ap = ap or make_parser()
    args = ap.parse_args(argv)
    if args.iters < 1:
        ap.error("--iters must be at least 1")
    return args


FLASHINFER_WORKSPACE = 128 << 20  # bytes: FlashInfer's float workspace (its split-KV partial results)


FLASHINFER_PAGE = 16  # tokens a page of FlashInfer's cache: the page size its documentation's examples use


def flashinfer_pages(torch, x, page):
    """x [B, H, N, d] as FlashInfer's HND page pool [B·N/page, H, page, d]: sequence b's pages
    b·N/page on, in order (a copy, made once before timing)."""
    b, h, n, d = x.shape
    return x.view(b, h, n // page, page, d).permute(0, 2, 1, 3, 4).reshape(b * (n // page), h, page, d).contiguous()


def flashinfer_calls(flashinfer, torch, q, k, v, workspace, device="cuda"):
    """{name: fn} of FlashInfer's kernels on this problem, each fn() giving O as [B, Hq, Nq, d].
    The cache is paged as a server keeps it, FLASHINFER_PAGE tokens a page, each sequence's
    pages consecutive in the pool (one page of Nk tokens a sequence when Nk is not a
    multiple). plan() runs here, once, as a server plans a step."""
    b, hq, nq, d = q.shape
    hkv, nk = k.shape[1], k.shape[2]
    page = FLASHINFER_PAGE if nk % FLASHINFER_PAGE == 0 else nk
    per = nk // page  # pages a sequence
    i32 = {"dtype": torch.int32, "device": device}
    indptr, indices = torch.arange(b + 1, **i32) * per, torch.arange(b * per, **i32)
    last = torch.full((b,), page, **i32)
    kv = (flashinfer_pages(torch, k, page), flashinfer_pages(torch, v, page))
    dtypes = {"q_data_type": q.dtype, "kv_data_type": k.dtype}
    calls = {}
    if nq == 1:
        q1 = q.reshape(b, hq, d)
        for name, tc in (("flashinfer_decode", False), ("flashinfer_decode_tc", True)):
            w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(workspace, kv_layout="HND", use_tensor_cores=tc)
            w.plan(indptr, indices, last, hq, hkv, d, page, **dtypes)
            calls[name] = lambda w=w: w.run(q1, kv).reshape(b, hq, 1, d)
    else:
        rows = q.transpose(1, 2).reshape(b * nq, hq, d).contiguous()  # FlashInfer's ragged [tokens, Hq, d]
        w = flashinfer.BatchPrefillWithPagedKVCacheWrapper(workspace, kv_layout="HND")
        w.plan(torch.arange(b + 1, **i32) * nq, indptr, indices, last, hq, hkv, d, page, causal=True, **dtypes)
        calls["flashinfer_prefill"] = lambda: w.run(rows, kv).reshape(b, nq, hq, d).transpose(1, 2)
    return calls


def timed(torch, fn, flush, iters):
    """Median milliseconds of fn() over iters calls after 3 warm-up calls, each preceded,
    outside the events, by a write of `flush` and the GPU's spin."""
    def before():
        flush.zero_()
        measure_ceilings.cover(torch)
    return measure_ceilings.bench(fn, reps=iters, warm=3, flush=before)


def captured(torch, fn):
    """fn's kernels recorded once as a CUDA graph; returns the call that replays them. As
    PyTorch asks, fn runs once first on a side stream (its lazy setup outside the capture)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def loop_ms(torch, fn, steps):
    """Milliseconds a call over `steps` calls issued back to back (one call first, waited for):
    the pace of a decode loop, whichever of the CPU's launches and the GPU's work is slower."""
    fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(steps):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / steps


def main(argv=None):
    ap = make_parser()
    args = parse_args(sys.argv[1:] if argv is None else argv, ap)
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        print(f"decode_vs_pytorch: needs PyTorch ({e}); pip install torch", file=sys.stderr)
        return 2
    if args.lib:
        os.environ["FLASHTUT_LIB"] = args.lib
    import flashtut
    # The library (after torch: flashtut.load's order) is what names the forwards --impls
    # may take, so it is loaded before the GPU test, as compare_pytorch.py does: an unknown
    # name would otherwise become a "refused" row on every shape.
    try:
        flashtut.load(args.lib)
        known = flashtut.available("forward")
    except flashtut.LibraryError as e:
        print(f"decode_vs_pytorch: error: {e}", file=sys.stderr)
        return 2
    unknown = [name for name in args.impls if name not in known]
    if unknown:
        aside = (" (PyTorch's backends run without being named, FlashInfer's with --flashinfer)"
                 if unknown[0].startswith(("torch_", "flashinfer")) else "")
        ap.error(f"--impls {unknown[0]!r} is not one of the library's forwards{aside}: {', '.join(known)}")
    if not torch.cuda.is_available():
        print("decode_vs_pytorch: no CUDA GPU: nothing measured", file=sys.stderr)
        return 3
    problem = unwritable(args.out, folder=True)  # before any measurement: the CSVs come after the first shape
    if problem:
        ap.error(f"--out {args.out}: {problem}")

    flashinfer = fi_workspace = None
    if args.flashinfer:
        try:
            import flashinfer
            fi_workspace = torch.empty(FLASHINFER_WORKSPACE, dtype=torch.uint8, device="cuda")
            print(f"decode_vs_pytorch: FlashInfer {flashinfer.__version__}")
        except ImportError as e:
            print(f"decode_vs_pytorch: --flashinfer, but FlashInfer is not importable ({e}): left out",
                  file=sys.stderr)
            flashinfer = None
    shapes = args.shapes or [s for s in GRID if cache_bytes(s[0], s[2], s[4]) <= MAX_CACHE]
    flush = torch.empty(FLUSH_BYTES // 4, device="cuda", dtype=torch.float32)
    rows, graph_rows = [], []
    path = os.path.join(args.out, "decode_vs_pytorch.csv")
    graph_path = os.path.join(args.out, "decode_graphs.csv")
    gpu = torch.cuda.get_device_name()
    for b, hq, hkv, nq, nk in shapes:
        g = torch.Generator(device="cuda").manual_seed(b * 1000003 + hkv * 101 + nq * 7 + nk)
        q = torch.randn(b, hq, nq, D, device="cuda", dtype=torch.bfloat16, generator=g)
        k = torch.randn(b, hkv, nk, D, device="cuda", dtype=torch.bfloat16, generator=g)
        v = torch.randn(b, hkv, nk, D, device="cuda", dtype=torch.bfloat16, generator=g)
        mask = None
        if nq > 1:  # bottom-right: row i sees keys j <= i + nk - nq
            i = torch.arange(nq, device="cuda")[:, None]
            j = torch.arange(nk, device="cuda")[None, :]
            mask = j <= i + (nk - nq)
        moved = cache_bytes(b, hkv, nk) + 2 * b * hq * nq * D * 2
        ref = None
        # The float32 check where it fits: the math backend's scores and weights, and K and V
        # in float32 repeated to every query head (enable_gqa), under 8 GB.
        if b * hq * nk * (nq * 3 + 2 * D) * 4 < 8e9:
            with sdpa_kernel(SDPBackend.MATH):
                ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask,
                                                     enable_gqa=hkv != hq)

        def new_row(impl, status="ok"):
            return {"impl": impl, "batch": b, "heads": hq, "heads_kv": hkv, "len_q": nq, "len_kv": nk,
                    "head_dim": D, "dtype": "bf16", "ms": "", "gbps": "", "rel_err": "", "status": status,
                    "gpu": gpu}

        def record(impl, fn):
            row = new_row(impl)
            try:
                out = fn()
                torch.cuda.synchronize()
                if ref is not None:
                    row["rel_err"] = f"{((out.float() - ref).norm() / ref.norm()).item():.2e}"
                ms = timed(torch, fn, flush, args.iters)
                row["ms"], row["gbps"] = f"{ms:.4f}", f"{moved / (ms * 1e-3) / 1e9:.1f}"
            except (RuntimeError, ValueError, NotImplementedError) as e:  # a backend that refuses the shape
                row["status"] = "refused: " + " ".join(str(e).split())[:160]
                torch.cuda.synchronize()
            rows.append(row)
            if args.graph and row["status"] == "ok" and not impl.startswith("flashinfer"):
                record_graph(impl, fn)
            return row

        def record_graph(impl, fn):
            """The graph, loop and loop_graph rows of one call that ran (module docstring). The
            plain loop runs before the capture: the graph's private memory pool keeps the
            call's temporaries (the MATH backend's scores: tens of GB at B = 128) until the
            graph is freed, and a plain call beside it would need them twice."""
            try:
                loop = loop_ms(torch, fn, args.iters)
                replay = captured(torch, fn)
            except (RuntimeError, ValueError, NotImplementedError) as e:  # not capturable, or out of memory
                torch.cuda.synchronize()
                graph_rows.append({**new_row(impl, "not captured: " + " ".join(str(e).split())[:160]),
                                   "timing": "graph"})
                return
            for timing, ms in (("graph", lambda: timed(torch, replay, flush, args.iters)),
                               ("loop", lambda: loop),
                               ("loop_graph", lambda: loop_ms(torch, replay, args.iters))):
                row = {**new_row(impl), "timing": timing}
                t = ms()
                row["ms"], row["gbps"] = f"{t:.4f}", f"{moved / (t * 1e-3) / 1e9:.1f}"
                graph_rows.append(row)
            replay = None
            torch.cuda.empty_cache()  # the graph's pool, back before the next backend's capture
            t = timed(torch, fn, flush, args.iters)
            row = {**new_row(impl), "timing": "call_again"}
            row["ms"], row["gbps"] = f"{t:.4f}", f"{moved / (t * 1e-3) / 1e9:.1f}"
            graph_rows.append(row)

        for name in BACKENDS:
            backend = getattr(SDPBackend, name)

            def sdpa(backend=backend):
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=hkv != hq)
            record("torch_" + name.split("_")[0].lower(), sdpa)
        if flashinfer is not None:
            try:
                fi_calls = flashinfer_calls(flashinfer, torch, q, k, v, fi_workspace)
            except (RuntimeError, ValueError, NotImplementedError) as e:  # plan() refused the shape
                fi_calls = {}
                rows.append(new_row("flashinfer", "refused: " + " ".join(str(e).split())[:160]))
            for name, fn in fi_calls.items():
                record(name, fn)
        for impl in args.impls:
            record(impl, lambda impl=impl: flashtut.forward(q, k, v, causal=True, impl=impl,
                                                           causal_align=flashtut.CAUSAL_BOTTOM_RIGHT)[0])
        here = [r for r in rows if (r["batch"], r["heads_kv"], r["len_q"], r["len_kv"]) == (b, hkv, nq, nk)]
        verdict = verdicts(here)
        print(f"B={b:3d} Hq={hq} Hkv={hkv:2d} Nq={nq} Nk={nk:6d}: " +
              "  ".join(f"{r['impl']} {r['ms'] or '-'} ms {r['gbps'] or ''}" for r in here) + f"  [{verdict}]",
              flush=True)
        if args.graph:
            print("  graphs: " + "  ".join(f"{r['impl']} {r['timing']} {r['ms'] or r['status']}"
                                           for r in graph_rows if (r["batch"], r["heads_kv"], r["len_q"],
                                                                   r["len_kv"]) == (b, hkv, nq, nk)), flush=True)
            write(graph_path, graph_rows)
        q = k = v = ref = mask = None  # free the cache before the next shape
        torch.cuda.empty_cache()
        write(path, rows)  # after every shape: a run cut short keeps what it measured
    print(f"decode_vs_pytorch: wrote {len(rows)} rows to {path}")
    return 0


def verdicts(here):
    """Our fastest over PyTorch's fastest backend and over FlashInfer's fastest kernel, for one
    shape's rows (those measured)."""
    def best(pred):
        ms = [float(r["ms"]) for r in here if pred(r["impl"]) and r["ms"]]
        return min(ms) if ms else None
    ours = best(lambda i: not i.startswith(("torch_", "flashinfer")))
    torch_ms, fi_ms = best(lambda i: i.startswith("torch_")), best(lambda i: i.startswith("flashinfer"))
    said = [f"ours / fastest {who} {theirs / ours:.2f}x"
            for who, theirs in (("PyTorch", torch_ms), ("FlashInfer", fi_ms)) if ours and theirs]
    return ", ".join(said) or "no comparison"


def write(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["impl"])
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    sys.exit(main())
