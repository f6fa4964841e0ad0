#!/usr/bin/env python3
"""One PyTorch attention backend's forward and backward, run a few times on one shape and
nothing else: the process to hand a profiler, so that its kernels can be set beside the
chapters' (scripts/gpu_run.py's `profiles` step profiles FlashAttention-2's backward with
the same Nsight Compute sections as chapter 08's kernel).

  python3 scripts/sdpa_once.py --backend FLASH_ATTENTION --batch 4 --heads 16 --seq-len 4096 \\
      --head-dim 128 [--causal] [--dtype bf16] [--iters 2]
  ncu -k regex:flash_bwd_dq_dk_dv --launch-skip 1 --launch-count 1 python3 scripts/sdpa_once.py ...

Needs PyTorch with CUDA. Prints the shape and the backend, and exits non-zero with a message
when PyTorch, the GPU or the backend is missing.
"""
import argparse
import sys

BACKENDS = ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION", "MATH")
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "float32": "float32"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=BACKENDS, default="FLASH_ATTENTION")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=4096)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--dtype", choices=DTYPES, default="bf16")
    ap.add_argument("--iters", type=int, default=2, help="forward+backward calls (default 2)")
    args = ap.parse_args()
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        sys.exit(f"sdpa_once: needs PyTorch ({e})")
    if not torch.cuda.is_available():
        sys.exit("sdpa_once: no CUDA GPU visible to PyTorch")
    shape = (args.batch, args.heads, args.seq_len, args.head_dim)
    dtype = getattr(torch, DTYPES[args.dtype])
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(shape, device="cuda", dtype=dtype, generator=gen).requires_grad_()
               for _ in range(3))
    d_out = torch.randn(shape, device="cuda", dtype=dtype, generator=gen)
    print(f"sdpa_once: {args.backend} B={args.batch} H={args.heads} N={args.seq_len} "
          f"d={args.head_dim} {'causal' if args.causal else 'non-causal'} {args.dtype}, "
          f"{args.iters} forward+backward calls")
    try:
        with sdpa_kernel(getattr(SDPBackend, args.backend)):
            for _ in range(args.iters):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=args.causal)
                torch.autograd.grad(out, (q, k, v), d_out)
        torch.cuda.synchronize()
    except RuntimeError as e:
        sys.exit(f"sdpa_once: {args.backend} cannot run this shape: {e}")


if __name__ == "__main__":
    main()
