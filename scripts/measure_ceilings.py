#!/usr/bin/env python3
"""Measures the GPU's ceilings for the roofline (needs PyTorch and a GPU): four lines that
plots/ceilings_from_anchors.py reads. scripts/pytorch_anchors.py prints the same lines first
(it calls ceilings() and bench() here), then minutes of attention benchmarks.

Usage: python3 scripts/measure_ceilings.py | tee ceilings.log
       python3 plots/ceilings_from_anchors.py ceilings.log plots/results/h200/ceilings.csv
"""

COVER_CYCLES = 2_000_000  # the GPU's spin after a flush (cover): about 1 ms at 2 GHz


def cover(torch):
    """Keeps the GPU busy for about a millisecond (torch.cuda._sleep, where this PyTorch has it),
    so that a call launched from Python right after is queued before the GPU reaches it: CUDA
    events around that call then time the GPU's work, not the launch's host latency (contract 3)."""
    spin = getattr(torch.cuda, "_sleep", None)
    if spin is not None:
        spin(COVER_CYCLES)


def bench(fn, reps=20, warm=5, flush=None):
    """Median milliseconds of fn() timed with CUDA events, after warm-up calls; flush(), when
    given, runs before each timed call, outside the events (e.g. a write that evicts the L2)."""
    import torch
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if flush is not None:
            flush()
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def ceilings(torch, dev):
    """Prints the device and the four ceiling lines (copy, bf16, fp16 and fp32 products).
    Turns TF32 off for float32 matrix products, and leaves it off."""
    p = torch.cuda.get_device_properties(0)
    print("device", p.name, p.multi_processor_count, "SMs", "torch", torch.__version__)
    # Copy bandwidth: 2 GiB each way, far past the L2, so every byte comes from DRAM.
    x = torch.empty(2 * 1024**3, dtype=torch.uint8, device=dev)
    y = torch.empty_like(x)
    ms = bench(lambda: y.copy_(x))
    print(f"ceiling copy {2 * x.numel() / ms / 1e9:.2f} TB/s (read+write)")
    del x, y
    # Matrix products of 8192³: large enough for cuBLAS to reach its peak rate.
    for dt in (torch.bfloat16, torch.float16):
        a = torch.randn(8192, 8192, dtype=dt, device=dev)
        b = torch.randn(8192, 8192, dtype=dt, device=dev)
        ms = bench(lambda: a @ b, reps=10)
        print(f"ceiling matmul {dt} {2 * 8192**3 / ms / 1e9:.0f} TFLOP/s")
    torch.backends.cuda.matmul.allow_tf32 = False  # true float32 on the CUDA cores
    a = torch.randn(8192, 8192, device=dev)
    b = torch.randn(8192, 8192, device=dev)
    ms = bench(lambda: a @ b, reps=5)
    print(f"ceiling matmul fp32(no tf32) {2 * 8192**3 / ms / 1e9:.0f} TFLOP/s")


if __name__ == "__main__":
    import torch
    ceilings(torch, torch.device("cuda"))
