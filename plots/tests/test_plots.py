"""CPU tests of the plot scripts (run by ctest; `python3 -m unittest test_plots` here works too).

Fixtures (made-up numbers, not measurements) live in fixtures/:
  results/    a complete results folder: tour.csv, traffic.csv, ceilings.csv, anchors.csv
  malformed/  the same with a non-numeric time in tour.csv line 4
  anchors/    output of the PyTorch anchor script, for ceilings_from_anchors.py
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PLOTS = os.path.dirname(HERE)
FIXTURES = os.path.join(HERE, "fixtures")
FIGURES = ("staircase.png", "bytes_vs_n.png", "roofline.png", "memory_vs_n.png")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

sys.path.insert(0, PLOTS)
import ceilings_from_anchors  # noqa: E402


def run(script, *args):
    """(exit code, stdout, stderr) of one of plots/*.py."""
    p = subprocess.run([sys.executable, os.path.join(PLOTS, script), *args],
                       capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def assert_figures(test, folder):
    for name in FIGURES:
        path = os.path.join(folder, name)
        test.assertTrue(os.path.isfile(path), f"{name} was not written")
        with open(path, "rb") as fh:
            head = fh.read(8)
        test.assertEqual(head, PNG_SIGNATURE, f"{name} is not a PNG")
        test.assertGreater(os.path.getsize(path), 10_000, f"{name} looks empty")


class Figures(unittest.TestCase):
    def test_fixture_results_give_every_figure(self):
        with tempfile.TemporaryDirectory() as out:
            code, stdout, stderr = run("make_plots.py", os.path.join(FIXTURES, "results"), out)
            self.assertEqual(code, 0, stderr)
            assert_figures(self, out)

    def test_header_only_csvs_still_give_every_figure(self):
        # No data yet (e.g. before the GPU run): figures are drawn with a note, exit 0.
        with tempfile.TemporaryDirectory() as tmp:
            res, out = os.path.join(tmp, "res"), os.path.join(tmp, "out")
            os.makedirs(res)
            for name in ("tour.csv", "traffic.csv", "ceilings.csv"):
                with open(os.path.join(FIXTURES, "results", name)) as src, \
                        open(os.path.join(res, name), "w") as dst:
                    dst.write(src.readline())
            code, _, stderr = run("make_plots.py", res, out)
            self.assertEqual(code, 0, stderr)
            assert_figures(self, out)


class MalformedCsv(unittest.TestCase):
    """Each broken input must stop the script with exit 1 and one line naming file:line."""

    def expect_failure(self, results, pattern):
        with tempfile.TemporaryDirectory() as out:
            code, _, stderr = run("make_plots.py", results, out)
        self.assertEqual(code, 1, f"expected exit 1, got {code}: {stderr}")
        lines = stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, f"expected one line, got: {stderr}")
        self.assertRegex(lines[0], r"^make_plots: error: " + pattern)
        self.assertNotIn("Traceback", stderr)

    def broken_copy(self, tmp, name, edit):
        """A copy of the fixture results with `edit(lines) -> lines` applied to `name`."""
        res = os.path.join(tmp, "res")
        shutil.copytree(os.path.join(FIXTURES, "results"), res)
        path = os.path.join(res, name)
        with open(path) as fh:
            lines = fh.read().splitlines()
        if edit is None:
            os.remove(path)
        else:
            with open(path, "w") as fh:
                fh.write("\n".join(edit(lines)) + "\n")
        return res

    def test_committed_malformed_fixture(self):
        self.expect_failure(os.path.join(FIXTURES, "malformed"),
                            r".*malformed/tour\.csv:4: column 'ms' is 'fast', not a number$")

    def test_missing_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            res = self.broken_copy(tmp, "traffic.csv", None)
            self.expect_failure(res, r".*traffic\.csv: file not found")

    def test_missing_column(self):
        def drop_flops(lines):
            header = lines[0].split(",")
            i = header.index("flops")
            return [",".join(f for j, f in enumerate(line.split(",")) if j != i) for line in lines]
        with tempfile.TemporaryDirectory() as tmp:
            res = self.broken_copy(tmp, "traffic.csv", drop_flops)
            self.expect_failure(res, r".*traffic\.csv:1: missing column\(s\) flops$")

    def test_non_numeric_field(self):
        def bad(lines):
            f = lines[3].split(",")
            f[4] = "12GB"  # model_read_bytes
            return lines[:3] + [",".join(f)] + lines[4:]
        with tempfile.TemporaryDirectory() as tmp:
            res = self.broken_copy(tmp, "traffic.csv", bad)
            self.expect_failure(res, r".*traffic\.csv:4: column 'model_read_bytes' is '12GB'")

    def test_wrong_field_count(self):
        with tempfile.TemporaryDirectory() as tmp:
            res = self.broken_copy(tmp, "ceilings.csv", lambda lines: lines + ["bf16_matmul,790"])
            self.expect_failure(res, r".*ceilings\.csv:6: 2 fields, the header has 3$")

    def test_malformed_optional_anchors(self):
        # anchors.csv is optional, but when present it is checked like the others.
        with tempfile.TemporaryDirectory() as tmp:
            res = self.broken_copy(tmp, "tour.csv", lambda lines: lines)
            with open(os.path.join(res, "anchors.csv"), "w") as fh:
                fh.write("backend,dtype,causal,B,H,N,d,fwd_ms,fwd_tflops,bwd_ms,bwd_tflops\n"
                         "mem_efficient,float32,False,4,32,4096,64,fast,35,39,35\n")
            self.expect_failure(res, r".*anchors\.csv:2: column 'fwd_ms' is 'fast', not a number$")

    def test_empty_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            res = self.broken_copy(tmp, "tour.csv", lambda lines: [])
            self.expect_failure(res, r".*tour\.csv:1: empty file")


class Ceilings(unittest.TestCase):
    def test_parses_the_anchor_log(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "ceilings.csv")
            code, _, stderr = run("ceilings_from_anchors.py",
                                  os.path.join(FIXTURES, "anchors", "anchors.log"), out)
            self.assertEqual(code, 0, stderr)
            with open(out) as fh:
                self.assertEqual(fh.read(), "name,value,unit\ncopy_bandwidth,4.31,TB/s\n"
                                 "fp32_matmul,50,TFLOP/s\nbf16_matmul,790,TFLOP/s\n"
                                 "fp16_matmul,770,TFLOP/s\n")

    def test_missing_ceiling_is_an_error(self):
        with self.assertRaisesRegex(ValueError, "copy_bandwidth"):
            ceilings_from_anchors.parse("ceiling matmul torch.bfloat16 790 TFLOP/s\n"
                                        "ceiling matmul fp32(no tf32) 50 TFLOP/s\n")
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "empty.log")
            open(log, "w").close()
            code, _, stderr = run("ceilings_from_anchors.py", log, os.path.join(tmp, "c.csv"))
            self.assertEqual(code, 1)
            self.assertIn("no 'copy_bandwidth / fp32_matmul / bf16_matmul' ceiling", stderr)


if __name__ == "__main__":
    unittest.main()
