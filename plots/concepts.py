#!/usr/bin/env python3
"""Draws the tutorial's concept pictures, one per chapter, from code (no measurements):

  concept_01_grid.png            the N×N grid's round trips through device memory, three kernels
  concept_02_tiles.png           a 64×64 tile of S = Q·Kᵀ from a row slab of Q, a column slab of Kᵀ
  concept_03_online_softmax.png  the running max m and sum l over a row read block by block
  concept_04_fused_loop.png      the fused forward's loop: which tile lives in HBM, shared
                                 memory, registers
  concept_05_backward.png        the flash backward: a block owns a K/V tile, walks the query tiles
  concept_06_fragments.png       mma.sync m16n8k16: which lane holds which element of A, B, C
  concept_07_warps.png           4 warps split the 128-row Q tile, share the 64-key K/V tile;
                                 P goes from the S accumulators into P·V's A operand
  concept_08_transposed_products.png
                                 the tensor-core backward: warp w owns 16 keys, Sᵀ = K_w·Qᵀ puts
                                 keys on the accumulator rows (Pᵀ, dSᵀ are A of dV, dK as they
                                 lie); dS goes through shared memory, ldmatrix.trans, for dQ
  concept_09_pingpong.png        chapter 09's warp-specialized block over time: the producer's
                                 copies, two consumers taking turns at the tensor cores
  concept_09_pairs.png           chapter 09's persistent grid under the causal mask: the K/V
                                 tiles each of 132 blocks reads, query tiles handed out one by
                                 one round-robin against in pairs (counted, not measured)
  concept_10_timeline.png        chapter 10's step 3 over two query tiles: the producer's copies,
                                 each consumer's products and waits, the adder warp's bulk adds

Usage: python3 plots/concepts.py OUT_DIR          (e.g. plots/figures)
       cmake --build build --target plots         (draws these too)

Slide-ready: 1600 pixels wide, no text under 14 pt. The sizes, tiles and names are the
chapters' (chapters/*/README.md); the fragment layouts are common/sm80/fragment.hpp's.
"""
import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle  # noqa: E402

DPI = 100
WIDTH_IN = 16.0  # 1600 pixels: a slide's width
# name -> height in inches (the width is WIDTH_IN for all): the test checks the PNG sizes.
FIGURES = {
    "concept_01_grid.png": 9.0,
    "concept_02_tiles.png": 9.0,
    "concept_03_online_softmax.png": 9.0,
    "concept_04_fused_loop.png": 9.0,
    "concept_05_backward.png": 9.0,
    "concept_06_fragments.png": 9.0,
    "concept_07_warps.png": 9.0,
    "concept_08_transposed_products.png": 9.0,
    "concept_09_pingpong.png": 9.0,
    "concept_09_pairs.png": 9.0,
    "concept_10_timeline.png": 9.0,
}
PNG_META = {"Software": None}  # no matplotlib version in the file: re-runs give equal bytes
MIN_PT = 14  # the smallest text anywhere (a projector at the back of a room)
FS, FS_TITLE, FS_BIG = 16, 22, 18

PALETTE = plt.get_cmap("tab10").colors
BLUE, ORANGE, GREEN, RED, PURPLE, BROWN, PINK, GREY = PALETTE[:8]
# The three kinds of memory, as bands (lightest: device memory, far from the arithmetic).
HBM_BG, SMEM_BG, REG_BG = "#e8e8e8", "#d6e6f5", "#fde3c8"
WARPS = (BLUE, ORANGE, GREEN, RED)

plt.rcParams.update({"font.size": FS, "axes.titlesize": FS_TITLE,
                     "font.family": "DejaVu Sans"})


# ---- helpers --------------------------------------------------------------------------------

def canvas(name, title):
    """A figure WIDTH_IN × height, one axes in inch units (x 0..16, y 0..height), no frame."""
    h = FIGURES[name]
    fig = plt.figure(figsize=(WIDTH_IN, h), dpi=DPI)
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_xlim(0, WIDTH_IN)
    ax.set_ylim(0, h)
    ax.set_axis_off()
    ax.text(0.4, h - 0.45, title, fontsize=FS_TITLE, fontweight="bold", va="center")
    return fig, ax


def box(ax, x, y, w, h, text="", color="white", fs=FS, edge="0.25", lw=1.5, weight="normal",
        round_=True, tcolor="black", **kw):
    patch = (FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=0.12",
                            fc=color, ec=edge, lw=lw, **kw) if round_ else
             Rectangle((x, y), w, h, fc=color, ec=edge, lw=lw, **kw))
    ax.add_patch(patch)
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fs,
                fontweight=weight, color=tcolor, linespacing=1.25)
    return patch


def band(ax, y, h, label, color, x0=0.3, x1=None, label_w=2.1):
    """A memory band: a long strip with its name at the left."""
    x1 = WIDTH_IN - 0.3 if x1 is None else x1
    ax.add_patch(Rectangle((x0, y), x1 - x0, h, fc=color, ec="none", zorder=0))
    ax.text(x0 + 0.15, y + h / 2, label, ha="left", va="center", fontsize=FS_BIG,
            fontweight="bold", color="0.25", linespacing=1.2)


def arrow(ax, start, end, text="", color="0.2", fs=FS, lw=2.2, rad=0.0, tx=None, ty=None,
          ha="center", va="center", tcolor=None, style="-|>", ls="-"):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=22, lw=lw,
                                 color=color, connectionstyle=f"arc3,rad={rad}",
                                 shrinkA=2, shrinkB=2, ls=ls, zorder=5))
    if text:
        x = (start[0] + end[0]) / 2 if tx is None else tx
        y = (start[1] + end[1]) / 2 if ty is None else ty
        ax.text(x, y, text, ha=ha, va=va, fontsize=fs, color=tcolor or color, zorder=6,
                linespacing=1.2,
                bbox=dict(fc="white", ec="none", alpha=0.85, pad=1.5))


def note(ax, y, text, fs=FS):
    ax.text(0.4, y, text, ha="left", va="center", fontsize=fs, color="0.2", linespacing=1.3)


def save(fig, out, name):
    path = os.path.join(out, name)
    fig.savefig(path, dpi=DPI, metadata=PNG_META)
    plt.close(fig)
    return path


# ---- chapter 01 -----------------------------------------------------------------------------

