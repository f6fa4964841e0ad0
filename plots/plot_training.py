#!/usr/bin/env python3
"""Draws the training curves of scripts/train_gpt.py: PyTorch's backends (FlashAttention-2,
cuDNN: one band over all their runs) against the tutorial's attention (its curve on top), and
says whether the tutorial's final loss lies inside PyTorch's band and how its step time
compares with each backend's.

  python3 plots/plot_training.py RUN.csv [RUN.csv ...] [--out plots/figures/training.png]
  python3 plots/plot_training.py                 # plots/results/h200/training.csv, all runs

The input: one or more CSVs of train_gpt.py (columns ``attention,seed,step,loss,val_loss,ms``
required, ``repeat`` optional, others ignored), each holding one run or several concatenated
(a header line repeated inside the file, as ``cat a.csv b.csv`` leaves it, is skipped). A
run is one (attention, seed, repeat); without a ``repeat`` column every run is repeat 0.
``attention`` ``flashtut`` is the tutorial's; every other value (``sdpa_flash``,
``sdpa_cudnn``, ``sdpa_math``) is PyTorch's.

The figure (1600 x 900 pixels, text 14 pt and up, for a slide): the training loss against
the step, smoothed by a trailing moving average of ``--smooth`` steps (the raw values as a
thin line with ``--raw``); PyTorch's runs as a shaded band from the lowest to the highest
smoothed curve at each step, each (backend, seed) a thin line, a colour a backend; the
tutorial's runs as bold lines on top; validation losses as markers (circles PyTorch,
diamonds the tutorial). The right panel
zooms into the second half of the steps. The legend gives each run's median step time (the
first ``--skip`` steps left out, as train_gpt.py's summary does).

Printed: per run, the final training loss (the mean of the last ``--last`` steps), the last
validation loss and the median step time; then the comparison:

- PyTorch's band: [min, max] of the final training loss over all of PyTorch's runs, every
  backend, seed and repeat (a seed's repeats differ: FlashAttention-2 sums dQ with atomics,
  in another order each run, as chapter 08 does), and the same for the validation loss;
- each tutorial run: inside or outside that band, and its difference from the mean of
  PyTorch's runs of the same seed (same batches, same initial weights);
- the verdict, one line per seed of the tutorial's: ``VERDICT seed S: INSIDE`` when the
  mean final training loss of the tutorial's runs with that seed lies inside PyTorch's
  band, ``OUTSIDE`` otherwise. The mean, not each run: the tutorial's seed-S runs sit next
  to PyTorch's seed-S runs, and when those are one edge of the band a single run lands on
  either side of it by chance (chapter 08's README counts the cases);
- the issue's letter beside it: the tutorial's first run of seed 0 against the band of
  PyTorch's first runs of each seed;
- beside the verdict, a tighter check: each seed's mean against the band of PyTorch's runs
  of that seed alone (their run-to-run spread, without the spread between seeds);
- step times: the median over the tutorial's runs of their median step times against the
  same over each PyTorch backend's, and their ratio, for the ``--graph`` runs and the eager
  ones apart (a run is a ``--graph`` run when its ``graph`` column is 1 on some step).

Exit 0 once drawn, whatever the comparison says; 2 for input it cannot read (the file and
line named).
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
# PyTorch's backends in blues and greys (the band is theirs together), the tutorial's seeds warm.
TORCH_COLORS, TUTORIAL_COLORS = (PALETTE[0], PALETTE[9], PALETTE[7]), (PALETTE[3], PALETTE[2], PALETTE[4], PALETTE[1])
TORCH_COLOR = TORCH_COLORS[0]
plt.rcParams.update({"font.size": FS, "axes.titlesize": FS_TITLE - 2, "axes.labelsize": FS,
                     "xtick.labelsize": FS_SMALL, "ytick.labelsize": FS_SMALL,
                     "legend.fontsize": FS_SMALL, "font.family": "DejaVu Sans"})


class InputError(Exception):
    pass


class Run:
    def __init__(self, attention, seed, repeat="0"):
        self.attention, self.seed, self.repeat = attention, seed, repeat
        self.steps, self.loss, self.ms = [], [], []
        self.val = []  # (step, val_loss)
        self.where = None
        self.graph = False  # a --graph run: some of its steps were replayed

    @property
    def tutorial(self):
        return self.attention == TUTORIAL

    @property
    def label(self):
        return f"{self.attention} seed {self.seed} repeat {self.repeat}"

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
    """The runs, one per (attention, seed, repeat), PyTorch's first, each by seed and repeat;
    each run's rows sorted by step."""
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
            repeat_col = header.index("repeat") if "repeat" in header else None
            graph_col = header.index("graph") if "graph" in header else None
            seen_here = set()
            for line, row in enumerate(reader, start=2):
                if not row or row == header:  # a blank line, or the next file's header
                    continue
                where = f"{path}:{line}"
                if len(row) < len(header):
                    raise InputError(f"{where}: {len(row)} fields, the header has {len(header)}")
                repeat = (row[repeat_col].strip() or "0") if repeat_col is not None else "0"
                key = (row[col["attention"]], row[col["seed"]], repeat)
                run = runs.get(key)
                if run is None:
                    run = runs[key] = Run(*key)
                    run.where = path
                elif key not in seen_here and run.where != path:
                    raise InputError(f"{where}: run {run.label} is also in {run.where}: "
                                     f"give each run once")
                seen_here.add(key)
                step = int(number(row[col["step"]], where, "step"))
                if step in run.steps:
                    raise InputError(f"{where}: step {step} of {run.label} appears twice")
                run.steps.append(step)
                run.loss.append(number(row[col["loss"]], where, "loss"))
                run.ms.append(number(row[col["ms"]], where, "ms"))
                if graph_col is not None and row[graph_col].strip() == "1":
                    run.graph = True
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

    def as_int(text):
        return int(text) if text.lstrip("-").isdigit() else 0

    def rank(r):  # PyTorch's runs first, then the tutorial's, each by seed, then repeat
        return (r.tutorial, r.attention, as_int(r.seed), r.seed, as_int(r.repeat), r.repeat)
    return sorted(runs.values(), key=rank)


