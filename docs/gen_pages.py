#!/usr/bin/env python3
"""Generates the Doxygen pages of the site (run by the `docs` target, into the build folder):

  mainpage.md   docs/mainpage.md with the chapter list, chapter links, figures and the
                measured staircase (a table from tour.csv and traffic.csv) filled in
  contracts.md  docs/contracts.md (what the code relies on: layouts, verification,
                timing, results files, the C API) as the page `contracts`; likewise
                docs/architecture.md, ceilings.md, glossary.md and instructors.md (DOC_PAGES)
  chNN.md       one page per chapters/NN_*/README.md (GitHub markdown made safe for
                Doxygen), followed by the chapter's measured ledger, generated from the
                committed CSVs (plots/results/<gpu>/traffic.csv, tour.csv, and
                chapters.csv when there is one: the chapter programs' every variant)
  results.md    the four figures and the whole tour table
  images/       pictures the READMEs show, copied so that IMAGE_PATH finds them
  input.doxy    Doxygen's INPUT: these pages in reading order (main page, chapters,
                results, DOC_PAGES), the order of Related Pages and of the tree

Usage: python3 docs/gen_pages.py --repo ROOT --results DIR --figures DIR --out DIR

Every number in a generated table comes from a CSV; docs/check_pages.py reads the tables
back and compares them with the CSVs. Formatting is the same everywhere: bytes and FLOPs
with decimal prefixes and three significant digits ("8.59 GB", "275 GFLOP"), '—' where a
number was not measured.
"""
import argparse
import json
import glob
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
import results_csv

# The shape the per-kernel table shows: the papers' benchmark shape, B=4 H=32 N=4096 d=64,
# the default of every chapter's program.
HEADLINE_N, HEADLINE_D = 4096, 64
# The figures plots/make_plots.py draws: (file, title, caption). The title heads the
# figure's section of the results page; the caption says what the figure shows (no '"':
# it goes inside a Doxygen \image command).
FIGURES = [("staircase.png", "The staircase: time per chapter, forward and backward",
            "The staircase in three rows, median time per call (the model's DRAM bytes in "
            "each bar): the forward in float32 on the CUDA cores (chapters 01–04, d = 64, "
            "N = 4096 and 16384, speedup over chapter 01); the forward in bf16 on the tensor "
            "cores (chapters 06–07 and chapter 09's fastest, N = 16384, d = 64 and 128, speedup "
            "over chapter 06's unfused grid_half); the backward in bf16 on the tensor cores (chapter 08's plain, "
            "wide_kv, async and dq_pass at the same shapes, speedup over chapter 05's float32 "
            "flash backward, the first bar). Lines: PyTorch on the same GPU, for scale"),
           ("bytes_vs_n.png", "Bytes through device memory vs N",
            "Bytes through device memory vs N, forward and backward, d = 64, non-causal: the "
            "model (lines) and Nsight Compute (points) for the kernels in traffic.csv, "
            "chapters 01–05 in float32 and the tensor-core chapters in bf16"),
           ("roofline.png", "Every kernel on the GPU's roofline",
            "Every kernel on the GPU's roofline"),
           ("memory_vs_n.png", "Extra device memory vs N", "Extra device memory vs N")]
CAPTIONS = {name: caption for name, _, caption in FIGURES}
TITLES = {name: title for name, title, _ in FIGURES}
MISSING = "—"  # an unmeasured number
# Pages made from docs/<id>.md as they are (GitHub markdown made safe, like a README):
# page id -> the title to use when the file has none.
DOC_PAGES = {"contracts": "Contracts", "architecture": "Architecture",
             "ceilings": "The H200's ceilings", "glossary": "Glossary",
             "instructors": "For instructors", "methodology": "How the numbers were measured",
             "answers": "Answers to the exercises", "use_in_your_model": "Use it in your model"}


# ---------------------------------------------------------------- number formatting

def si(value, unit):
    """8.59e9, 'B' -> '8.59 GB'; three significant digits, decimal prefixes."""
    if value is None:
        return MISSING
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def num(value, fmt="{:.3g}", suffix=""):
    return MISSING if value is None else fmt.format(value) + suffix


def g3(value):
    """Three significant digits without an exponent: 1034 -> '1034', 0.1672 -> '0.167'."""
    if value is None:
        return MISSING
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def escape(text):
    """Plain text from a CSV made safe in a Doxygen markdown table cell."""
    return Page.text(text).replace("|", "\\|")


