#!/usr/bin/env python3
"""Turns a results folder (tour.csv, traffic.csv, ceilings.csv) into the tutorial's four
figures:

  staircase.png    forward time per chapter/variant (log) and speedup over chapter 01
  bytes_vs_n.png   DRAM bytes per pass vs N: the model as lines, Nsight Compute as points
  roofline.png     the GPU's measured ceilings with every kernel placed on them
  memory_vs_n.png  peak extra device memory vs N (chapter 01, chapter 04, the backwards)

Usage: python3 plots/make_plots.py RESULTS_DIR OUT_DIR      (e.g. plots/results/h200 plots/figures)
       cmake --build build --target plots                    (the same, for the committed CSVs)

A missing or malformed CSV stops it with one line naming the file and line (exit 1). Data
that is merely absent (no measured traffic yet) leaves a note inside the figure instead.
"""
import argparse
import math
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_csv  # noqa: E402

import matplotlib  # noqa: E402

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

# 9 inches at 100 dots per inch: 900 pixels, the width a README shows, so text is drawn at
# the size it is read at (10-11 pt ≈ 14 px).
WIDTH_IN, DPI = 9.0, 100
# The staircase's sizes (the two headline N) and the head dimension every figure
# uses: d = 64 is what all of chapters 01-05 support.
STAIR_N = (4096, 16384)
HEAD_DIM = 64
# The roofline places kernels at this N (B=4, H=32: the papers' benchmark shape), or at the
# largest measured N below it when it is absent.
ROOFLINE_N = 4096
PALETTE = plt.get_cmap("tab10").colors
LINESTYLES = ["-", "--", ":", "-."]
PNG_META = {"Software": None}  # no matplotlib version in the file: re-runs give equal bytes


def chapter_color(chapter):
    """One colour per chapter, stable across figures."""
    return PALETTE[int(chapter) % len(PALETTE)] if chapter.isdigit() else PALETTE[-1]


def plain_log_labels(axis):
    """Tick labels '200' instead of '2×10²' on a log axis (readers compare plain numbers)."""
    fmt = FuncFormatter(lambda v, _: f"{v:g}")
    axis.set_major_formatter(fmt)
    axis.set_minor_formatter(fmt)