def draw_01(out):
    name = "concept_01_grid.png"
    fig, ax = canvas(name, "Chapter 01: three kernels, and the N×N grid goes through device memory")
    band(ax, 5.0, 2.9, "device\nmemory", HBM_BG)
    band(ax, 1.0, 1.8, "kernels", "#f4f4f4")
    # Device memory: the inputs, the grid (S, then P over it), the outputs.
    box(ax, 2.4, 5.6, 1.5, 1.7, "Q, K\nN×d", "white")
    grid_x, grid_w = 5.0, 5.8
    box(ax, grid_x, 5.3, grid_w, 2.3, "", "#f2d7d5", edge=RED, lw=2.5, round_=False)
    for i in range(1, 8):  # a grid, so it reads as one
        ax.plot([grid_x + i * grid_w / 8] * 2, [5.3, 7.6], color=RED, lw=0.6, alpha=0.5)
        ax.plot([grid_x, grid_x + grid_w], [5.3 + i * 2.3 / 8] * 2, color=RED, lw=0.6,
                alpha=0.5)
    ax.text(grid_x + grid_w / 2, 6.45, "the N×N grid, float32\nS, then P written over it",
            ha="center", va="center", fontsize=FS_BIG, fontweight="bold", color="0.1",
            bbox=dict(fc="#f2d7d5", ec="none", pad=3))
    box(ax, 11.9, 5.6, 1.3, 1.7, "V\nN×d", "white")
    box(ax, 13.7, 5.6, 1.9, 1.7, "O  N×d\nlse  N", "white")
    # The kernels.
    ky, kh = 1.25, 1.3
    box(ax, 2.4, ky, 3.2, kh, "S = scale·Q·Kᵀ\nqk_naive_kernel", "white", edge=BLUE, lw=2.5)
    box(ax, 6.3, ky, 3.6, kh, "P = softmax(S)\nsoftmax_naive_kernel", "white", edge=BLUE,
        lw=2.5)
    box(ax, 10.6, ky, 3.4, kh, "O = P·V\npv_naive_kernel", "white", edge=BLUE, lw=2.5)
    top, bot = 5.3, ky + kh
    arrow(ax, (3.15, 5.6), (3.15, bot), "read Q, K\n8·N·d", tx=2.95, ty=3.9, color="0.35",
          ha="center")
    arrow(ax, (5.0, bot), (5.6, top), "write S\n4·N²", tx=4.65, ty=3.9, color=RED,
          fs=FS_BIG)
    arrow(ax, (7.0, top), (7.0, bot), "read S ×3\n12·N²", tx=7.0, ty=3.9, color=RED,
          fs=FS_BIG)
    arrow(ax, (9.2, bot), (9.2, top), "write P\n4·N²", tx=9.2, ty=3.9, color=RED, fs=FS_BIG)
    arrow(ax, (10.6, top), (11.3, bot), "read P\n4·N²", tx=10.85, ty=3.9, color=RED,
          fs=FS_BIG)
    arrow(ax, (12.55, 5.6), (12.8, bot), "read V\n4·N·d", tx=12.75, ty=3.9, color="0.35")
    arrow(ax, (13.6, bot), (14.65, 5.6), "write O, lse\n4·N·d + 4·N", tx=14.75, ty=3.9,
          color="0.35")
    note(ax, 0.55, "Bytes per head, float32. The softmax reads each row three times (max, sum, "
         "normalize). The grid alone: 24·N² bytes; Q, K, V, O: 16·N·d.\n"
         "B = 4, H = 32, N = 4096, d = 64: 52 GB of grid traffic to produce 134 MB of O.",
         fs=FS)
    return save(fig, out, name)


# ---- chapter 02 -----------------------------------------------------------------------------

def draw_02(out):
    name = "concept_02_tiles.png"
    fig, ax = canvas(name, "Chapter 02: a block computes one 64×64 tile of S = Q·Kᵀ, "
                     "a 16-wide slab at a time")
    u = 1.4             # inches per 64 elements
    nt = 4              # N = 256 drawn: 4 tiles of 64
    s_x, s_y = 3.3, 0.5  # S's lower-left corner
    ti, tj = 1, 2       # the block's tile: rows 64-127, columns 128-191
    slab = 1            # the slab being copied: k 16-31 of d = 64
    # S (N×N), its tiles, the block's tile.
    for i in range(nt):
        for j in range(nt):
            box(ax, s_x + j * u, s_y + (nt - 1 - i) * u, u, u, "", "white", lw=1.0,
                round_=False)
    tx, ty = s_x + tj * u, s_y + (nt - 1 - ti) * u
    box(ax, tx, ty, u, u, "", "#c9e3c3", edge=GREEN, lw=3, round_=False)
    for k in range(1, 16):  # the block's 16×16 threads, each a 4×4 patch
        ax.plot([tx + k * u / 16] * 2, [ty, ty + u], color=GREEN, lw=0.4, alpha=0.6)
        ax.plot([tx, tx + u], [ty + k * u / 16] * 2, color=GREEN, lw=0.4, alpha=0.6)
    box(ax, tx + 5 * u / 16, ty + 10 * u / 16, u / 16, u / 16, "", GREEN, edge=GREEN, lw=0.5,
        round_=False)
    # Q (N×d) at the left of S, Kᵀ (d×N) above it.
    q_x = s_x - u - 0.35
    for i in range(nt):
        box(ax, q_x, s_y + (nt - 1 - i) * u, u, u, "", "white", lw=1.0, round_=False)
    box(ax, q_x, ty, u, u, "", "#d6e6f5", edge=BLUE, lw=3, round_=False)
    box(ax, q_x + slab * u / 4, ty, u / 4, u, "", BLUE, edge=BLUE, lw=1, round_=False)
    k_y = s_y + nt * u + 0.35
    for j in range(nt):
        box(ax, s_x + j * u, k_y, u, u, "", "white", lw=1.0, round_=False)
    box(ax, tx, k_y, u, u, "", "#fde3c8", edge=ORANGE, lw=3, round_=False)
    box(ax, tx, k_y + u - (slab + 1) * u / 4, u, u / 4, "", ORANGE, edge=ORANGE, lw=1,
        round_=False)
    # Names and sizes.
    ax.text(q_x + u / 2, s_y - 0.3, "Q  (N×d)", ha="center", va="center", fontsize=FS_BIG,
            fontweight="bold", color=BLUE)
    ax.text(q_x + u / 2, k_y + u / 2, "Kᵀ  (d×N)", ha="center", va="center",
            fontsize=FS_BIG, fontweight="bold", color=ORANGE)
    ax.text(s_x + nt * u / 2, s_y - 0.3, "S  (N×N)", ha="center", va="center",
            fontsize=FS_BIG, fontweight="bold", color="0.15")
    ax.text(q_x - 0.1, ty + u / 2, "64\nrows", ha="right", va="center", fontsize=FS,
            color=BLUE)
    ax.text(tx + u + 0.1, k_y + u / 2, "64\ncolumns", ha="left", va="center", fontsize=FS,
            color=ORANGE)
    ax.text(q_x + u / 2, ty + u + 0.22, "d = 64", ha="center", va="center", fontsize=FS,
            color=BLUE)
    # The explanation, at the right.
    rx = s_x + nt * u + 0.6
    lines = [
        (GREEN, "A block of 256 threads: one 64×64 tile of S", True),
        ("0.15", "(16×16 threads, each a 4×4 patch in registers)", False),
        ("0.15", "", False),
        ("0.15", "It walks d in slabs of 16 (here the 2nd of 4):", False),
        (BLUE, "  the 64×16 slab of Q's 64 rows", True),
        (ORANGE, "  the 16×64 slab of Kᵀ's 64 columns", True),
        ("0.15", "  go into shared memory (rows of 64 + 4 floats),", False),
        ("0.15", "  barrier, 16 outer-product steps, barrier.", False),
        ("0.15", "", False),
        ("0.15", "Each element read from device memory", False),
        ("0.15", "serves 64 outputs instead of one.", False),
        ("0.15", "", False),
        ("0.15", "The same kernel forms O = P·V; S and P still", False),
        ("0.15", "go through device memory (chapter 01's grid).", False),
    ]
    y = 7.55
    for color, text, bold in lines:
        ax.text(rx, y, text, ha="left", va="center", fontsize=FS, color=color,
                fontweight="bold" if bold else "normal")
        y -= 0.47
    return save(fig, out, name)