def note(text):
    """An italic remark (HTML: Doxygen 1.9's markdown misses '*...*' around some text)."""
    return f"<em>{text}</em>"


def ratio(a, b):
    return a / b if a is not None and b else None


# ---------------------------------------------------------------- GitHub markdown -> Doxygen

# HTML tags Doxygen understands; any other '<' is text and is escaped.
HTML_TAGS = {"a", "b", "blockquote", "br", "caption", "center", "code", "dd", "del", "div",
             "dl", "dt", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "ins",
             "kbd", "li", "ol", "p", "pre", "s", "small", "span", "strike", "strong", "sub",
             "sup", "table", "td", "th", "tr", "tt", "u", "ul"}
# A real tag: a known name, then '>', '/>' or attributes (so 'tile<Br, Bc>' and 'a<b and'
# are text, not the <br> and <b> tags).
HTML_TAG = (r"/?(?i:" + "|".join(sorted(HTML_TAGS, key=len, reverse=True)) +
            r")(?:\s*/?>|\s+[\w-]+\s*=)")
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_LANGS = {"cpp": "cpp", "c++": "cpp", "cuda": "cpp", "cu": "cpp", "c": "c", "cxx": "cpp",
              "python": "py", "py": "py"}  # others become plain blocks


def slug(text):
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[`*_]", "", text.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


class Page:
    """Turns one README into a Doxygen page body: headings get labels, links point at
    pages and files Doxygen knows, characters Doxygen would read as commands are escaped."""

    def __init__(self, page_id, readme, ctx):
        self.id, self.readme, self.ctx = page_id, readme, ctx
        self.dir = os.path.dirname(readme)
        self.anchors = {}  # GitHub anchor -> Doxygen label
        self.labels = []   # the labels of the headings, in order

    def label(self, heading):
        """A unique label for a heading, remembered under GitHub's anchor for it
        ('the-ledger', then 'the-ledger-1' for a second heading of the same text)."""
        base = f"{self.id}_" + (re.sub(r"[^a-z0-9]+", "_", heading.lower()).strip("_") or "section")
        label, n = base, 1
        while label in self.labels:
            n += 1
            label = f"{base}_{n}"
        anchor, k = slug(heading), 0
        while (anchor if k == 0 else f"{anchor}-{k}") in self.anchors:
            k += 1
        self.anchors[anchor if k == 0 else f"{anchor}-{k}"] = label
        self.labels.append(label)
        return label

    def target(self, url):
        """A Doxygen link target for a README link, or None to keep only the text."""
        if re.match(r"^[a-z]+:", url):
            return url  # http(s), mailto
        path, _, anchor = url.partition("#")
        if not path:
            return f"@ref {self.anchors[anchor]}" if anchor in self.anchors else None
        full = os.path.normpath(os.path.join(self.dir, path))
        rel = os.path.relpath(full, self.ctx.repo)
        m = re.match(r"^chapters/(\d\d)_[^/]+(/README\.md)?/?$", rel)
        if m and m.group(1) in self.ctx.chapters:
            return f"@ref ch{m.group(1)}"
        if rel in ("README.md", "."):
            return "@ref index"
        m = re.match(r"^(chapters/\d\d_[^/]+)/case_study\.md$", rel)
        if m and os.path.isfile(full):  # a chapter's case study: Doxygen's page for it (its top)
            return "@ref md_" + re.sub(r"[^\w]", "_", f"{m.group(1)}/case_study")
        m = re.match(r"^docs/(\w+)\.md$", rel)
        if m and m.group(1) in DOC_PAGES:  # a page of the site made from docs/*.md
            return f"@ref {m.group(1)}"
        if rel in self.ctx.sources:  # a file in the API reference: its page
            return f"@ref {self.ctx.sources[rel]}"
        return None

    def image(self, alt, src):
        """An \\image command for a picture that exists, else a note."""
        if re.match(r"^[a-z]+:", src):
            return f'<img src="{src}" alt="{alt}">'
        full = os.path.normpath(os.path.join(self.dir, src))
        if not os.path.isfile(full):
            name = os.path.basename(src)
            if name in CAPTIONS and os.path.isfile(os.path.join(self.ctx.figures, name)):
                full = os.path.join(self.ctx.figures, name)
            else:
                return note(f"Figure `{name}` is not generated yet.")
        name = self.ctx.copy_image(full, alt)
        return f'\n\\image html {name} "{alt}"\n' if alt else f"\n\\image html {name}\n"

    @staticmethod
    def text(s):
        """Escapes one stretch of prose (no code spans in it)."""
        s = s.replace("\\", "\\\\")
        s = re.sub(r"([@#%$])(?=\w)", r"\\\1", s)  # @cmd, #member, %word, $keyword
        s = re.sub(r"<(?!!--)(?!" + HTML_TAG + ")", "&lt;", s)
        return s

    def prose(self, s):
        """Links and images rewritten (a link's label may be a `code span`), then text
        escaped, outside code spans."""
        spans = [m.span() for m in re.finditer(r"`+[^`]*?`+", s)]
        inside = lambda i: any(a <= i < b for a, b in spans)  # noqa: E731
        out, pos = [], 0
        for m in LINK.finditer(s):
            if inside(m.start()):
                continue  # brackets inside a code span are code
            out.append(self.code_and_text(s[pos:m.start()]))
            bang, label, url = m.groups()
            if bang:
                out.append(self.image(label, url))
            else:
                t = self.target(url)
                out.append(f"[{self.prose(label)}]({t})" if t else self.prose(label))
            pos = m.end()
        out.append(self.code_and_text(s[pos:]))
        return "".join(out)

    def code_and_text(self, s):
        """Text escaped outside `code spans`; the spans as they are (Doxygen leaves them alone)."""
        return "".join(part if i % 2 else self.text(part)
                       for i, part in enumerate(re.split(r"(`+[^`]*?`+)", s)))

    def convert(self, text):
        """(title, Doxygen markdown body)."""
        lines = text.splitlines()
        title, body, fence = None, [], None
        # First pass: the labels, so that '#anchor' links anywhere can resolve.
        for line in lines:
            if re.match(r"^\s*(```|~~~)", line):
                fence = None if fence else line.strip()[:3]
            elif not fence and re.match(r"^#{2,6}\s", line):
                self.label(re.sub(r"^#+\s+|\s+#*$", "", line))
        labels = iter(self.labels)
        fence = None
        for line in lines:
            m = re.match(r"^(\s*)(```|~~~)\s*\{?\.?([\w+-]*)\}?\s*$", line)
            if m and not fence:
                fence = m.group(2)
                lang = CODE_LANGS.get(m.group(3).lower())
                body.append(f"{m.group(1)}{fence}{{.{lang}}}" if lang else m.group(1) + fence)
                continue
            if fence:
                if line.strip() == fence:
                    fence = None
                body.append(line)
                continue
            h = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
            if h and len(h.group(1)) == 1 and title is None:
                title = re.sub(r"[`*]", "", h.group(2))
                continue
            if h:  # '##' is the page's top level: Doxygen's '#' (a \section)
                level = max(1, len(h.group(1)) - 1)
                # Plain text: Doxygen 1.9 shows markup in a heading as raw tags in the TOC.
                heading = re.sub(r"`|\*\*|__", "", h.group(2))
                body.append(f"{'#' * level} {self.prose(heading)} {{#{next(labels)}}}")
                continue
            line = re.sub(r"</?(details|summary)>", "", line)  # Doxygen 1.9 lacks them
            body.append(self.prose(line))
        return title, "\n".join(body)


# ---------------------------------------------------------------- the ledger tables

def by_variant(rows):
    """{(variant, pass): rows} in first-seen order."""
    out = {}
    for r in rows:
        out.setdefault((r.get("variant", ""), r.get("pass") or "forward"), []).append(r)
    return out


def headline_shape(rows):
    """(N, d) of the per-kernel table: 4096/64 when measured, else the first there is."""
    shapes = [(r["seq_len"], r["head_dim"]) for r in rows if not r["causal"]]
    if (HEADLINE_N, HEADLINE_D) in shapes:
        return HEADLINE_N, HEADLINE_D
    return shapes[0] if shapes else None


def kernel_rows(rows):
    """The per-kernel table at the headline shape (markdown lines)."""
    shape = headline_shape(rows)
    if not shape:
        return []
    sel = [r for r in rows if (r["seq_len"], r["head_dim"]) == shape and not r["causal"]]
    b, h = sel[0]["batch"], sel[0]["heads"]
    out = [f"Per kernel at B={b}, H={h}, N={shape[0]}, d={shape[1]}, non-causal. DRAM bytes: "
           "the model's prediction and Nsight Compute's `dram__bytes_*`; requested: what the "
           "kernel's loads and stores ask of L2 (model / `lts__t_sectors_srcunit_tex_op_*`); "
           "FLOP per byte uses the measured DRAM bytes where there are some; time: "
           "`gpu__time_duration` under Nsight Compute (caches flushed, clocks not locked). "
           "FLOPs are the ledger's: what each kernel computes (a recomputation counts), not "
           "the papers' count the timing table below uses.", "",
           "<!-- ft-table: kernels -->",
           "| variant | pass | kernel | DRAM read (model / measured) | DRAM write (model / measured) "
           "| requested read+write (model / measured) | FLOPs | FLOP per DRAM byte | time (ms) | TFLOP/s |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in sel:
        model_req = sum_or_none(r["model_requested_read_bytes"], r["model_requested_write_bytes"])
        meas_req = sum_or_none(r["measured_requested_read_bytes"], r["measured_requested_write_bytes"])
        dram = results_csv.dram_bytes(r, "measured") or results_csv.dram_bytes(r, "model")
        ms = r["measured_ms"]
        out.append(
            f"| {r.get('variant', '')} | {r.get('pass') or 'forward'} | `{r['kernel']}` "
            f"| {si(r['model_read_bytes'], 'B')} / {si(r['measured_read_bytes'], 'B')} "
            f"| {si(r['model_write_bytes'], 'B')} / {si(r['measured_write_bytes'], 'B')} "
            f"| {si(model_req, 'B')} / {si(meas_req, 'B')} | {si(r['flops'], 'FLOP')} "
            f"| {g3(ratio(r['flops'], dram))} | {num(ms, '{:.4g}')} "
            f"| {num(ratio(r['flops'], ms and ms * 1e9))} |")
    return out


def sum_or_none(*values):
    return None if any(v is None for v in values) else sum(values)


def size_rows(rows):
    """Totals per variant and pass at every measured size (markdown lines)."""
    out = ["Totals over each variant's kernels at every size measured (16k tokens: "
           "B = 16384/N, H = 2048/d). '!' marks a measurement more than 20% away from the "
           "model at N ≥ 4096: the chapter's text says why. TFLOP/s: the ledger's FLOPs "
           "over the summed Nsight Compute kernel times.", "",
           "<!-- ft-table: sizes -->",
           "| variant | pass | N | d | B·H | DRAM model | DRAM measured | measured / model | time (ms) | TFLOP/s |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for (variant, pss), rs in by_variant(rows).items():
        shapes = sorted({(r["head_dim"], r["seq_len"], r["causal"]) for r in rs})
        for d, n, causal in shapes:
            sel = [r for r in rs if (r["head_dim"], r["seq_len"], r["causal"]) == (d, n, causal)]
            model = sum_or_none(*[results_csv.dram_bytes(r, "model") for r in sel])
            meas = sum_or_none(*[results_csv.dram_bytes(r, "measured") for r in sel])
            ms = sum_or_none(*[r["measured_ms"] for r in sel])
            flops = sum_or_none(*[r["flops"] for r in sel])
            q = ratio(meas, model)
            flag = "!" if q is not None and n >= 4096 and abs(q - 1) > 0.2 else ""
            out.append(f"| {variant} | {pss} | {n}{' causal' if causal else ''} | {d} "
                       f"| {sel[0]['batch'] * sel[0]['heads']} | {si(model, 'B')} | {si(meas, 'B')} "
                       f"| {num(q, '{:.2f}')}{flag} | {num(ms, '{:.4g}')} "
                       f"| {num(ratio(flops, ms and ms * 1e9))} |")
    return out


def tour_rows(tour, chapter):
    """The chapter's timed rows from tour.csv with the step's speedup (markdown lines)."""
    rows = [r for r in tour if r["chapter"] == chapter]
    out = ["Timed by the chapter's program (CUDA events, median, L2 flushed between calls). "
           "Step speedup: the previous chapter's fastest variant of the same pass on the same "
           "problem, divided by this time.", "",
           "<!-- ft-table: tour -->",
           "| variant | pass | B | H | N | d | causal | time (ms) | TFLOP/s | model GB/s "
           "| rel. error | speedup vs ch01 | step speedup |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        prev = step_baseline(tour, r)
        step = f"{prev[1] / r['ms']:.2f}× (vs {prev[0]})" if prev and r["ms"] else MISSING
        out.append(f"| {r['variant']} | {r['pass']} | {r['batch']} | {r['heads']} | {r['seq_len']} "
                   f"| {r['head_dim']} | {'yes' if r['causal'] else 'no'} | {num(r['ms'], '{:.4g}')} "
                   f"| {num(r['tflops'])} | {g3(r['gbps'])} | {num(r['rel_err'], '{:.1e}')} "
                   f"| {num(r['speedup_vs_ch01'], '{:.2f}', '×')} | {step} |")
    return out


def shape_cell(r):
    """'B=4 H=32 N=4096 d=64', or 'B=16384 H=1 N=16384' where d does not apply (0)."""
    return f"B={r['batch']} H={r['heads']} N={r['seq_len']}" + (f" d={r['head_dim']}" if r["head_dim"] else "")


def fastest_same(rows, row):
    """The shortest time among `rows` on the same problem as `row`."""
    times = [r["ms"] for r in rows if r["ms"] and same_problem(r, row)]
    return min(times) if times else None


def variant_rows(chapter_rows):
    """Every row of the chapter program's own run (chapters.csv; markdown lines)."""
    out = ["Every variant, as the chapter's program printed it in its own run (`chapters.csv`: "
           "the default variants and the others, e.g. tile shapes or a benchmark of one "
           "kernel). GB/s as the program reports it: the model's DRAM bytes per second, or "
           "for a benchmark what its `what` says. '÷ fastest': this time over the fastest "
           "variant's on the same problem.", "",
           "<!-- ft-table: variants -->",
           "| variant | pass | shape | causal | time (ms) | TFLOP/s | GB/s | rel. error "
           "| ÷ fastest | what |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in chapter_rows:
        best = fastest_same(chapter_rows, r)
        out.append(f"| {r['variant']} | {r['pass']} | {shape_cell(r)} | {'yes' if r['causal'] else 'no'} "
                   f"| {num(r['ms'], '{:.4g}')} | {num(r['tflops'])} | {g3(r['gbps'])} "
                   f"| {num(r['rel_err'], '{:.1e}')} | {num(ratio(r['ms'], best), '{:.2f}')} "
                   f"| {escape(r.get('what', ''))} |")
    return out


def summary_rows(tour, traffic, chapters=()):
    """The staircase in numbers for the main page: every tour row at the headline shape,
    with the DRAM bytes of its kernels (traffic.csv) beside the time (markdown lines)."""
    rows = [r for r in tour if (r["seq_len"], r["head_dim"]) == (HEADLINE_N, HEADLINE_D)
            and not r["causal"]]
    if not rows:
        return [note(f"No rows at N={HEADLINE_N}, d={HEADLINE_D} in `tour.csv` yet.")]
    b, h = rows[0]["batch"], rows[0]["heads"]
    out = [f"Measured on the {gpu_of(tour)} at B={b}, H={h}, N={HEADLINE_N}, d={HEADLINE_D}, "
           f"non-causal: {dtypes_text(rows)} (generated from `tour.csv` and `traffic.csv`):", "",
           "<!-- ft-table: summary -->",
           "| chapter | variant | pass | time (ms) | TFLOP/s | speedup vs ch01 "
           "| DRAM bytes (model / measured) | extra memory | dtype |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        kernels = [t for t in traffic or [] if t["chapter"] == r["chapter"]
                   and t.get("variant", "") == r["variant"] and same_kernel_problem(t, r)]
        model = sum_or_none(*[results_csv.dram_bytes(t, "model") for t in kernels]) if kernels else None
        meas = sum_or_none(*[results_csv.dram_bytes(t, "measured") for t in kernels]) if kernels else None
        link = f"\\ref ch{r['chapter']} \"{r['chapter']}\""
        out.append(f"| {link} | {r['variant']} | {r['pass']} | {num(r['ms'], '{:.4g}')} "
                   f"| {num(r['tflops'])} | {num(r['speedup_vs_ch01'], '{:.2f}', '×')} "
                   f"| {si(model, 'B')} / {si(meas, 'B')} | {si(r.get('extra_mem_bytes'), 'B')} "
                   f"| {r.get('dtype') or 'float32'} |")
    shown = {r["chapter"] for r in rows}
    elsewhere = {}  # chapter -> the sizes its tour.csv rows have, when none is the headline's
    for r in tour:
        if r["chapter"] not in shown:
            elsewhere.setdefault(r["chapter"], set()).add(r["seq_len"])
    if elsewhere:
        parts = [(f"\\ref ch{c} \"{c}\"" if c in chapters else c)
                 + f" (N = {', '.join(str(n) for n in sorted(ns))})"
                 for c, ns in sorted(elsewhere.items())]
        out += ["", note("Not in this table, having no row at this shape in `tour.csv`: "
                         f"chapter{'s' if len(parts) > 1 else ''} " + ", ".join(parts)
                         + f"; {'each' if len(parts) > 1 else 'the'} chapter's page has its rows.")]
    return out


def dtypes_text(rows):
    """'float32 for chapters 01–05; bf16 for chapters 06–07': each dtype of the rows with its
    chapters, in the chapters' order."""
    chapters, order = {}, sorted({r["chapter"] for r in rows})
    for r in rows:
        chapters.setdefault(r.get("dtype") or "float32", set()).add(r["chapter"])
    parts = []
    for dtype, chs in chapters.items():
        chs = sorted(chs)
        # A span only where no chapter of another dtype lies inside it.
        whole = order[order.index(chs[0]):order.index(chs[-1]) + 1] == chs
        span = (chs[0] if len(chs) == 1 else f"{chs[0]}–{chs[-1]}" if whole
                else ", ".join(chs))
        parts.append(f"{dtype} for chapter{'s' if len(chs) > 1 else ''} {span}")
    return "; ".join(parts)


def same_kernel_problem(t, r):
    """A traffic.csv row of the problem a tour.csv row timed (and of its pass)."""
    return ((t.get("pass") or "forward") == r["pass"] and t["seq_len"] == r["seq_len"]
            and t["head_dim"] == r["head_dim"] and t["causal"] == r["causal"]
            and t["batch"] == r["batch"] and t["heads"] == r["heads"])


def gpu_of(rows):
    names = [r.get("gpu") for r in rows if r.get("gpu")]
    return names[-1] if names else "GPU"


def same_problem(a, b):
    keys = ("pass", "batch", "heads", "seq_len", "head_dim", "causal")
    return all(a[k] == b[k] for k in keys)


def step_baseline(tour, row):
    """('NN variant', ms) of the previous chapter's fastest row on the same problem."""
    earlier = sorted({r["chapter"] for r in tour if r["chapter"] < row["chapter"]
                      and r["ms"] and same_problem(r, row)})
    if not earlier:
        return None
    cands = [r for r in tour if r["chapter"] == earlier[-1] and r["ms"] and same_problem(r, row)]
    best = min(cands, key=lambda r: r["ms"])
    return f"{best['chapter']} {best['variant']}", best["ms"]


def ledger_section(ctx, chapter, page_id):
    """The generated part of a chapter page."""
    gpu = ctx.gpu
    out = ["", "---", "", f"# Measured on the {gpu} (generated) {{#{page_id}_measured}}", "",
           f"Generated by `docs/gen_pages.py` from `{ctx.results_rel}/traffic.csv` and "
           "`tour.csv` when the docs were built; nothing in this section is typed by hand.", ""]
    if ctx.traffic is None:
        out += [note("No `traffic.csv` committed yet: the measured ledger appears here after "
                     "the GPU run (`scripts/measure_traffic.sh`)."), ""]
    else:
        rows = [r for r in ctx.traffic if r["chapter"] == chapter]
        if rows:
            out += [f"## Memory ledger per kernel {{#{page_id}_ledger}}", ""] + kernel_rows(rows)
            out += ["", f"## Every size {{#{page_id}_sizes}}", ""] + size_rows(rows) + [""]
        else:
            out += [note(f"No rows for chapter {chapter} in `traffic.csv` yet."), ""]
    if ctx.tour is None:
        out += [note("No `tour.csv` committed yet."), ""]
    else:
        if any(r["chapter"] == chapter for r in ctx.tour):
            out += [f"## Time and speedup {{#{page_id}_tour}}", ""] + tour_rows(ctx.tour, chapter) + [""]
        else:
            out += [note(f"No rows for chapter {chapter} in `tour.csv` yet."), ""]
    own = [r for r in ctx.chapters_csv or [] if r["chapter"] == chapter]
    if own:
        out += [f"## Every variant {{#{page_id}_variants}}", ""] + variant_rows(own) + [""]
    out += ["The figures (staircase, bytes vs N, roofline, memory): \\ref results.", ""]
    return out


# ---------------------------------------------------------------- the site

class Context:
    def __init__(self, args):
        self.repo, self.out, self.figures = args.repo, args.out, args.figures
        rel = os.path.relpath(args.results, args.repo)
        self.results_rel = rel if not rel.startswith("..") else os.path.abspath(args.results)
        self.tour = self.read(os.path.join(args.results, "tour.csv"))
        self.traffic = self.read(os.path.join(args.results, "traffic.csv"))
        # The chapter programs' own rows (every variant); optional, tour.csv's columns.
        self.chapters_csv = self.read(os.path.join(args.results, "chapters.csv"), "tour.csv")
        names = [r.get("gpu") for r in self.tour or [] if r.get("gpu")]
        self.gpu = names[-1] if names else os.path.basename(os.path.normpath(args.results)).upper()
        self.chapter_dirs = sorted(d for d in glob.glob(os.path.join(args.repo, "chapters", "[0-9][0-9]_*"))
                                   if os.path.isdir(d))
        self.chapters = {os.path.basename(d)[:2]: d for d in self.chapter_dirs}
        # Files Doxygen documents: a README link to one becomes a link to its page.
        self.sources = {}
        for folder in ("common", "chapters"):
            for f in glob.glob(os.path.join(args.repo, folder, "**", "*"), recursive=True):
                rel = os.path.relpath(f, args.repo)
                if re.search(r"\.(hpp|cuh|h|cu|cpp)$", f) and not re.search(r"(^|/)(tests/|test_)", rel):
                    self.sources[rel] = rel
        self.images = os.path.join(self.out, "images")
        # image file -> the words a reader without the picture gets (its alt text): Doxygen
        # 1.9's \image leaves alt empty, so docs/alt_text.py writes these into the HTML.
        self.alts = {}

    @staticmethod
    def read(path, kind=None):
        """Rows of a results CSV, None when it is not committed; malformed: exit 1."""
        if not os.path.isfile(path):
            return None
        try:
            return results_csv.read(path, kind)
        except results_csv.CsvError as e:
            sys.exit(f"gen_pages: error: {e}")

    def copy_image(self, path, alt=""):
        os.makedirs(self.images, exist_ok=True)
        # "figures/roofline.png" -> "figures_roofline.png": unique enough, no odd characters
        name = re.sub(r"[^\w.-]", "_", os.path.basename(os.path.dirname(path)) + "_" +
                      os.path.basename(path))
        shutil.copyfile(path, os.path.join(self.images, name))
        stem = os.path.splitext(os.path.basename(path))[0].replace("_", " ")
        self.alts[name] = alt or self.alts.get(name) or CAPTIONS.get(os.path.basename(path)) or stem
        return name

    def figure(self, name, caption):
        path = os.path.join(self.figures, name)
        if os.path.isfile(path):
            return f'\\image html {self.copy_image(path, caption)} "{caption}" width=900px'
        title = TITLES.get(name, caption)
        return note(f"Figure `plots/figures/{name}` ({title[0].lower() + title[1:]}) is not generated yet: "
                    "`cmake --build build --target plots` draws it from the committed CSVs.")

    def chapter_title(self, chapter):
        readme = os.path.join(self.chapters[chapter], "README.md")
        if os.path.isfile(readme):
            with open(readme, encoding="utf-8") as fh:
                for line in fh:
                    if line.startswith("# "):
                        return line[2:].strip().replace("`", "")
        return f"Chapter {chapter}: {os.path.basename(self.chapters[chapter])[3:]}"


def write(path, lines):
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


# A chapter whose README says this runs the other chapters' kernels (from Python) and has
# no ledger rows of its own; docs/check_pages.py asks none of it.
NO_PROGRAM = "This chapter builds no program of its own"


def chapter_page(ctx, chapter):
    page_id = f"ch{chapter}"
    folder = ctx.chapters[chapter]
    readme = os.path.join(folder, "README.md")
    rel = os.path.relpath(folder, ctx.repo)
    if os.path.isfile(readme):
        with open(readme, encoding="utf-8") as fh:
            title, body = Page(page_id, readme, ctx).convert(fh.read())
    else:
        title, body = None, note(f"This chapter's `{rel}/README.md` is not written yet.")
    title = title or ctx.chapter_title(chapter)
    head = [f"# {title} {{#{page_id}}}", "",
            note(f"From `{rel}/README.md`; the code is in `{rel}/` (see the file list)."), "",
            "[TOC]", ""]
    if os.path.isfile(os.path.join(folder, "case_study.md")):
        # Doxygen's page for chapters/NN_x/case_study.md, nested under this chapter's page
        # (in the tree and under Related Pages).
        case = "md_" + re.sub(r"[^\w]", "_", f"{rel}/case_study")
        head += [f"The chapter's case study: \\subpage {case}", ""]
    if NO_PROGRAM in body:  # Python over the other chapters' kernels: no ledger rows of its own
        tail = ["", note("Its measurements are in the text above: it has no rows of its own in "
                         "`traffic.csv` or `tour.csv`."), ""]
    else:
        tail = ledger_section(ctx, chapter, page_id)
    write(os.path.join(ctx.out, f"{page_id}.md"), head + [body] + tail)


def main_page(ctx, template):
    with open(template, encoding="utf-8") as fh:
        text = re.sub(r"<!--.*?-->\n?", "", fh.read(), flags=re.S)  # notes to the editor
    items = [f"{i}. \\ref ch{c}" for i, c in enumerate(sorted(ctx.chapters), 1)]
    text = text.replace("@@CHAPTERS@@", "\n".join(items) if items else note("No chapters yet."))
    text = re.sub(r"\{\{ch:(\d\d)\}\}",
                  lambda m: f'\\ref ch{m.group(1)} "chapter {m.group(1)}"' if m.group(1) in ctx.chapters
                  else f"chapter {m.group(1)}", text)
    summary = summary_rows(ctx.tour, ctx.traffic, ctx.chapters) if ctx.tour is not None else \
        [note("No `tour.csv` committed yet: the measured staircase appears here after the GPU run.")]
    text = text.replace("@@SUMMARY@@", "\n".join(summary))
    text = re.sub(r"@@FIGURE ([\w.]+)@@", lambda m: ctx.figure(m.group(1), CAPTIONS[m.group(1)]), text)
    write(os.path.join(ctx.out, "mainpage.md"), [text])


def results_page(ctx):
    out = [f"# Results on the {ctx.gpu} {{#results}}", "",
           f"Everything here is drawn or copied from `{ctx.results_rel}/*.csv` when the docs are "
           "built (`plots/make_plots.py` for the figures, `docs/gen_pages.py` for the tables).", ""]
    for name, title, caption in FIGURES:
        out += [f"# {title} {{#results_{name[:-4]}}}", "", ctx.figure(name, caption), ""]
    out += ["# Every timed row {#results_tour}", ""]
    if ctx.tour is None:
        out.append(note("No `tour.csv` committed yet."))
    else:
        for chapter in sorted({r["chapter"] for r in ctx.tour}):
            link = f"\\ref ch{chapter}" if chapter in ctx.chapters else f"Chapter {chapter}"
            out += [f"## {link} {{#results_ch{chapter}}}", ""] + tour_rows(ctx.tour, chapter) + [""]
    write(os.path.join(ctx.out, "results.md"), out)


def doc_page(ctx, page_id):
    """docs/<page_id>.md as the page `page_id` (GitHub markdown made safe, like a README)."""
    source = os.path.join(HERE, f"{page_id}.md")
    with open(source, encoding="utf-8") as fh:
        title, body = Page(page_id, source, ctx).convert(fh.read())
    write(os.path.join(ctx.out, f"{page_id}.md"),
          [f"# {title or DOC_PAGES[page_id]} {{#{page_id}}}", "", "[TOC]", "", body])


def main(argv=None):
    ap = argparse.ArgumentParser(description="Generates the Doxygen pages.")
    ap.add_argument("--repo", required=True)
    ap.add_argument("--results", required=True, help="e.g. plots/results/h200")
    ap.add_argument("--figures", required=True, help="e.g. plots/figures")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    ctx = Context(args)
    if os.path.isdir(args.out):
        shutil.rmtree(args.out)  # no pages left over from a chapter that was renamed
    os.makedirs(ctx.images)  # Doxygen's IMAGE_PATH: must exist even when empty
    for chapter in sorted(ctx.chapters):
        chapter_page(ctx, chapter)
    main_page(ctx, os.path.join(HERE, "mainpage.md"))
    for page_id in DOC_PAGES:
        doc_page(ctx, page_id)
    results_page(ctx)
    # Doxygen's INPUT, the pages in reading order (docs/Doxyfile.in includes this file):
    # Related Pages and the tree list the pages in the order Doxygen reads them.
    order = ["mainpage"] + [f"ch{c}" for c in sorted(ctx.chapters)] + ["results"] + list(DOC_PAGES)
    with open(os.path.join(args.out, "image_alts.json"), "w", encoding="utf-8") as fh:
        json.dump(ctx.alts, fh, indent=1, sort_keys=True, ensure_ascii=False)
    write(os.path.join(args.out, "input.doxy"),
          ["INPUT = " + " ".join(f'"{os.path.join(os.path.abspath(args.out), p)}.md"' for p in order)])
    print(f"gen_pages: {len(ctx.chapters)} chapter pages, results from {ctx.results_rel} "
          f"(tour.csv {'present' if ctx.tour is not None else 'absent'}, "
          f"traffic.csv {'present' if ctx.traffic is not None else 'absent'}) into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
