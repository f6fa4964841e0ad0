#!/usr/bin/env python3
"""Checks the generated site against the committed CSVs (ctest docs_ledger_pages):

  - every chapter folder chapters/NN_*/ has a README and a generated page chNN.md (and, with
    --html, the rendered chNN.html);
  - every number in the page's generated tables equals the CSVs: the per-kernel ledger and
    the per-size totals against traffic.csv, the timing table against tour.csv, the table
    of every variant against chapters.csv (when committed), and the main page's staircase
    table against tour.csv and traffic.csv. The
    expected values are recomputed here from the CSVs, not taken from gen_pages.py, and
    compared with the page's rounded figures (three or four significant digits);
  - with --html, every cell of those tables appears in the rendered page.

Exit 0: all good; 1: a mismatch (each printed); 77: the pages exist but the CSVs are not
committed yet, so the numbers could not be checked (ctest reports "skipped").

Usage: python3 docs/check_pages.py --repo ROOT --results DIR --generated DIR [--html DIR]
"""
import argparse
import glob
import html
import os
import re
import sys

import results_csv

SKIP = 77
UNITS = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
TOLERANCE = 0.006  # three significant digits round by at most 0.5%


def tables(markdown):
    """{name: [[cell, ...], ...]} of the tables after '<!-- ft-table: name -->' markers.
    A name may repeat (the results page); a chapter page has each once."""
    out, lines = {}, markdown.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"<!-- ft-table: (\w+) -->", line.strip())
        if not m:
            continue
        rows = []
        for row in lines[i + 3:]:  # skip the header and the |---| line
            if not row.startswith("|"):
                break
            cells = re.split(r"(?<!\\)\|", row.strip()[1:-1])  # '\|' is a '|' inside a cell
            rows.append([c.strip() for c in cells])
        out[m.group(1)] = rows
    return out


def value(cell):
    """'8.59 GB' -> 8.59e9, '275 GFLOP' -> 2.75e11, '1.04!' -> 1.04, '3.20×' -> 3.2, '—' -> None."""
    cell = cell.strip().rstrip("!×").strip()
    if cell == "—":
        return None
    m = re.match(r"^([-+0-9.eE]+)\s*([kMGTP]?)(B|FLOP)?$", cell)
    if not m:
        raise ValueError(f"not a number: '{cell}'")
    return float(m.group(1)) * UNITS[m.group(2)]


def close(shown, expected):
    if shown is None or expected is None:
        return shown is None and expected is None
    return abs(shown - expected) <= TOLERANCE * abs(expected) + 1e-12


def add(*values):
    return None if any(v is None for v in values) else sum(values)


def div(a, b):
    return a / b if a is not None and b else None


