#!/usr/bin/env python3
"""Turns a results folder (tour.csv, traffic.csv, ceilings.csv, tc_variants.csv, probes.csv,
ch07_anchors.csv or vs_pytorch.csv, and anchors.csv if there is one) into the tutorial's
four figures:

  staircase.png    time per chapter/variant (log), DRAM bytes and speedup: the forward in
                   float32 on the CUDA cores (chapters 01-05, over chapter 01), the forward
                   in bf16 on the tensor cores (chapters 06-07 at N=16384, over chapter 06's
                   grid_half), the backward in bf16 on the tensor cores (chapter 08 at
                   N=16384, over chapter 05's float32 flash backward)
  bytes_vs_n.png   DRAM bytes per pass vs N: the model as lines, Nsight Compute as points
  roofline.png     the GPU's measured ceilings (mma.sync from probes.csv among them) with the
                   float32 kernels, the bf16 tensor-core forwards and chapter 08's fastest
                   bf16 backward placed on them
  memory_vs_n.png  peak extra device memory vs N (chapter 01, chapter 04, the backwards:
                   chapter 05's float32 ones and chapter 08's bf16 one)

Usage: python3 plots/make_plots.py RESULTS_DIR OUT_DIR      (e.g. plots/results/h200 plots/figures)
       cmake --build build --target plots                    (the same, for the committed CSVs)

A missing or malformed CSV stops it with one line naming the file and line (exit 1). Data
that is merely absent (no measured traffic yet) leaves a note inside the figure instead.
anchors.csv (PyTorch on the same GPU) is optional: the staircase shows it for scale.
vs_pytorch.csv (scripts/compare_pytorch.py) is optional too: when present, the bf16 row's
PyTorch lines come from it (the same run), each backend falling back to ch07_anchors.csv,
then anchors.csv (the backward row: vs_pytorch.csv, then ch07_anchors.csv); without it,
ch07_anchors.csv must exist. Prints one summary line per staircase row and for the
roofline: what was drawn, from which file.
"""
import argparse
import math
import os
import sys
import textwrap
from collections import defaultdict
from typing import Callable, NamedTuple

import results_csv

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

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
# The chapters whose kernels are float32 on the CUDA cores: the roofline's traffic.csv points.
FLOAT32_CHAPTERS = ("01", "02", "03", "04", "05")
# The tensor-core forwards go on it at this N (16384 tokens, B=1), as whole calls: ◆.
ROOFLINE_TC_N = 16384
TC_MARKER = "D"
# Two points of the roofline closer than this (in decades, on both axes) share one label.
SAME_SPOT_DECADES = 0.15
LABEL_PT = 8  # the roofline's point labels
PALETTE = plt.get_cmap("tab10").colors
LINESTYLES = ["-", "--", ":", "-."]
PASS_MARKER = {"forward": "o", "backward": "^"}
PNG_META = {"Software": None}  # no matplotlib version in the file: re-runs give equal bytes
# PyTorch's float32 paths in anchors.csv, drawn on the staircase for scale.
ANCHORS = (("torch-naive(3 kernels)", "PyTorch float32, three kernels (cuBLAS, no TF32)", ":"),
           ("mem_efficient", "PyTorch float32 SDPA, memory-efficient (tensor cores, 3×TF32)", "--"))
# The staircase's second row: the tensor-core chapters in bf16 at one N, both head dimensions,
# the variants in the chapters' order, each bar's speedup over the unfused pipeline.
TC_DTYPE = "bf16"
STAIR_TC_N = 16384
STAIR_TC_DIMS = (64, 128)
STAIR_TC = (("06", "grid_f32"), ("06", "grid_half"), ("07", "plain"), ("07", "padded"),
            ("07", "swizzled"), ("07", "async"), ("07", "tuned"), ("07", "lazy_rescale"),
            ("09", "fastest"))
# Chapter 09 (Hopper's instructions) on that row: its tour rows (the chapter's fastest), the
# variants of chapters 06-07 coming from tc_variants.csv.
TC_TOUR_CHAPTERS = ("09",)
TC_BASELINE = ("06", "grid_half")
# PyTorch's bf16 paths on that row: vs_pytorch.csv's impl, the anchors' backend, a short
# name, the legend's label, the line style (dotted: three kernels, as in the float32 row).
BF16_ANCHORS = (("torch_naive", "torch-naive(3 kernels)", "three kernels",
                 "PyTorch bf16, three kernels (matmul, softmax, matmul)", ":"),
                ("torch_flash", "flash(FA2)", "FlashAttention-2",
                 "PyTorch bf16 SDPA, FlashAttention-2", "--"),
                ("torch_cudnn", "cudnn", "cuDNN", "PyTorch bf16 SDPA, cuDNN", "-."))
# The staircase's third row: chapter 08's backward in bf16 at the same N and head dimensions,
# its variants in the chapter's order (the tile-shape variants and `fastest`, split_tail's
# code, left out), after chapter 05's float32 flash backward (tour.csv), the baseline of its
# speedups; PyTorch's FlashAttention-2 and cuDNN backwards for scale (vs_pytorch.csv's
# backward rows, else ch07_anchors.csv's bwd_ms).
STAIR_BWD = (("08", "plain"), ("08", "wide_kv"), ("08", "async"), ("08", "dq_pass"),
             ("08", "warp_tiles"), ("08", "hoisted"), ("08", "spread_atomics"), ("08", "pipelined_dk"),
             ("08", "late_copy"), ("08", "dq_pointer"), ("08", "split_tail"))
BWD_BASELINE = ("05", "flash")  # float32, CUDA cores, from tour.csv
BWD_ANCHORS = tuple(a for a in BF16_ANCHORS if a[0] != "torch_naive")
# The roofline's tensor-core backward: chapter 08's `fastest` row (else its quickest STAIR_BWD
# variant), as a whole call like the forwards, one marker per head dimension.
TC_BWD_CHAPTER = "08"
TC_BWD_MARKER = "v"


def chapter_color(chapter):
    """One colour per chapter, stable across figures (tab10's grey, its 8th, goes to no
    chapter: chapter 07 gets the blue no chapter 00 uses)."""
    if not chapter.isdigit():
        return PALETTE[-1]
    c = int(chapter)
    return PALETTE[0] if c == 7 else PALETTE[c % len(PALETTE)]


def text_on(color):
    """White on the dark chapter colours, near-black on the light ones (chapter 08's olive):
    the text inside a bar stays readable."""
    r, g, b = matplotlib.colors.to_rgb(color)
    lum = sum(w * (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4)
              for w, c in zip((0.2126, 0.7152, 0.0722), (r, g, b)))
    return "white" if lum < 0.42 else "0.1"


