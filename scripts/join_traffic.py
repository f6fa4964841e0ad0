#!/usr/bin/env python3
"""Joins Nsight Compute's measurements with the traffic model into traffic.csv.

Usage: python3 scripts/join_traffic.py OUT_CSV RUN_DIR [--keep OLD_CSV]

RUN_DIR holds one pair of files per profiled run (scripts/measure_traffic.sh writes them):
  <tag>__<variant>.ncu.csv     ncu --csv output (details page: one row per kernel launch
                               and metric)
  <tag>__<variant>.ledger.csv  the program's --ledger-csv (the model, one row per kernel)
Each model row gets the measurements of a launch with the same base name: ncu prints
demangled names with namespaces, template arguments and parameters
("void ch04::flash_forward_kernel<64>(const float *, ...)"), the ledger the bare name.

Which launch: the harness runs a forward once to verify (skipped with --no-verify, but the
first call still happens) and then the timed calls, and a backward after its paired
forward; so the last launches of a name are the timed call of the pass being measured.
For a name that appears k times in the ledger, the last k launches are paired with those
k rows in order. The summary warns where fewer launches than rows were found.

Prints a summary (model vs measured DRAM bytes; '!' where they differ by more than 20% at
N >= 4096, the issue's threshold) and exits 1 when no row could be joined.

--keep OLD_CSV: also keep the rows of an earlier traffic.csv for every run (chapter,
variant, pass, N, d, causal) that RUN_DIR did not measure again, so that a few shapes can be
re-measured without repeating the rest. Their columns are taken as they are.
"""
import csv
import glob
import os
import re
import sys
from collections import defaultdict

SECTOR_BYTES = 32  # an L2 sector: the lts__t_sectors_* counters count these
METRICS = {  # ncu metric -> (traffic.csv column, factor to bytes / ms from the base unit)
    "dram__bytes_read.sum": ("measured_read_bytes", 1.0),
    "dram__bytes_write.sum": ("measured_write_bytes", 1.0),
    "lts__t_sectors_srcunit_tex_op_read.sum": ("measured_requested_read_bytes", SECTOR_BYTES),
    "lts__t_sectors_srcunit_tex_op_write.sum": ("measured_requested_write_bytes", SECTOR_BYTES),
    # Atomics and reductions reach L2 as their own operations, counted by neither of the
    # two above (chapter 05's dQ += dS·K): one column for both kinds.
    "lts__t_sectors_srcunit_tex_op_red.sum": ("measured_requested_atomic_bytes", SECTOR_BYTES),
    "lts__t_sectors_srcunit_tex_op_atom.sum": ("measured_requested_atomic_bytes", SECTOR_BYTES),
    "gpu__time_duration.sum": ("measured_ms", 1.0),
}
# ncu scales units unless run with --print-units base; accept either (decimal prefixes, as
# ncu uses for byte and sector counts; binary ones in case a version prints KiB).
UNITS = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
         "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
         "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
         "sector": 1, "Ksector": 1e3, "Msector": 1e6, "Gsector": 1e9, "": 1,
         # times to milliseconds
         "nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3,
         "ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
COLUMNS = ["chapter", "kernel", "seq_len", "head_dim", "model_read_bytes", "model_write_bytes",
           "measured_read_bytes", "measured_write_bytes", "model_requested_read_bytes",
           "model_requested_write_bytes", "measured_requested_read_bytes",
           "measured_requested_write_bytes", "flops", "measured_ms", "batch", "heads", "causal",
           "variant", "pass", "measured_requested_atomic_bytes"]
RUN_KEY = ("chapter", "variant", "pass", "seq_len", "head_dim", "causal")  # one profiled run
NEWER = ("measured_requested_atomic_bytes",)  # columns a traffic.csv from before may lack


def base_name(name):
    """'void ns::kern<64, (int)2>(const float *, int)' -> 'kern';
    'void <unnamed>::kern<<unnamed>::Tiles<64, 8>>(float *)' -> 'kern'."""
    s = name.strip()
    # Anonymous namespaces: ncu writes '<unnamed>::' (seen on the H200 as 'unnamed>::' when
    # a template argument names a type from one) or '(anonymous namespace)::'.
    s = s.replace("(anonymous namespace)::", "")
    s = re.sub(r"(?:(?<=[\s<,(:])|^)<unnamed>::", "", s)  # '<unnamed>::' as a whole
    s = s.replace("unnamed>::", "")  # the form whose '<' is the template's own
    if s.endswith(")"):  # drop the parameter list (matching parenthesis from the end)
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(s[i], 0)
            if depth == 0:
                s = s[:i]
                break
    out, depth = [], 0  # drop template arguments, nested or not
    for c in s:
        if c == "<":
            depth += 1
        elif c == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(c)
    s = "".join(out).strip().split("::")[-1]
    return s.split()[-1] if s.split() else s