class Checker:
    def __init__(self):
        self.errors = []

    def expect(self, where, shown_cell, expected):
        try:
            shown = value(shown_cell)
        except ValueError as e:
            self.errors.append(f"{where}: {e}")
            return
        if not close(shown, expected):
            self.errors.append(f"{where}: page shows '{shown_cell}', the CSV gives {expected}")

    def pair(self, where, cell, model, measured):
        """A 'model / measured' cell."""
        parts = cell.split(" / ")
        if len(parts) != 2:
            self.errors.append(f"{where}: expected 'model / measured', got '{cell}'")
            return
        self.expect(where + " (model)", parts[0], model)
        self.expect(where + " (measured)", parts[1], measured)

    def kernels(self, page, rows, table):
        """Per-kernel ledger at the headline shape (N=4096, d=64, else the first)."""
        shapes = [(r["seq_len"], r["head_dim"]) for r in rows if not r["causal"]]
        shape = (4096, 64) if (4096, 64) in shapes else (shapes[0] if shapes else None)
        want = [r for r in rows if (r["seq_len"], r["head_dim"]) == shape and not r["causal"]]
        if len(table) != len(want):
            self.errors.append(f"{page} kernels: {len(table)} rows, traffic.csv has {len(want)} at N,d={shape}")
            return
        for cells, r in zip(table, want):
            where = f"{page} kernels {r['kernel']} (traffic.csv:{r['_line']})"
            if cells[2].strip("`") != r["kernel"] or cells[0] != r.get("variant", ""):
                self.errors.append(f"{where}: row is '{cells[0]} {cells[2]}'")
                continue
            self.pair(where + " DRAM read", cells[3], r["model_read_bytes"], r["measured_read_bytes"])
            self.pair(where + " DRAM write", cells[4], r["model_write_bytes"], r["measured_write_bytes"])
            self.pair(where + " requested", cells[5],
                      add(r["model_requested_read_bytes"], r["model_requested_write_bytes"]),
                      add(r["measured_requested_read_bytes"], r["measured_requested_write_bytes"]))
            self.expect(where + " FLOPs", cells[6], r["flops"])
            dram = add(r["measured_read_bytes"], r["measured_write_bytes"]) or \
                add(r["model_read_bytes"], r["model_write_bytes"])
            self.expect(where + " FLOP/byte", cells[7], div(r["flops"], dram))
            self.expect(where + " ms", cells[8], r["measured_ms"])
            self.expect(where + " TFLOP/s", cells[9],
                        div(r["flops"], r["measured_ms"] and r["measured_ms"] * 1e9))

    def sizes(self, page, rows, table):
        """Totals per variant, pass and size."""
        groups = {}
        for r in rows:
            key = (r.get("variant", ""), r.get("pass") or "forward", r["seq_len"], r["head_dim"], r["causal"])
            groups.setdefault(key, []).append(r)
        seen = set()
        for cells in table:
            n = cells[2].split()
            key = (cells[0], cells[1], int(n[0]), int(cells[3]), len(n) > 1)
            where = f"{page} sizes {' '.join(map(str, key))}"
            if key not in groups:
                self.errors.append(f"{where}: no such rows in traffic.csv")
                continue
            seen.add(key)
            g = groups[key]
            model = add(*[add(r["model_read_bytes"], r["model_write_bytes"]) for r in g])
            meas = add(*[add(r["measured_read_bytes"], r["measured_write_bytes"]) for r in g])
            ms = add(*[r["measured_ms"] for r in g])
            self.expect(where + " B·H", cells[4], g[0]["batch"] * g[0]["heads"])
            self.expect(where + " DRAM model", cells[5], model)
            self.expect(where + " DRAM measured", cells[6], meas)
            self.expect(where + " ratio", cells[7], div(meas, model))
            self.expect(where + " ms", cells[8], ms)
            self.expect(where + " TFLOP/s", cells[9],
                        div(add(*[r["flops"] for r in g]), ms and ms * 1e9))
        for key in groups.keys() - seen:
            self.errors.append(f"{page} sizes: traffic.csv's {key} is missing from the page")

    def variants(self, page, rows, table):
        """The chapter program's own rows (chapters.csv): every variant."""
        if len(table) != len(rows):
            self.errors.append(f"{page} variants: {len(table)} rows, chapters.csv has {len(rows)}")
            return
        keys = ("pass", "batch", "heads", "seq_len", "head_dim", "causal")
        for cells, r in zip(table, rows):
            where = f"{page} variants {r['variant']} {r['pass']} (chapters.csv:{r['_line']})"
            shape = f"B={r['batch']} H={r['heads']} N={r['seq_len']}" + \
                (f" d={r['head_dim']}" if r["head_dim"] else "")
            ident = [r["variant"], r["pass"], shape, "yes" if r["causal"] else "no"]
            if cells[:4] != ident:
                self.errors.append(f"{where}: row is {cells[:4]}")
                continue
            same = [o["ms"] for o in rows if o["ms"] and all(o[k] == r[k] for k in keys)]
            self.expect(where + " ms", cells[4], r["ms"])
            self.expect(where + " TFLOP/s", cells[5], r["tflops"])
            self.expect(where + " GB/s", cells[6], r["gbps"])
            self.expect(where + " ÷ fastest", cells[8], div(r["ms"], min(same) if same else None))

    def summary(self, page, tour, traffic, table):
        """The main page's staircase: tour rows at N=4096, d=64, non-causal, with the DRAM
        bytes of their kernels from traffic.csv."""
        rows = [r for r in tour if (r["seq_len"], r["head_dim"]) == (4096, 64) and not r["causal"]]
        if len(table) != len(rows):
            self.errors.append(f"{page} summary: {len(table)} rows, tour.csv has {len(rows)} at N=4096, d=64")
            return
        for cells, r in zip(table, rows):
            where = f"{page} summary {r['chapter']} {r['variant']} (tour.csv:{r['_line']})"
            if not cells[0].endswith(f'"{r["chapter"]}"') or cells[1:3] != [r["variant"], r["pass"]]:
                self.errors.append(f"{where}: row is {cells[:3]}")
                continue
            kernels = [t for t in traffic if t["chapter"] == r["chapter"]
                       and t.get("variant", "") == r["variant"]
                       and (t.get("pass") or "forward") == r["pass"]
                       and all(t[k] == r[k] for k in ("seq_len", "head_dim", "causal", "batch", "heads"))]
            self.expect(where + " ms", cells[3], r["ms"])
            self.expect(where + " TFLOP/s", cells[4], r["tflops"])
            self.expect(where + " speedup vs ch01", cells[5], r["speedup_vs_ch01"])
            self.pair(where + " DRAM", cells[6],
                      add(*[add(t["model_read_bytes"], t["model_write_bytes"]) for t in kernels])
                      if kernels else None,
                      add(*[add(t["measured_read_bytes"], t["measured_write_bytes"]) for t in kernels])
                      if kernels else None)
            self.expect(where + " extra memory", cells[7], r.get("extra_mem_bytes"))

    def tour(self, page, rows, table):
        if len(table) != len(rows):
            self.errors.append(f"{page} tour: {len(table)} rows, tour.csv has {len(rows)}")
            return
        for cells, r in zip(table, rows):
            where = f"{page} tour {r['variant']} {r['pass']} N={r['seq_len']} (tour.csv:{r['_line']})"
            ident = [r["variant"], r["pass"], str(r["batch"]), str(r["heads"]), str(r["seq_len"]),
                     str(r["head_dim"]), "yes" if r["causal"] else "no"]
            if cells[:7] != ident:
                self.errors.append(f"{where}: row is {cells[:7]}")
                continue
            self.expect(where + " ms", cells[7], r["ms"])
            self.expect(where + " TFLOP/s", cells[8], r["tflops"])
            self.expect(where + " speedup vs ch01", cells[11], r["speedup_vs_ch01"])