def human_bytes(v, _=None):
    """'34 GB', '512 MB': decimal units, as the programs print them."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if v >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:g} B"


def n_axis(ax, ns):
    """Log2 axis for N with the measured N as plain tick labels."""
    ax.set_xscale("log", base=2)
    if ns:
        ax.set_xticks(sorted(ns), [str(n) for n in sorted(ns)])
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    ax.set_xlabel("sequence length N (tokens, log scale)")


def note(ax, text, y=0.5):
    """A grey sentence inside the axes, for data that is not there yet."""
    ax.text(0.5, y, text, transform=ax.transAxes, ha="center", va="center", fontsize=10,
            color="0.35", wrap=True,
            bbox=dict(boxstyle="round", facecolor="0.96", edgecolor="0.8"))


def latest(rows, key):
    """Keeps the last row for each key (a re-run appended later wins)."""
    out = {}
    for r in rows:
        out[key(r)] = r
    return list(out.values())


def shape_text(rows):
    """'B=4, H=32' when the rows share one, else the fixed token count, else ''."""
    shapes = {(r["batch"], r["heads"]) for r in rows}
    if len(shapes) == 1:
        b, h = shapes.pop()
        return f"B={b}, H={h}"
    tokens = {r["batch"] * r["seq_len"] for r in rows}
    heads = {r["heads"] for r in rows}
    if len(tokens) == 1 and len(heads) == 1:
        return f"B·N = {tokens.pop()} tokens, H={heads.pop()}"
    return ""


def plot_staircase(tour, gpu, path):
    fig, axes = plt.subplots(1, len(STAIR_N), figsize=(WIDTH_IN, 5.2), sharey=True)
    fwd = [r for r in tour if r["pass"] == "forward" and r["head_dim"] == HEAD_DIM
           and not r["causal"] and r["ms"] is not None]
    for ax, n in zip(axes, STAIR_N):
        at_n = [r for r in fwd if r["seq_len"] == n]
        # One problem per panel: the (B, H) most rows were timed at (the tour's shape).
        shapes = [(r["batch"], r["heads"]) for r in at_n]
        shape = max(set(shapes), key=shapes.count) if shapes else None
        rows = latest([r for r in at_n if (r["batch"], r["heads"]) == shape],
                      key=lambda r: (r["chapter"], r["variant"]))
        rows.sort(key=lambda r: (r["chapter"], r["ms"] is None, -(r["ms"] or 0)))
        ax.set_title(f"N = {n}" + (f" ({shape_text(rows)})" if rows else ""), fontsize=11)
        ax.set_yscale("log")
        ax.grid(axis="y", which="both", alpha=0.3)
        if not rows:
            ax.set_xticks([])
            note(ax, f"no measured forward rows\nat N={n}, d={HEAD_DIM}\nin tour.csv yet")
            continue
        base = [r["ms"] for r in rows if r["chapter"] == "01"]
        x = range(len(rows))
        ax.bar(x, [r["ms"] for r in rows], color=[chapter_color(r["chapter"]) for r in rows],
               edgecolor="0.2", linewidth=0.5)
        for i, r in zip(x, rows):
            s = r["speedup_vs_ch01"] or (base[0] / r["ms"] if base else None)
            label = f"{s:.1f}×" if s else "n/a"
            ax.annotate(label, (i, r["ms"]), xytext=(0, 3), textcoords="offset points",
                        ha="center", va="bottom", fontsize=9)
        tilt = 30 if len(rows) > 6 else 0  # two-line labels fit flat up to six bars per panel
        ax.set_xticks(list(x), [f"{r['chapter']}\n{r['variant']}" for r in rows], fontsize=8,
                      rotation=tilt, ha="right" if tilt else "center", rotation_mode="anchor")
        ax.margins(y=0.15)
        plain_log_labels(ax.yaxis)
    axes[0].set_ylabel("forward time per call (ms, log scale)")
    fig.suptitle(f"The staircase on {gpu}: forward, d={HEAD_DIM}, non-causal, float32\n"
                 "bars: median time; labels: speedup over chapter 01", fontsize=12)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI, metadata=PNG_META)
    plt.close(fig)


def plot_bytes_vs_n(traffic, gpu, path):
    rows = [r for r in traffic if r["head_dim"] == HEAD_DIM and not r["causal"]]
    passes = sorted({results_csv.traffic_key(r)[2] for r in rows}, reverse=True) or ["forward"]
    fig, axes = plt.subplots(1, len(passes), figsize=(WIDTH_IN, 5.4), squeeze=False)
    for ax, pss in zip(axes[0], passes):
        # Sum each (chapter, variant)'s kernels at each N.
        model, measured, complete = defaultdict(float), defaultdict(float), defaultdict(lambda: True)
        for r in rows:
            ch, var, p = results_csv.traffic_key(r)
            if p != pss:
                continue
            k = (ch, var, r["seq_len"])
            model[k] += results_csv.dram_bytes(r, "model") or 0
            m = results_csv.dram_bytes(r, "measured")
            measured[k] += m or 0
            complete[k] &= m is not None
        lines = sorted({(ch, var) for ch, var, _ in model})
        nth = defaultdict(int)
        for ch, var in lines:
            style = LINESTYLES[nth[ch] % len(LINESTYLES)]
            nth[ch] += 1
            ns = sorted(n for c, v, n in model if (c, v) == (ch, var))
            ax.plot(ns, [model[(ch, var, n)] for n in ns], style, color=chapter_color(ch),
                    label=f"{ch} {var}")
            mn = [n for n in ns if complete[(ch, var, n)]]
            ax.plot(mn, [measured[(ch, var, n)] for n in mn], "o", color=chapter_color(ch),
                    markersize=6, markeredgecolor="0.15")
        n_axis(ax, {n for _, _, n in model})
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(human_bytes))
        ax.grid(which="both", alpha=0.3)
        ax.set_title(f"{pss} pass", fontsize=11)
        if not lines:
            note(ax, f"no {pss} rows at d={HEAD_DIM} in traffic.csv yet")
            continue
        if not any(complete[k] for k in model):
            note(ax, "no Nsight Compute measurements yet:\nlines are the model only", y=0.15)
        handles, labels = ax.get_legend_handles_labels()
        handles += [Line2D([], [], color="0.3", label="model (line)"),
                    Line2D([], [], color="0.3", marker="o", linestyle="", label="measured (point)")]
        ax.legend(handles=handles, fontsize=8, loc="upper left", ncol=1 if len(handles) < 8 else 2)
    axes[0][0].set_ylabel("DRAM bytes read + written per call (log scale)")
    sub = shape_text(rows) if rows else ""
    fig.suptitle(f"Bytes through device memory vs N on {gpu}\nd={HEAD_DIM}, non-causal"
                 + (f", {sub}" if sub else "")
                 + ": N² terms grow with N, N·d terms stay flat", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI, metadata=PNG_META)
    plt.close(fig)


def plot_roofline(traffic, ceilings, gpu, path):
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 6.0))
    rows = [r for r in traffic if r["head_dim"] == HEAD_DIM and not r["causal"]]
    sizes = sorted({r["seq_len"] for r in rows})
    n = ROOFLINE_N if ROOFLINE_N in sizes else (max([s for s in sizes if s <= ROOFLINE_N] or sizes or [0]))
    rows = [r for r in rows if r["seq_len"] == n]
    points, zero_flop, untimed = [], [], 0
    for r in rows:
        measured = results_csv.dram_bytes(r, "measured")
        dram = measured if measured else results_csv.dram_bytes(r, "model")
        if r["measured_ms"] is None:
            untimed += 1
            continue
        if not r["flops"] or not dram:
            zero_flop.append(r)
            continue
        points.append((r, r["flops"] / dram, r["flops"] / (r["measured_ms"] * 1e-3) / 1e12,
                       measured is not None))
    # The ceilings: bandwidth × intensity for memory-bound kernels, flat lines for compute.
    # (fp16's rate is within a few percent of bf16's, so only bf16 is drawn.)
    xs = [p[1] for p in points] or [1.0]
    ys = [p[2] for p in points]
    lo, hi = min(min(xs) / 4, 0.05), max(max(xs) * 4, 2000)
    bw = ceilings.get("copy_bandwidth")
    flat = [(name, ceilings[name]) for name in ("fp32_matmul", "bf16_matmul") if name in ceilings]
    top = max([v for _, (v, _) in flat] + ys + [1.0]) * 8  # room for the notes above
    bottom = min(ys + [top / 1e4]) / 3
    if bw:
        ax.plot([lo, hi], [bw[0] * lo, bw[0] * hi], color="0.2", lw=1.5)
        roof = min([v for _, (v, _) in flat] or [top])
        x_label = max(lo * 8, math.sqrt(bottom * roof) / bw[0])  # half-way up to the roof
        ax.annotate(f"copy bandwidth\n{bw[0]:.2f} {bw[1]}", (x_label, bw[0] * x_label),
                    fontsize=9, xytext=(-6, 4), textcoords="offset points", ha="right")
    for name, (v, unit) in flat:
        ax.axhline(v, color="0.2", lw=1.2, ls="-" if name == "fp32_matmul" else "--")
        label = "fp32 (no TF32)" if name == "fp32_matmul" else name.split("_")[0]
        ax.annotate(f"{label} matrix product {v:.0f} {unit}", (hi, v), ha="right",
                    va="bottom", fontsize=9, xytext=(-4, 2), textcoords="offset points")
    if bw and "fp32_matmul" in ceilings:
        ridge = ceilings["fp32_matmul"][0] / bw[0]
        ax.axvline(ridge, color="0.6", lw=0.8, ls=":")
        ax.annotate(f"fp32 ridge {ridge:.0f} FLOP/B", (ridge, bottom * 3), fontsize=8,
                    color="0.4", rotation=90, ha="right", va="bottom")
    seen = set()
    for r, x, y, measured in points:
        c = chapter_color(r["chapter"])
        label = f"chapter {r['chapter']}" if r["chapter"] not in seen else None
        seen.add(r["chapter"])
        ax.plot(x, y, "o" if measured else "s", color=c if measured else "none",
                markeredgecolor=c, markersize=7, label=label)
    # Kernels that land on (nearly) the same spot share one label instead of overprinting.
    clusters = []
    for r, x, y, _ in sorted(points, key=lambda p: (p[1], p[2])):
        name = f"{r['chapter']} {r['kernel']}" + (f" ({r['variant']})" if r.get("variant") else "")
        for cl in clusters:
            if abs(math.log10(x / cl["x"])) < 0.12 and abs(math.log10(y / cl["y"])) < 0.12:
                if name not in cl["names"]:
                    cl["names"].append(name)
                break
        else:
            clusters.append({"x": x, "y": y, "names": [name]})
    for cl in clusters:
        ax.annotate("\n".join(cl["names"]), (cl["x"], cl["y"]), xytext=(6, 0),
                    textcoords="offset points", fontsize=7, va="center", color="0.15")
    ax.set_ylim(bottom, top)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.grid(which="both", alpha=0.25)
    ax.set_xlabel("arithmetic intensity (FLOP per DRAM byte, log scale)")
    ax.set_ylabel("achieved TFLOP/s (log scale)")
    sub = shape_text(rows) if rows else ""
    where = f"every kernel at N={n}, d={HEAD_DIM}" + (f" ({sub})" if sub else "") if rows else "no kernels yet"
    ax.set_title(f"Roofline of the {gpu} with {where}\nceilings measured; points: Nsight Compute"
                 " bytes and kernel time (squares: model bytes)", fontsize=11)
    msgs = []
    if not ceilings:
        msgs.append("ceilings.csv has no rows")
    if not rows:
        msgs.append(f"no kernels at d={HEAD_DIM} in traffic.csv yet")
    elif untimed:
        msgs.append(f"{untimed} kernel(s) without a measured time are not placed")
    if zero_flop:
        msgs.append("no FLOPs counted (memory only): " + ", ".join(
            f"{r['chapter']} {r['kernel']}" for r in zero_flop[:6]))
    if msgs:
        ax.text(0.01, 0.99, "\n".join(msgs), transform=ax.transAxes, ha="left", va="top",
                fontsize=8, color="0.3",
                bbox=dict(boxstyle="round", facecolor="0.97", edgecolor="0.8"))
    if points:
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=DPI, metadata=PNG_META)
    plt.close(fig)


def plot_memory_vs_n(tour, gpu, path):
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 5.2))
    rows = [r for r in tour if r["head_dim"] == HEAD_DIM and not r["causal"]
            and ((r["pass"] == "forward" and r["chapter"] in ("01", "04"))
                 or r["pass"] == "backward") and r.get("extra_mem_bytes") is not None]
    rows = latest(rows, key=lambda r: (r["chapter"], r["variant"], r["pass"], r["seq_len"]))
    series = defaultdict(list)
    for r in rows:
        series[(r["chapter"], r["variant"], r["pass"])].append(r)
    # Log scale, so the N² workspaces (GB) and the N-sized ones (MB) both show their slope;
    # a kernel that needs nothing extra (0 B) is drawn on a floor line a decade lower.
    nonzero = [r["extra_mem_bytes"] for r in rows if r["extra_mem_bytes"] > 0]
    floor = min(nonzero + [1e6]) / 10
    nth = defaultdict(int)
    for (ch, var, pss), rs in sorted(series.items()):
        rs.sort(key=lambda r: r["seq_len"])
        style = LINESTYLES[nth[ch] % len(LINESTYLES)]
        nth[ch] += 1
        ns = [r["seq_len"] for r in rs]
        ys = [max(r["extra_mem_bytes"], floor) for r in rs]
        ax.plot(ns, ys, style, marker="o", color=chapter_color(ch), label=f"{ch} {var} ({pss})")
        last = rs[-1]["extra_mem_bytes"]  # the value at the largest N, written beside it
        ax.annotate(human_bytes(last) if last > 0 else "0 B", (ns[-1], ys[-1]), xytext=(6, 0),
                    textcoords="offset points", fontsize=8, va="center", color=chapter_color(ch))
    n_axis(ax, {r["seq_len"] for r in rows})
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(human_bytes))
    if rows:
        ax.axhline(floor, color="0.7", lw=0.8, ls=":")
        ax.annotate("0 B (nothing extra)", (0.01, floor), xycoords=("axes fraction", "data"),
                    xytext=(0, 3), textcoords="offset points", fontsize=8, color="0.4")
        ax.set_xlim(min(r["seq_len"] for r in rows) / 1.4, max(r["seq_len"] for r in rows) * 2)
    ax.set_ylabel("extra device memory (bytes, log scale)")
    ax.grid(which="both", alpha=0.3)
    sub = shape_text(rows) if rows else ""
    ax.set_title(f"Device memory beyond the inputs and outputs on {gpu}, d={HEAD_DIM}, "
                 "non-causal" + (f"\n({sub})" if sub else ""), fontsize=11)
    if series:
        ax.legend(fontsize=9, loc="best")
    else:
        note(ax, "no measured extra_mem_bytes for chapter 01, chapter 04\n"
                 "or a backward pass in tour.csv yet")
    fig.tight_layout()
    fig.savefig(path, dpi=DPI, metadata=PNG_META)
    plt.close(fig)


FIGURES = ("staircase.png", "bytes_vs_n.png", "roofline.png", "memory_vs_n.png")


def gpu_name(tour, results_dir):
    """The GPU named in tour.csv's gpu column, else the results folder's name ('H200')."""
    names = [r.get("gpu", "") for r in tour if r.get("gpu")]
    return names[-1] if names else os.path.basename(os.path.normpath(results_dir)).upper()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results_dir", help="folder with tour.csv, traffic.csv, ceilings.csv")
    ap.add_argument("out_dir", help="folder for the PNGs (created)")
    args = ap.parse_args(argv)
    try:
        tour, traffic, ceilings = results_csv.read_results(args.results_dir)
    except results_csv.CsvError as e:
        print(f"make_plots: error: {e}", file=sys.stderr)
        return 1
    gpu = gpu_name(tour, args.results_dir)
    os.makedirs(args.out_dir, exist_ok=True)
    out = [os.path.join(args.out_dir, f) for f in FIGURES]
    plot_staircase(tour, gpu, out[0])
    plot_bytes_vs_n(traffic, gpu, out[1])
    plot_roofline(traffic, results_csv.ceilings_dict(ceilings), gpu, out[2])
    plot_memory_vs_n(tour, gpu, out[3])
    for p in out:
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
