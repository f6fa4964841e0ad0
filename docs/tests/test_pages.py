"""CPU tests of docs/gen_pages.py and docs/check_pages.py on a small fixture repository
(ctest docs_pages_fixture). The results are the plot fixtures (made-up numbers); chapter 01's
README is fixtures/tricky_README.md, GitHub markdown that Doxygen would misread unconverted.
With Doxygen installed, the fixture site is also built with warnings as errors."""
import base64
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
DOCS = os.path.dirname(HERE)
ROOT = os.path.dirname(DOCS)
RESULTS = os.path.join(ROOT, "plots", "tests", "fixtures", "results")
# The smallest valid PNG (1×1 pixel), for pictures the fixture README shows.
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
CHAPTERS = ["01_naive", "02_tiled", "03_online_softmax", "04_fused_forward", "05_backward"]


def run(script, *args):
    p = subprocess.run([sys.executable, os.path.join(DOCS, script), *args],
                       capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


class FixtureSite(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        repo = cls.repo = os.path.join(cls.tmp, "repo")
        for ch in CHAPTERS:
            os.makedirs(os.path.join(repo, "chapters", ch))
            with open(os.path.join(repo, "chapters", ch, "README.md"), "w") as fh:
                fh.write(f"# Chapter {ch[:2]}: {ch[3:]}\n\nText of chapter {ch[:2]}.\n\n"
                         "## Build and run\n\n```\ncmake --build build\n```\n")
        shutil.copy(os.path.join(HERE, "fixtures", "tricky_README.md"),
                    os.path.join(repo, "chapters", "01_naive", "README.md"))
        with open(os.path.join(repo, "chapters", "01_naive", "naive.cu"), "w") as fh:
            fh.write("/// @file naive.cu\n/// @brief A fixture kernel file.\n\n"
                     "/// Adds one.\n__global__ void add_one(float* x) { x[0] += 1.f; }\n")
        with open(os.path.join(repo, "chapters", "01_naive", "tiles.png"), "wb") as fh:
            fh.write(PNG)
        os.makedirs(os.path.join(repo, "common", "harness"))
        with open(os.path.join(repo, "common", "harness", "harness.hpp"), "w") as fh:
            fh.write("/// @file harness.hpp\n/// @brief A fixture header.\n#pragma once\n"
                     "namespace ft {\n/// Nothing.\ninline int nothing() { return 0; }\n}\n")
        os.makedirs(os.path.join(repo, "plots", "figures"))
        with open(os.path.join(repo, "plots", "figures", "staircase.png"), "wb") as fh:
            fh.write(PNG)
        with open(os.path.join(repo, "README.md"), "w") as fh:
            fh.write("# Fixture\n")
        cls.gen = os.path.join(cls.tmp, "generated")
        code, out = run("gen_pages.py", "--repo", repo, "--results", RESULTS,
                        "--figures", os.path.join(repo, "plots", "figures"), "--out", cls.gen)
        assert code == 0, out
        with open(os.path.join(cls.gen, "ch01.md")) as fh:
            cls.ch01 = fh.read()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def check(self, *extra, gen=None, results=RESULTS):
        return run("check_pages.py", "--repo", self.repo, "--results", results,
                   "--generated", gen or self.gen, *extra)

    def copy_of_pages(self):
        gen = os.path.join(self.tmp, f"copy{len(os.listdir(self.tmp))}")
        shutil.copytree(self.gen, gen)
        return gen

    # ---- the checker

    def test_generated_pages_match_the_csvs(self):
        code, out = self.check()
        self.assertEqual(code, 0, out)
        self.assertIn("OK: 5 chapter pages", out)

    def test_a_changed_number_fails(self):
        gen = self.copy_of_pages()
        path = os.path.join(gen, "ch04.md")
        with open(path) as fh:
            text = fh.read()
        # The first DRAM-read cell of chapter 04's kernel table, one digit changed.
        m = re.search(r"<!-- ft-table: kernels -->\n.*\n.*\n\| [^|]+\| [^|]+\| [^|]+\| ([0-9.]+) ", text)
        self.assertIsNotNone(m)
        changed = text[:m.start(1)] + str(float(m.group(1)) * 1.1)[:4] + text[m.end(1):]
        with open(path, "w") as fh:
            fh.write(changed)
        code, out = self.check(gen=gen)
        self.assertEqual(code, 1, out)
        self.assertRegex(out, r"FAILED: ch04\.md kernels .* DRAM read \(model\): page shows")

    def change_first_number(self, name, table, column, pattern):
        """A copy of the pages with one number of `table` in page `name` changed by 10%;
        returns the checker's (exit code, output)."""
        gen = self.copy_of_pages()
        path = os.path.join(gen, name)
        with open(path) as fh:
            text = fh.read()
        cells = r"\| " + r"[^|]+\| " * column
        m = re.search(rf"<!-- ft-table: {table} -->\n.*\n.*\n{cells}([0-9.]+)", text)
        self.assertIsNotNone(m, f"no {table} table in {name}")
        changed = text[:m.start(1)] + f"{float(m.group(1)) * 1.1:.4g}" + text[m.end(1):]
        with open(path, "w") as fh:
            fh.write(changed)
        code, out = self.check(gen=gen)
        self.assertEqual(code, 1, out)
        self.assertRegex(out, pattern)

    def test_a_changed_variant_time_fails(self):
        # chapters.csv's table: the time column (the fifth) of the first chapter 04 row.
        self.change_first_number("ch04.md", "variants", 4,
                                 r"FAILED: ch04\.md variants simple forward .* ms: page shows")

    def test_a_changed_summary_number_fails(self):
        # The main page's staircase: chapter 01's time (the fourth column).
        self.change_first_number("mainpage.md", "summary", 3,
                                 r"FAILED: mainpage\.md summary 01 naive .* ms: page shows")

    def test_variant_and_summary_tables(self):
        with open(os.path.join(self.gen, "ch04.md")) as fh:
            ch04 = fh.read()
        self.assertIn("<!-- ft-table: variants -->", ch04)
        # CSV text is escaped for a table cell: '<' and '|' would break it.
        self.assertIn("(d &lt;= 128 \\| any N)", ch04)
        with open(os.path.join(self.gen, "ch03.md")) as fh:
            self.assertIn("| row_softmax_online | softmax | B=16384 H=1 N=16384 | no |", fh.read())
        with open(os.path.join(self.gen, "mainpage.md")) as fh:
            main = fh.read()
        self.assertIn("<!-- ft-table: summary -->", main)
        self.assertIn("non-causal: float32 for chapters 01–05 (generated", main)

    def test_summary_names_each_dtype_and_the_chapters_it_leaves_out(self):
        import gen_pages
        def row(chapter, dtype, n):
            return {"chapter": chapter, "variant": "v", "pass": "forward", "dtype": dtype,
                    "batch": 4, "heads": 32, "seq_len": n, "head_dim": 64, "causal": False,
                    "ms": 1.0, "tflops": 1.0, "speedup_vs_ch01": None, "extra_mem_bytes": 0}
        tour = [row("01", "float32", 4096), row("02", "", 4096), row("06", "bf16", 4096),
                row("07", "float32", 4096), row("08", "bf16", 16384), row("09", "bf16", 1024)]
        text = "\n".join(gen_pages.summary_rows(tour, [], {"08": "chapters/08_x"}))
        self.assertIn("non-causal: float32 for chapters 01, 02, 07; bf16 for chapter 06 (", text)
        self.assertRegex(text, r"\| 0 B \| float32 \|\n.*\| 0 B \| float32 \|\n.*\| bf16 \|")
        # 08 is a chapter of the site (a link), 09 is not (plain text).
        self.assertIn('chapters \\ref ch08 "08" (N = 16384), 09 (N = 1024); each chapter', text)

    def test_a_missing_page_fails(self):
        gen = self.copy_of_pages()
        os.remove(os.path.join(gen, "ch03.md"))
        code, out = self.check(gen=gen)
        self.assertEqual(code, 1, out)
        self.assertIn("ch03.md: missing", out)

    def test_a_chapter_without_rows_fails_unless_it_says_it_has_not_run(self):
        results = os.path.join(self.tmp, "results_without_05")
        shutil.copytree(RESULTS, results)
        for name in ("tour.csv", "traffic.csv"):
            path = os.path.join(results, name)
            with open(path) as fh:
                lines = fh.readlines()
            with open(path, "w") as fh:
                fh.writelines(l for l in lines if not l.startswith("05,"))
        gen = self.copy_of_pages()
        code, out = self.check(gen=gen, results=results)
        self.assertEqual(code, 1, out)
        self.assertIn("chapter 05: no rows in tour.csv", out)
        with open(os.path.join(gen, "ch05.md"), "a") as fh:
            fh.write("\n## Measured\n\nNot yet run on a GPU.\n")
        code, out = self.check(gen=gen, results=results)
        self.assertNotIn("chapter 05: no rows", out)

    def test_without_csvs_the_check_is_skipped(self):
        empty = os.path.join(self.tmp, "no_results")
        os.makedirs(empty, exist_ok=True)
        code, out = self.check(results=empty)
        self.assertEqual(code, 77, out)
        self.assertIn("SKIPPED", out)

    # ---- the README conversion

    def test_title_and_sections(self):
        self.assertTrue(self.ch01.startswith("# Chapter 01 — a fixture README with everything "
                                             "GitHub accepts {#ch01}\n"))
        self.assertIn("# The idea {#ch01_the_idea}", self.ch01)
        self.assertIn("## A third-level heading with code and bold {#ch01_a_third_level", self.ch01)
        self.assertIn("# The memory ledger {#ch01_the_memory_ledger_2}", self.ch01)

    def test_links(self):
        self.assertIn("[the next chapter](@ref ch02)", self.ch01)
        self.assertIn("[chapter 04](@ref ch04)", self.ch01)
        self.assertIn("[the kernels](@ref chapters/01_naive/naive.cu)", self.ch01)
        self.assertIn("[the harness](@ref common/harness/harness.hpp)", self.ch01)
        self.assertIn("[the ledger section](@ref ch01_the_memory_ledger)", self.ch01)
        self.assertIn("[the top README](@ref index)", self.ch01)
        self.assertIn("(https://example.com/a_b?c=d#e)", self.ch01)
        self.assertIn(" a missing file,", self.ch01)  # text kept, link dropped
        self.assertIn(" an unknown anchor,", self.ch01.replace("\n", " "))

    def test_escapes_outside_code_only(self):
        self.assertIn("a plain tile&lt;Br, Bc>", self.ch01)
        self.assertIn("a&lt;b and 3 &lt;= 4", self.ch01)
        self.assertIn("std::vector&lt;float>", self.ch01)
        self.assertIn("Folded text with <br> a break, <b>bold</b>, <kbd>Ctrl</kbd>", self.ch01)
        self.assertIn("template `tile<Br, Bc>`", self.ch01)
        self.assertIn("ask \\@someone", self.ch01)
        self.assertIn("\\#include", self.ch01)
        self.assertIn("\\\\sum_j", self.ch01)
        self.assertIn("// @param q \\brief not a command", self.ch01)  # code block untouched
        self.assertIn("```{.cpp}", self.ch01)
        self.assertNotIn("<details>", self.ch01)

    def test_images(self):
        self.assertIn("<em>Figure `nothing.png` is not generated yet.</em>", self.ch01)
        self.assertIn("\\image html figures_staircase.png", self.ch01)
        self.assertIn("\\image html 01_naive_tiles.png", self.ch01)
        self.assertTrue(os.path.isfile(os.path.join(self.gen, "images", "01_naive_tiles.png")))

    def test_ledger_sections(self):
        self.assertIn("# Measured on the FIXTURE GPU (made-up numbers) (generated) {#ch01_measured}",
                      self.ch01)
        for table in ("kernels", "sizes", "tour"):
            self.assertIn(f"<!-- ft-table: {table} -->", self.ch01)
        self.assertNotIn("<!-- ft-table: variants -->", self.ch01)  # no chapters.csv rows

    # ---- Doxygen on the fixture site

    def test_doxygen_builds_the_fixture_without_warnings(self):
        doxygen = shutil.which("doxygen")
        if not doxygen:
            self.skipTest("doxygen not installed")
        out = os.path.join(self.tmp, "site")
        with open(os.path.join(DOCS, "Doxyfile.in")) as fh:
            conf = fh.read()
        for key, val in (("FT_DOCS_OUT", out), ("FT_DOCS_GEN", self.gen), ("FT_SOURCE", self.repo),
                         ("FT_DOCS_SRC", DOCS)):
            conf = conf.replace(f"@{key}@", val)
        os.makedirs(out)
        with open(os.path.join(out, "Doxyfile"), "w") as fh:
            fh.write(conf)
        p = subprocess.run([doxygen, "Doxyfile"], cwd=out, capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(p.stderr.strip(), "", "Doxygen warned")
        code, text = self.check("--html", os.path.join(out, "html"))
        self.assertEqual(code, 0, text)


if __name__ == "__main__":
    unittest.main()
