#!/usr/bin/env python3
"""Where a kernel's warps wait, phase by phase: Nsight Compute's per-instruction stall
samples (its source page, exported as CSV) summed over the stretches of SASS between
groups of tensor-core instructions.

    ncu --section WarpStateStats --section SourceCounters --section InstructionStats -o rep ./program ...
    ncu -i rep.ncu-rep --page source --csv --print-source sass | gzip > source.csv.gz
    python3 scripts/stall_phases.py source.csv.gz --names S,dP,dV,dQ,dK

A phase starts at the first of every --per-phase (default 64) executed HMMA in program
order and runs to the next phase's first HMMA, so that it holds that product, what
follows it (chapter 08: the exponentials and the stores of P after S, dS after dP, the
atomics between dK's k-steps) and, for the last phase, the loop's end; "pre" is what
comes before the first HMMA (the top of the loop: barrier, the next tile's copies, the
addresses). Instructions executed fewer than --min-exec times (the code before and after
the loop, the paths a whole tile skips) are summed apart, as "other". Columns: the share of
all samples, then the stall reasons' samples as shares of all samples (they sum, with the
reasons not shown, to the phase's share), executed instructions, and the phase's samples in
thousands.

Tensor-core kernels of Hopper (HGMMA, not HMMA) have no phases by this rule: --top N lists
the N instructions that hold the most samples instead, in order, each with its place in
the page, its share of the samples, how often it executed, its text and its two largest
stall reasons (where a warp waits: a wgmma wait, an mbarrier's try-wait loop, a register an
atomic still reads).

    python3 scripts/stall_phases.py source.csv.gz --top 12
"""
import argparse
import csv
import gzip
import io
import re
import sys

REASONS = ("wait", "short_sb", "mio", "math", "selected", "not_selected", "long_sb", "barrier", "lg")


def read_rows(path):
    """The instruction rows of one exported source page: (opcode, executed, samples,
    {reason: samples}, text). The export's first line names the kernel, the second the
    columns."""
    with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as f:
        raw = f.read()
    rows = list(csv.reader(io.StringIO(raw.decode())))
    if len(rows) < 2 or "Source" not in rows[1]:
        raise SystemExit(f"{path}: not an Nsight Compute source page (ncu -i REP --page source --csv)")
    col = {name: i for i, name in enumerate(rows[1])}
    for needed in ("Source", "# Samples", "Instructions Executed"):
        if needed not in col:
            raise SystemExit(f"{path}: no column {needed!r} (export with --print-source sass)")
    out = []
    for r in rows[2:]:
        if len(r) != len(rows[1]):
            continue
        text = re.sub(r"^@!?U?P\w+\s+", "", r[col["Source"]].strip())  # drop a predicate
        num = lambda name: float(r[col[name]] or 0) if name in col else 0.0
        out.append((text.split()[0].split(".")[0] if text else "", num("Instructions Executed"),
                    num("# Samples"), {k: num("stall_" + k) for k in REASONS}, text))
    return out


def phases(rows, per_phase, min_exec):
    """([(phase index, or None for pre, [rows])] in program order, [rows executed fewer than
    min_exec times], the loop's HMMA count)."""
    groups, other, current, hmma = [(None, [])], [], None, 0
    for row in rows:
        if row[1] < min_exec:
            other.append(row)
            continue
        if row[0] == "HMMA":
            index = hmma // per_phase
            if index != current:
                groups.append((index, []))
                current = index
            hmma += 1
        groups[-1][1].append(row)
    return groups, other, hmma


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="+", help="exported source pages (.csv or .csv.gz)")
    ap.add_argument("--names", default="", help="the phases' names, comma-separated (default g0, g1, ...)")
    ap.add_argument("--per-phase", type=int, default=64, help="HMMA a phase (default 64: chapter 08's products)")
    ap.add_argument("--min-exec", type=float, default=1e6,
                    help="an instruction executed fewer times is not the loop's: summed as "
                         "'other' (default 1e6)")
    ap.add_argument("--top", type=int, default=0,
                    help="also list the N instructions with the most samples (default 0: none)")
    args = ap.parse_args(argv)
    names = [n for n in args.names.split(",") if n]
    for path in args.csv:
        rows = read_rows(path)
        groups, other, hmma = phases(rows, args.per_phase, args.min_exec)
        total = sum(r[2] for r in rows) or 1.0
        print(f"== {path}: {total:.0f} samples, {hmma} HMMA in the loop, "
              f"{sum(r[1] for r in rows):.3g} instructions executed")
        print(f"{'phase':<6} {'samples':>7} " + " ".join(f"{k[:8]:>8}" for k in REASONS)
              + f" {'executed':>9} {'thousands':>9}")
        share = lambda x: 100.0 * x / total
        labelled = [("pre" if i is None else names[i] if i < len(names) else f"g{i}", part)
                    for i, part in groups]
        for name, part in labelled + [("other", other)]:
            print(f"{name:<6} {share(sum(r[2] for r in part)):6.1f}% "
                  + " ".join(f"{share(sum(r[3][k] for r in part)):7.1f}%" for k in REASONS)
                  + f" {sum(r[1] for r in part):9.3g} {sum(r[2] for r in part) / 1000:9.1f}")
        if args.top:
            print(f"{'place':>5} {'samples':>7} {'executed':>9}  {'instruction':<48} reasons")
            for place, r in sorted(enumerate(rows), key=lambda x: -x[1][2])[:args.top]:
                why = sorted(r[3].items(), key=lambda kv: -kv[1])[:2]
                print(f"{place:>5} {share(r[2]):6.1f}% {r[1]:9.3g}  {r[4][:48]:<48} "
                      + " ".join(f"{k} {share(v):.1f}%" for k, v in why))
    return 0


if __name__ == "__main__":
    sys.exit(main())