# ---- chapter 03 -----------------------------------------------------------------------------

# A row of 12 scores in base-2 units (x = s·log2 e), read in 3 blocks of 4.
ROW_03 = ((1, 3, 2, 0), (5, 4, 1, 2), (2, 4, 3, 1))


def online_steps(blocks):
    """(m_old, m_new, l_old, factor, block_sum, l_new) per block, exactly as online_push."""
    m, l, steps = float("-inf"), 0.0, []
    for blk in blocks:
        m_new = max(m, max(blk))
        factor = 2.0 ** (m - m_new) if m != float("-inf") else 0.0
        add = sum(2.0 ** (x - m_new) for x in blk)
        steps.append((m, m_new, l, factor, add, l * factor + add))
        m, l = m_new, l * factor + add
    return steps


def fmt(v):
    return "−∞" if v == float("-inf") else f"{v:g}"


def draw_03(out):
    name = "concept_03_online_softmax.png"
    fig, ax = canvas(name, "Chapter 03: the online softmax: one read of a row gives both "
                     "m and l")
    steps = online_steps(ROW_03)
    colors = (BLUE, ORANGE, GREEN)
    # Top: the scores as bars, the running max as a step line.
    sub = fig.add_axes([0.07, 0.49, 0.88, 0.38])
    xs = 0
    for b, blk in enumerate(ROW_03):
        sub.axvspan(xs - 0.5, xs + len(blk) - 0.5, color=colors[b], alpha=0.08)
        sub.bar(range(xs, xs + len(blk)), blk, color=colors[b], width=0.7)
        for k, v in enumerate(blk):
            sub.text(xs + k, v + 0.12, f"{v}", ha="center", va="bottom", fontsize=FS)
        sub.text(xs + 1.5, 6.4, f"block {b + 1}", ha="center", va="center", fontsize=FS_BIG,
                 fontweight="bold", color=colors[b])
        m_new = steps[b][1]
        sub.plot([xs - 0.5, xs + len(blk) - 0.5], [m_new, m_new], color=RED, lw=3,
                 ls="--")
        xs += len(blk)
    sub.plot([3.5, 3.5], [steps[0][1], steps[1][1]], color=RED, lw=3, ls="--")
    sub.text(11.5, steps[2][1] + 0.35, "running max m", color=RED, fontsize=FS_BIG,
             ha="right", va="bottom", fontweight="bold")
    sub.annotate(f"m steps up: {fmt(steps[0][1])} → {fmt(steps[1][1])}",
                 xy=(3.5, 4.0), xytext=(1.6, 4.9), fontsize=FS_BIG, color=RED,
                 ha="center", arrowprops=dict(arrowstyle="-|>", color=RED, lw=2))
    sub.set_xlim(-0.6, 11.6)
    sub.set_ylim(0, 7.0)
    sub.set_xticks(range(12), [f"x{j}" for j in range(12)], fontsize=FS)
    sub.set_yticks(range(0, 7, 2))
    sub.tick_params(labelsize=FS)
    sub.set_ylabel("score x (base 2)", fontsize=FS)
    for s in ("top", "right"):
        sub.spines[s].set_visible(False)
    # Bottom: the state after each block.
    w, gap, x0 = 4.9, 0.25, 0.4
    for b, (m_old, m_new, l_old, factor, add, l_new) in enumerate(steps):
        x = x0 + b * (w + gap)
        raised = m_new > m_old
        head = (f"m: {fmt(m_old)} → {fmt(m_new)}" + ("  (raised)" if raised and b else "")
                if m_new != m_old else f"m stays {fmt(m_new)}")
        if b == 0:
            body = f"l = 0 + Σ 2^(x − {fmt(m_new)})\n  = {fmt(add)}"
        else:
            body = (f"l = {fmt(l_old)} · 2^({fmt(m_old)} − {fmt(m_new)})\n"
                    f"       + Σ 2^(x − {fmt(m_new)})\n"
                    f"  = {fmt(l_old)} · {fmt(factor)} + {fmt(add)}\n"
                    f"  = {fmt(l_new)}")
        box(ax, x, 1.2, w, 2.6, "", "white", edge=colors[b], lw=2.5)
        ax.text(x + 0.2, 3.4, head, ha="left", va="center", fontsize=FS_BIG,
                fontweight="bold", color=RED if raised and b else "0.15")
        ax.text(x + 0.2, 3.05, body, ha="left", va="top", fontsize=FS, color="0.1",
                linespacing=1.4)
    note(ax, 0.55, "Each block: m_new = max(m, block max);  l = l · 2^(m − m_new) + "
         "Σ 2^(x − m_new), the factor 1 when m does not move.\n"
         f"After the row: m = {fmt(steps[-1][1])}, l = {fmt(steps[-1][5])} = Σ 2^(x − m) "
         "over all 12 scores, so P_j = 2^(x_j − m) / l.")
    return save(fig, out, name)


# ---- chapter 04 -----------------------------------------------------------------------------

