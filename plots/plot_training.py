#!/usr/bin/env python3
"""Draws the training curves of scripts/train_gpt.py: PyTorch's FlashAttention-2 (one band
over its seeds) against the tutorial's attention (its curve on top), and says whether the
tutorial's final loss lies inside PyTorch's band and how their step times compare.

  python3 plots/plot_training.py RUN.csv [RUN.csv ...] [--out plots/figures/training.png]
  python3 plots/plot_training.py                 # plots/results/h200/training.csv, all runs

The input: one or more CSVs of train_gpt.py (columns ``attention,seed,step,loss,val_loss,ms``
first; more are ignored), each holding one run or several concatenated (a header line
repeated inside the file, as ``cat a.csv b.csv`` leaves it, is skipped). A run is one
(attention, seed). ``attention`` ``flashtut`` is the tutorial's; every other value
(``sdpa_flash``, ``sdpa_math``) is PyTorch's.

The figure (1600 x 900 pixels, text 14 pt and up, for a slide): the training loss against
the step, smoothed by a trailing moving average of ``--smooth`` steps (the raw values as a
thin line with ``--raw``); PyTorch's seeds as a shaded band from the lowest to the highest
smoothed curve at each step, each seed a thin line; the tutorial's runs as bold lines on
top; validation losses as markers (circles PyTorch, diamonds the tutorial). The right panel
zooms into the second half of the steps. The legend gives each run's median step time (the
first ``--skip`` steps left out, as train_gpt.py's summary does).

Printed: per run, the final training loss (the mean of the last ``--last`` steps), the last
validation loss and the median step time; then whether each tutorial run's final training
and validation losses lie inside the [min, max] of PyTorch's runs' (and by how much it
differs from the PyTorch run of the same seed, which saw the same batches from the same
initial weights), and the ratio of the tutorial's median step time to PyTorch's (the mean
of its runs' medians). Exit 0 once drawn, whatever the comparison says; 2 for input it
cannot read (the file and line named).
"""
import argparse
import csv
import math
import os
import statistics
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_IN = os.path.join(HERE, "results", "h200", "training.csv")
DEFAULT_OUT = os.path.join(HERE, "figures", "training.png")
REQUIRED = ("attention", "seed", "step", "loss", "val_loss", "ms")
TUTORIAL = "flashtut"

# The concept pictures' style (plots/concepts.py): a slide's width, nothing under 14 pt.
DPI, WIDTH_IN, HEIGHT_IN = 100, 16.0, 9.0
FS, FS_TITLE, FS_SMALL = 16, 22, 14
PNG_META = {"Software": None}
PALETTE = plt.get_cmap("tab10").colors
TORCH_COLOR, TUTORIAL_COLORS = PALETTE[0], (PALETTE[3], PALETTE[2], PALETTE[4], PALETTE[1])
plt.rcParams.update({"font.size": FS, "axes.titlesize": FS_TITLE - 2, "axes.labelsize": FS,
                     "xtick.labelsize": FS_SMALL, "ytick.labelsize": FS_SMALL,
                     "legend.fontsize": FS_SMALL, "font.family": "DejaVu Sans"})


class InputError(Exception):
    pass


class Run:
    def __init__(self, attention, seed):
        self.attention, self.seed = attention, seed
        self.steps, self.loss, self.ms = [], [], []
        self.val = []  # (step, val_loss)
        self.where = None

    @property
    def tutorial(self):
        return self.attention == TUTORIAL

    @property
    def label(self):
        return f"{self.attention} seed {self.seed}"

    def final_loss(self, last):
        return statistics.fmean(self.loss[-last:])

    def final_val(self):
        return self.val[-1][1] if self.val else float("nan")

    def median_ms(self, skip):
        timed = self.ms[skip:] if len(self.ms) > skip else self.ms
        return statistics.median(timed)


def number(text, where, column):
    try:
        return float(text)
    except ValueError:
        raise InputError(f"{where}: {column} is {text!r}, not a number") from None


