#!/usr/bin/env python3
"""Writes the results section of README.md from the committed H200 CSVs.

  python3 scripts/update_readme.py            rewrite the section between the markers
  python3 scripts/update_readme.py --check    exit 1 if README.md is not what the CSVs say

Numbers in the README come from here and nowhere else: plots/results/h200/tour.csv (the
staircase), chapters.csv (chapter 03's row-softmax benchmark), anchors.csv (PyTorch's
attention backends, measured in the same run), and for the tensor-core chapters
vs_pytorch.csv (the comparison script's one run) or, before that file exists,
tc_variants.csv with ch07_anchors.csv (one session).
"""
import argparse
import csv
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "plots", "results", "h200")
README = os.path.join(ROOT, "README.md")
BEGIN, END = "<!-- results:begin (scripts/update_readme.py) -->", "<!-- results:end -->"


def read(name):
    with open(os.path.join(RESULTS, name), newline="") as f:
        return list(csv.DictReader(f))


def gb(x):
    return f"{float(x) / 1e9:.3g} GB"


def staircase(tour, n):
    out = [f"**N = {n}, d = 64, non-causal** (B = {16384 // n}, H = 32: 16384 tokens)", "",
           "| ch | variant | dtype | pass | what changed | ms | TFLOP/s | DRAM bytes (model) | speedup vs 01 | rel. error | extra memory |",
           "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in tour:
        if r["seq_len"] == str(n) and r["head_dim"] == "64" and r["causal"] == "0":
            speed = f"{float(r['speedup_vs_ch01']):.1f}×" if r["speedup_vs_ch01"] else "—"
            out.append(f"| {r['chapter']} | {r['variant']} | {r['dtype']} | {r['pass']} | {r['what']} | "
                       f"{float(r['ms']):.2f} | {float(r['tflops']):.1f} | {gb(r['model_bytes'])} | "
                       f"{speed} | {float(r['rel_err']):.1e} | {gb(r['extra_mem_bytes'])} |")
    return out


def versus_pytorch(tour, anchors):
    mem = {(a["causal"] == "True", a["N"], a["d"]): a for a in anchors
           if a["backend"] == "mem_efficient" and a["dtype"] == "float32"}
    out = ["| N | d | causal | ch04 fast fwd TFLOP/s | PyTorch fwd | ratio | ch05 flash bwd TFLOP/s | PyTorch bwd | ratio | ch05 materialize bwd |",
           "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for d in ("64", "128"):
        for causal in ("0", "1"):
            for n in ("1024", "4096", "16384"):
                pick = {(r["chapter"], r["variant"]): r for r in tour
                        if r["seq_len"] == n and r["head_dim"] == d and r["causal"] == causal}
                a = mem.get((causal == "1", n, d))
                if not a or ("04", "fast") not in pick or ("05", "flash") not in pick:
                    continue
                f, b, m = pick[("04", "fast")], pick[("05", "flash")], pick.get(("05", "materialize"))
                ff, bf = float(f["tflops"]), float(b["tflops"])
                pf, pb = float(a["fwd_tflops"]), float(a["bwd_tflops"])
                mt = f"{float(m['tflops']):.1f}" if m else "—"
                out.append(f"| {n} | {d} | {'yes' if causal == '1' else 'no'} | {ff:.1f} | {pf:.1f} | "
                           f"{ff / pf:.2f}× | {bf:.1f} | {pb:.1f} | {bf / pb:.2f}× | {mt} |")
    return out


# Chapter 07's fastest variant per head dimension (ch07::fastest() in flash_forward.cu).
FASTEST_07 = {"64": "tuned", "128": "lazy_rescale"}


def tensor_cores():
    """The tensor-core chapters against PyTorch's bf16 backends at N = 16384, 16384 tokens."""
    path = os.path.join(RESULTS, "vs_pytorch.csv")
    table = {}  # (impl, d, causal) -> TFLOP/s
    if os.path.exists(path):
        source = "`vs_pytorch.csv`: one run of `scripts/compare_pytorch.py`"
        for r in read("vs_pytorch.csv"):
            if (r["dtype"] == "bf16" and r["seq_len"] == "16384" and r["pass"] == "forward"
                    and r["batch"] == "1" and r.get("heads_kv", r["heads"]) == r["heads"]):
                table[(r["impl"], r["head_dim"], r["causal"])] = float(r["tflops"])
        fast07 = lambda d: table.get(("ch07_fastest", d, c))
    else:
        source = "`tc_variants.csv` and `ch07_anchors.csv`, one session"
        for r in read("tc_variants.csv"):
            if r["seq_len"] == "16384":
                table[(f"ch{r['chapter']}_{r['variant']}", r["head_dim"], r["causal"])] = float(r["tflops"])
        for a in read("ch07_anchors.csv"):
            if a["N"] == "16384" and a["dtype"] == "bfloat16":
                name = {"flash(FA2)": "torch_flash", "cudnn": "torch_cudnn"}.get(a["backend"])
                if name:
                    table[(name, a["d"], "1" if a["causal"] == "True" else "0")] = float(a["fwd_tflops"])
        fast07 = lambda d: table.get((f"ch07_{FASTEST_07[d]}", d, c))
    naive = {(a["d"], a["causal"] == "True"): float(a["fwd_tflops"]) for a in read("anchors.csv")
             if a["backend"].startswith("torch-naive") and a["dtype"] == "bfloat16" and a["N"] == "16384"}
    # Chapter 09 beside cuDNN measured in its own run (ch09_vs_pytorch.csv), so that its
    # ratio compares two rows of one process.
    same09 = {}
    if os.path.exists(os.path.join(RESULTS, "ch09_vs_pytorch.csv")):
        for r in read("ch09_vs_pytorch.csv"):
            if (r["dtype"] == "bf16" and r["seq_len"] == "16384" and r["pass"] == "forward"
                    and r["batch"] == "1" and r.get("heads_kv", r["heads"]) == r["heads"]):
                same09[(r["impl"], r["head_dim"], r["causal"])] = float(r["tflops"])
    out = [f"**On the tensor cores** (bf16 in and out, float32 accumulation; N = 16384, 16384 tokens; "
           f"forward TFLOP/s from {source}; PyTorch's three-kernel bf16 path from `anchors.csv`; "
           f"chapter 09 against cuDNN in its own run, `ch09_vs_pytorch.csv`):", "",
           "| d | causal | ch06 unfused (warp_rows) | PyTorch 3 kernels | ch07 fused (fastest) | FlashAttention-2 | ch07 / FA2 | cuDNN | ch09 Hopper (fastest) | ch09 / cuDNN |",
           "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for d in ("64", "128"):
        for c in ("0", "1"):
            f07, fa2 = fast07(d), table.get(("torch_flash", d, c))
            u06, cud = table.get(("ch06_warp_rows", d, c)), table.get(("torch_cudnn", d, c))
            nv = naive.get((d, c == "1"))
            if f07 is None or fa2 is None:
                continue
            cell = lambda x: f"{x:.1f}" if x is not None else "—"
            f09, c09 = same09.get(("ch09_fastest", d, c)), same09.get(("torch_cudnn", d, c))
            ratio09 = f"{f09 / c09:.2f}×" if f09 and c09 else "—"
            out.append(f"| {d} | {'yes' if c == '1' else 'no'} | {cell(u06)} | {cell(nv)} | {f07:.1f} | "
                       f"{fa2:.1f} | {f07 / fa2:.2f}× | {cell(cud)} | {cell(f09)} | {ratio09} |")
    return out


def row_softmax(chapters):
    rows = [r for r in chapters if r["pass"] == "softmax"]
    out = []
    for r in rows:
        out.append(f"- `{r['variant']}` over {int(r['batch'])} rows of {int(r['seq_len'])} floats: "
                   f"{float(r['ms']):.3f} ms, {float(r['gbps']):.0f} GB/s counting one read and one "
                   f"write of the rows ({r['what'].split('; ')[-1]} measured in the same run)")
    return out


def section():
    tour, chapters, anchors = read("tour.csv"), read("chapters.csv"), read("anchors.csv")
    gpu = tour[0]["gpu"] if tour else "?"
    lines = [BEGIN, "",
             f"Measured on an {gpu} (`plots/results/h200/`, how: `env.txt` there), float32 on "
             "the CUDA cores (chapters 01–05) and bf16 on the tensor cores (06–07, the speedup "
             "over chapter 01 comparing across dtypes), "
             "median of up to 10 runs with the L2 flushed before each; FLOPs counted as the "
             "FlashAttention papers do. Every row was verified against the float64 reference "
             "first (relative L2 error shown). Extra memory: the workspace beyond inputs and "
             "outputs, as the allocator counted it.", ""]
    for n in (4096, 16384):
        lines += staircase(tour, n) + [""]
    lines += ["**Against PyTorch** (2.11, `scaled_dot_product_attention` with the memory-efficient "
              "backend, float32, measured in the same run; it runs float32 on the tensor cores "
              "with the 3×TF32 split, while these chapters use the CUDA cores), 16384 tokens, "
              "H = 2048/d:", ""]
    lines += versus_pytorch(tour, anchors) + [""]
    lines += tensor_cores() + [""]
    lines += ["**Chapter 03's row softmax** (the online-softmax idea alone, a memory-bound kernel):", ""]
    lines += row_softmax(chapters) + ["", END]
    return "\n".join(lines)


def main(argv):
    parser = argparse.ArgumentParser(description="Writes the results section of README.md from the "
                                     "committed H200 CSVs (plots/results/h200/).")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if README.md is not what the CSVs say")
    check = parser.parse_args(argv).check  # --help, or an unknown argument, exits before any write
    with open(README) as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        sys.exit(f"{README}: the markers {BEGIN!r} … {END!r} are missing")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    new = head + section() + tail
    if check:
        if new != text:
            sys.exit("README.md's results section differs from the CSVs: run scripts/update_readme.py")
        print("README.md results match plots/results/h200/")
        return
    with open(README, "w") as f:
        f.write(new)
    print("README.md results section rewritten from plots/results/h200/")


if __name__ == "__main__":
    main(sys.argv[1:])
