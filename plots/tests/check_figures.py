"""ctest: the plot script runs on the committed results (plots/results/<gpu>/) and writes
every figure, and the tensor-core panels are not empty: the staircase's bf16 rows (forward
and backward) have bars at both head dimensions and the roofline has the mma.sync roof and
tensor-core points, forward and backward (the script's summary lines say what each drew). Exits 77 (ctest: skipped, with the message)
while tour.csv, traffic.csv and ceilings.csv are not yet committed, so a fresh checkout
before the first GPU run does not fail for that reason.

Usage: python3 plots/tests/check_figures.py RESULTS_DIR
"""
import os
import re
import subprocess
import sys
import tempfile

SKIP = 77  # SKIP_RETURN_CODE in plots/CMakeLists.txt
HERE = os.path.dirname(os.path.abspath(__file__))
FIGURES = ("staircase.png", "bytes_vs_n.png", "roofline.png", "memory_vs_n.png")


def main(results):
    missing = [f for f in ("tour.csv", "traffic.csv", "ceilings.csv")
               if not os.path.isfile(os.path.join(results, f))]
    if missing:
        print(f"SKIPPED: {results} has no {', '.join(missing)} yet (committed after the GPU run)")
        return SKIP
    with tempfile.TemporaryDirectory() as out:
        p = subprocess.run([sys.executable, os.path.join(os.path.dirname(HERE), "make_plots.py"),
                            results, out], capture_output=True, text=True, timeout=300)
        print(p.stdout + p.stderr, end="")
        if p.returncode != 0:
            print(f"FAILED: make_plots.py exited {p.returncode}")
            return 1
        absent = [f for f in FIGURES if not os.path.isfile(os.path.join(out, f))
                  or os.path.getsize(os.path.join(out, f)) == 0]
        if absent:
            print(f"FAILED: not written: {', '.join(absent)}")
            return 1
    lines = p.stdout.splitlines()
    bf16 = next((line for line in lines if line.startswith("staircase bf16 ")), "")
    bwd = next((line for line in lines if line.startswith("staircase backward ")), "")
    roof = next((line for line in lines if line.startswith("roofline ")), "")
    empty = [f"the staircase's bf16 panel at d={d} has no bars" for d in (64, 128)
             if not re.search(rf"\bd={d}: [1-9]\d* bars", bf16)]
    empty += [f"the staircase's backward panel at d={d} has no bars" for d in (64, 128)
              if not re.search(rf"\bd={d}: [1-9]\d* bars", bwd)]
    if "mma.sync roof: none" in roof or "mma.sync roof:" not in roof:
        empty.append("the roofline has no mma.sync roof (probes.csv)")
    if "bf16: no points" in roof or "bf16:" not in roof:
        empty.append("the roofline has no tensor-core points (tc_variants.csv)")
    if "bf16 backward: no points" in roof or "bf16 backward:" not in roof:
        empty.append("the roofline has no tensor-core backward points (tc_variants.csv)")
    if empty:
        print("FAILED: " + "; ".join(empty))
        return 1
    print(f"OK: {len(FIGURES)} figures from {results}, the tensor-core panels drawn")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
