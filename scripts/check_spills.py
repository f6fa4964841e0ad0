#!/usr/bin/env python3
"""Holds what the chapter READMEs say about register spills to what ptxas reported.

  python3 scripts/check_spills.py BUILD_DIR        exit 1, saying which, if a claim is false
  python3 scripts/check_spills.py BUILD_DIR --list  every kernel that spills, per chapter

The chapters' kernels are compiled with -Xptxas=-v through cmake/ptxas_report.sh, which keeps
ptxas's report beside each object (<object>.ptxas.txt). A kernel *spills* when ptxas moves
registers out to local memory ("N bytes spill stores"): slow, and worth a sentence in the
lesson. Each claim below quotes a README and says what must hold for the quote to be true:
when a kernel starts or stops spilling, or the text changes, this fails and names both.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
from collections import namedtuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# One kernel of one architecture: chapter "07", arch "sm_90", its demangled name, the
# bytes of its spill stores.
Kernel = namedtuple("Kernel", "chapter arch name spill")

ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\w+)'")
SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def demangle(names):
    """C++ names of the mangled `names` (c++filt, one call); the mangled ones without it."""
    if not names or not shutil.which("c++filt"):
        return {n: n for n in names}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout
    return dict(zip(names, out.splitlines()))


def parse(text, chapter):
    """The kernels of one report: each entry function's spill stores, for its architecture."""
    found, entry = [], None
    for line in text.splitlines():
        m = ENTRY.search(line)
        if m:
            entry = m.groups()
            continue
        m = SPILL.search(line)
        if m and entry:  # the first properties line after an entry is the entry's
            found.append((chapter, entry[1], entry[0], int(m.group(2))))
            entry = None
    return found


def kernels(build):
    """Every kernel of every chapter's ptxas report under build/chapters."""
    raw = []
    for path in sorted(glob.glob(os.path.join(build, "chapters", "*", "**", "*.ptxas.txt"), recursive=True)):
        chapter = os.path.relpath(path, os.path.join(build, "chapters"))[:2]
        with open(path, encoding="utf-8", errors="replace") as f:
            raw += parse(f.read(), chapter)
    names = demangle(sorted({r[2] for r in raw}))
    return [Kernel(c, a, names[n], s) for c, a, n, s in raw]


# ---- the claims -------------------------------------------------------------------------

def spilling(ks, chapter, arch=None):
    """{demangled name: spill bytes} of the chapter's kernels that spill (on `arch`)."""
    return {k.name: k.spill for k in ks if k.chapter == chapter and k.spill and (arch is None or k.arch == arch)}


def none_spill(chapter, arch=None):
    def check(ks):
        bad = spilling(ks, chapter, arch)
        return not bad, bad
    check.arch = arch
    return check


def exactly(chapter, arch, expected):
    """The chapter's spilling kernels on `arch` are those whose names match the regular
    expressions of `expected`, each pattern's largest spill equal to its value, and no others."""
    def check(ks):
        bad = spilling(ks, chapter, arch)
        got, unmatched = {}, dict(bad)
        for pattern in expected:
            hits = {n: s for n, s in bad.items() if re.search(pattern, n)}
            got[pattern] = max(hits.values()) if hits else 0
            for n in hits:
                unmatched.pop(n, None)
        return got == expected and not unmatched, {"expected": expected, "got": got, "others": unmatched}
    check.arch = arch
    return check


def spills(chapter, arch, pattern, nbytes):
    """The one kernel of the chapter matching `pattern` on `arch` spills `nbytes`."""
    def check(ks):
        hits = [k.spill for k in ks if k.chapter == chapter and k.arch == arch and re.search(pattern, k.name)]
        return hits == [nbytes], hits
    check.arch = arch
    return check


# Chapter 07's kernels that spill, at d = 128 (flash_forward.cu: tuned, lazy_rescale, and
# lazy_rescale's views and two-length instances, which `fastest` runs), both dtypes.
_CH07 = r"flash_forward_tc<ch07::ForwardTraits<\w+, 128, 128, 64, 4, [^>]*Rescale\){}> >\("
_CH07_VIEWS, _CH07_KV = r"flash_forward_tc<ft::Views<ch07::ForwardTraits<", r"flash_forward_tc<ch07::KeyValue<"
_CH07_VIEWS_KV = r"flash_forward_tc<ft::Views<ch07::KeyValue<"


def ch07(tuned, lazy, views, kv, views_kv):
    return {_CH07.format(0): tuned, _CH07.format(1): lazy, _CH07_VIEWS: views, _CH07_KV: kv,
            _CH07_VIEWS_KV: views_kv}