def seeds_of(runs):
    """The runs grouped by seed, in order: [(seed, [runs])]."""
    groups = {}
    for r in runs:
        groups.setdefault(r.seed, []).append(r)
    return list(groups.items())


def backends_of(runs):
    """The runs grouped by attention (PyTorch's backend), in order: [(attention, [runs])]."""
    groups = {}
    for r in runs:
        groups.setdefault(r.attention, []).append(r)
    return list(groups.items())


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


def median_of_medians(runs, skip):
    """The median over runs of each run's median step time."""
    return statistics.median(r.median_ms(skip) for r in runs)


def runs_text(group):
    return f"{len(group)} run{'s' if len(group) > 1 else ''}"


def draw_seed(axis, group, args, *, color, lw, alpha, z, marker, ms, label, val_label,
              zoom_from):
    """One seed's runs on one axis: each run's smoothed training loss (and with --raw the raw
    one under it) at zorder z, its validation losses as markers above; the legend names the
    seed once. Returns the values drawn from step zoom_from on (for the zoom's limits)."""
    drawn = []
    for i, r in enumerate(group):
        sm = smooth(r.loss, args.smooth)
        if args.raw:
            axis.plot(r.steps, r.loss, color=color, lw=0.6, alpha=0.35, zorder=z - 1)
        axis.plot(r.steps, sm, color=color, lw=lw, alpha=alpha, zorder=z,
                  label=None if i else label)
        if r.val:
            axis.plot(*zip(*r.val), marker, color=color, ms=ms, mec="white", mew=1.0,
                      zorder=z + 2, label=None if i else val_label)
        drawn += [v for s, v in zip(r.steps, sm) if s >= zoom_from]
        drawn += [v for s, v in r.val if s >= zoom_from]
    return drawn


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
            names = ", ".join(seed for seed, _ in seeds_of(torch_runs))
            backends = ", ".join(name for name, _ in backends_of(torch_runs))
            axis.fill_between(steps, low, high, color=TORCH_COLOR, alpha=0.3, lw=0, zorder=1,
                              label=f"PyTorch ({backends}): band of its "
                                    f"{len(torch_runs)} runs (seeds {names})")
            zoom_values += [v for s, a, b in zip(steps, low, high) if s >= zoom_from for v in (a, b)]
        first = True
        for b, (backend, runs_b) in enumerate(backends_of(torch_runs)):
            for seed, group in seeds_of(runs_b):
                zoom_values += draw_seed(
                    axis, group, args, color=TORCH_COLORS[b % len(TORCH_COLORS)], lw=1.2,
                    alpha=0.8, z=2, marker="o", ms=8,
                    label=f"PyTorch {backend}, seed {seed} ({runs_text(group)}): "
                          f"{median_of_medians(group, args.skip):.1f} ms/step",
                    val_label="PyTorch: validation loss (every run)" if first else None,
                    zoom_from=zoom_from)
                first = False
        for k, (seed, group) in enumerate(seeds_of(ours)):
            zoom_values += draw_seed(
                axis, group, args, color=TUTORIAL_COLORS[k % len(TUTORIAL_COLORS)], lw=2.2,
                alpha=0.9, z=5, marker="D", ms=9,
                label=f"{args.tutorial}, seed {seed} ({runs_text(group)}): "
                      f"{median_of_medians(group, args.skip):.1f} ms/step",
                val_label=f"tutorial, seed {seed}: validation loss", zoom_from=zoom_from)
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
    title = args.title or "A small GPT, trained with PyTorch's attention and the tutorial's"
    fig.suptitle(title, fontsize=FS_TITLE, fontweight="bold", x=0.01, y=0.975, ha="left")
    sub = time_line(torch_runs, ours, args.skip)
    if sub:
        fig.text(0.01, 0.915, sub, fontsize=FS, ha="left", va="center", color="0.25")
    fig.subplots_adjust(left=0.055, right=0.985, bottom=0.085, top=0.83, wspace=0.13)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    fig.savefig(args.out, dpi=DPI, metadata=PNG_META)
    plt.close(fig)