def read_ncu(path):
    """Launches in order: [(base name, {traffic.csv column: value})]."""
    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        lines = fh.read().splitlines()
    # ncu may put its own "==PROF==" lines (and the program's output) before the table.
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    launches = {}
    for line_no, row in enumerate(csv.DictReader(lines[start:]), start + 2):
        if not row.get("ID") or not row["ID"].strip().isdigit():
            continue  # a units row or stray text
        name = row.get("Kernel Name") or row.get("Function Name") or row.get("Demangled Name") or ""
        launch = launches.setdefault(int(row["ID"]), (base_name(name), {}))
        metric = row.get("Metric Name", "")
        if metric in METRICS:
            column, factor = METRICS[metric]
            unit = row.get("Metric Unit", "").strip()
            if unit not in UNITS:
                raise ValueError(f"{path}:{line_no}: unknown unit '{unit}' for {metric}")
            text = row.get("Metric Value", "").replace(",", "").strip()  # 1,234,567
            try:  # (summed: two metrics may feed one column)
                launch[1][column] = launch[1].get(column, 0.0) + float(text) * UNITS[unit] * factor
            except ValueError:
                raise ValueError(f"{path}:{line_no}: {metric} is '{text}', not a number") from None
    return [launches[i] for i in sorted(launches)]


def read_ledger(path, variant):
    with open(path, newline="", encoding="utf-8") as fh:
        return [r for r in csv.DictReader(fh) if r["variant"] == variant]


def join(launches, ledger):
    """traffic.csv rows for one run, and warnings."""
    by_name = defaultdict(list)
    for name, metrics in launches:
        by_name[name].append(metrics)
    wanted = defaultdict(int)
    for r in ledger:
        wanted[base_name(r["kernel"])] += 1
    taken, rows, warnings = defaultdict(int), [], []
    for r in ledger:
        name = base_name(r["kernel"])
        found = by_name.get(name, [])
        k = wanted[name]
        # The i-th of k rows of this name takes launch number len(found) - k + i.
        index = len(found) - k + taken[name]
        taken[name] += 1
        measured = found[index] if 0 <= index < len(found) else {}
        if not measured:
            warnings.append(f"{r['chapter']} {r['variant']} {r['pass']} {name}: "
                            f"{len(found)} launch(es) for {k} ledger row(s)")
        rows.append({
            "chapter": r["chapter"], "kernel": r["kernel"], "seq_len": r["seq_len"],
            "head_dim": r["head_dim"], "batch": r["batch"], "heads": r["heads"],
            "causal": r["causal"], "variant": r["variant"], "pass": r["pass"],
            "model_read_bytes": r["model_dram_read_bytes"],
            "model_write_bytes": r["model_dram_write_bytes"],
            "model_requested_read_bytes": r["model_read_bytes"],
            "model_requested_write_bytes": r["model_write_bytes"],
            "flops": r["flops"],
            **{col: measured.get(col) for col, _ in METRICS.values()},
            "kept": False,
        })
    return rows, warnings


def fmt(v):
    """Integers without '.000000', times with 6 significant digits, None as empty."""
    if v is None or v == "":
        return ""
    f = float(v)
    return f"{f:.0f}" if f == int(f) and abs(f) >= 1 else f"{f:.6g}"


