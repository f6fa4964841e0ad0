#!/usr/bin/env python3
"""Ring attention across the ranks of a torchrun launch: each rank holds its zigzag part of
one sequence (flashtut.ring), the key/value blocks go round the ring, and the result is
checked against attention over the whole sequence on one device, then timed.

  PYTHONPATH=python torchrun --nproc-per-node P scripts/ring_attention.py --seq-len 131072 --head-dim 128 --causal
  PYTHONPATH=python torchrun --nproc-per-node 2 scripts/ring_attention.py --device cpu --seq-len 64 --head-dim 16
                                    (the CPU: gloo, float64 blocks: a check of the schedule)

On GPUs: one GPU a rank (LOCAL_RANK), NCCL, bf16, the blocks on the tutorial's kernels
(flashtut.ring.flashtut_blocks: chapters 09 and 10 on Hopper, 07 and 08 elsewhere). NCCL's
NVLink multicast stays off (NCCL_NVLS_ENABLE=0, set here unless the
environment sets it). Rank 0 prints, per pass, the ring's time (the slowest rank's, median
of --iters after --warmup), TFLOP/s per GPU (the causal FLOPs counted once), the same
problem on one GPU (rank 0 alone runs the whole sequence; --no-single skips it), and the
scaling efficiency: (single-GPU time / P) / ring time.

The check (on unless --no-check): every rank computes o and the gradients over the whole
sequence with the same block functions and compares its own zigzag part, under the
same-dtype tolerance (bf16: 2e-2 relative to the output's scale; float64: 1e-10). The check
and the single-GPU timing need the whole sequence on one device: for a sequence that does
not fit one, pass --no-check --no-single.
"""
import argparse
import csv
import os
import statistics
import sys
import time