Claim = namedtuple("Claim", "readme quote check")

# Chapter 10's spilling kernels, every one: step 4's at d = 64 and tall_bulk's (a store and
# a load a tile in its consumers).
CH10_SPILLS = {r"SpecializedBackwardTraits<\w+, 64, \(ch10::DqAdd\)1, true": 8,
               r"SpecializedBackwardTraits<\w+, 64, \(ch10::DqAdd\)1, false, \(ch10::Schedule\)0, 128": 4}

CLAIMS = [
    Claim("chapters/04_fused_forward/README.md",
          "On sm_90 no configuration spills", none_spill("04", "sm_90")),
    Claim("chapters/04_fused_forward/README.md",
          "on sm_80 `fast_64x64` at d = 128 spills 72 bytes",
          exactly("04", "sm_80", {r"FastTiles<128, 64, 64, 16>": 72})),
    Claim("chapters/05_backward/README.md", "No kernel spills.", none_spill("05")),
    Claim("chapters/06_tensor_cores/README.md", "(`ptxas -v`: no spills)", none_spill("06")),
    Claim("chapters/07_tensor_core_forward/README.md",
          "at d = 128 on sm_90 `tuned` spills 96 bytes and `lazy_rescale` 72",
          exactly("07", "sm_90", ch07(tuned=96, lazy=72, views=32, kv=52, views_kv=116))),
    Claim("chapters/07_tensor_core_forward/README.md",
          "(52 and 48 on sm_80; their views and two-length instances 32–116)",
          exactly("07", "sm_80", ch07(tuned=52, lazy=48, views=32, kv=48, views_kv=116))),
    Claim("chapters/08_tensor_core_backward/README.md",
          "the views kernel spills 80 bytes at d = 64 in bf16",
          spills("08", "sm_90", r"Views<ch08::StepTraits<__nv_bfloat16, 64, \(ch08::Step\)6>", 80)),
    Claim("chapters/09_hopper_forward/README.md",
          "which 240 registers hold without spilling", none_spill("09")),
    Claim("chapters/09_hopper_forward/README.md",
          "schedule without spilling (they do: ptxas reports none)", none_spill("09")),
    # Chapter 10: step 1 at d = 128 spills (both dtypes), steps 2-3 do not.
    Claim("chapters/10_hopper_backward/README.md",
          "With 254 registers a thread (ptxas, d = 128)", exactly("10", "sm_90a", CH10_SPILLS)),
    Claim("chapters/10_hopper_backward/README.md",
          "spill 8 bytes at d = 64 and none at d = 128", exactly("10", "sm_90a", CH10_SPILLS)),
    Claim("chapters/10_hopper_backward/README.md",
          "`tall_bulk` spills 4 bytes (a store and a load a tile), `tall` none", exactly("10", "sm_90a", CH10_SPILLS)),
    Claim("chapters/10_hopper_backward/case_study.md",
          "same spills but step 4's at d = 128, 4 bytes before and none now", exactly("10", "sm_90a", CH10_SPILLS)),
]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", help="the build folder (its chapters' *.ptxas.txt)")
    ap.add_argument("--list", action="store_true", help="print every spilling kernel and exit")
    args = ap.parse_args(argv)
    ks = kernels(args.build)
    if not ks:
        print(f"no ptxas reports under {args.build}/chapters (build the chapters first)")
        return 1
    if args.list:
        for k in sorted(ks):
            if k.spill:
                print(f"ch{k.chapter} {k.arch} {k.spill:4d} B  {k.name}")
        return 0
    failed = 0
    for c in CLAIMS:
        with open(os.path.join(ROOT, c.readme), encoding="utf-8") as f:
            text = " ".join(f.read().split())
        arch = c.check.arch
        if arch and arch not in {k.arch for k in ks if k.chapter == c.readme.split("/")[1][:2]}:
            print(f"skip {c.readme}: \"{c.quote}\" (this build has no {arch} code)")
            continue
        ok, detail = c.check(ks)
        if c.quote not in text:
            print(f"FAIL {c.readme}: the text no longer says \"{c.quote}\"")
            failed += 1
        elif not ok:
            print(f"FAIL {c.readme} says \"{c.quote}\", ptxas says otherwise: {detail}")
            failed += 1
        else:
            print(f"ok   {c.readme}: \"{c.quote}\"")
    archs = sorted({k.arch for k in ks})
    print(f"{len(CLAIMS) - failed} of {len(CLAIMS)} claims hold ({len(ks)} kernels, {', '.join(archs)})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
