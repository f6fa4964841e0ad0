#!/usr/bin/env python3
"""Draws chapter 11's figure: the bandwidth a decode step draws against the number of cached
keys, as a fraction of what a plain streaming read of the same K and V bytes reaches in the
same run: the read's time over the decode's (decode.csv's stream_read rows), one panel per
number of query rows a sequence.

  python3 plots/plot_decode.py [plots/results/h200/decode.csv] [--out plots/figures/decode.png]

One line per (batch, key/value heads) layout for --variant (default: fastest), the goal
(--goal, 0.85 of the read) dashed; line style by batch, colour by key/value heads. Printed: one line per layout with its fractions, from the
shortest cache to the longest. The figure is 1600 x 900 pixels, text 14 pt and up (a slide).
"""
import argparse
import csv
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

HERE = os.path.dirname(os.path.abspath(__file__))
PNG_META = {"Software": None}  # no matplotlib version in the file: re-runs give equal bytes
STYLE = {1: "-", 16: "--", 128: ":"}  # line style by batch; colour by key/value heads


def fractions(rows, variant):
    """{query rows: {(batch, heads, kv heads): [(keys, stream_read's time / the variant's)]}}."""
    read, got = {}, {}
    for r in rows:
        key = (int(r["seq_len"]), int(r["batch"]), int(r["heads"]), int(r["heads_kv"]), int(r["len_kv"]))
        if r["variant"] == "stream_read":
            read[key] = float(r["ms"])
        elif r["variant"] == variant:
            got[key] = float(r["ms"])
    out = defaultdict(lambda: defaultdict(list))
    for key, ms in sorted(got.items()):
        if key in read:
            out[key[0]][key[1:4]].append((key[4], read[key] / ms))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", nargs="?", default=os.path.join(HERE, "results", "h200", "decode.csv"))
    ap.add_argument("--out", default=os.path.join(HERE, "figures", "decode.png"))
    ap.add_argument("--variant", default="fastest", help="chapter 11's variant to draw (default: fastest)")
    ap.add_argument("--goal", type=float, default=0.85, help="the fraction drawn dashed (default: 0.85)")
    args = ap.parse_args(argv)
    try:
        with open(args.csv, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        print(f"plot_decode: error: {e}", file=sys.stderr)
        return 1
    data = fractions(rows, args.variant)
    if not data:
        print(f"plot_decode: error: {args.csv} has no {args.variant} rows beside stream_read rows", file=sys.stderr)
        return 1
    panels = sorted(data)
    plt.rcParams.update({"font.size": 14})
    fig, axes = plt.subplots(1, len(panels), figsize=(16, 9), dpi=100, sharey=True, squeeze=False,
                             layout="constrained")
    kv_heads = sorted({layout[2] for p in panels for layout in data[p]}, reverse=True)
    colour = {kv: plt.get_cmap("tab10").colors[i] for i, kv in enumerate(kv_heads)}
    for ax, nq in zip(axes[0], panels):
        for (b, hq, hkv), points in sorted(data[nq].items(), key=lambda x: (-x[0][2], x[0][0])):
            keys, frac = zip(*points)
            ax.plot(keys, frac, STYLE.get(b, "-."), marker="o", lw=2.2, color=colour[hkv],
                    label=f"B = {b}, {hq} query heads on {hkv}")
            print(f"plot_decode: N_q={nq} B={b} H_q={hq} H_kv={hkv}: " +
                  " ".join(f"{k}:{x:.2f}" for k, x in points))
        ax.axhline(args.goal, color="0.3", ls=(0, (6, 4)), lw=1.5)
        ax.set_xscale("log", base=2)
        ax.annotate(f"goal: {args.goal:.0%} of the read", (1.0, args.goal), xycoords=("axes fraction", "data"),
                    xytext=(-6, -18), textcoords="offset points", ha="right", fontsize=13, color="0.3")
        ax.set_xlabel("cached keys N_k (log scale)")
        ax.set_title(f"{nq} query row{'s' if nq > 1 else ''} a sequence")
        # At least up to 1.05; a decode measured faster than the read (a small cache, where the
        # read too is a few waves and a launch) stays on the page.
        ax.set_ylim(0, max(1.05, 0.05 + max(x for p in panels for pts in data[p].values() for _, x in pts)))
        ax.grid(True, which="major", alpha=0.3)
    axes[0][0].set_ylabel("time to read K and V once / decode time")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=13, frameon=False)
    gpu = next((r["gpu"] for r in rows if r.get("gpu")), "GPU")
    fig.suptitle(f"Chapter 11 ({args.variant}) on the {gpu}: d = 128, bf16; K and V read once is 1.0")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    fig.savefig(args.out, metadata=PNG_META)
    print(f"plot_decode: wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
