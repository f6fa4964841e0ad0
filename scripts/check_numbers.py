#!/usr/bin/env python3
"""Holds the numbers of the chapter READMEs that come from committed CSVs to those CSVs.

  python3 scripts/check_numbers.py        exit 1, naming each quote the CSVs no longer give

Each claim names a page, recomputes a piece of its text from plots/results/h200/ (a table
row, a range of ratios) and checks that the page says exactly that. A re-measured CSV that
moves a number, or an edit that changes one by hand, fails here until text and CSV agree.
README.md's results section has its own generator (scripts/update_readme.py --check).
"""
import csv
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "plots", "results", "h200")


def read(name):
    with open(os.path.join(RESULTS, name), newline="") as f:
        return list(csv.DictReader(f))


def page(path):
    """The page's text with every run of whitespace one space (quotes may wrap lines)."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return " ".join(f.read().split())


def span(values, digits=2, unit="×"):
    lo, hi = min(values), max(values)
    return f"{lo:.{digits}f}–{hi:.{digits}f}{unit}"


# ---- chapter 09: ch09_vs_pytorch.csv ----------------------------------------------------

STEPS = ["ch09_wgmma", "ch09_tma", "ch09_warp_specialized", "ch09_pingpong", "ch09_overlap"]
SHAPES = [(d, c, n) for d in (64, 128) for c in (0, 1) for n in (1024, 4096, 16384)]


def ch09_table(dtype="bf16"):
    """{(d, causal, N): {impl: TFLOP/s}} of one dtype."""
    t = {}
    for r in read("ch09_vs_pytorch.csv"):
        if r["dtype"] == dtype and r["pass"] == "forward":
            t.setdefault((int(r["head_dim"]), int(r["causal"]), int(r["seq_len"])), {})[r["impl"]] = float(r["tflops"])
    return t


def ch09_rows():
    """The lesson's measured table, row by row."""
    t = ch09_table()
    for d, c, n in SHAPES:
        x = t[(d, c, n)]
        cells = [x[i] for i in STEPS + ["ch07_fastest", "torch_flash", "torch_cudnn"]]
        ov = x["ch09_overlap"]
        yield (f"| {n} | {d} | {'yes' if c else 'no'} | " + " | ".join(f"{v:.0f}" for v in cells) +
               f" | {ov / x['torch_cudnn']:.2f}× | {ov / x['torch_flash']:.2f}× |")


def ch09_ratio(num, den, sizes, digits=2):
    t = ch09_table()
    return span([t[(d, c, n)][num] / t[(d, c, n)][den] for d, c, n in SHAPES if n in sizes], digits)


def claims():
    """(page, text it must contain) pairs, the text computed from the CSVs."""
    ch09 = "chapters/09_hopper_forward/README.md"
    out = [(ch09, row) for row in ch09_rows()]
    out += [
        (ch09, f"At N = 16384 the kernel runs at {ch09_ratio('ch09_overlap', 'torch_cudnn', (16384,))} cuDNN"),
        (ch09, f"At N = 1024 the fastest variant is "
               f"{span([max(v for i, v in x.items() if i.startswith('ch09')) / x['torch_cudnn'] for (d, c, n), x in ch09_table().items() if n == 1024])} cuDNN"),
        ("README.md", f"it runs {ch09_ratio('ch09_overlap', 'torch_cudnn', (16384,))} PyTorch's cuDNN backend "
                      f"and {ch09_ratio('ch09_overlap', 'torch_flash', (16384,))} its FlashAttention-2 backend"),
        ("README.md", f"at N = 4096, {ch09_ratio('ch09_overlap', 'torch_cudnn', (4096,))} cuDNN"),
        ("README.md", f"at N = 1024, {ch09_ratio('ch09_overlap', 'torch_cudnn', (1024,))}"),
    ]
    fp16, bf16 = ch09_table("fp16"), ch09_table("bf16")
    worst = max(abs(fp16[k][i] / bf16[k][i] - 1) for k in bf16 for i in STEPS)
    out.append((ch09, f"fp16, in another run of the same script, lands within {int(worst * 100) + 1}% of these"))
    return out


def main():
    failed = 0
    pages = {}
    for path, text in claims():
        body = pages.setdefault(path, page(path))
        if " ".join(text.split()) in body:
            continue
        print(f"FAIL {path}: the CSVs give \"{text}\", which the page does not say")
        failed += 1
    total = len(claims())
    print(f"{total - failed} of {total} numbers hold")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