def log_ticks_125(axis):
    """Log axis ticks at 1, 2 and 5 of each decade, labelled as plain numbers ('200', not
    '2×10²'), and no unlabelled clutter in between."""
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_minor_locator(LogLocator(base=10, subs=(3.0, 4.0, 6.0, 7.0, 8.0, 9.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


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


def merged_series(series):
    """{(chapter, pass, values): [variants]}: variants of one chapter whose curves are equal
    (e.g. every chapter 04 variant moves the same bytes) share one line and one label."""
    out = {}
    for (ch, var, pss), points in sorted(series.items(), key=lambda kv: kv[0][0]):  # stable
        key = (ch, pss, tuple(sorted(points.items())))
        out.setdefault(key, []).append(var)
    return out


def variants_label(ch, variants, all_variants):
    if len(variants) > 3 and set(variants) == set(all_variants):
        return f"{ch} (all {len(variants)} variants)"
    return f"{ch} " + ", ".join(variants)


# ---------------------------------------------------------------- 1. the staircase

def anchor_ms(anchors, n, shape):
    """{label: (ms, style)} of PyTorch's float32 forward at this problem (d=64, non-causal)."""
    out = {}
    for backend, label, style in ANCHORS:
        for a in anchors:
            if (a["backend"] == backend and a["dtype"] == "float32" and not a["causal"]
                    and int(a["N"]) == n and int(a["d"]) == HEAD_DIM and shape
                    and (int(a["B"]), int(a["H"])) == shape and a["fwd_ms"]):
                out[label] = (a["fwd_ms"], style)
    return out


def tc_pytorch_ms(sources, n, d, shape, pass_="forward", backends=BF16_ANCHORS):
    """{short name: (ms, style, file)} of PyTorch's bf16 forward (or backward: pass_) at this
    problem (non-causal), each of `backends` from the first of `sources` [(file name, rows)]
    that has it: vs_pytorch.csv's same-run rows first, then ch07_anchors.csv, then
    anchors.csv (bwd_ms for the backward)."""
    out = {}
    column = "fwd_ms" if pass_ == "forward" else "bwd_ms"
    for impl, backend, short, _, style in backends:
        for name, rows in sources:
            for r in rows or []:
                if name == "vs_pytorch.csv":
                    hit = (r["impl"] == impl and r["pass"] == pass_ and r["dtype"] == TC_DTYPE
                           and not r["causal"] and r["seq_len"] == n and r["head_dim"] == d
                           and (r["batch"], r["heads"]) == shape and r["ms"])
                    ms = r["ms"]
                else:
                    hit = (r["backend"] == backend and r["dtype"] in ("bfloat16", TC_DTYPE)
                           and not r["causal"] and int(r["N"]) == n and int(r["d"]) == d
                           and (int(r["B"]), int(r["H"])) == shape and r[column])
                    ms = r[column]
                if hit:
                    out[short] = (ms, style, name)  # a later row of the same file wins
            if short in out:
                break
    return out


def main_shape(rows):
    """The (B, H) most rows were timed at (the tour's shape), or None."""
    shapes = [(r["batch"], r["heads"]) for r in rows]
    return max(sorted(set(shapes)), key=shapes.count) if shapes else None


def ms_text(ms, narrow=False):
    """'2567 ms', '9.42 ms'; narrow bars get the unit on a line of its own."""
    value = f"{ms:.0f}" if ms >= 100 else f"{ms:.3g}"
    return value + ("\nms" if narrow else " ms")


def gb_text(b, narrow=False):
    """DRAM bytes in GB whatever their size, so that bars compare at a glance: '207 GB',
    '0.54 GB' (narrow bars: the unit on a line of its own)."""
    v = b / 1e9
    return (f"{v:.0f}" if v >= 10 else f"{v:.2g}") + ("\nGB" if narrow else " GB")


def draw_bars(ax, rows, speedups):
    """One row's bars in one panel: the time inside each bar's foot and the DRAM bytes the
    model counts inside its top (white), the speedup above it, chapter and variant below;
    the staircase's look for both rows."""
    x = range(len(rows))
    narrow = len(rows) > 6  # more bars than fit "9.42 ms" on one line
    crowded = len(rows) > 9  # more than fit "7.9×" in 10 pt side by side, or flat labels
    ax.bar(x, [r["ms"] for r in rows], color=[chapter_color(r["chapter"]) for r in rows],
           edgecolor="0.2", linewidth=0.5, width=0.7, zorder=2)
    for i, r, s in zip(x, rows, speedups):
        # The text inside a bar sits on the bar's colour, over any PyTorch line crossing it.
        inside = dict(color=text_on(chapter_color(r["chapter"])), zorder=4, linespacing=1.0,
                      bbox=dict(boxstyle="square,pad=0.1", facecolor=chapter_color(r["chapter"]),
                                edgecolor="none"))
        # Above the bar: the speedup (the headline); inside its foot: the time itself.
        ax.annotate(f"{s:.1f}×" if s else "n/a", (i, r["ms"]), xytext=(0, 3),
                    textcoords="offset points", ha="center", va="bottom", fontsize=8 if crowded else 10,
                    fontweight="bold", zorder=4,
                    bbox=dict(boxstyle="square,pad=0.05", facecolor="white",
                              edgecolor="none", alpha=0.85))
        ax.annotate(ms_text(r["ms"], narrow), (i, 0), xycoords=("data", "axes fraction"),
                    xytext=(0, 4), textcoords="offset points", ha="center", va="bottom",
                    fontsize=8, fontweight="bold", **inside)
        if r.get("model_bytes"):  # inside its top: what it moves through DRAM
            ax.annotate(gb_text(r["model_bytes"], narrow), (i, r["ms"]), xytext=(0, -3),
                        textcoords="offset points", ha="center", va="top", fontsize=8, **inside)
    # Two-line labels fit flat up to six bars per panel, tilted up to nine; past that, one
    # line each, steeper.
    tilt = 60 if crowded else 30 if len(rows) > 6 else 0
    sep = " " if crowded else "\n"
    names = [r["variant"].replace("\n", sep) for r in rows]
    ax.set_xticks(list(x), [f"{r['chapter']}{sep}{n}" for r, n in zip(rows, names)], fontsize=9,
                  rotation=tilt, ha="right" if tilt else "center", rotation_mode="anchor")
    ax.set_xlabel("chapter and variant")


def row_legend(sub, seen, title):
    """The legend shared by a row's panels, under them: one line per PyTorch backend."""
    handles = [Line2D([], [], color="0.15", ls=style, lw=1.3, label=f"{label}: " + ", ".join(values))
               for label, (style, values) in seen.items()]
    sub.legend(handles=handles, loc="outside lower center", ncol=1, fontsize=9, frameon=False,
               title=title, title_fontsize=9)


def one_problem(rows, order):
    """A panel's rows at the (B, H) most of them were timed at, the latest of each variant,
    sorted by `order` (a sort key); and that shape (None: no rows)."""
    shape = main_shape(rows)  # one problem per panel
    kept = latest([r for r in rows if (r["batch"], r["heads"]) == shape],
                  key=lambda r: (r["chapter"], r["variant"]))
    kept.sort(key=order)
    return kept, shape


def panel_head(ax, heading, rows, missing):
    """A staircase panel's title (`heading` and the shape its rows share), log time axis and
    grid; without rows, the sentence `missing` where the bars would be. Returns whether
    there are bars to draw."""
    ax.set_title(heading + (f", {shape_text(rows)}" if rows else ""), fontsize=11)
    ax.set_yscale("log")
    ax.grid(axis="y", which="major", alpha=0.35)
    if not rows:
        ax.set_xticks([])
        note(ax, missing)
    return bool(rows)


def staircase_float32(sub, tour, anchors, gpu):
    """The float32 row (chapters 01-05, CUDA cores): d=64 at STAIR_N, speedup over chapter 01.
    Returns a one-line summary of what it drew."""
    axes = sub.subplots(1, len(STAIR_N), sharey=True)
    fwd = [r for r in tour if r["pass"] == "forward" and r["head_dim"] == HEAD_DIM
           and not r["causal"] and r["ms"] is not None and r["dtype"] in ("float32", "")]
    seen_anchor, bottoms, drawn = {}, [], []
    for ax, n in zip(axes, STAIR_N):
        rows, shape = one_problem([r for r in fwd if r["seq_len"] == n],
                                  lambda r: (r["chapter"], -r["ms"]))
        if not panel_head(ax, f"N = {n}", rows,
                          f"no measured forward rows\nat N={n}, d={HEAD_DIM}\nin tour.csv yet"):
            continue
        base = [r["ms"] for r in rows if r["chapter"] == "01"]
        draw_bars(ax, rows, [r["speedup_vs_ch01"] or (base[0] / r["ms"] if base else None)
                             for r in rows])
        drawn.append(f"N={n}: {len(rows)} bars")
        found = anchor_ms(anchors, n, shape)
        for label, (ms, style) in found.items():
            ax.axhline(ms, color="0.15", ls=style, lw=1.3, zorder=3)
            seen_anchor.setdefault(label, (style, []))[1].append(f"{ms:.3g} ms at N={n}")
        bottoms.append(min(r["ms"] for r in rows) / 3)  # the shortest bar tall enough for its time
        missing = [label.split(" (")[0] for _, label, _ in ANCHORS
                   if anchors and label not in found]
        if missing:  # e.g. PyTorch's three kernels ran out of memory at N=16384
            ax.text(0.98, 0.98, "no PyTorch row at this N:\n" + "\n".join(missing),
                    transform=ax.transAxes, ha="right", va="top", fontsize=8, color="0.3")
    if bottoms:  # log bars start at the axis: its bottom sets how tall they look
        tops = [r["ms"] for r in fwd if r["seq_len"] in STAIR_N]
        axes[0].set_ylim(min(bottoms), max(tops) * 3)  # room above for the speedup labels
    log_ticks_125(axes[0].yaxis)
    axes[0].set_ylabel("forward time per call (ms, log scale)")
    sub.suptitle(f"The staircase on the {gpu}: attention forward, float32, d={HEAD_DIM}, "
                 "non-causal\ninside the bars: median time (foot), DRAM bytes of the model (top); "
                 "above: speedup over chapter 01",
                 fontsize=12)
    if seen_anchor:
        row_legend(sub, seen_anchor, "for scale, measured on the same GPU:")
    return "float32 (tour.csv): " + ("; ".join(drawn) or "no bars")


class TcPass(NamedTuple):
    """What a tensor-core row takes from its pass: the pass ("forward" or "backward"), its
    variants in the order drawn, baseline(d, shape, rows) -> (bars, ms) (a panel's bars: its
    rows, after any bar from another file; the time its speedups are over, None when none is
    measured), what a panel without that time says (lines), what the summary adds with one,
    and PyTorch's backends for scale (BF16_ANCHORS' rows)."""
    pass_: str
    order: tuple
    baseline: Callable
    no_baseline: list
    with_baseline: str
    backends: tuple


def pytorch_lines(ax, found, labels, d, seen, files):
    """PyTorch's times ({short name: (ms, style, file)}) as lines across a tensor-core panel,
    each noted in `seen` (the legend's, by `labels`) and its file in `files`."""
    for short, (ms, style, name) in found.items():
        ax.axhline(ms, color="0.15", ls=style, lw=1.3, zorder=3)
        seen.setdefault(labels[short], (style, []))[1].append((f"{ms:.3g} ms at d={d}", name))
        files.add(name)


def tc_panel_notes(ax, spec, rows, found, base):
    """The top right corner of a tensor-core panel: the variants tc_variants.csv lacks, the
    PyTorch backends no file gives, and the speedups' baseline when it is missing."""
    absent = [f"{ch} {v}" for ch, v in spec.order if (ch, v) not in
              {(r["chapter"], r["variant"]) for r in rows}]
    lacking = [short for _, _, short, _, _ in spec.backends if short not in found]
    text = (["not in tc_variants.csv:"] + absent if absent else []) + \
           (["no PyTorch row here:"] + lacking if lacking else []) + \
           (spec.no_baseline if base is None else [])
    if text:
        ax.text(0.98, 0.98, "\n".join(text), transform=ax.transAxes, ha="right", va="top",
                fontsize=8, color="0.3", zorder=5,
                bbox=dict(boxstyle="square,pad=0.2", facecolor="white", edgecolor="none",
                          alpha=0.85))


def pytorch_legend(sub, seen, files):
    """A tensor-core row's legend: {label: (style, [(value text, file)])}, each backend's
    values with the file they came from (named once when one file gave them all)."""
    if not seen:
        return
    entries = {}
    for label, (style, values) in seen.items():
        names = {name for _, name in values}
        text = (", ".join(v for v, _ in values) + f" ({names.pop()})" if len(names) == 1
                else ", ".join(f"{v} ({name})" for v, name in values))
        entries[label] = (style, [text])
    older = " (anchors.csv: an earlier session)" if "anchors.csv" in files else ""
    row_legend(sub, entries, "for scale, PyTorch on the same GPU, from the file named"
               f"{older}:")


def staircase_tc(sub, tc, spec, sources, title):
    """A tensor-core row: bf16 at N=STAIR_TC_N, one panel per head dimension of
    STAIR_TC_DIMS, spec's pass and variants from tc_variants.csv after its baseline's bars,
    the speedups over that baseline, PyTorch's backends (from the first of `sources` that
    has each) for scale; `title` above. Returns the panels' summaries."""
    axes = sub.subplots(1, len(STAIR_TC_DIMS), sharey=True)
    measured = [r for r in tc if r["pass"] == spec.pass_ and r["dtype"] == TC_DTYPE
                and not r["causal"] and r["seq_len"] == STAIR_TC_N and r["ms"] is not None
                and (r["chapter"], r["variant"]) in spec.order]
    # The legend names the pass unless it is the forward ("PyTorch bf16 SDPA, cuDNN, backward").
    suffix = "" if spec.pass_ == "forward" else f", {spec.pass_}"
    labels = {short: label + suffix for _, _, short, label, _ in spec.backends}
    seen, lows, tops, drawn, files = {}, [], [], [], set()
    for ax, d in zip(axes, STAIR_TC_DIMS):
        rows, shape = one_problem([r for r in measured if r["head_dim"] == d],
                                  lambda r: spec.order.index((r["chapter"], r["variant"])))
        missing = (f"no measured {TC_DTYPE} {spec.pass_} rows\nat N={STAIR_TC_N}, d={d}\n"
                   "in tc_variants.csv yet")
        if not panel_head(ax, f"d = {d}", rows, missing):
            continue
        bars, base = spec.baseline(d, shape, rows)
        draw_bars(ax, bars, [base / r["ms"] if base is not None else None for r in bars])
        found = tc_pytorch_ms(sources, STAIR_TC_N, d, shape, spec.pass_, spec.backends)
        pytorch_lines(ax, found, labels, d, seen, files)
        lows += [ms / 1.5 for ms, _, _ in found.values()] + [min(r["ms"] for r in bars) / 3]
        tops += [ms for ms, _, _ in found.values()] + [r["ms"] for r in bars]
        tc_panel_notes(ax, spec, rows, found, base)
        pt = ", ".join(f"{short} {ms:.3g} ms ({name})" for short, (ms, _, name) in found.items())
        drawn.append(f"d={d}: {len(rows)} bars"
                     + (spec.with_baseline if base is not None else "")
                     + (f"; PyTorch {pt}" if pt else ""))
    if lows:
        axes[0].set_ylim(min(lows), max(tops) * 3)
    log_ticks_125(axes[0].yaxis)
    axes[0].set_ylabel(f"{spec.pass_} time per call (ms, log scale)")
    sub.suptitle(title, fontsize=12)
    pytorch_legend(sub, seen, files)
    return drawn


def staircase_bf16(sub, tc, sources, gpu):
    """The bf16 row (chapters 06 and 07, tensor cores): N=STAIR_TC_N, d=64 and d=128, bars
    from tc_variants.csv in STAIR_TC's order, speedup over TC_BASELINE (the unfused
    pipeline), PyTorch's bf16 backends for scale. Returns a one-line summary."""
    def baseline(d, shape, rows):
        """The unfused pipeline is one of the row's own bars."""
        base = [r["ms"] for r in rows if (r["chapter"], r["variant"]) == TC_BASELINE]
        return rows, (base[0] if base else None)

    spec = TcPass("forward", STAIR_TC, baseline,
                  [f"no {TC_BASELINE[0]} {TC_BASELINE[1]}: no speedups"], "", BF16_ANCHORS)
    drawn = staircase_tc(
        sub, tc, spec, sources,
        f"The same on the tensor cores: {TC_DTYPE}, N={STAIR_TC_N}, non-causal; "
        "unfused (06), fused (07), Hopper (09)\ninside the bars: time and DRAM bytes, as above; "
        f"above: speedup over {TC_BASELINE[0]} {TC_BASELINE[1]} (unfused)")
    return f"{TC_DTYPE} (tc_variants.csv): " + ("; ".join(drawn) or "no bars")


def staircase_backward(sub, tour, tc, sources, gpu):
    """The backward row: chapter 08 in bf16 on the tensor cores (tc_variants.csv, STAIR_BWD's
    order) at N=STAIR_TC_N, d=64 and d=128, after chapter 05's float32 flash backward at the
    same problem (tour.csv), the baseline of the speedups; PyTorch's bf16 FlashAttention-2
    and cuDNN backwards for scale. Returns a one-line summary."""
    ch05 = [r for r in tour if r["pass"] == "backward" and r["dtype"] in ("float32", "")
            and not r["causal"] and r["seq_len"] == STAIR_TC_N and r["ms"] is not None
            and (r["chapter"], r["variant"]) == BWD_BASELINE]

    def baseline(d, shape, rows):
        """Chapter 05's flash backward at the panel's problem, a bar before the row's."""
        base = latest([r for r in ch05
                       if r["head_dim"] == d and (r["batch"], r["heads"]) == shape],
                      key=lambda r: r["variant"])
        if not base:
            return rows, None
        # The float32 bar says so under it: the others are bf16.
        return [dict(base[0], variant=f"{BWD_BASELINE[1]}\n(float32)")] + rows, base[0]["ms"]

    spec = TcPass("backward", STAIR_BWD, baseline,
                  [f"no {BWD_BASELINE[0]} {BWD_BASELINE[1]} in tour.csv:", "no speedups"],
                  f" + {BWD_BASELINE[0]} {BWD_BASELINE[1]}", BWD_ANCHORS)
    drawn = staircase_tc(
        sub, tc, spec, sources,
        f"The backward (dQ, dK, dV): {TC_DTYPE} on the tensor cores (08), "
        f"N={STAIR_TC_N}, non-causal\ninside the bars: time and DRAM bytes, as above; above: "
        f"speedup over {BWD_BASELINE[0]} {BWD_BASELINE[1]} (float32)")
    return f"{TC_DTYPE} (tc_variants.csv, tour.csv): " + ("; ".join(drawn) or "no bars")


def plot_staircase(tour, anchors, tc, sources, gpu, path):
    """Three rows, one above the other: the forward in float32 on the CUDA cores (chapters
    01-05), the forward in bf16 on the tensor cores (chapters 06, 07 and 09), the backward in bf16
    on the tensor cores (chapter 08). Returns the rows' summaries."""
    fig = plt.figure(figsize=(WIDTH_IN, 17.2), layout="constrained")
    top, middle, bottom = fig.subfigures(3, 1, hspace=0.04, height_ratios=(5.6, 6.0, 5.6))
    # The backward's PyTorch lines: the same run's, else the session of tc_variants.csv (no
    # three-kernel line, so no anchors.csv).
    bwd_sources = [(name, rows) for name, rows in sources if name != "anchors.csv"]
    hopper = [r for r in tour if r["chapter"] in TC_TOUR_CHAPTERS]
    out = [staircase_float32(top, tour, anchors, gpu), staircase_bf16(middle, tc + hopper, sources, gpu),
           staircase_backward(bottom, tour, tc, bwd_sources, gpu)]
    fig.savefig(path, dpi=DPI, metadata=PNG_META)
    plt.close(fig)
    return out


# ---------------------------------------------------------------- 2. bytes vs N

def plot_bytes_vs_n(traffic, gpu, path):
    rows = [r for r in traffic if r["head_dim"] == HEAD_DIM and not r["causal"]]
    passes = sorted({results_csv.traffic_key(r)[2] for r in rows}, reverse=True) or ["forward"]
    fig, axes = plt.subplots(1, len(passes), figsize=(WIDTH_IN, 6.4), squeeze=False, sharey=True)
    legend = {}
    for ax, pss in zip(axes[0], passes):
        # Sum each (chapter, variant)'s kernels at each N.
        model, measured = defaultdict(dict), defaultdict(dict)
        complete = defaultdict(lambda: True)
        for r in rows:
            ch, var, p = results_csv.traffic_key(r)
            if p != pss:
                continue
            k, n = (ch, var, p), r["seq_len"]
            model[k][n] = model[k].get(n, 0) + (results_csv.dram_bytes(r, "model") or 0)
            m = results_csv.dram_bytes(r, "measured")
            measured[k][n] = measured[k].get(n, 0) + (m or 0)
            complete[(k, n)] &= m is not None
        nth = defaultdict(int)
        variants = defaultdict(list)
        for ch, var, _ in model:
            variants[ch].append(var)
        for (ch, _, points), vars_ in merged_series(model).items():
            style = LINESTYLES[nth[ch] % len(LINESTYLES)]
            nth[ch] += 1
            ns = [n for n, _ in points]
            label = variants_label(ch, vars_, variants[ch])
            line, = ax.plot(ns, [v for _, v in points], style, color=chapter_color(ch), lw=1.8,
                            label=label, zorder=2)
            legend.setdefault(label, line)
            for var in vars_:
                k = (ch, var, pss)
                mn = [n for n in ns if complete[(k, n)]]
                ax.plot(mn, [measured[k][n] for n in mn], "o", color=chapter_color(ch),
                        markersize=6, markeredgecolor="0.15", zorder=3)
        all_n = {n for k in model for n in model[k]}
        n_axis(ax, all_n)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(human_bytes))
        ax.grid(which="major", alpha=0.35)
        ax.set_title(f"{pss} pass", fontsize=11)
        if not model:
            note(ax, f"no {pss} rows at d={HEAD_DIM} in traffic.csv yet")
            continue
        if not any(complete.values()):
            note(ax, "no Nsight Compute measurements yet:\nlines are the model only", y=0.15)
        # The lesson in one arrow: most vs fewest bytes at the largest N.
        n_max = max(all_n)
        ends = [(v[n_max], k) for k, v in model.items() if n_max in v]
        if len(ends) > 1:
            (hi, _), (lo, _) = max(ends), min(ends)
            if lo > 0 and hi / lo >= 10:
                x = n_max * 1.25
                ax.annotate("", (x, lo), xytext=(x, hi),
                            arrowprops=dict(arrowstyle="<->", color="0.25", lw=1.2))
                ax.text(x * 1.08, math.sqrt(hi * lo), f"{hi / lo:.0f}×\nfewer\nbytes",
                        fontsize=9, va="center", ha="left", color="0.15")
                ax.set_xlim(min(all_n) / 1.4, n_max * 2.6)
    axes[0][0].set_ylabel("DRAM bytes read + written per call (log scale)")
    handles = list(legend.values()) + [
        Line2D([], [], color="0.3", lw=1.8, label="model (line)"),
        Line2D([], [], color="0.3", marker="o", markeredgecolor="0.15", linestyle="",
               label="measured, Nsight Compute (point)")]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=9, frameon=False)
    sub = shape_text(rows) if rows else ""
    fig.suptitle(f"Bytes through device memory vs N on the {gpu}: float32 (01-05), bf16 "
                 f"(06-08), d={HEAD_DIM}, "
                 "non-causal" + (f",\n{sub}: " if sub else "\n")
                 + "N² terms grow with N, N·d terms stay flat", fontsize=11)
    rows_of_legend = math.ceil(len(handles) / 3)
    fig.tight_layout(rect=(0, 0.035 + 0.035 * rows_of_legend, 1, 1))
    fig.savefig(path, dpi=DPI, metadata=PNG_META)
    plt.close(fig)


# ---------------------------------------------------------------- 3. the roofline

def avoid_boxes(ax, segments, texts):
    """Screen boxes (x0, y0, x1, y1) that labels must not cover: small squares along each
    line segment ((x0, y0), (x1, y1)) in data coordinates, and the extents of texts."""
    renderer = ax.figure.canvas.get_renderer()
    out, lines = [], [(ax.transData.transform(a), ax.transData.transform(b), 2) for a, b in segments]
    for t in texts:
        bb = t.get_window_extent(renderer)
        if t.get_rotation() % 90:  # text along a slanted line: its box's diagonal, thickened
            lines.append(((bb.x0, bb.y0), (bb.x1, bb.y1), 7))
        else:
            out.append(tuple(bb.extents))
    for (ax0, ay0), (bx0, by0), half in lines:
        steps = max(1, int(math.hypot(bx0 - ax0, by0 - ay0) / 4))
        for i in range(steps + 1):
            px, py = ax0 + (bx0 - ax0) * i / steps, ay0 + (by0 - ay0) * i / steps
            out.append((px - half, py - half, px + half, py + half))
    return out


def place_labels(ax, items, avoid=()):
    """Writes each (x, y, text) label near its point where it overlaps no other label, no
    marker, nothing in `avoid` (screen boxes) and stays inside the axes; a thin leader line
    joins a label moved off its point. Deterministic: the first free spot in a fixed order
    of candidate offsets."""
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    box = ax.get_window_extent(renderer)
    pad = 3  # pixels kept free around every label
    taken = list(avoid)
    for x, y, _ in items:  # the markers
        px, py = ax.transData.transform((x, y))
        taken.append((px - 8, py - 8, px + 8, py + 8))
    offsets = sorted(((dx, dy) for dx in (10, -10, 40, -40, 80, -80)
                      for dy in range(-160, 161, 10)),
                     key=lambda o: (abs(o[0]) + abs(o[1]) * 1.2, o[0] < 0, o[1] < 0))

    def free(bb):
        if bb.x0 < box.x0 + 2 or bb.x1 > box.x1 - 2 or bb.y0 < box.y0 + 2 or bb.y1 > box.y1 - 2:
            return False
        return not any(bb.x0 - pad < t[2] and bb.x1 + pad > t[0] and bb.y0 - pad < t[3]
                       and bb.y1 + pad > t[1] for t in taken)

    for x, y, text in items:
        chosen = None
        for dx, dy in offsets:
            t = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset pixels",
                            ha="left" if dx > 0 else "right", va="center", fontsize=LABEL_PT,
                            linespacing=1.1)
            bb = t.get_window_extent(renderer)
            t.remove()
            if free(bb):
                chosen = (dx, dy, bb)
                break
        dx, dy, bb = chosen or (offsets[0] + (None,))
        far = abs(dy) > 8 or abs(dx) > 12
        ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset pixels",
                    ha="left" if dx > 0 else "right", va="center", fontsize=LABEL_PT,
                    linespacing=1.1, color="0.1", zorder=5,
                    bbox=dict(boxstyle="square,pad=0.1", facecolor="white", edgecolor="none",
                              alpha=0.8),
                    arrowprops=dict(arrowstyle="-", color="0.45", lw=0.6, shrinkA=1, shrinkB=4)
                    if far else None)
        if bb is not None:
            taken.append((bb.x0, bb.y0, bb.x1, bb.y1))


