#!/usr/bin/env python3
"""Checks that every kernel a chapter's ledger names is a __global__ function in the
sources, so that scripts/join_traffic.py can pair it with Nsight Compute's launches (a
misspelt name would leave its measured columns empty, found only on the GPU machine).

Usage: python3 scripts/check_ledger_names.py SOURCE_ROOT PROGRAM...
Each program runs with the GPU hidden (it prints its model and exits 3), writing its
ledger for every variant at its default shape.
"""
import csv
import glob
import os
import re
import subprocess
import sys
import tempfile

# __global__ [void] [void] name( or name<, once __launch_bounds__(...) is taken out
KERNEL = re.compile(r"__global__\s+(?:void\s+)?(?:void\s+)?(\w+)\s*[(<]")


def without_launch_bounds(text):
    """Drops every __launch_bounds__(...), whose arguments may hold parentheses."""
    while (i := text.find("__launch_bounds__")) >= 0:
        j, depth = text.index("(", i), 0
        for k in range(j, len(text)):
            depth += {"(": 1, ")": -1}.get(text[k], 0)
            if depth == 0:
                break
        text = text[:i] + text[k + 1:]
    return text


def kernels_in(root):
    names = set()
    for path in glob.glob(os.path.join(root, "**", "*.cu*"), recursive=True):
        with open(path, encoding="utf-8", errors="replace") as fh:
            names.update(KERNEL.findall(without_launch_bounds(fh.read())))
    return names


def main(argv):
    if len(argv) < 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    root, programs = argv[1], argv[2:]
    defined = kernels_in(os.path.join(root, "chapters")) | kernels_in(os.path.join(root, "common"))
    bad = 0
    for prog in programs:
        with tempfile.TemporaryDirectory() as tmp:
            ledger = os.path.join(tmp, "ledger.csv")
            env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
            p = subprocess.run([prog, "--ledger-csv", ledger], env=env, capture_output=True,
                               text=True, timeout=120)
            if not os.path.isfile(ledger):
                print(f"FAILED: {prog} wrote no ledger (exit {p.returncode}): {p.stderr.strip()[-300:]}")
                bad += 1
                continue
            with open(ledger, newline="") as fh:
                rows = list(csv.DictReader(fh))
        for r in rows:
            name = re.sub(r"<.*", "", r["kernel"])
            if name not in defined:
                print(f"FAILED: {os.path.basename(prog)} {r['variant']} ({r['pass']}): ledger kernel "
                      f"'{r['kernel']}' is not a __global__ function under chapters/ or common/")
                bad += 1
        print(f"{os.path.basename(prog)}: {len(rows)} ledger rows: "
              + ", ".join(sorted({r['variant'] + ':' + r['kernel'] for r in rows})))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