def summary(rows, out=sys.stdout):
    """Per pass and shape: model vs measured DRAM and requested bytes, and the kernel time."""
    groups = defaultdict(list)
    for r in rows:
        groups[(r["chapter"], r["variant"], r["pass"], int(r["head_dim"]), int(r["seq_len"]))].append(r)
    print("requested bytes: loads + stores (+ atomics where measured), as L2 sees them", file=out)
    print(f"{'ch':3} {'variant':16} {'pass':9} {'d':>4} {'N':>6} {'DRAM model':>11} {'measured':>11}"
          f" {'ratio':>6} {'req. model':>11} {'measured':>11} {'ratio':>6} {'ms':>9}", file=out)
    flagged = 0
    for (ch, var, pss, d, n), rs in sorted(groups.items()):
        def total(prefix):
            vals = [(r[prefix + "read_bytes"], r[prefix + "write_bytes"]) for r in rs]
            if any(a in (None, "") or b in (None, "") for a, b in vals):
                return None
            atomics = sum(float(r.get(prefix + "atomic_bytes") or 0) for r in rs)
            return sum(float(a) + float(b) for a, b in vals) + atomics
        dm, dd = total("model_"), total("measured_")
        rm, rd = total("model_requested_"), total("measured_requested_")
        ms = (None if any(r["measured_ms"] in (None, "") for r in rs)
              else sum(float(r["measured_ms"]) for r in rs))
        ratio = dd / dm if dd is not None and dm else None
        rratio = rd / rm if rd is not None and rm else None
        flag = "!" if ratio is not None and n >= 4096 and abs(ratio - 1) > 0.2 else " "
        flagged += flag == "!"
        g = lambda v: "-" if v is None else f"{v / 1e9:.3f} GB"  # noqa: E731
        q = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
        print(f"{ch:3} {var:16} {pss:9} {d:4} {n:6} {g(dm):>11} {g(dd):>11} {q(ratio):>5}{flag}"
              f" {g(rm):>11} {g(rd):>11} {q(rratio):>6} {'-' if ms is None else f'{ms:.4g}':>9}", file=out)
    if flagged:
        print(f"{flagged} pass(es) marked '!': measured DRAM bytes differ from the model by more "
              "than 20% at N >= 4096; explain or fix them (issue 4).", file=out)


def read_kept(path, measured_runs):
    """Rows of an earlier traffic.csv whose run was not measured again."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as e:
        raise ValueError(f"--keep {path}: {e}") from None
    missing = [c for c in COLUMNS if c not in NEWER and rows and c not in rows[0]]
    if missing:
        raise ValueError(f"--keep {path}: not a traffic.csv (no column {missing[0]})")
    kept = [r for r in rows if tuple(r[k] for k in RUN_KEY) not in measured_runs]
    for r in kept:
        r["kept"] = True
        for c in NEWER:
            r.setdefault(c, "")
    return kept


def main(argv):
    keep = None
    if len(argv) == 5 and argv[3] == "--keep":
        keep = argv[4]
    elif len(argv) != 3:
        print("usage: join_traffic.py OUT_CSV RUN_DIR [--keep OLD_CSV]", file=sys.stderr)
        return 2
    out_csv, run_dir = argv[1], argv[2]
    rows, warnings = [], []
    for ncu_path in sorted(glob.glob(os.path.join(run_dir, "*.ncu.csv"))):
        stem = ncu_path[: -len(".ncu.csv")]
        ledger_path = stem + ".ledger.csv"
        variant = os.path.basename(stem).split("__")[-1]
        if not os.path.isfile(ledger_path):
            warnings.append(f"{ncu_path}: no {os.path.basename(ledger_path)} beside it")
            continue
        try:
            r, w = join(read_ncu(ncu_path), read_ledger(ledger_path, variant))
        except (ValueError, KeyError) as e:
            print(f"join_traffic: error: {e}", file=sys.stderr)
            return 1
        rows += r
        warnings += w
    n_measured = len(rows)
    if keep:
        try:
            rows += read_kept(keep, {tuple(str(r[k]) for k in RUN_KEY) for r in rows})
        except ValueError as e:
            print(f"join_traffic: error: {e}", file=sys.stderr)
            return 1
    rows.sort(key=lambda r: (r["chapter"], r["variant"], r["pass"] != "forward",
                             int(r["head_dim"]), int(r["seq_len"])))  # stable: ledger order kept
    with open(out_csv, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(COLUMNS)
        for r in rows:
            w.writerow([r[c] if r["kept"] or c in ("chapter", "kernel", "variant", "pass")
                        else fmt(r[c]) for c in COLUMNS])
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    summary(rows)
    print(f"wrote {out_csv}: {len(rows)} kernel rows ({n_measured} from {run_dir}, "
          f"{len(rows) - n_measured} kept), "
          f"{sum(r['measured_read_bytes'] not in (None, '') for r in rows)} measured")
    return 0 if n_measured else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