def roofline_labels(points):
    """One label per kernel and spot: [(x, y, 'kernel\\n(NN variant, ...)')]. The same kernel
    used by several chapters (tiled_matmul_kernel) or variants is named once."""
    groups = []
    for r, x, y, _ in sorted(points, key=lambda p: (p[0]["kernel"], p[1], p[2])):
        for g in groups:
            if (g["kernel"] == r["kernel"] and abs(math.log10(x / g["x"])) < SAME_SPOT_DECADES
                    and abs(math.log10(y / g["y"])) < SAME_SPOT_DECADES):
                g["members"].append(r)
                g["pts"].append((x, y))
                break
        else:
            groups.append({"kernel": r["kernel"], "x": x, "y": y, "members": [r], "pts": [(x, y)]})
    out = []
    for g in groups:
        by_ch = defaultdict(list)
        for r in sorted(g["members"], key=lambda r: r["_line"]):  # the CSV's (the program's) order
            if r.get("variant") and r["variant"] not in by_ch[r["chapter"]]:
                by_ch[r["chapter"]].append(r["variant"])
        who = "; ".join(f"{ch} " + ", ".join(v) if v else ch for ch, v in sorted(by_ch.items()))
        who = "\n".join(textwrap.wrap(f"({who})", 34))
        # Anchor at the geometric middle of the group's points.
        gx = math.exp(sum(math.log(p[0]) for p in g["pts"]) / len(g["pts"]))
        gy = math.exp(sum(math.log(p[1]) for p in g["pts"]) / len(g["pts"]))
        out.append((gx, gy, f"{g['kernel']}\n{who}"))
    return sorted(out, key=lambda item: -item[1])


