#!/usr/bin/env python3
"""What storing the scores in bf16 costs, measured: attention's output and log-sum-exp
errors on logits of order 1 and of order 100, for the computations that keep S (and P) in
device memory in bf16 (chapter 06's grid variants; PyTorch's own three bf16 kernels:
matmul, softmax, matmul) beside those that keep S in float32 (chapter 06's `grid_f32`,
chapter 07's fused kernel, PyTorch's FlashAttention-2), all against a float64 reference on
the same bf16 inputs.

  python3 scripts/precision_vs_pytorch.py --out DIR [--lib build/common/libflashtut.so]
      [--sizes 2 64 1024 4096] [--dims 64 128] [--logits 1 100] [--device cuda|cpu]

Inputs: q, k, v drawn from N(0, 1) (seeded by the shape), q and k multiplied by sqrt(L), so
that the logits scale·q·k (scale = 1/sqrt(d)) have a standard deviation of about L
(``--logits``), then rounded to bf16. B = 1, H = 8, non-causal.

The implementations (rows of the CSV):

- ``torch_three_kernels``: ``s = (q @ kᵀ)·scale`` in bf16 (a bf16 tensor, as PyTorch's math
  path writes it), ``p = softmax(s)`` in bf16, ``o = p @ v``; its log-sum-exp is that of the
  bf16 s.
- ``torch_float32_scores``: the same products with s and the softmax in float32 and only P
  rounded to bf16 before P·V: what a fused kernel keeps, computed by PyTorch's operations
  (runs on the CPU too: the test of the lesson's claim uses it).
- ``torch_flash``: SDPA's FlashAttention-2 backend (CUDA only), with its log-sum-exp.
- ``ch06_grid_f32``, ``ch06_grid_half``, ``ch06_warp_rows``, ``ch07``: the tutorial's, through
  flashtut.forward (CUDA only).

Errors: relative L2 of O and of the log-sum-exp against float64. Writes
DIR/precision_vs_pytorch.csv and prints one line per shape. Exit 0; 2 for bad arguments;
3 with ``--device cuda`` and no GPU.
"""
import argparse
import csv
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

BATCH, HEADS = 1, 8
OURS = ("ch06_grid_f32", "ch06_grid_half", "ch06_warp_rows", "ch07")
COLUMNS = ["impl", "batch", "heads", "seq_len", "head_dim", "logits", "o_rel_err", "lse_rel_err", "status", "device"]


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for precision_vs_pytorch.csv")
    ap.add_argument("--lib", help="libflashtut.so (default: flashtut's own search)")
    ap.add_argument("--sizes", nargs="+", type=int, default=[2, 64, 1024, 4096], help="sequence lengths N")
    ap.add_argument("--dims", nargs="+", type=int, default=[64, 128], help="head dimensions d")
    ap.add_argument("--logits", nargs="+", type=float, default=[1.0, 100.0],
                    help="the logits' standard deviation, L")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="cpu: PyTorch's operations only (the tutorial's kernels and FlashAttention-2 need CUDA)")
    args = ap.parse_args(argv)
    if min(args.sizes) < 1 or min(args.dims) < 1 or min(args.logits) <= 0:
        ap.error("--sizes and --dims must be positive, --logits above 0")
    return args


def rel_l2(got, ref):
    """‖got − ref‖ / ‖ref‖ in float64; NaN when got is not finite."""
    got = got.double()
    if not bool(got.isfinite().all()):
        return float("nan")
    return ((got - ref).norm() / ref.norm().clamp_min(1e-300)).item()


def inputs(torch, n, d, logits, device):
    g = torch.Generator().manual_seed(n * 1009 + d * 13 + int(logits * 7))
    q, k, v = (torch.randn(BATCH, HEADS, n, d, generator=g) for _ in range(3))
    amp = math.sqrt(logits)
    return [(t * f).to(torch.bfloat16).to(device) for t, f in ((q, amp), (k, amp), (v, 1.0))]


def reference(q, k, v, scale):
    s = (q.double() @ k.double().transpose(-2, -1)) * scale
    lse = s.logsumexp(-1)
    return (s - lse[..., None]).exp() @ v.double(), lse


def implementations(torch, device, lib):
    """name -> fn(q, k, v, scale) returning (o, lse): what can run on `device`."""
    def three_kernels(q, k, v, scale):
        s = (q @ k.transpose(-2, -1)) * scale  # bf16, as stored
        return torch.softmax(s, dim=-1) @ v, s.float().logsumexp(-1)

    def float32_scores(q, k, v, scale):
        s = (q.float() @ k.float().transpose(-2, -1)) * scale
        lse = s.logsumexp(-1)
        p = (s - lse[..., None]).exp().to(torch.bfloat16)
        return p @ v, lse

    impls = {"torch_three_kernels": three_kernels, "torch_float32_scores": float32_scores}
    if device != "cuda":
        return impls

    def flash(q, k, v, scale):
        out = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, False, False, scale=scale)
        return out[0], out[1]
    impls["torch_flash"] = flash
    if lib:
        os.environ["FLASHTUT_LIB"] = lib
    import flashtut
    for name in OURS:
        impls[name] = (lambda name: lambda q, k, v, scale: flashtut.forward(q, k, v, scale=scale, impl=name))(name)
    return impls


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        import torch
    except ImportError as e:
        print(f"precision_vs_pytorch: needs PyTorch ({e}); pip install torch", file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("precision_vs_pytorch: no CUDA GPU (--device cpu runs PyTorch's operations alone)", file=sys.stderr)
        return 3
    os.makedirs(args.out, exist_ok=True)
    impls = implementations(torch, args.device, args.lib)
    rows = []
    for d in args.dims:
        for logits in args.logits:
            for n in args.sizes:
                q, k, v = inputs(torch, n, d, logits, args.device)
                scale = 1.0 / math.sqrt(d)
                ref_o, ref_lse = reference(q, k, v, scale)
                line = []
                for name, fn in impls.items():
                    row = dict(impl=name, batch=BATCH, heads=HEADS, seq_len=n, head_dim=d, logits=f"{logits:g}",
                               o_rel_err="", lse_rel_err="", status="ok", device=args.device)
                    try:
                        o, lse = fn(q, k, v, scale)
                        row["o_rel_err"] = f"{rel_l2(o, ref_o):.3e}"
                        if lse is not None:
                            row["lse_rel_err"] = f"{rel_l2(lse.reshape(ref_lse.shape), ref_lse):.3e}"
                    except (RuntimeError, ValueError) as e:  # a kernel that refuses the shape
                        row["status"] = "refused: " + " ".join(str(e).split())[:160]
                    rows.append(row)
                    line.append(f"{name} {row['o_rel_err'] or '-'}/{row['lse_rel_err'] or '-'}")
                print(f"d={d} logits~{logits:g} N={n}: " + "  ".join(line), flush=True)
    path = os.path.join(args.out, "precision_vs_pytorch.csv")
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    print(f"precision_vs_pytorch: wrote {len(rows)} rows (O / lse relative errors) to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