def read_runs(paths):
    """{(attention, seed): Run}, in the order first seen; each run's rows sorted by step."""
    runs = {}
    for path in paths:
        try:
            fh = open(path, newline="")
        except OSError as e:
            raise InputError(f"cannot read {path}: {e.strerror}") from None
        with fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None:
                raise InputError(f"{path} is empty")
            missing = [c for c in REQUIRED if c not in header]
            if missing:
                raise InputError(f"{path}:1: no column {', '.join(missing)} (train_gpt.py's CSV "
                                 f"starts with {','.join(REQUIRED)})")
            col = {c: header.index(c) for c in REQUIRED}
            seen_here = set()
            for line, row in enumerate(reader, start=2):
                if not row or row == header:  # a blank line, or the next file's header
                    continue
                where = f"{path}:{line}"
                if len(row) < len(header):
                    raise InputError(f"{where}: {len(row)} fields, the header has {len(header)}")
                key = (row[col["attention"]], row[col["seed"]])
                run = runs.get(key)
                if run is None:
                    run = runs[key] = Run(*key)
                    run.where = path
                elif key not in seen_here and run.where != path:
                    raise InputError(f"{where}: run {key[0]} seed {key[1]} is also in {run.where}: "
                                     f"give each run once")
                seen_here.add(key)
                step = int(number(row[col["step"]], where, "step"))
                if step in run.steps:
                    raise InputError(f"{where}: step {step} of {key[0]} seed {key[1]} appears twice")
                run.steps.append(step)
                run.loss.append(number(row[col["loss"]], where, "loss"))
                run.ms.append(number(row[col["ms"]], where, "ms"))
                if row[col["val_loss"]].strip():
                    run.val.append((step, number(row[col["val_loss"]], where, "val_loss")))
    if not runs:
        raise InputError(f"no rows in {', '.join(paths)}")
    for run in runs.values():
        by_step = sorted(range(len(run.steps)), key=run.steps.__getitem__)
        run.steps = [run.steps[i] for i in by_step]
        run.loss = [run.loss[i] for i in by_step]
        run.ms = [run.ms[i] for i in by_step]
        run.val.sort()

    def rank(r):  # PyTorch's runs first, then the tutorial's, each by seed (as a number if one)
        seed = int(r.seed) if r.seed.lstrip("-").isdigit() else 0
        return (r.tutorial, r.attention, seed, r.seed)
    return sorted(runs.values(), key=rank)


def smooth(values, window):
    """Trailing moving average (the first points average what there is so far)."""
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def band(runs, window):
    """(steps, low, high) over the steps every run has: the smoothed curves' envelope."""
    common = sorted(set.intersection(*(set(r.steps) for r in runs)))
    curves = [dict(zip(r.steps, smooth(r.loss, window))) for r in runs]
    return (common, [min(c[s] for c in curves) for s in common],
            [max(c[s] for c in curves) for s in common])