def tc_roofline_points(tc):
    """[(row, FLOP per model DRAM byte, TFLOP/s)] of the tensor-core forwards the roofline
    shows: at ROOFLINE_TC_N, bf16, non-causal, d in STAIR_TC_DIMS, every chapter 06 variant
    and chapter 07's fastest (its `fastest` row if the CSV has one, else the staircase
    variant with the shortest time: the tile-shape sweep is not a candidate)."""
    rows = [r for r in tc if r["pass"] == "forward" and r["dtype"] == TC_DTYPE
            and not r["causal"] and r["seq_len"] == ROOFLINE_TC_N
            and r["head_dim"] in STAIR_TC_DIMS and r["ms"] and r["tflops"] and r["model_bytes"]]
    rows = latest(rows, key=lambda r: (r["chapter"], r["variant"], r["head_dim"]))
    out = []
    for d in STAIR_TC_DIMS:
        at_d = [r for r in rows if r["head_dim"] == d]
        shape = main_shape(at_d)
        at_d = [r for r in at_d if (r["batch"], r["heads"]) == shape]
        ch07 = [r for r in at_d if r["chapter"] == "07"]
        named = [r for r in ch07 if r["variant"] == "fastest"]
        ch07 = named or [r for r in ch07 if ("07", r["variant"]) in STAIR_TC]
        pick = [r for r in at_d if r["chapter"] == "06"]
        pick += sorted(ch07, key=lambda r: r["ms"])[:1]
        for r in pick:
            flops = r["tflops"] * 1e12 * r["ms"] * 1e-3
            out.append((r, flops / r["model_bytes"], r["tflops"]))
    return out