def time_line(torch_runs, ours, skip):
    """The subtitle: median step times (the median of the runs' medians) and their ratio,
    over the --graph runs where there are any of both kinds, else over all."""
    if not torch_runs and not ours:
        return ""
    if any(r.graph for r in torch_runs) and any(r.graph for r in ours):
        torch_runs = [r for r in torch_runs if r.graph]
        ours = [r for r in ours if r.graph]
    parts = [f"{name} {median_of_medians(group, skip):.2f} ms"
             for name, group in backends_of(torch_runs)]
    if ours:
        m = median_of_medians(ours, skip)
        ratios = ", ".join(f"{m / median_of_medians(group, skip):.3f}x {name}"
                           for name, group in backends_of(torch_runs))
        parts.append(f"tutorial {m:.2f} ms" + (f" ({ratios})" if ratios else ""))
    return "median step: " + ", ".join(parts) + f" (first {skip} steps left out)"


def inside(value, low, high):
    return low <= value <= high


def edge_note(value, low, high):
    """'' inside, else how far beyond the nearer edge."""
    return "" if inside(value, low, high) else \
        f", {min(abs(value - low), abs(value - high)):.4f} beyond its nearer edge"


def report(runs, args):
    """The lines printed after drawing (the module's docstring says what they hold)."""
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
    torch_by_seed = dict(seeds_of(torch_runs))
    lines.append(f"PyTorch's band: final train loss [{lo:.4f}, {hi:.4f}] (width {hi - lo:.4f}), "
                 f"final val loss [{vlo:.4f}, {vhi:.4f}], over {len(torch_runs)} runs (seeds "
                 f"{', '.join(f'{s} x{len(g)}' for s, g in torch_by_seed.items())})")
    for r in ours:
        f, v = r.final_loss(args.last), r.final_val()
        same = torch_by_seed.get(r.seed)
        line = (f"tutorial seed {r.seed} repeat {r.repeat}: final train loss {f:.4f} is "
                f"{'INSIDE' if inside(f, lo, hi) else 'OUTSIDE'} PyTorch's band"
                f"{edge_note(f, lo, hi)}")
        if same:
            line += (f"; {f - statistics.fmean(t.final_loss(args.last) for t in same):+.4f} from "
                     f"the mean of PyTorch's seed-{r.seed} runs (same batches)")
        if math.isfinite(v):
            line += (f"; final val loss {v:.4f} {'INSIDE' if inside(v, vlo, vhi) else 'OUTSIDE'}"
                     f"{edge_note(v, vlo, vhi)}")
        lines.append(line)
    for seed, group in seeds_of(ours):
        mean = statistics.fmean(r.final_loss(args.last) for r in group)
        count = sum(inside(r.final_loss(args.last), lo, hi) for r in group)
        lines.append(f"VERDICT seed {seed}: {'INSIDE' if inside(mean, lo, hi) else 'OUTSIDE'}: "
                     f"the mean final train loss of the tutorial's {len(group)} run"
                     f"{'s' if len(group) > 1 else ''}, {mean:.4f}, against PyTorch's band "
                     f"[{lo:.4f}, {hi:.4f}]{edge_note(mean, lo, hi)} ({count} of {len(group)} "
                     f"runs inside one by one)")
    # The letter: one tutorial run of seed 0 against the band of one PyTorch run of
    # each seed (the first of each).
    first_ours = next((r for r in ours if r.seed == "0"), ours[0])
    firsts = [g[0] for g in torch_by_seed.values()]
    flo = min(r.final_loss(args.last) for r in firsts)
    fhi = max(r.final_loss(args.last) for r in firsts)
    f = first_ours.final_loss(args.last)
    lines.append(f"letter: tutorial seed {first_ours.seed} repeat {first_ours.repeat}, {f:.4f}, "
                 f"against the band of PyTorch's first run of each seed [{flo:.4f}, {fhi:.4f}]: "
                 f"{'INSIDE' if inside(f, flo, fhi) else 'OUTSIDE'}{edge_note(f, flo, fhi)}")
    # The tighter check beside the verdict: each seed's mean against PyTorch's runs of that
    # seed alone (their run-to-run spread, without the spread between seeds).
    for seed, group in seeds_of(ours):
        same = torch_by_seed.get(seed)
        if not same or len(same) < 2:
            continue
        slo, shi = (f(t.final_loss(args.last) for t in same) for f in (min, max))
        mean = statistics.fmean(r.final_loss(args.last) for r in group)
        count = sum(inside(r.final_loss(args.last), slo, shi) for r in group)
        lines.append(f"same seed {seed}: the tutorial's mean {mean:.4f} against PyTorch's seed-{seed} "
                     f"band [{slo:.4f}, {shi:.4f}] (width {shi - slo:.4f}): "
                     f"{'INSIDE' if inside(mean, slo, shi) else 'OUTSIDE'}{edge_note(mean, slo, shi)} "
                     f"({count} of {len(group)} runs inside one by one)")
    # Step times compare within one mode: an eager step is the host's, a replayed one the GPU's.
    for mode, graph in (("--graph", True), ("eager", False)):
        o_runs = [r for r in ours if r.graph == graph]
        for backend, group in backends_of(torch_runs):
            t_runs = [r for r in group if r.graph == graph]
            if not t_runs or not o_runs:
                continue
            t_torch = median_of_medians(t_runs, args.skip)
            t_ours = median_of_medians(o_runs, args.skip)
            lines.append(f"step time{'' if graph else ' (eager)'}: tutorial {t_ours:.2f} ms against "
                         f"PyTorch {backend}'s {t_torch:.2f} ms (medians over the {mode} runs of "
                         f"their median steps): ratio {t_ours / t_torch:.3f} (above 1: the "
                         f"tutorial is slower)")
    if any(r.graph for r in runs) and not all(r.graph for r in runs):
        lines.append("note: these runs mix --graph and eager ones; the step times above compare "
                     "each mode with itself")
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
    ap.add_argument("--tutorial", default="tutorial",
                    help="the tutorial's runs' name in the legend, e.g. 'tutorial (ch09 + ch10)'")
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