def draw(runs, args):
    torch_runs = [r for r in runs if not r.tutorial]
    ours = [r for r in runs if r.tutorial]
    fig, (ax, zoom) = plt.subplots(1, 2, figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI,
                                   gridspec_kw={"width_ratios": [3, 2]})
    last_step = max(r.steps[-1] for r in runs)
    zoom_from = max(1, last_step // 2)
    zoom_values = []
    for axis in (ax, zoom):
        if len(torch_runs) > 1:
            steps, low, high = band(torch_runs, args.smooth)
            names = ", ".join(str(r.seed) for r in torch_runs)
            axis.fill_between(steps, low, high, color=TORCH_COLOR, alpha=0.3, lw=0, zorder=1,
                              label=f"PyTorch, {torch_runs[0].attention}: band of seeds {names}")
            zoom_values += [v for s, a, b in zip(steps, low, high) if s >= zoom_from for v in (a, b)]
        for r in torch_runs:
            sm = smooth(r.loss, args.smooth)
            if args.raw:
                axis.plot(r.steps, r.loss, color=TORCH_COLOR, lw=0.6, alpha=0.35, zorder=1)
            axis.plot(r.steps, sm, color=TORCH_COLOR, lw=1.2, alpha=0.8, zorder=2,
                      label=f"PyTorch {r.attention}, seed {r.seed}: "
                            f"{r.median_ms(args.skip):.1f} ms/step")
            if r.val:
                axis.plot(*zip(*r.val), "o", color=TORCH_COLOR, ms=8, mec="white", mew=1.0,
                          zorder=4, label=None if r is not torch_runs[0] else
                          "PyTorch: validation loss (every seed)")
            zoom_values += [v for s, v in zip(r.steps, sm) if s >= zoom_from]
            zoom_values += [v for s, v in r.val if s >= zoom_from]
        for i, r in enumerate(ours):
            color = TUTORIAL_COLORS[i % len(TUTORIAL_COLORS)]
            sm = smooth(r.loss, args.smooth)
            if args.raw:
                axis.plot(r.steps, r.loss, color=color, lw=0.6, alpha=0.35, zorder=3)
            axis.plot(r.steps, sm, color=color, lw=2.6, zorder=5,
                      label=f"tutorial (ch07 + ch08), seed {r.seed}: "
                            f"{r.median_ms(args.skip):.1f} ms/step")
            if r.val:
                axis.plot(*zip(*r.val), "D", color=color, ms=9, mec="white", mew=1.0, zorder=6,
                          label=f"tutorial, seed {r.seed}: validation loss")
            zoom_values += [v for s, v in zip(r.steps, sm) if s >= zoom_from]
            zoom_values += [v for s, v in r.val if s >= zoom_from]
        axis.grid(True, color="0.88", zorder=0)
        axis.set_xlabel("step")
    ax.set_ylabel(f"loss (nats per byte; training: mean of {args.smooth} steps)")
    ax.set_title("the whole run")
    zoom.set_title(f"steps {zoom_from}-{last_step}")
    pad_x = max(1, (last_step - zoom_from) // 40)
    zoom.set_xlim(zoom_from - pad_x, last_step + pad_x)
    finite = [v for v in zoom_values if math.isfinite(v)]
    if finite:
        lo, hi = min(finite), max(finite)
        pad = 0.08 * (hi - lo) if hi > lo else 0.05 * abs(hi) + 1e-3
        zoom.set_ylim(lo - pad, hi + pad)
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles, labels, loc="upper right", framealpha=0.92)
    title = args.title or "A small GPT, trained with PyTorch's FlashAttention-2 and the tutorial's attention"
    fig.suptitle(title, fontsize=FS_TITLE, fontweight="bold", x=0.01, y=0.975, ha="left")
    sub = time_line(torch_runs, ours, args.skip)
    if sub:
        fig.text(0.01, 0.915, sub, fontsize=FS, ha="left", va="center", color="0.25")
    fig.subplots_adjust(left=0.055, right=0.985, bottom=0.085, top=0.83, wspace=0.13)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    fig.savefig(args.out, dpi=DPI, metadata=PNG_META)
    plt.close(fig)


def time_line(torch_runs, ours, skip):
    """The subtitle: median step times and their ratio."""
    parts = []
    if torch_runs:
        t = statistics.fmean(r.median_ms(skip) for r in torch_runs)
        parts.append(f"median step: PyTorch {t:.1f} ms")
    for r in ours:
        parts.append(f"tutorial (seed {r.seed}) {r.median_ms(skip):.1f} ms" +
                     (f" ({r.median_ms(skip) / t:.2f}x)" if torch_runs else ""))
    return ", ".join(parts) + (f" (the first {skip} steps left out)" if parts else "")


def inside(value, low, high):
    return low <= value <= high


def report(runs, args):
    """The lines printed after drawing."""
    lines = []
    for r in runs:
        lines.append(f"run {r.label}: {len(r.steps)} steps, final train loss "
                     f"{r.final_loss(args.last):.4f} (mean of the last {min(args.last, len(r.loss))}), "
                     f"final val loss {r.final_val():.4f}, median step {r.median_ms(args.skip):.2f} ms")
    torch_runs = [r for r in runs if not r.tutorial]
    ours = [r for r in runs if r.tutorial]
    if not torch_runs or not ours:
        lines.append("comparison: needs PyTorch runs and tutorial (flashtut) runs; have "
                     f"{len(torch_runs)} and {len(ours)}")
        return lines
    finals = [r.final_loss(args.last) for r in torch_runs]
    vals = [r.final_val() for r in torch_runs]
    lo, hi = min(finals), max(finals)
    vlo, vhi = min(vals), max(vals)
    t_torch = statistics.fmean(r.median_ms(args.skip) for r in torch_runs)
    seeds = ", ".join(str(r.seed) for r in torch_runs)
    for r in ours:
        f, v = r.final_loss(args.last), r.final_val()
        same = next((t for t in torch_runs if t.seed == r.seed), None)
        verdict = "INSIDE" if inside(f, lo, hi) else "OUTSIDE"
        line = (f"tutorial seed {r.seed}: final train loss {f:.4f} is {verdict} PyTorch's band "
                f"[{lo:.4f}, {hi:.4f}] (seeds {seeds}; width {hi - lo:.4f})")
        if not inside(f, lo, hi):
            line += f", {min(abs(f - lo), abs(f - hi)):.4f} beyond its nearer edge"
        if same is not None:
            line += f"; {f - same.final_loss(args.last):+.4f} from PyTorch seed {r.seed} (same batches)"
        lines.append(line)
        if math.isfinite(v):
            vverdict = "INSIDE" if inside(v, vlo, vhi) else "OUTSIDE"
            line = (f"tutorial seed {r.seed}: final val loss {v:.4f} is {vverdict} PyTorch's "
                    f"[{vlo:.4f}, {vhi:.4f}]")
            if same is not None and math.isfinite(same.final_val()):
                line += f"; {v - same.final_val():+.4f} from PyTorch seed {r.seed}"
            lines.append(line)
        lines.append(f"tutorial seed {r.seed}: median step {r.median_ms(args.skip):.2f} ms against "
                     f"PyTorch's {t_torch:.2f} ms (mean of its seeds' medians): ratio "
                     f"{r.median_ms(args.skip) / t_torch:.3f} (above 1: the tutorial is slower)")
    return lines


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("csvs", nargs="*", help=f"train_gpt.py CSVs (default: {DEFAULT_IN})")
    ap.add_argument("--out", default=DEFAULT_OUT, help="the PNG to write")
    ap.add_argument("--smooth", type=int, default=10, help="moving-average window, steps")
    ap.add_argument("--skip", type=int, default=10,
                    help="steps left out of the median step time (warm-up)")
    ap.add_argument("--last", type=int, default=20,
                    help="the final training loss is the mean of this many last steps")
    ap.add_argument("--raw", action="store_true", help="draw the raw training loss too")
    ap.add_argument("--title", help="the figure's title")
    args = ap.parse_args(argv)
    if args.smooth < 1 or args.last < 1 or args.skip < 0:
        ap.error("--smooth and --last must be at least 1, --skip at least 0")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    paths = args.csvs or [DEFAULT_IN]
    try:
        runs = read_runs(paths)
    except InputError as e:
        print(f"plot_training: error: {e}", file=sys.stderr)
        return 2
    draw(runs, args)
    for line in report(runs, args):
        print(line)
    print(f"plot_training: wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