def tc_backward_points(tc):
    """[(row, FLOP per model DRAM byte, TFLOP/s)] of chapter 08's fastest bf16 backward at
    ROOFLINE_TC_N, non-causal, at each d of STAIR_TC_DIMS: its `fastest` row if the CSV has
    one, else the STAIR_BWD variant with the shortest time (the tile-shape variants are not
    candidates). FLOPs from tflops × ms (the backward's 2.5× the forward's products)."""
    rows = [r for r in tc if r["pass"] == "backward" and r["dtype"] == TC_DTYPE
            and r["chapter"] == TC_BWD_CHAPTER and not r["causal"]
            and r["seq_len"] == ROOFLINE_TC_N and r["head_dim"] in STAIR_TC_DIMS
            and r["ms"] and r["tflops"] and r["model_bytes"]]
    rows = latest(rows, key=lambda r: (r["variant"], r["head_dim"]))
    out = []
    for d in STAIR_TC_DIMS:
        at_d = [r for r in rows if r["head_dim"] == d]
        shape = main_shape(at_d)
        at_d = [r for r in at_d if (r["batch"], r["heads"]) == shape]
        pick = ([r for r in at_d if r["variant"] == "fastest"]
                or sorted((r for r in at_d if (r["chapter"], r["variant"]) in STAIR_BWD),
                          key=lambda r: r["ms"]))[:1]
        for r in pick:
            flops = r["tflops"] * 1e12 * r["ms"] * 1e-3
            out.append((r, flops / r["model_bytes"], r["tflops"]))
    return out