def draw_04(out):
    name = "concept_04_fused_loop.png"
    fig, ax = canvas(name, "Chapter 04: one fused kernel, S and P stay on chip "
                     "(fast, d = 64: Br = 128, Bc = 32)")
    band(ax, 6.0, 2.0, "device\nmemory\n(HBM)", HBM_BG)
    band(ax, 3.4, 2.2, "shared\nmemory", SMEM_BG)
    band(ax, 0.9, 2.1, "registers", REG_BG)
    # HBM.
    box(ax, 2.7, 6.3, 1.6, 1.3, "Q\nN×d", "white")
    box(ax, 6.0, 6.3, 5.8, 1.3, "K, V\nN×d each", "white")
    box(ax, 12.9, 6.3, 2.7, 1.3, "O (N×d)\nlse (N)", "white")
    # Shared memory.
    box(ax, 2.5, 3.7, 2.5, 1.6, "Q tile, transposed\nd×Br = 64×128\n×scale·log2 e",
        "white", edge=BLUE, lw=2.5)
    box(ax, 5.5, 3.7, 2.2, 1.6, "K_j, transposed\nd×Bc\n= 64×32", "white", edge=ORANGE,
        lw=2.5)
    box(ax, 8.0, 3.7, 2.2, 1.6, "P, transposed\nBc×Br\n= 32×128", "white", edge=PURPLE,
        lw=2.5)
    box(ax, 10.5, 3.7, 1.8, 1.6, "V_j\nBc×d\n= 32×64", "white", edge=ORANGE, lw=2.5)
    # Registers.
    box(ax, 5.5, 1.15, 3.0, 1.6, "S = Q_i·K_jᵀ\nBr×Bc = 128×32", "white", edge=PURPLE, lw=2.5)
    box(ax, 9.1, 1.15, 3.2, 1.6, "O_i = α·O_i + P·V_j\nBr×d = 128×64", "white", edge=GREEN,
        lw=2.5)
    box(ax, 13.0, 1.15, 2.5, 1.6, "m, l\nper row", "white", edge=GREEN, lw=2.5)
    # Traffic.
    arrow(ax, (3.5, 6.3), (3.5, 5.3), "once", tx=3.65, ty=5.8, color=BLUE, ha="left")
    arrow(ax, (6.6, 6.3), (6.6, 5.3), color=ORANGE)
    arrow(ax, (11.4, 6.3), (11.4, 5.3), color=ORANGE)
    ax.text(9.0, 5.78, "every tile j (N/Bc times)", ha="center", va="center", fontsize=FS,
            color=ORANGE)
    arrow(ax, (4.6, 3.7), (5.5, 2.5), color=BLUE)
    arrow(ax, (6.6, 3.7), (6.6, 2.75), color=ORANGE)
    arrow(ax, (8.1, 2.75), (8.6, 3.7), color=PURPLE)
    ax.text(7.9, 3.22, "P = 2^(S − m')", ha="right", va="center", fontsize=FS,
            color=PURPLE)
    arrow(ax, (9.6, 3.7), (9.9, 2.75), color=PURPLE)
    arrow(ax, (11.4, 3.7), (11.4, 2.75), color=ORANGE)
    arrow(ax, (12.3, 1.95), (13.0, 1.95), color=GREEN, style="<|-|>")
    arrow(ax, (14.25, 2.75), (14.25, 6.3), "once, at the end:\nO / l,  lse", tx=14.25,
          ty=4.5, color=GREEN, ha="center")
    # The loop.
    ax.add_patch(FancyBboxPatch((5.3, 1.0), 7.2, 4.45, boxstyle="round,pad=0.05",
                                fc="none", ec="0.35", lw=1.8, ls="--", zorder=1))
    ax.text(5.4, 0.72, "the loop over K/V tiles j", ha="left", va="center", fontsize=FS,
            color="0.3", style="italic")
    note(ax, 0.35, "Device memory sees Q, K, V in and O, lse out: the N×N grid is gone. "
         "α = 2^(m − m') rescales O and l when a tile raises m (chapter 03).", fs=FS)
    return save(fig, out, name)


# ---- chapter 05 -----------------------------------------------------------------------------

def draw_05(out):
    name = "concept_05_backward.png"
    fig, ax = canvas(name, "Chapter 05: the flash backward: a block owns a K/V tile and "
                     "walks the query tiles")
    # Left: the grid of tiles, the block's column, its walk down the query tiles.
    n, c = 6, 0.7
    gx, gy = 0.9, 1.45
    for i in range(n):
        for j in range(n):
            color = "#fde3c8" if j == 2 else "white"
            box(ax, gx + j * c, gy + (n - 1 - i) * c, c, c, "", color, lw=0.8,
                round_=False)
    box(ax, gx + 2 * c, gy + (n - 1 - 3) * c, c, c, "", ORANGE, edge="0.25", lw=0.8,
        round_=False)
    arrow(ax, (gx + 2.5 * c, gy + n * c - 0.15), (gx + 2.5 * c, gy + 0.15), color="0.15",
          lw=2.5)
    ax.text(gx + n * c / 2, gy + n * c + 0.35, "key tiles j (Bc = 64)", ha="center",
            va="center", fontsize=FS)
    ax.text(gx - 0.2, gy + n * c / 2, "query tiles i (Br = 64)", ha="right", va="center",
            fontsize=FS, rotation=90)
    ax.text(gx + n * c / 2, gy - 0.3, "one block per key tile j", ha="center", va="center",
            fontsize=FS, color="0.2")
    # Right: the bands.
    x0 = 5.6
    band(ax, 6.15, 1.85, "HBM", HBM_BG, x0=x0)
    band(ax, 3.6, 2.3, "shared\nmemory", SMEM_BG, x0=x0)
    band(ax, 1.05, 2.3, "registers", REG_BG, x0=x0)
    box(ax, 7.3, 6.45, 1.6, 1.25, "K, V", "white")
    box(ax, 9.1, 6.45, 2.3, 1.25, "Q, dO, L, D", "white")
    box(ax, 11.7, 6.45, 1.9, 1.25, "dK, dV\n(once, at the end)", "white", edge=GREEN,
        lw=2.5, fs=MIN_PT)
    box(ax, 13.9, 6.45, 1.7, 1.25, "dQ, float32\n(atomicAdd)", "white", edge=RED, lw=2.5,
        fs=MIN_PT)
    box(ax, 7.3, 3.85, 1.6, 1.8, "K_j, V_j\n64×d\nkept", "white", edge=ORANGE, lw=2.5)
    box(ax, 9.1, 3.85, 2.3, 1.8, "Q_i, dO_i (64×d)\nL_i, D_i\n(i+1 copied\nduring i)",
        "white", edge=BLUE, lw=2.5)
    box(ax, 11.7, 3.85, 1.6, 1.8, "P, dS\n64×64", "white", edge=PURPLE, lw=2.5)
    box(ax, 7.3, 1.3, 4.1, 1.8, "recompute S = Q_i·K_jᵀ\n"
        "P = exp2(S·scale·log2e − L·log2e)\ndP = dO·Vᵀ,  dS = P∘(dP − D)", "white",
        edge=PURPLE, lw=2.5)
    box(ax, 11.7, 1.3, 1.9, 1.8, "dV_j += Pᵀ·dO_i\ndK_j += dSᵀ·Q_i", "white", edge=GREEN,
        lw=2.5, fs=MIN_PT)
    box(ax, 13.9, 1.3, 1.7, 1.8, "dQ_i +=\ndS·K_j", "white", edge=RED, lw=2.5)
    arrow(ax, (8.1, 6.45), (8.1, 5.65), "once", tx=8.25, ty=6.05, ha="left", color=ORANGE)
    arrow(ax, (10.25, 6.45), (10.25, 5.65), "each i", tx=10.4, ty=6.05, ha="left",
          color=BLUE)
    arrow(ax, (8.1, 3.85), (8.1, 3.1), color=ORANGE)
    arrow(ax, (10.25, 3.85), (10.25, 3.1), color=BLUE)
    arrow(ax, (11.4, 2.9), (12.1, 3.85), color=PURPLE)
    arrow(ax, (12.9, 3.85), (12.9, 3.1), color=PURPLE)
    arrow(ax, (13.45, 3.1), (13.45, 6.45), color=GREEN)
    arrow(ax, (14.75, 3.1), (14.75, 6.45), "atomicAdd,\neach i", tx=14.75, ty=4.75,
          color=RED)
    ax.text(0.4, 0.5, "Only K_j, V_j stay; Q, dO, L, D stream past. P is recomputed from L "
            "(no N×N grid anywhere); dQ sums over key tiles that live in different blocks, "
            "hence the atomics.", ha="left", va="center", fontsize=MIN_PT, color="0.2")
    return save(fig, out, name)


