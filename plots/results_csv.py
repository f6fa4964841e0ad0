"""Reads the results CSVs of plots/results/<gpu>/ (docs/contracts.md, the results files) and
checks them, so that every script that turns them into figures or pages fails the same way:
one line, naming the file and the line, e.g.

    plots/results/h200/tour.csv:7: column 'ms' is 'fast', not a number

Used by plots/make_plots.py, docs/gen_pages.py, docs/check_pages.py. Standard library only,
so the docs can be generated without matplotlib.
"""
import csv
import os

# Columns each file must have (the contract) and which of them are numbers. Extra columns
# are allowed and kept as text unless listed in OPTIONAL_NUMERIC.
REQUIRED = {
    "tour.csv": ["chapter", "variant", "pass", "dtype", "batch", "heads", "seq_len",
                 "head_dim", "causal", "ms", "tflops", "model_bytes", "gbps", "rel_err",
                 "speedup_vs_ch01"],
    "traffic.csv": ["chapter", "kernel", "seq_len", "head_dim", "model_read_bytes",
                    "model_write_bytes", "measured_read_bytes", "measured_write_bytes",
                    "model_requested_read_bytes", "model_requested_write_bytes",
                    "measured_requested_read_bytes", "measured_requested_write_bytes",
                    "flops", "measured_ms", "batch", "heads", "causal"],
    "ceilings.csv": ["name", "value", "unit"],
    # PyTorch on the same GPU (scripts/pytorch_anchors.py); optional.
    "anchors.csv": ["backend", "dtype", "causal", "B", "H", "N", "d", "fwd_ms", "fwd_tflops",
                    "bwd_ms", "bwd_tflops"],
    # The tensor-core chapters (06, 07): every variant, the tour's columns (gpu_run.py's tc step).
    "tc_variants.csv": ["chapter", "variant", "pass", "dtype", "batch", "heads", "seq_len",
                        "head_dim", "causal", "ms", "tflops", "model_bytes", "gbps", "rel_err",
                        "speedup_vs_ch01"],
    # FlashAttention-2 and cuDNN in the session of tc_variants.csv: anchors.csv's columns.
    "ch07_anchors.csv": ["backend", "dtype", "causal", "B", "H", "N", "d", "fwd_ms",
                         "fwd_tflops", "bwd_ms", "bwd_tflops"],
    # Register-only ceilings (tools/probes.cu): mma.sync, MUFU ex2, FFMA.
    "probes.csv": ["probe", "unit", "rate"],
    # Ours and PyTorch's in one run (scripts/compare_pytorch.py); optional.
    "vs_pytorch.csv": ["impl", "pass", "dtype", "batch", "heads", "seq_len", "head_dim",
                       "causal", "ms", "tflops", "rel_err"],
}
TEXT = {"chapter", "variant", "pass", "dtype", "kernel", "name", "unit", "what", "gpu", "causal",
        "backend", "impl", "probe", "torch_ref", "timed"}
OPTIONAL_NUMERIC = {"model_requested_bytes", "ms_min", "ms_max", "iters", "extra_mem_bytes"}
# Numbers that are measurements: a negative value means "not measured", like an empty field.
MEASURED = {"ms", "tflops", "gbps", "rel_err", "speedup_vs_ch01", "ms_min", "ms_max",
            "fwd_ms", "fwd_tflops", "bwd_ms", "bwd_tflops", "extra_mem_bytes", "measured_read_bytes", "measured_write_bytes",
            "measured_requested_read_bytes", "measured_requested_write_bytes", "measured_ms", "rate"}


class CsvError(Exception):
    """A missing or malformed results file; str() is the one-line message."""