def tc_labels(points):
    """One label per chapter and spot, a line per point: '07 tuned, d=64: 321 TFLOP/s'
    ('08 fastest backward, d=64: ...' for a backward)."""
    groups = []
    for r, x, y in points:
        for g in groups:
            if (g["chapter"] == r["chapter"] and abs(math.log10(x / g["pts"][0][0])) < SAME_SPOT_DECADES
                    and abs(math.log10(y / g["pts"][0][1])) < SAME_SPOT_DECADES):
                g["pts"].append((x, y))
                g["lines"].append((r, y))
                break
        else:
            groups.append({"chapter": r["chapter"], "pts": [(x, y)], "lines": [(r, y)]})
    out = []
    for g in groups:
        gx = math.exp(sum(math.log(p[0]) for p in g["pts"]) / len(g["pts"]))
        gy = math.exp(sum(math.log(p[1]) for p in g["pts"]) / len(g["pts"]))
        text = "\n".join(f"{r['chapter']} {r['variant']}"
                         + (" backward" if r["pass"] == "backward" else "")
                         + f", d={r['head_dim']}: {y:.0f} TFLOP/s" for r, y in g["lines"])
        out.append((gx, gy, text))
    return out


def mma_probe(probes):
    """(rate, unit) of the mma.sync probe in probes.csv, or None."""
    for name, (rate, unit) in probes.items():
        if name.startswith("mma_sync") and unit == "TFLOP/s":
            return rate, unit
    return None


def plot_roofline(traffic, ceilings, tc, probes, gpu, path):
    """The float32 kernels (traffic.csv, chapters 01-05) at ROOFLINE_N under the copy and
    matrix-product roofs, and the bf16 tensor-core forwards (tc_variants.csv) at
    ROOFLINE_TC_N under the measured mma.sync roof (probes.csv). Returns a summary."""
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 7.4))
    rows = [r for r in traffic if r["head_dim"] == HEAD_DIM and not r["causal"]
            and r["chapter"] in FLOAT32_CHAPTERS]
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
    tc_points = tc_roofline_points(tc)
    bwd_points = tc_backward_points(tc)
    mma = mma_probe(probes)
    xs = [p[1] for p in points + tc_points + bwd_points] or [1.0]
    ys = [p[2] for p in points + tc_points + bwd_points]
    lo, hi = min(min(xs) / 4, 0.05), max(max(xs) * 8, 2000)
    bw = ceilings.get("copy_bandwidth")
    flat = [(name, ceilings[name]) for name in ("fp32_matmul", "bf16_matmul") if name in ceilings]
    if mma:
        flat.append(("mma_sync", mma))
    top = max([v for _, (v, _) in flat] + ys + [1.0]) * 4
    bottom = min(ys + [top / 1e4]) / 3
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(bottom, top)
    # The roofs: min(bandwidth × intensity, rate) for each measured matrix-product rate, so
    # the fp32 roof (the one these float32 kernels live under) bends at its own ridge point.
    segments, texts = [], []  # what the kernels' labels must leave readable
    for name, (v, unit) in flat:
        # Solid: the roofs the chapters' instructions live under (fp32 FFMA products, the
        # mma.sync probe); dashed: cuBLAS's bf16 rate, for reference.
        fp32, probe = name == "fp32_matmul", name == "mma_sync"
        style = dict(color="0.1" if fp32 or probe else "0.45", lw=2.0 if fp32 or probe else 1.2,
                     ls="-" if fp32 or probe else "--", zorder=1)
        ridge = v / bw[0] if bw else lo
        ax.plot([max(ridge, lo), hi], [v, v], **style)
        segments.append(((max(ridge, lo), v), (hi, v)))
        label = ("fp32 matrix product, CUDA cores (cuBLAS, no TF32)" if fp32 else
                 "mma.sync bf16 (register-only probe)" if probe else
                 f"{name.split('_')[0]} matrix product, tensor cores (cuBLAS)")
        # The probe's label under its line: cuBLAS's bf16 roof is just above it.
        texts.append(ax.annotate(f"{label}: {v:.0f} {unit}", (hi, v), ha="right",
                                 va="top" if probe else "bottom", fontsize=9,
                                 xytext=(-4, -3 if probe else 2), textcoords="offset points",
                                 color=style["color"]))
        if bw:
            ax.plot([lo, ridge], [bw[0] * lo, v], **style)
            segments.append(((lo, bw[0] * lo), (ridge, v)))
            if fp32 or probe:
                ax.axvline(ridge, color="0.6", lw=0.8, ls=":", zorder=0)
                texts.append(ax.annotate(f"ridge {ridge:.0f} FLOP/B", (ridge, bottom), xytext=(-3, 4),
                            textcoords="offset points", fontsize=8, color="0.4",
                            rotation=90, ha="right", va="bottom"))
    if bw:
        # Written along the bandwidth line: its angle on screen, from two points on it.
        x0 = lo * 3
        p0, p1 = ax.transData.transform([(x0, bw[0] * x0), (x0 * 10, bw[0] * x0 * 10)])
        angle = math.degrees(math.atan2(p1[1] - p0[1], p1[0] - p0[0]))
        texts.append(ax.annotate(f"DRAM copy bandwidth {bw[0]:.2f} {bw[1]}", (x0, bw[0] * x0), xytext=(0, 5),
                    textcoords="offset points", rotation=angle, rotation_mode="anchor",
                    fontsize=9, color="0.1", ha="left", va="bottom"))
    chapters_seen = {}
    for r, x, y in tc_points:  # one marker per call: the three kernels of 06 together
        c = chapter_color(r["chapter"])
        ax.plot(x, y, TC_MARKER, color=c, markeredgecolor="0.15", markersize=9, zorder=4.6)
        chapters_seen.setdefault(r["chapter"], c)
    for r, x, y in bwd_points:  # chapter 08's three kernels together, like the forwards
        c = chapter_color(r["chapter"])
        ax.plot(x, y, TC_BWD_MARKER, color=c, markeredgecolor="0.15", markersize=10, zorder=4.6)
        chapters_seen.setdefault(r["chapter"], c)
    for r, x, y, measured in points:
        c = chapter_color(r["chapter"])
        pss = r.get("pass") or "forward"
        # Forward circles over backward triangles: chapters 02, 03 and 05 share a kernel.
        ax.plot(x, y, PASS_MARKER.get(pss, "s"), color=c if measured else "none",
                markeredgecolor="0.15" if measured else c, markersize=8 if pss == "forward" else 10,
                zorder=4.5 if pss == "forward" else 4)
        chapters_seen.setdefault(r["chapter"], c)
    ax.grid(which="major", alpha=0.3)
    ax.set_xlabel("arithmetic intensity (FLOP per DRAM byte, log scale)")
    ax.set_ylabel("achieved TFLOP/s (log scale)")
    sub = shape_text(rows) if rows else ""
    where = (f"float32 kernels at N={n}, d={HEAD_DIM}" + (f", {sub}" if sub else "")
             + ": Nsight Compute DRAM bytes, kernel time") if rows else \
        f"float32 kernels: none at d={HEAD_DIM} in traffic.csv yet"
    tc_sub = shape_text([p[0] for p in tc_points]) if tc_points else ""
    ax.set_title(f"Roofline of the {gpu}, non-causal; ceilings measured (copy, cuBLAS: PyTorch; "
                 f"mma.sync: a probe)\n{where}\n{TC_DTYPE} forwards (◆) and chapter "
                 f"{TC_BWD_CHAPTER}'s fastest backward (▼) on the tensor cores at N={ROOFLINE_TC_N}, "
                 f"d={' and '.join(map(str, STAIR_TC_DIMS))}"
                 + (f" ({tc_sub})" if tc_sub else "") + ":\nthe model's DRAM bytes, call time",
                 fontsize=11)
    fig.tight_layout()
    place_labels(ax, sorted(roofline_labels(points) + tc_labels(tc_points) + tc_labels(bwd_points),
                            key=lambda i: -i[1]),
                 avoid_boxes(ax, segments, texts))
    msgs = []
    if not ceilings:
        msgs.append("ceilings.csv has no rows")
    if not mma:
        msgs.append("probes.csv has no mma_sync rate: no tensor-core roof")
    if not tc_points:
        msgs.append(f"no {TC_DTYPE} forwards at N={ROOFLINE_TC_N} in tc_variants.csv yet")
    if not bwd_points:
        msgs.append(f"no chapter {TC_BWD_CHAPTER} {TC_DTYPE} backward at N={ROOFLINE_TC_N} "
                    "in tc_variants.csv yet")
    if not rows:
        msgs.append(f"no kernels at d={HEAD_DIM} in traffic.csv yet")
    elif untimed:
        msgs.append(f"{untimed} kernel(s) without a measured time are not placed")
    if any(not p[3] for p in points):
        msgs.append("hollow markers: no measured bytes, placed with the model's")
    if zero_flop:
        names = sorted({f"{r['chapter']} {r['kernel']}" for r in zero_flop})
        msgs.append("not placed (memory only, no FLOPs counted):\n  " + "\n  ".join(names))
    if msgs:
        ax.text(0.01, 0.99, "\n".join(msgs), transform=ax.transAxes, ha="left", va="top",
                fontsize=8, color="0.3", zorder=6,
                bbox=dict(boxstyle="round", facecolor="0.97", edgecolor="0.8"))
    if points or tc_points or bwd_points:
        handles = [Line2D([], [], color=c, marker="s", ls="", markersize=8, label=f"chapter {ch}")
                   for ch, c in sorted(chapters_seen.items())]
        handles += [Line2D([], [], color="0.5", marker=m, ls="", markersize=7,
                           markeredgecolor="0.15", label=f"{p} kernel")
                    for p, m in PASS_MARKER.items()
                    if any((r.get("pass") or "forward") == p for r, *_ in points)]
        if tc_points:
            handles.append(Line2D([], [], color="0.5", marker=TC_MARKER, ls="", markersize=8,
                                  markeredgecolor="0.15", label=f"{TC_DTYPE} forward call"))
        if bwd_points:
            handles.append(Line2D([], [], color="0.5", marker=TC_BWD_MARKER, ls="", markersize=9,
                                  markeredgecolor="0.15", label=f"{TC_DTYPE} backward call"))
        ax.legend(handles=handles, fontsize=8, loc="lower right", ncol=2)
    fig.savefig(path, dpi=DPI, metadata=PNG_META)
    plt.close(fig)
    return ((f"float32: {len(points)} kernels at N={n}" if points else "float32: no kernels")
            + f" (traffic.csv); {TC_DTYPE}: "
            + ("; ".join(f"{r['chapter']} {r['variant']} d={r['head_dim']} at "
                         f"{x:.3g} FLOP/B, {y:.1f} TFLOP/s" for r, x, y in tc_points)
               or "no points") + f" (tc_variants.csv); {TC_DTYPE} backward: "
            + ("; ".join(f"{r['chapter']} {r['variant']} d={r['head_dim']} at "
                         f"{x:.3g} FLOP/B, {y:.1f} TFLOP/s" for r, x, y in bwd_points)
               or "no points") + " (tc_variants.csv); mma.sync roof: "
            + (f"{mma[0]:g} {mma[1]} (probes.csv)" if mma else "none"))