def markdown_cell_text(cell):
    """What a generated table cell shows once rendered: no code ticks, no backslash
    escapes, HTML entities decoded ('d &lt;= 64' -> 'd <= 64')."""
    return html.unescape(re.sub(r"\\(.)", r"\1", cell.strip("`")))


def rendered_text(path):
    """The visible text of an HTML page, cells separated so that each can be found."""
    with open(path, encoding="utf-8") as fh:
        s = fh.read()
    s = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", s, flags=re.S)
    s = re.sub(r"</t[dh]>", " ¦ ", s)
    return html.unescape(re.sub(r"<[^>]+>", "", s))


def main(argv=None):
    ap = argparse.ArgumentParser(description="Checks the generated chapter pages against the CSVs.")
    ap.add_argument("--repo", required=True)
    ap.add_argument("--results", required=True)
    ap.add_argument("--generated", required=True)
    ap.add_argument("--html")
    args = ap.parse_args(argv)

    chk = Checker()
    chapters = sorted(d for d in glob.glob(os.path.join(args.repo, "chapters", "[0-9][0-9]_*"))
                      if os.path.isdir(d))
    if not chapters:
        chk.errors.append(f"no chapter folders under {args.repo}/chapters")
    pages = {}
    for folder in chapters:
        ch = os.path.basename(folder)[:2]
        md = os.path.join(args.generated, f"ch{ch}.md")
        if not os.path.isfile(os.path.join(folder, "README.md")):
            chk.errors.append(f"{folder}: no README.md, so its page has no text")
        if not os.path.isfile(md):
            chk.errors.append(f"{md}: missing (chapter {ch} has no generated page)")
            continue
        if args.html and not os.path.isfile(os.path.join(args.html, f"ch{ch}.html")):
            chk.errors.append(f"{args.html}/ch{ch}.html: missing (the page was not rendered)")
        with open(md, encoding="utf-8") as fh:
            pages[ch] = fh.read()

    csvs = {}
    for name in ("traffic.csv", "tour.csv", "chapters.csv"):
        path = os.path.join(args.results, name)
        if os.path.isfile(path):
            try:
                csvs[name] = results_csv.read(path, "tour.csv" if name == "chapters.csv" else name)
            except results_csv.CsvError as e:
                chk.errors.append(str(e))
    # A chapter whose README says it has not run on a GPU yet (the code is written, the
    # measurements come with the next GPU session) may have no rows; any rows it has are
    # still checked.
    unmeasured_ok = "Not yet run on a GPU"
    # A chapter that builds no program of its own (Python over the other chapters' kernels,
    # gen_pages.NO_PROGRAM) has no rows of its own either.
    no_program = "This chapter builds no program of its own"
    for ch, text in pages.items():
        page = f"ch{ch}.md"
        found = tables(text)
        unmeasured = unmeasured_ok in text or no_program in text
        if "traffic.csv" in csvs:
            rows = [r for r in csvs["traffic.csv"] if r["chapter"] == ch]
            if not rows and unmeasured:
                pass
            elif not rows:
                chk.errors.append(f"chapter {ch}: no rows in traffic.csv (measure it: scripts/measure_traffic.sh)")
            elif "kernels" not in found or "sizes" not in found:
                chk.errors.append(f"{page}: the generated ledger tables are missing")
            else:
                chk.kernels(page, rows, found["kernels"])
                chk.sizes(page, rows, found["sizes"])
        if "tour.csv" in csvs:
            rows = [r for r in csvs["tour.csv"] if r["chapter"] == ch]
            if not rows and unmeasured:
                pass
            elif not rows:
                chk.errors.append(f"chapter {ch}: no rows in tour.csv")
            elif "tour" not in found:
                chk.errors.append(f"{page}: the generated timing table is missing")
            else:
                chk.tour(page, rows, found["tour"])
        if "chapters.csv" in csvs:  # optional: the page shows it when there are rows
            rows = [r for r in csvs["chapters.csv"] if r["chapter"] == ch]
            if rows and "variants" not in found:
                chk.errors.append(f"{page}: chapters.csv has rows for chapter {ch}, the page no table")
            elif rows:
                chk.variants(page, rows, found["variants"])
        if args.html and os.path.isfile(os.path.join(args.html, f"ch{ch}.html")):
            shown = rendered_text(os.path.join(args.html, f"ch{ch}.html"))
            for name, table in found.items():
                for cells in table:
                    missing = [c for c in map(markdown_cell_text, cells) if c not in shown]
                    if missing:  # one message per row is enough
                        chk.errors.append(f"ch{ch}.html: cell '{missing[0]}' of the {name} "
                                          "table is not on the page")

    main_md = os.path.join(args.generated, "mainpage.md")
    if not os.path.isfile(main_md):
        chk.errors.append(f"{main_md}: missing (no main page was generated)")
    elif "tour.csv" in csvs:
        with open(main_md, encoding="utf-8") as fh:
            found = tables(fh.read())
        if "summary" not in found:
            chk.errors.append("mainpage.md: the generated staircase table is missing")
        else:
            chk.summary("mainpage.md", csvs["tour.csv"], csvs.get("traffic.csv", []), found["summary"])

    # The pages made from docs/*.md (gen_pages.DOC_PAGES) exist and were rendered.
    for page_id in ("contracts", "ceilings", "glossary", "instructors", "methodology", "answers",
                    "use_in_your_model"):
        if not os.path.isfile(os.path.join(args.generated, f"{page_id}.md")):
            chk.errors.append(f"{page_id}.md: missing (docs/{page_id}.md was not turned into a page)")
        elif args.html and not os.path.isfile(os.path.join(args.html, f"{page_id}.html")):
            chk.errors.append(f"{args.html}/{page_id}.html: missing (the page was not rendered)")

    for e in chk.errors:
        print(f"FAILED: {e}")
    if chk.errors:
        return 1
    checked = ", ".join(csvs) or "no CSV"
    print(f"OK: {len(pages)} chapter pages; numbers checked against {checked}")
    missing = [n for n in ("traffic.csv", "tour.csv") if n not in csvs]
    if missing:
        print(f"SKIPPED: {args.results} has no {', '.join(missing)} yet: those numbers are unchecked")
        return SKIP
    return 0


if __name__ == "__main__":
    sys.exit(main())
