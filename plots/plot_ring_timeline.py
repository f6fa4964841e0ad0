#!/usr/bin/env python3
"""Draws the timeline of one ring-attention call on one rank from a PyTorch profiler trace:
the GPU's kernels on each CUDA stream over time, NCCL's transfers (kernels named nccl*)
apart from the attention kernels, so that whether the next block's transfer runs under the
current block's arithmetic can be seen, and says how much of the transfers' time the
compute covers.

  python3 plots/plot_ring_timeline.py TRACE.json [--out ring_timeline.png] [--title TEXT]

TRACE.json: a Chrome trace as torch.profiler's export_chrome_trace writes it
(scripts/ring_attention.py --trace DIR writes one a rank). Its GPU kernels are the events
with "ph": "X" and "cat": "kernel"; each names its stream in args.stream (else tid). Times
are microseconds.

Printed: per stream, its kernels' count and busy time; the transfers' total time; the part
of it during which an attention kernel also ran (on any stream); that part as a fraction:
1.0 means the transfers are hidden entirely. An NCCL kernel's time includes its wait for
the peer rank, so the fraction understates a short copy behind a long wait; the last line
says what the rank lost: the time a transfer ran with no attention kernel beside it (the
exposed communication), against the span from the first kernel to the last.

The figure: 1600 × 900 pixels, text 14 pt and up; one row a stream, the transfers in one
color and the attention kernels in another, time in milliseconds from the first kernel.
"""
import argparse
import json
import os
import sys

WIDTH_IN, HEIGHT_IN, DPI = 16.0, 9.0, 100
FS = 16


def kernels(trace):
    """[(stream, name, start_us, end_us)] of the trace's GPU kernels, by start time."""
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    out = []
    for e in events:
        if e.get("ph") != "X" or e.get("cat") != "kernel":
            continue
        args = e.get("args") or {}
        stream = args.get("stream", e.get("tid"))
        start = float(e["ts"])
        out.append((str(stream), e.get("name", ""), start, start + float(e.get("dur", 0.0))))
    return sorted(out, key=lambda k: k[2])


def is_transfer(name):
    return "nccl" in name.lower()


def union(intervals):
    """The union of [start, end) intervals, as disjoint sorted intervals."""
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def covered(transfers, compute):
    """Microseconds of the transfers' union during which some compute kernel ran."""
    total = 0.0
    comp = union(compute)
    for s, e in union(transfers):
        for cs, ce in comp:
            total += max(0.0, min(e, ce) - max(s, cs))
    return total


def summary(ks):
    """(lines to print, transfer_us, covered_us)."""
    lines = []
    streams = {}
    for stream, name, s, e in ks:
        streams.setdefault(stream, []).append((name, s, e))
    for stream, items in streams.items():
        busy = sum(e - s for s, e in union([(s, e) for _, s, e in items]))
        lines.append(f"stream {stream}: {len(items)} kernels, busy {busy / 1e3:.3f} ms")
    transfers = [(s, e) for _, n, s, e in ks if is_transfer(n)]
    compute = [(s, e) for _, n, s, e in ks if not is_transfer(n)]
    t_us = sum(e - s for s, e in union(transfers))
    c_us = covered(transfers, compute)
    frac = c_us / t_us if t_us else float("nan")
    lines.append(f"transfers {t_us / 1e3:.3f} ms, under compute {c_us / 1e3:.3f} ms: {frac:.2f} hidden")
    span = (max(e for *_, e in ks) - ks[0][2]) if ks else 0.0
    exposed = t_us - c_us
    lines.append(f"exposed {exposed / 1e3:.3f} ms of the call's {span / 1e3:.3f} ms "
                 f"({100.0 * exposed / span if span else float('nan'):.1f}%): a transfer, no attention kernel")
    return lines, t_us, c_us


def draw(ks, out, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"font.size": FS, "font.family": "DejaVu Sans"})
    fig, ax = plt.subplots(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
    t0 = ks[0][2] if ks else 0.0
    streams = sorted({k[0] for k in ks}, key=lambda s: (len(s), s))
    colors = {True: "#9467bd", False: "#1f77b4"}
    for row, stream in enumerate(streams):
        for st, name, s, e in ks:
            if st == stream:
                ax.barh(row, (e - s) / 1e3, left=(s - t0) / 1e3, height=0.6, color=colors[is_transfer(name)])
    ax.set_yticks(range(len(streams)), [f"stream {s}" for s in streams])
    ax.set_xlabel("time (ms)")
    ax.set_title(title, fontsize=FS + 4, fontweight="bold")
    from matplotlib.patches import Patch
    ax.legend(handles=[Patch(color=colors[True], label="NCCL transfer"),
                       Patch(color=colors[False], label="attention kernels")], loc="upper right")
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(out, dpi=DPI, metadata={"Software": None})
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace", help="a Chrome trace of torch.profiler (JSON)")
    ap.add_argument("--out", default="ring_timeline.png", help="the PNG (default: ring_timeline.png)")
    ap.add_argument("--title", default="Ring attention on one rank: the GPU's streams")
    a = ap.parse_args(argv)
    try:
        with open(a.trace, encoding="utf-8") as fh:
            trace = json.load(fh)
    except (OSError, ValueError) as e:
        print(f"plot_ring_timeline: cannot read {a.trace}: {e}", file=sys.stderr)
        return 2
    ks = kernels(trace)
    if not ks:
        print(f"plot_ring_timeline: {a.trace} holds no GPU kernel events (\"cat\": \"kernel\")", file=sys.stderr)
        return 1
    lines, _, _ = summary(ks)
    print("\n".join(lines))
    draw(ks, a.out, a.title)
    print(f"wrote {os.path.abspath(a.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