def _number(path, line, column, text):
    """A float, None for an empty field (unmeasured), or CsvError."""
    text = text.strip()
    if text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        raise CsvError(f"{path}:{line}: column '{column}' is '{text}', not a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise CsvError(f"{path}:{line}: column '{column}' is '{text}', not a finite number")
    if column in MEASURED and value < 0:
        return None
    return value


def _causal(path, line, text):
    t = text.strip().lower()
    if t in ("0", "false", "no", ""):
        return False
    if t in ("1", "true", "yes"):
        return True
    raise CsvError(f"{path}:{line}: column 'causal' is '{text}', expected 0 or 1")


def read(path, kind=None):
    """Rows of one results file as dicts (numbers as float or None, causal as bool,
    chapter as two digits, '_line' the line number). kind: one of REQUIRED's names ('tour.csv',
    'traffic.csv', ...); default: the file's base name."""
    kind = kind or os.path.basename(path)
    required = REQUIRED[kind]
    if not os.path.isfile(path):
        raise CsvError(f"{path}: file not found (expected the {kind} of a results folder)")
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        try:
            header = next(reader)
        except StopIteration:
            raise CsvError(f"{path}:1: empty file, expected a header line") from None
        header = [h.strip() for h in header]
        if not any(header):
            raise CsvError(f"{path}:1: empty file, expected a header line")
        missing = [c for c in required if c not in header]
        if missing:
            raise CsvError(f"{path}:1: missing column(s) {', '.join(missing)}")
        rows = []
        for fields in reader:
            line = reader.line_num
            if not fields or all(f.strip() == "" for f in fields):
                continue  # blank line
            if len(fields) != len(header):
                raise CsvError(f"{path}:{line}: {len(fields)} fields, the header has {len(header)}")
            row = {"_line": line}
            for column, text in zip(header, fields):
                if column == "causal":
                    row[column] = _causal(path, line, text)
                elif column in TEXT or (column not in required and column not in OPTIONAL_NUMERIC):
                    row[column] = text.strip()
                else:
                    row[column] = _number(path, line, column, text)
            if "chapter" in row:
                c = row["chapter"]
                if not c:
                    raise CsvError(f"{path}:{line}: column 'chapter' is empty")
                row["chapter"] = c.zfill(2) if c.isdigit() else c
            for column in ("seq_len", "head_dim", "batch", "heads", "value"):
                if column in row and row[column] is None and column in required:
                    raise CsvError(f"{path}:{line}: column '{column}' is empty")
            for column in ("seq_len", "head_dim", "batch", "heads"):
                if column in row and row[column] is not None:
                    row[column] = int(row[column])
            rows.append(row)
    return rows


def read_results(results_dir):
    """(tour, traffic, ceilings) of a results folder; each CSV must exist."""
    return tuple(read(os.path.join(results_dir, name)) for name in
                 ("tour.csv", "traffic.csv", "ceilings.csv"))


# The tensor-core files of a results folder: (name, must exist). vs_pytorch.csv, when there
# is one, supplies PyTorch's numbers of the same run; without it, ch07_anchors.csv must.
TENSOR_CORE_FILES = (("tc_variants.csv", True), ("probes.csv", True),
                     ("vs_pytorch.csv", False), ("ch07_anchors.csv", False))


def read_tensor_cores(results_dir):
    """{name: rows} of the tensor-core files (TENSOR_CORE_FILES); an optional file that is
    absent maps to None. CsvError for a missing required file, a malformed one, or neither
    vs_pytorch.csv nor ch07_anchors.csv (PyTorch's bf16 numbers come from one of them)."""
    out = {}
    for name, required in TENSOR_CORE_FILES:
        path = os.path.join(results_dir, name)
        if required or os.path.isfile(path):
            out[name] = read(path)
        else:
            out[name] = None
    if out["vs_pytorch.csv"] is None and out["ch07_anchors.csv"] is None:
        raise CsvError(f"{os.path.join(results_dir, 'ch07_anchors.csv')}: file not found, and "
                       "no vs_pytorch.csv either (PyTorch's bf16 numbers come from one of them)")
    return out


def probes_dict(rows):
    """{probe: (rate, unit)} of probes.csv rows; a probe without a rate is left out."""
    return {r["probe"]: (r["rate"], r["unit"]) for r in rows if r["rate"] is not None}


def ceilings_dict(rows):
    """{name: (value, unit)} of ceilings.csv rows."""
    return {r["name"]: (r["value"], r["unit"]) for r in rows}


def traffic_key(row):
    """The (chapter, variant, pass) a traffic.csv row belongs to; variant and pass are extra
    columns written by scripts/join_traffic.py (empty / 'forward' when absent)."""
    return row["chapter"], row.get("variant", ""), row.get("pass", "") or "forward"


def dram_bytes(row, which):
    """Read + write DRAM bytes of a traffic.csv row: which = 'model' or 'measured';
    None when a measured figure is missing."""
    r, w = row[f"{which}_read_bytes"], row[f"{which}_write_bytes"]
    return None if r is None or w is None else r + w
