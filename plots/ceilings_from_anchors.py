#!/usr/bin/env python3
"""Extracts the GPU's measured ceilings from the output of the PyTorch anchor script
(scripts/pytorch_anchors.py, run on the GPU), or of scripts/measure_ceilings.py (the same
four lines alone), into ceilings.csv, the file the roofline figure draws its lines from.

Usage: python3 plots/ceilings_from_anchors.py ANCHORS_LOG OUT_CSV
       (e.g. plots/results/h200/anchors.log plots/results/h200/ceilings.csv)

The lines it reads (everything else in the log is ignored):
  ceiling copy 4.31 TB/s (read+write)
  ceiling matmul torch.bfloat16 790 TFLOP/s
  ceiling matmul torch.float16 770 TFLOP/s
  ceiling matmul fp32(no tf32) 50 TFLOP/s
copy, bf16 and fp32 are required (exit 1 naming the missing one); fp16 is optional.
"""
import re
import sys

# (name in ceilings.csv, pattern of the log line, unit, required)
PATTERNS = [
    ("copy_bandwidth", r"^ceiling copy\s+([0-9.eE+-]+)\s+TB/s", "TB/s", True),
    ("fp32_matmul", r"^ceiling matmul fp32\(no tf32\)\s+([0-9.eE+-]+)\s+TFLOP/s", "TFLOP/s", True),
    ("bf16_matmul", r"^ceiling matmul torch\.bfloat16\s+([0-9.eE+-]+)\s+TFLOP/s", "TFLOP/s", True),
    ("fp16_matmul", r"^ceiling matmul torch\.float16\s+([0-9.eE+-]+)\s+TFLOP/s", "TFLOP/s", False),
]


def parse(text, source="log"):
    """[(name, value, unit)] in PATTERNS order; ValueError naming what is missing."""
    found = {}
    for number, line in enumerate(text.splitlines(), 1):
        for name, pattern, unit, _ in PATTERNS:
            m = re.match(pattern, line.strip())
            if m:
                try:
                    value = float(m.group(1))
                except ValueError:
                    raise ValueError(f"{source}:{number}: '{m.group(1)}' is not a number") from None
                found[name] = (value, unit)  # the last measurement wins
    missing = [n for n, _, _, req in PATTERNS if req and n not in found]
    if missing:
        raise ValueError(f"{source}: no '{' / '.join(missing)}' ceiling line found "
                         "(is this the output of scripts/pytorch_anchors.py?)")
    return [(n, *found[n]) for n, _, _, _ in PATTERNS if n in found]


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        with open(argv[1], encoding="utf-8", errors="replace") as fh:
            rows = parse(fh.read(), argv[1])
    except (OSError, ValueError) as e:
        print(f"ceilings_from_anchors: error: {e}", file=sys.stderr)
        return 1
    with open(argv[2], "w", encoding="utf-8") as out:
        out.write("name,value,unit\n")
        for name, value, unit in rows:
            out.write(f"{name},{value:g},{unit}\n")
    print(f"wrote {argv[2]}: " + ", ".join(f"{n} {v:g} {u}" for n, v, u in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