# ---------------------------------------------------------------- 4. extra memory vs N

# split_tail's (and so fastest's) room for the slots of the key tiles it cuts
# (tail_split.hpp): kMaxCutTiles tiles of 2·Bc·d floats (dK's, then dV's), Bc = 128 keys
# and Br = 128 (d = 64) or 64 (d = 128) queries (WarpTileTraits).
CH08_MAX_CUT_TILES = 160
CH08_SPLIT_TAIL = ("split_tail", "fastest")


def ch08_workspace_bytes(variant, b, h, n, d, causal=False):
    """Chapter 08's workspace (tensor_core_backward.cu, workspace_bytes_of): the float32 dQ
    accumulator and D, B·H·N·(d+1)·4 bytes; dq_pass, D alone, B·H·N·4; split_tail (and
    fastest, its code) non-causal, D padded to 4 floats and then room for the slots of
    min(key tiles, 160) cut tiles, none where a key tile has one query tile."""
    rows = b * h * n
    if variant == "dq_pass":
        return rows * 4
    base = rows * (d + 1) * 4
    if variant not in CH08_SPLIT_TAIL:
        return base
    bc, br = 128, (128 if d == 64 else 64)
    key_tiles, q_tiles = b * h * -(-n // bc), -(-n // br)
    cut = 0 if causal or q_tiles < 2 else min(key_tiles, CH08_MAX_CUT_TILES)
    return base + ((rows + 3) // 4 * 4 - rows + cut * 2 * bc * d) * 4


def ch08_memory_series(tc, tour_shapes):
    """{variant: {N: (bytes, measured)}} of chapter 08's bf16 backward at d=HEAD_DIM,
    non-causal, for STAIR_BWD's variants: tc_variants.csv's extra_mem_bytes where measured
    (the N it has rows at), else ch08_workspace_bytes at the tour's (B, H) for that N (tour_shapes:
    {N: (B, H)}), so that it reads beside chapter 05's backwards at every N. Empty without
    a measured row."""
    rows = [r for r in tc if r["chapter"] == "08" and r["pass"] == "backward"
            and r["dtype"] == TC_DTYPE and r["head_dim"] == HEAD_DIM and not r["causal"]
            and ("08", r["variant"]) in STAIR_BWD and r.get("extra_mem_bytes") is not None]
    out = defaultdict(dict)
    for r in latest(rows, key=lambda r: (r["variant"], r["seq_len"])):
        out[r["variant"]][r["seq_len"]] = (r["extra_mem_bytes"], True)
    for var, points in out.items():
        for n, (b, h) in tour_shapes.items():
            if n not in points:
                points[n] = (ch08_workspace_bytes(var, b, h, n, HEAD_DIM), False)
    return {var: dict(sorted(points.items())) for var, points in out.items()}


def plot_memory_vs_n(tour, tc, gpu, path):
    """The float32 rows of tour.csv (chapters 01 and 04's forwards, chapter 05's backwards)
    and chapter 08's bf16 backward (tc_variants.csv, and its workspace formula at the N it
    was not measured at). Returns a summary."""
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 7.0))
    rows = [r for r in tour if r["head_dim"] == HEAD_DIM and not r["causal"]
            and ((r["pass"] == "forward" and r["chapter"] in ("01", "04"))
                 or r["pass"] == "backward") and r.get("extra_mem_bytes") is not None]
    rows = latest(rows, key=lambda r: (r["chapter"], r["variant"], r["pass"], r["seq_len"]))
    series = defaultdict(dict)
    for r in rows:
        series[(r["chapter"], r["variant"], r["pass"])][r["seq_len"]] = r["extra_mem_bytes"]
    ch05 = [r for r in rows if r["pass"] == "backward"]
    shapes = {n: main_shape([r for r in ch05 if r["seq_len"] == n])
              for n in sorted({r["seq_len"] for r in ch05})}
    ch08 = ch08_memory_series(tc, shapes)
    # Log scale, so the N² workspaces (GB) and the N-sized ones (MB) both show their slope;
    # a kernel that needs nothing extra (0 B) is drawn on a floor line labelled "0 B", a
    # decade below the smallest non-zero amount.
    nonzero = [r["extra_mem_bytes"] for r in rows if r["extra_mem_bytes"] > 0] + \
              [v for points in ch08.values() for v, _ in points.values() if v > 0]
    floor = 10 ** math.floor(math.log10(min(nonzero + [1e6]))) / 10
    written = set()  # (N, bytes) already written beside a line's end: written once
    nth = defaultdict(int)
    variants = defaultdict(list)
    for ch, var, pss in series:
        variants[(ch, pss)].append(var)
    for (ch, pss, points), vars_ in merged_series(series).items():
        style = LINESTYLES[nth[ch] % len(LINESTYLES)]
        nth[ch] += 1
        ns = [n for n, _ in points]
        ys = [max(v, floor) for _, v in points]
        label = variants_label(ch, vars_, variants[(ch, pss)]) + f" ({pss})"
        ax.plot(ns, ys, style, marker="o", color=chapter_color(ch), label=label, lw=1.8)
        last = points[-1][1]  # the value at the largest N, written beside it
        written.add((ns[-1], last))
        ax.annotate(human_bytes(last) if last > 0 else "0 B", (ns[-1], ys[-1]), xytext=(6, 0),
                    textcoords="offset points", fontsize=9, va="center", color=chapter_color(ch))
    # Chapter 08: a dotted line through its measured points (filled) and its formula's
    # (hollow); variants with equal amounts share a line. Drawn under the float32 lines:
    # dq_pass needs what chapter 05's flash needs (D alone), the two lines coincide.
    c08 = chapter_color("08")
    merged, said = defaultdict(list), []
    for var, points in ch08.items():
        merged[tuple(points.items())].append(var)
    for points, vars_ in merged.items():
        measured = [f"{human_bytes(v)} at N={n}" for n, (v, m) in points if m]
        formula = [str(n) for n, (_, m) in points if not m]
        said.append(f"08 {', '.join(vars_)}: " + ", ".join(measured) + " (tc_variants.csv)"
                    + (f", the formula at N={', '.join(formula)}" if formula else ""))
        ns = [n for n, _ in points]
        ys = [max(v, floor) for _, (v, _) in points]
        ax.plot(ns, ys, ":", color=c08, lw=3, zorder=1.5,
                label=f"08 {', '.join(vars_)} ({TC_DTYPE} backward)")
        for n, y, (_, measured) in zip(ns, ys, (p for _, p in points)):
            ax.plot(n, y, "s", color=c08 if measured else "white", markeredgecolor=c08,
                    markeredgewidth=1.5, markersize=10, zorder=1.6)
        last = points[-1][1][0]
        if (ns[-1], last) not in written:
            written.add((ns[-1], last))
            ax.annotate(human_bytes(last), (ns[-1], ys[-1]), xytext=(6, 0),
                        textcoords="offset points", fontsize=9, va="center", color=c08)
    all_n = {r["seq_len"] for r in rows} | {n for points in ch08.values() for n in points}
    n_axis(ax, all_n)
    ax.set_yscale("log")
    if rows or ch08:
        top = max(nonzero + [floor * 10]) * 3
        ax.set_ylim(floor / 2, top)
        decades = [10 ** k for k in range(int(math.log10(floor)) + 1, int(math.log10(top)) + 1)]
        ax.set_yticks([floor] + decades, ["0 B"] + [human_bytes(v) for v in decades])
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.axhline(floor, color="0.7", lw=0.8, ls=":")
        ax.set_xlim(min(all_n) / 1.4, max(all_n) * 2)
    ax.set_ylabel("extra device memory (bytes, log scale)")
    ax.grid(which="major", alpha=0.3)
    sub = shape_text(rows) if rows else ""
    ax.set_title(f"Device memory beyond the inputs and outputs (Q, K, V, O, L; dO, dQ, dK, dV)"
                 f" on the {gpu}\npeak workspace of one call, d={HEAD_DIM}, non-causal"
                 + (f", {sub}" if sub else "") + f"\nfloat32 (tour.csv); chapter 08 in {TC_DTYPE} "
                 "(tc_variants.csv)", fontsize=11)
    if series or ch08:
        handles, _ = ax.get_legend_handles_labels()
        if ch08:
            handles += [
                Line2D([], [], color=c08, marker="s", ls="", markersize=8,
                       label="08 measured (extra_mem_bytes)"),
                Line2D([], [], color="white", marker="s", ls="", markersize=8,
                       markeredgecolor=c08, markeredgewidth=1.5,
                       label="08 at an N not measured: its formula\n(tensor_core_backward.cu: "
                             "workspace_bytes,\nB·H·N·(d+1)·4; dq_pass: B·H·N·4)")]
        legend = fig.legend(handles=handles, fontsize=9, loc="lower center", ncol=2,
                            frameon=False)
        height = legend.get_window_extent(fig.canvas.get_renderer()).height / fig.bbox.height
        fig.tight_layout(rect=(0, height + 0.01, 1, 1))  # the axes above the legend
    else:
        note(ax, "no measured extra_mem_bytes for chapter 01, chapter 04\n"
                 "or a backward pass in tour.csv yet")
        fig.tight_layout()
    fig.savefig(path, dpi=DPI, metadata=PNG_META)
    plt.close(fig)
    return ("float32: " + (f"{len(series)} variants" if series else "no rows") + " (tour.csv); "
            + ("; ".join(said) or f"no chapter 08 {TC_DTYPE} backward rows in tc_variants.csv"))


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
        anchors_csv = os.path.join(args.results_dir, "anchors.csv")
        anchors = results_csv.read(anchors_csv) if os.path.isfile(anchors_csv) else []
        tcf = results_csv.read_tensor_cores(args.results_dir)
    except results_csv.CsvError as e:
        print(f"make_plots: error: {e}", file=sys.stderr)
        return 1
    gpu = gpu_name(tour, args.results_dir)
    os.makedirs(args.out_dir, exist_ok=True)
    out = [os.path.join(args.out_dir, f) for f in FIGURES]
    # PyTorch's bf16 numbers: the comparison script's same run first, then the chapter-07
    # session's anchors, then the older anchors (the three-kernel path).
    sources = [("vs_pytorch.csv", tcf["vs_pytorch.csv"]), ("ch07_anchors.csv", tcf["ch07_anchors.csv"]),
               ("anchors.csv", anchors)]
    summary = plot_staircase(tour, anchors, tcf["tc_variants.csv"], sources, gpu, out[0])
    plot_bytes_vs_n(traffic, gpu, out[1])
    summary.append(plot_roofline(traffic, results_csv.ceilings_dict(ceilings), tcf["tc_variants.csv"],
                                 results_csv.probes_dict(tcf["probes.csv"]), gpu, out[2]))
    summary.append(plot_memory_vs_n(tour, tcf["tc_variants.csv"], gpu, out[3]))
    names = ("staircase", "staircase", "staircase backward", "roofline", "memory_vs_n")
    for name, line in zip(names, summary):
        print(f"{name} {line}")
    for p in out:
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