from paths import unwritable  # scripts/paths.py


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--heads-kv", type=int, default=None, help="key/value heads (default: --heads)")
    ap.add_argument("--seq-len", type=int, default=131072, help="the whole sequence (split over the ranks)")
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--no-check", dest="check", action="store_false")
    ap.add_argument("--no-single", dest="single", action="store_false",
                    help="skip the single-device timing (and so the efficiency)")
    ap.add_argument("--csv", default=None, metavar="PATH",
                    help="rank 0 appends one row a pass to this CSV (its header when it is new; its "
                         "folder made if missing)")
    ap.add_argument("--trace", default=None, metavar="DIR",
                    help="each rank also writes a Chrome trace of one forward and one backward "
                         "(torch.profiler) to DIR/ring_trace_rank<R>.json; "
                         "plots/plot_ring_timeline.py draws one")
    a = ap.parse_args(argv)
    if a.heads_kv is None:  # not `or`: --heads-kv 0 is an error, not the default
        a.heads_kv = a.heads
    for name in ("batch", "heads", "heads_kv", "seq_len", "head_dim", "iters"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    if a.warmup < 0:
        ap.error("--warmup must be 0 or more")
    if a.heads % a.heads_kv:
        ap.error(f"--heads-kv ({a.heads_kv}) must divide --heads ({a.heads})")
    # The outputs are written after the run: a path that cannot be written fails now instead.
    for flag, path, folder in (("--csv", a.csv, False), ("--trace", a.trace, True)):
        problem = path and unwritable(path, folder)
        if problem:
            ap.error(f"{flag} {path}: {problem}")
    return a


def main(argv=None):
    a = parse(argv)
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        print("ring_attention: needs PyTorch (pip install torch)", file=sys.stderr)
        return 2
    try:
        import flashtut.ring as ring
    except ImportError as e:  # neither installed nor on PYTHONPATH
        print(f"ring_attention: needs the flashtut package ({e}): `pip install .` in the repository, or "
              "PYTHONPATH=python in a built tree (python/README.md)", file=sys.stderr)
        return 2

    if "RANK" not in os.environ:
        print("ring_attention: launch it with torchrun (PYTHONPATH=python torchrun --nproc-per-node P "
              "scripts/ring_attention.py ...)",
              file=sys.stderr)
        return 2
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    cuda = a.device == "cuda"
    if cuda and not torch.cuda.is_available():
        print("ring_attention: no CUDA GPU here; --device cpu checks the schedule on the CPU", file=sys.stderr)
        return 2
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if cuda else "gloo")
    world, rank = dist.get_world_size(), dist.get_rank()
    if a.seq_len % (2 * world):
        if rank == 0:
            print(f"ring_attention: --seq-len {a.seq_len} must be a multiple of 2·P = {2 * world}", file=sys.stderr)
        dist.destroy_process_group()
        return 2

    dev = torch.device("cuda") if cuda else torch.device("cpu")
    dtype = torch.bfloat16 if cuda else torch.float64
    blocks = ring.flashtut_blocks() if cuda else ring.reference_blocks()
    g = torch.Generator(device="cpu").manual_seed(0)  # the same whole tensors on every rank
    shape_q = (a.batch, a.heads, a.seq_len, a.head_dim)
    shape_kv = (a.batch, a.heads_kv, a.seq_len, a.head_dim)
    whole = [torch.randn(s, generator=g, dtype=torch.float32).to(dtype) for s in (shape_q, shape_kv, shape_kv, shape_q)]
    q, k, v, do = (ring.zigzag_shard(t, world, rank).to(dev) for t in whole)
    comm = ring.DistributedRing()

    def sync():
        if cuda:
            torch.cuda.synchronize()
        dist.barrier()

    def timed(fn):
        for _ in range(a.warmup):
            fn()
        times = []
        for _ in range(a.iters):
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    o, lse = ring.forward(q, k, v, causal=a.causal, comm=comm, blocks=blocks)
    dq, dk, dv = ring.backward(q, k, v, o, lse, do, causal=a.causal, comm=comm, blocks=blocks)
    ok = True
    if a.check:
        wq, wk, wv, wdo = (t.to(dev) for t in whole)
        o_ref, lse_ref = blocks[0](wq, wk, wv, a.causal)
        grads_ref = blocks[1](wq, wk, wv, o_ref, lse_ref, wdo, a.causal)
        mine = lambda t: ring.zigzag_shard(t, world, rank)
        tol = 1e-10 if dtype == torch.float64 else 2e-2
        for name, got, ref in (("o", o, o_ref), ("dq", dq, grads_ref[0]), ("dk", dk, grads_ref[1]),
                               ("dv", dv, grads_ref[2])):
            ref = mine(ref).to(got.dtype)
            err = (got.double() - ref.double()).abs().max().item() / max(ref.double().abs().max().item(), 1e-30)
            if err > tol:
                ok = False
                print(f"rank {rank}: {name} differs from one device's attention: {err:.2e} > {tol:.0e}",
                      file=sys.stderr)
    fwd = timed(lambda: ring.forward(q, k, v, causal=a.causal, comm=comm, blocks=blocks))
    bwd = timed(lambda: ring.backward(q, k, v, o, lse, do, causal=a.causal, comm=comm, blocks=blocks))
    if a.trace:
        from torch.profiler import ProfilerActivity, profile
        os.makedirs(a.trace, exist_ok=True)
        # The profiler records the second of two calls: the first absorbs its start-up, which
        # takes each rank a different time, and a barrier starts the recorded one together.
        # Without it, a rank's first transfer waits for the later rank's profiler to start.
        from torch.profiler import schedule
        with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else []),
                     schedule=schedule(wait=0, warmup=1, active=1, repeat=1),
                     on_trace_ready=lambda p: p.export_chrome_trace(
                         os.path.join(a.trace, f"ring_trace_rank{rank}.json"))) as prof:
            for _ in range(2):
                sync()
                o_t, lse_t = ring.forward(q, k, v, causal=a.causal, comm=comm, blocks=blocks)
                ring.backward(q, k, v, o_t, lse_t, do, causal=a.causal, comm=comm, blocks=blocks)
                sync()
                prof.step()
    single = (None, None)
    if a.single and rank == 0:
        wq, wk, wv, wdo = (t.to(dev) for t in whole)
        o1, l1 = blocks[0](wq, wk, wv, a.causal)
        single = (timed_single(lambda: blocks[0](wq, wk, wv, a.causal), a, cuda),
                  timed_single(lambda: blocks[1](wq, wk, wv, o1, l1, wdo, a.causal), a, cuda))
    if rank == 0:
        pairs = a.seq_len * a.seq_len * (0.5 if a.causal else 1.0)
        flops = {"forward": 4.0 * a.batch * a.heads * pairs * a.head_dim}
        flops["backward"] = 2.5 * flops["forward"]
        print(f"ring attention: P = {world}, B = {a.batch}, H = {a.heads} (K/V {a.heads_kv}), N = {a.seq_len}, "
              f"d = {a.head_dim}, {'causal' if a.causal else 'non-causal'}, {dtype}, check {'ok' if ok else 'FAILED'}")
        rows = []
        for name, t, t1 in (("forward", fwd, single[0]), ("backward", bwd, single[1])):
            line = f"  {name:8s} {t * 1e3:9.3f} ms  {flops[name] / t / world / 1e12:7.1f} TFLOP/s a rank"
            if t1 is not None:
                line += (f"  one device {t1 * 1e3:9.3f} ms ({flops[name] / t1 / 1e12:.1f} TFLOP/s)"
                         f"  efficiency {t1 / world / t:.2f}")
            print(line)
            rows.append({"pass": name, "ranks": world, "batch": a.batch, "heads": a.heads,
                         "heads_kv": a.heads_kv, "seq_len": a.seq_len, "head_dim": a.head_dim,
                         "causal": int(a.causal), "dtype": str(dtype).replace("torch.", ""),
                         "check": "ok" if ok else ("FAILED" if a.check else "not run"),
                         "ms": f"{t * 1e3:.3f}", "tflops_per_rank": f"{flops[name] / t / world / 1e12:.1f}",
                         "single_ms": "" if t1 is None else f"{t1 * 1e3:.3f}",
                         "single_tflops": "" if t1 is None else f"{flops[name] / t1 / 1e12:.1f}",
                         "efficiency": "" if t1 is None else f"{t1 / world / t:.3f}"})
        if a.csv:
            append_rows(a.csv, rows)
    dist.destroy_process_group()
    return 0 if ok else 1


def append_rows(path, rows):
    """Appends rows to a CSV, with the header first when the file is new or empty."""
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        if new:
            w.writeheader()
        w.writerows(rows)


def timed_single(fn, a, cuda):
    import torch
    for _ in range(a.warmup):
        fn()
    times = []
    for _ in range(a.iters):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


if __name__ == "__main__":
    sys.exit(main())