# ---- chapter 06 -----------------------------------------------------------------------------

def lane_cell(lane, transposed=False):
    """(row, col) of the first element of `lane`'s pair in an 8×8 block (fragment.hpp's
    pair_in_block); B's blocks are transposed: column l/4, rows 2·(l%4), +1."""
    g, t = lane // 4, lane % 4
    return (2 * t, g) if transposed else (g, 2 * t)


def draw_block(ax, x, y, cell, transposed, edge, title):
    """An 8×8 block with each lane's number in its two cells (a pair)."""
    for lane in range(32):
        r, c = lane_cell(lane, transposed)
        w, h = (cell, 2 * cell) if transposed else (2 * cell, cell)
        bx, by = x + c * cell, y + (8 - r) * cell - h
        box(ax, bx, by, w, h, f"{lane}", "#ffffff" if (lane // 4) % 2 else "#eef3f8",
            fs=MIN_PT, lw=1.0, round_=False, edge="0.4")
    ax.add_patch(Rectangle((x, y), 8 * cell, 8 * cell, fc="none", ec=edge, lw=3))
    ax.text(x + 4 * cell, y + 8 * cell + 0.3, title, ha="center", va="center",
            fontsize=FS, fontweight="bold", color=edge)


def draw_fragment(ax, x, y, cell, rows, cols, regs, edge, title):
    """A fragment of 8×8 blocks, each named by the registers that cover it."""
    for (bi, bj), text in regs.items():
        box(ax, x + bj * 8 * cell, y + (rows // 8 - 1 - bi) * 8 * cell, 8 * cell, 8 * cell,
            text, "white", edge=edge, lw=2.5, fs=FS_BIG, round_=False)
    ax.text(x + cols * cell / 2, y + rows * cell + 0.32, title, ha="center", va="center",
            fontsize=FS, fontweight="bold", color=edge)


def draw_06(out):
    name = "concept_06_fragments.png"
    fig, ax = canvas(name, "Chapter 06: mma.sync m16n8k16: which lane holds what "
                     "(D = A·B + C, one warp)")
    cell = 0.4
    draw_block(ax, 0.6, 3.2, cell, False, BLUE, "an 8×8 block of A or C")
    draw_block(ax, 4.5, 3.2, cell, True, ORANGE, "an 8×8 block of B (transposed)")
    ax.text(0.6, 2.55, "lane l: row l/4, columns 2·(l%4), +1\n(one 32-bit register: "
            "the smaller column in the low half)", ha="left", va="center", fontsize=FS,
            color=BLUE)
    ax.text(4.5, 1.45, "lane l: column l/4,\nrows 2·(l%4), +1", ha="left", va="center",
            fontsize=FS, color=ORANGE)
    # The fragments, in blocks; A's registers go down, then across.
    c2 = 0.17
    fy = 3.2
    draw_fragment(ax, 8.8, fy, c2, 16, 16, {(0, 0): "a0,a1", (1, 0): "a2,a3",
                                            (0, 1): "a4,a5", (1, 1): "a6,a7"}, BLUE,
                  "A  16×16 (m × k)")
    draw_fragment(ax, 12.6, fy, c2, 16, 8, {(0, 0): "b0,b1", (1, 0): "b2,b3"}, ORANGE,
                  "B  16×8 (k×n)")
    draw_fragment(ax, 14.3, fy, c2, 16, 8, {(0, 0): "c0,c1", (1, 0): "c2,c3"}, GREEN,
                  "C, D  16×8")
    for k, (xx, lab) in enumerate(((8.8, "k 0-7"), (8.8 + 8 * c2, "k 8-15"))):
        ax.text(xx + 4 * c2, fy - 0.25, lab, ha="center", va="center", fontsize=MIN_PT)
    ax.text(8.7, fy + 12 * c2, "m 0-7", ha="right", va="center", fontsize=MIN_PT)
    ax.text(8.7, fy + 4 * c2, "m 8-15", ha="right", va="center", fontsize=MIN_PT)
    ax.text(12.6 + 4 * c2, fy - 0.25, "n 0-7", ha="center", va="center", fontsize=MIN_PT)
    ax.text(14.3 + 4 * c2, fy - 0.25, "n 0-7", ha="center", va="center", fontsize=MIN_PT)
    ax.text(8.8, 1.9, "A: 4 registers of 2 bf16 (reg 0 = a0,a1 ... reg 3 = a6,a7),\n"
            "     down, then across\n"
            "B: 2 registers of 2 bf16, its blocks transposed\n"
            "C, D: 4 floats, not packed", ha="left", va="center", fontsize=FS,
            color="0.15", linespacing=1.4)
    ax.text(0.6, 0.6, "Every fragment is made of 8×8 blocks with the lanes placed the same "
            "way;\nonly which register covers which block differs (common/sm80/fragment.hpp).",
            ha="left", va="center", fontsize=FS, color="0.2")
    return save(fig, out, name)


# ---- chapter 07 -----------------------------------------------------------------------------

def draw_07(out):
    name = "concept_07_warps.png"
    fig, ax = canvas(name, "Chapter 07: 4 warps split the 128-row Q tile and share the "
                     "64-key K/V tile (tuned)")
    # Left: Q tile | S tile (under K_jᵀ) | V_j, O per warp.
    r = 0.045           # inches per row / key
    qx, sx = 0.9, 2.6
    y0 = 0.9            # bottom of the 128 rows
    qw, sw = 1.3, 64 * r
    kh = 1.25
    ky = y0 + 128 * r + 0.25
    box(ax, sx, ky, sw, kh, "K_jᵀ  (64 keys)\nshared memory", SMEM_BG, edge=ORANGE, lw=2.5,
        round_=False, fs=FS)
    for w in range(4):
        yb = y0 + (3 - w) * 32 * r
        box(ax, qx, yb, qw, 32 * r, f"Q rows\n{32 * w}-{32 * w + 31}", SMEM_BG,
            edge=WARPS[w], lw=2.5, round_=False, fs=MIN_PT)
        box(ax, sx, yb, sw, 32 * r, f"warp {w}: S, P\n(32×64, registers)", "white",
            edge=WARPS[w], lw=2.5, round_=False, fs=FS)
    ax.text(qx + qw / 2, ky + kh / 2, "Q tile\n128×d", ha="center", va="center",
            fontsize=FS, fontweight="bold")
    vx = sx + sw + 0.6
    box(ax, vx, ky, 1.6, kh, "V_j  (64×d)\nshared\nmemory", SMEM_BG, edge=ORANGE, lw=2.5,
        round_=False, fs=MIN_PT)
    for w in range(4):
        yb = y0 + (3 - w) * 32 * r
        box(ax, vx, yb, 1.6, 32 * r, f"O, m, l\nwarp {w}", REG_BG, edge=WARPS[w], lw=2.5,
            round_=False, fs=MIN_PT)
        arrow(ax, (sx + sw, yb + 16 * r), (vx, yb + 16 * r), color=WARPS[w], lw=2)
    ax.text(qx, 0.45, "every warp reads the same K_j, V_j: one copy serves the block;\n"
            "a row's max, sum and O stay in one warp (no barrier for the softmax)",
            ha="left", va="center", fontsize=FS, color="0.2")
    # Right: the S accumulators are P's A operand, lane for lane.
    c = 0.095
    ax.text(8.4, 7.75, "P never touches shared memory:", ha="left", va="center",
            fontsize=FS_BIG, fontweight="bold")
    ax.text(8.4, 7.25, "the S accumulators over 16 keys are the A operand of P·V",
            ha="left", va="center", fontsize=FS)
    ax_y = 1.9
    cells = {(0, 0): ("S0.c0,c1", "a0,a1", BLUE), (1, 0): ("S0.c2,c3", "a2,a3", ORANGE),
             (0, 1): ("S1.c0,c1", "a4,a5", GREEN), (1, 1): ("S1.c2,c3", "a6,a7", RED)}
    for side, x in ((0, 8.7), (1, 12.5)):
        for (bi, bj), texts in cells.items():
            box(ax, x + bj * 8 * c * 2, ax_y + (1 - bi) * 8 * c * 2.6, 16 * c, 8 * c * 2.6,
                texts[side], "white", edge=texts[2], lw=3, fs=FS_BIG, round_=False)
        top = ax_y + 2 * 8 * c * 2.6
        ax.text(x + 16 * c, top + 0.75,
                ("S accumulators (float)\ntwo 16×8 tiles: S0, S1" if side == 0 else
                 "P as A operand (bf16 pairs)\none 16×16 fragment"),
                ha="center", va="center", fontsize=FS, fontweight="bold")
        ax.text(x + 8 * c, top + 0.2, "keys 0-7" if side == 0 else "k 0-7", ha="center",
                va="center", fontsize=MIN_PT)
        ax.text(x + 24 * c, top + 0.2, "keys 8-15" if side == 0 else "k 8-15", ha="center",
                va="center", fontsize=MIN_PT)
    ax.text(8.6, ax_y + 8 * c * 2.6 * 1.5, "m 0-7", ha="right", va="center",
            fontsize=MIN_PT)
    ax.text(8.6, ax_y + 8 * c * 2.6 * 0.5, "m 8-15", ha="right", va="center",
            fontsize=MIN_PT)
    arrow(ax, (8.7 + 32 * c + 0.05, ax_y + 8 * c * 2.6), (12.45, ax_y + 8 * c * 2.6),
          "", color="0.2", lw=3)
    ax.text(8.4, 1.2, "the same lanes, the same places: only float → bf16, "
            "in the registers\n(one cvt.rn.bf16x2.f32 per pair), then O += P·V_j",
            ha="left", va="center", fontsize=FS, color="0.2")
    return save(fig, out, name)


# ---- chapter 08 -----------------------------------------------------------------------------

def draw_08(out):
    name = "concept_08_transposed_products.png"
    fig, ax = canvas(name, "Chapter 08: the backward computes Sᵀ = K·Qᵀ, so the keys sit "
                     "on the accumulator rows")
    # Left: the block's keys, split among its warps (plain: 64 keys, 4 warps). Right: what
    # warp w does per query tile i (flash_backward_tc.cuh), in HBM, shared memory, registers.
    lx, lw = 0.4, 3.7
    ax.text(lx + lw / 2, 7.75, "a block: Bc = 64 keys\n(its K, V tile), 4 warps", ha="center",
            va="center", fontsize=FS_BIG, fontweight="bold")
    wh, wtop = 1.2, 7.1
    for w in range(4):
        yb = wtop - (w + 1) * wh
        box(ax, lx, yb, lw, wh - 0.1, f"warp {w}: keys {16 * w}-{16 * w + 15}\n"
            "dK, dV rows in registers", REG_BG, edge=WARPS[w], lw=2.5, round_=False, fs=FS)
    ax.text(lx + lw / 2, 1.75, "walks every query tile i,\nBr = 64 (32 at d = 128);\n"
            "wide_kv, async: 8 warps, 128 keys", ha="center", va="center", fontsize=FS,
            color="0.2", linespacing=1.3)
    # Right: the bands, four columns.
    band(ax, 6.7, 1.5, "HBM", HBM_BG, x0=4.5)
    band(ax, 4.25, 2.0, "shared\nmemory", SMEM_BG, x0=4.5)
    band(ax, 1.3, 2.45, "registers", REG_BG, x0=4.5)
    c = [6.3, 8.75, 11.2, 13.65]  # the columns' left edges, 1.95 wide
    cw = 1.95
    hy, hh = 6.85, 1.2
    box(ax, c[0], hy, cw, hh, "K, V", "white")
    box(ax, c[1], hy, cw, hh, "Q, dO, L, D", "white")
    box(ax, c[2], hy, cw, hh, "dK, dV\nonce, at the end", "white", edge=GREEN, lw=2.5)
    box(ax, c[3], hy, cw, hh, "dQ, float32\natomicAdd, each i", "white", edge=RED, lw=2.5,
        fs=MIN_PT)
    sy, sh = 4.45, 1.6
    box(ax, c[0], sy, cw, sh, "K, V\n64×d, kept", "white", edge=ORANGE, lw=2.5)
    box(ax, c[1], sy, cw, sh, "Q_i, dO_i\nBr×d\nL_i, D_i", "white", edge=BLUE, lw=2.5)
    box(ax, c[3], sy, 1.45, sh, "dSᵀ\n[key]\n[query]", "white", edge=PURPLE, lw=2.5)
    ry, rh = 1.5, 2.05
    box(ax, c[0], ry, c[1] + cw - c[0], rh, "Sᵀ = K_w·Qᵀ,   dPᵀ = V_w·dOᵀ\n"
        "16 keys (rows) × Br queries\nPᵀ, dSᵀ: A of dV, dK as they lie", "white",
        edge=PURPLE, lw=2.5)
    box(ax, c[2], ry, cw, rh, "dV += Pᵀ·dO\ndK += dSᵀ·Q\nfloat32, kept", "white",
        edge=GREEN, lw=2.5)
    box(ax, c[3], ry, cw, rh, "dQ_i += dS·K", "white", edge=RED, lw=2.5)
    # Traffic between HBM and shared memory.
    arrow(ax, (c[0] + 0.5, hy), (c[0] + 0.5, sy + sh), "once", tx=c[0] + 0.65,
          ty=(hy + sy + sh) / 2, ha="left", color=ORANGE)
    arrow(ax, (c[1] + 0.5, hy), (c[1] + 0.5, sy + sh), "each i", tx=c[1] + 0.65,
          ty=(hy + sy + sh) / 2, ha="left", color=BLUE)
    # The products' operands: into the Sᵀ box from the rows as stored.
    arrow(ax, (c[0] + 0.5, sy), (c[0] + 0.5, ry + rh), "A", tx=c[0] + 0.65,
          ty=(sy + ry + rh) / 2, ha="left", color=ORANGE, fs=FS_BIG)
    arrow(ax, (c[1] + 0.5, sy), (c[1] + 0.5, ry + rh), "B, as stored", tx=c[1] + 0.65,
          ty=(sy + ry + rh) / 2, ha="left", color=BLUE)
    # dO, Q again as the B operands of dV, dK: ldmatrix.trans.
    arrow(ax, (c[1] + cw, sy + 0.35), (c[2] + 0.55, ry + rh), color=BLUE, lw=2.6)
    ax.text(c[2] + 0.05, sy + 0.95, "B = dO, Q:\nldmatrix\n.trans", ha="left", va="center",
            fontsize=FS, color=BLUE, fontweight="bold", linespacing=1.15)
    # The accumulators into dV, dK in place.
    arrow(ax, (c[1] + cw, ry + rh / 2), (c[2], ry + rh / 2), color=PURPLE, lw=3)
    # dSᵀ to shared memory and back transposed as dQ's A.
    arrow(ax, (c[2] + cw, ry + rh - 0.25), (c[3], sy + 0.45), color=PURPLE)
    arrow(ax, (c[3] + 0.45, sy), (c[3] + 0.45, ry + rh), color=PURPLE, lw=2.6)
    ax.text(c[3] + 0.55, (sy + ry + rh) / 2, "A = dS:\n.trans", ha="left",
            va="center", fontsize=MIN_PT, color=PURPLE, fontweight="bold")
    # Out to HBM: dK, dV once; dQ by atomics each query tile.
    arrow(ax, (c[2] + 1.6, ry + rh), (c[2] + 1.6, hy), color=GREEN)
    arrow(ax, (c[3] + 1.72, ry + rh), (c[3] + 1.72, hy), color=RED)
    note(ax, 0.62, "Read transposed with ldmatrix.trans: dO and Q (B of dV, dK), dS (A of dQ; "
         "K is its B). dK, dV never leave the chip until the end;\n"
         "only dQ has queries on its rows: it leaves every query tile by float32 atomics "
         "(dq_pass: no atomics, a second kernel per query tile recomputes S, dP).", fs=MIN_PT)
    return save(fig, out, name)


# ---- chapter 09 -----------------------------------------------------------------------------

def draw_09(out):
    """Schematic, not measured: a turn's products and a softmax drawn equally long, the case
    in which ping-pong keeps the tensor cores busy all the time."""
    name = "concept_09_pingpong.png"
    fig, ax = canvas(name, "Chapter 09: a producer, two consumers taking turns (pingpong, schematic)")
    x0, slot = 3.0, 1.25  # time: one slot = one turn's products = one softmax
    rows = {"producer\n(1 thread)": 6.7, "consumer 0\n(rows 0-63)": 5.2,
            "consumer 1\n(rows 64-127)": 3.7, "tensor\ncores": 2.2}
    for label, y in rows.items():
        ax.text(0.4, y + 0.45, label, ha="left", va="center", fontsize=FS_BIG, fontweight="bold",
                color="0.25", linespacing=1.15)
        ax.plot([x0 - 0.1, WIDTH_IN - 0.3], [y - 0.08, y - 0.08], color="0.8", lw=1)
    t = lambda k: x0 + k * slot
    # The producer: Q and K/V tiles 0-2 into three stages at once, then tile 3 only when
    # both consumers have released stage 0 (tile 0's P·V done: consumer 1's turn 1).
    yp = rows["producer\n(1 thread)"]
    box(ax, t(-0.0), yp, 0.55 * slot, 0.9, "Q\nK/V 0", "#eeeeee", round_=False)
    box(ax, t(0.55), yp, 0.55 * slot, 0.9, "K/V 1", "#eeeeee", round_=False)
    box(ax, t(1.1), yp, 0.55 * slot, 0.9, "K/V 2", "#eeeeee", round_=False)
    ax.text(t(2.5), yp + 0.45, "waits: empty[0]", ha="center", va="center", fontsize=FS,
            color="0.35", style="italic")
    box(ax, t(4.65), yp, 0.55 * slot, 0.9, "K/V 3", "#eeeeee", round_=False)
    box(ax, t(6.65), yp, 0.55 * slot, 0.9, "K/V 4", "#eeeeee", round_=False)
    # The consumers: turn (products) and softmax alternate; consumer 1 one slot behind.
    turns = ["S₀", "P₀V₀\n+ S₁", "P₁V₁\n+ S₂", "P₂V₂\n+ S₃", "P₃V₃\n+ S₄"]
    for c, (label, color) in enumerate((("consumer 0\n(rows 0-63)", BLUE),
                                        ("consumer 1\n(rows 64-127)", ORANGE))):
        y = rows[label]
        for j in range(len(turns)):
            k = 2 * j + c + 0.6
            if t(k + 2) > WIDTH_IN - 0.3:
                break
            box(ax, t(k), y, slot, 0.9, turns[j], color, tcolor="white", fs=FS, round_=False)
            box(ax, t(k + 1), y, slot, 0.9, f"softmax {j}", "white", edge=color, lw=2.5,
                round_=False)
            yt = rows["tensor\ncores"]
            box(ax, t(k), yt, slot, 0.9, f"c{c}", color, tcolor="white", round_=False)
        # The turn handed over: consumer c arrives on the other's named barrier.
    for k in range(1, 9):
        c = (k - 1) % 2
        y_from = rows["consumer 0\n(rows 0-63)"] if c == 0 else rows["consumer 1\n(rows 64-127)"]
        y_to = rows["consumer 1\n(rows 64-127)"] if c == 0 else rows["consumer 0\n(rows 0-63)"]
        xk = t(k + 0.6)
        if xk > WIDTH_IN - 0.6:
            break
        arrow(ax, (xk - 0.05, y_from + (0 if c == 0 else 0.9)), (xk + 0.05, y_to + (0.9 if c == 0 else 0)),
              color="0.3", lw=1.6)
    for k in (4.6, 6.6):  # consumer 1's P·V of tile k done: the last reader frees its stage
        arrow(ax, (t(k), rows["consumer 1\n(rows 64-127)"] + 0.9), (t(k + 0.05), yp),
              color=GREEN, ls="--", lw=2.4)
    note(ax, 1.35, "A turn issues one consumer's products (Pⱼ₋₁·Vⱼ₋₁ and Sⱼ = Q·Kⱼᵀ) "
         "and hands the tensor cores to the other (bar.arrive / bar.sync);")
    note(ax, 0.85, "its softmax runs while the other's products do. The producer runs three "
         "tiles ahead; green: a stage freed once both consumers read it.")
    note(ax, 0.35, "Drawn for equal times: a turn's products and a softmax; where the softmax "
         "is shorter (d = 128), the tensor cores idle less still.")
    return save(fig, out, name)


def draw_10(out):
    """Schematic, not measured: one consumer's work on a query tile in chapter 10's step 3,
    drawn in the order the code runs it, each phase its own width; the second consumer the
    same, a little behind; where the tensor cores wait on the threads."""
    name = "concept_10_timeline.png"
    fig, ax = canvas(name, "Chapter 10: a block's work on query tiles j and j + 1 (bulk_dq, schematic)")
    x0 = 2.75
    rows = {"producer\n(1 thread)": 6.9, "consumer 0\n(keys 0-63)": 5.35,
            "consumer 1\n(keys 64-127)": 3.95, "adder\n(1 warp)": 2.55}
    for label, y in rows.items():
        ax.text(0.4, y + 0.45, label, ha="left", va="center", fontsize=FS_BIG, fontweight="bold",
                color="0.25", linespacing=1.15)
        ax.plot([x0 - 0.1, WIDTH_IN - 0.3], [y - 0.08, y - 0.08], color="0.8", lw=1)
    # One tile's phases: (label, width, kind): "mma" runs on the tensor cores, "reg" on the
    # consumer's own registers, "wait" is a consumer waiting (barrier or wgmma.wait).
    phases = [("Sᵀ, dPᵀ", 1.15, "mma"), ("wait", 0.45, "wait"), ("P, dS", 0.95, "reg"),
              ("dV, dK", 0.95, "mma"), ("dSᵀ→smem\nmeet", 1.05, "wait"), ("dQ", 0.65, "mma"),
              ("wait", 0.45, "wait"), ("dQ→\nsmem", 0.75, "reg")]
    tile_w = sum(w for _, w, _ in phases)
    fill = {"reg": "white", "wait": "#eeeeee"}
    for c, (label, color) in enumerate((("consumer 0\n(keys 0-63)", BLUE), ("consumer 1\n(keys 64-127)", ORANGE))):
        y = rows[label]
        for j in range(2):
            x = x0 + j * tile_w + 0.12 * c
            for text, w, kind in phases:
                if kind == "mma":
                    box(ax, x, y, w, 0.9, text, color, tcolor="white", round_=False)
                else:
                    box(ax, x, y, w, 0.9, text, fill[kind], edge=color, lw=2.0, round_=False, fs=MIN_PT)
                x += w
    # The producer: tile j + 1's Q and dO into the other stage while tile j is computed; tile
    # j + 2's once both consumers release tile j's stage (after dQ's wait: the dashed arrows).
    yp = rows["producer\n(1 thread)"]
    box(ax, x0, yp, 1.0, 0.9, "Q, dO\nj + 1", "#eeeeee", round_=False)
    release = x0 + tile_w - 0.75
    box(ax, release + 0.3, yp, 1.0, 0.9, "Q, dO\nj + 2", "#eeeeee", round_=False)
    for c, label in enumerate(("consumer 0\n(keys 0-63)", "consumer 1\n(keys 64-127)")):
        arrow(ax, (release + 0.12 * c, rows[label] + 0.9), (release + 0.3, yp + 0.1), color=GREEN, ls="--", lw=2.0)
    # The adder: tile j's dQ rows to the copy engine while the consumers start tile j + 1.
    ya = rows["adder\n(1 warp)"]
    box(ax, x0 + tile_w + 0.15, ya, 3.6, 0.9, "bulk adds of tile j's dQ\n(by the copy engine)", PURPLE,
        tcolor="white", round_=False)
    note(ax, 1.75, "Dark: products on the tensor cores; white: the consumer's own arithmetic; grey: "
         "waiting (wgmma results, the two consumers' barriers).")
    note(ax, 1.2, "Every white and grey box of one consumer is time its tensor-core work does not "
         "fill, unless the other consumer's products land there.")
    note(ax, 0.65, "Both consumers meet twice a tile (dSᵀ before dQ; dQ before the next dSᵀ): "
         "they cannot drift a whole phase apart.")
    return save(fig, out, name)


def block_work(tiles_per_head, heads, blocks, pairs):
    """K/V tiles each persistent block reads under the causal mask (query tile i of a head
    reads i + 1 of them), when the grid's blocks take query tiles round-robin, one at a time
    with the last of a head first (pairs=False), or pairs of them, the i-th from a head's
    end with the i-th from its start (pairs=True): chapter 09's TileOrder, counted."""
    work = [0] * blocks
    if not pairs:
        for t in range(tiles_per_head * heads):
            work[t % blocks] += tiles_per_head - t % tiles_per_head
    else:
        per_head = (tiles_per_head + 1) // 2
        for p in range(per_head * heads):
            i = p % per_head
            both = {tiles_per_head - 1 - i, i}  # one tile when i is the middle one
            work[p % blocks] += sum(q + 1 for q in both)
    return work


def draw_09_pairs(out):
    """Counted, not measured: the work of each block of a persistent grid on the H200's 132
    SMs at d = 128, N = 16384 (128 query tiles a head), 16 heads, causal."""
    name = "concept_09_pairs.png"
    fig = plt.figure(figsize=(WIDTH_IN, FIGURES[name]), dpi=DPI)
    fig.text(0.025, 0.95, "Chapter 09: which query tiles a persistent block takes, under the causal mask",
             fontsize=FS_TITLE, fontweight="bold", va="center")
    blocks, tiles, heads = 132, 128, 16
    panels = (("round-robin", False, BLUE), ("pairs (i, 127 − i)", True, ORANGE))
    for k, (label, pairs, color) in enumerate(panels):
        ax = fig.add_axes([0.07 + 0.5 * k, 0.2, 0.41, 0.65])
        work = block_work(tiles, heads, blocks, pairs)
        ax.bar(range(blocks), work, width=1.0, color=color)
        mean = sum(work) / blocks
        ax.axhline(mean, color="0.2", lw=2, ls="--")
        ax.text(blocks - 1, mean * 1.02, f"mean {mean:.0f}", ha="right", va="bottom", fontsize=FS)
        ax.set_title(f"{label}: the slowest block {max(work) / mean:.2f}× the mean", fontsize=FS_BIG)
        ax.set_xlabel("block (one an SM)", fontsize=FS)
        ax.set_ylabel("K/V tiles read", fontsize=FS)
        ax.set_xlim(-0.5, blocks - 0.5)
        ax.set_ylim(0, 1.15 * max(block_work(tiles, heads, blocks, False)))
        ax.tick_params(labelsize=FS)
    fig.text(0.025, 0.06, "B = 1, H = 16, N = 16384, d = 128: 2048 query tiles of 128 rows on 132 "
             "blocks; the kernel ends when its slowest block does.", fontsize=FS, color="0.2")
    return save(fig, out, name)


DRAW = (draw_01, draw_02, draw_03, draw_04, draw_05, draw_06, draw_07, draw_08, draw_09, draw_09_pairs,
        draw_10)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="the folder the PNGs go to (e.g. plots/figures)")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    for draw in DRAW:
        path = draw(args.out)
        print(f"concept {os.path.basename(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
