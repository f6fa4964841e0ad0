"""CPU tests of scripts/join_traffic.py on a fixture in Nsight Compute's --csv layout
(fixtures/ncu/: a chapter-05-like run, made-up numbers)."""
import csv
import io
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "scripts")
import join_traffic


class BaseName(unittest.TestCase):
    def test_demangled_names(self):
        cases = {
            "void ch04::flash_forward_kernel<64, 64, 64>(const float *, float *, int)":
                "flash_forward_kernel",
            "void (anonymous namespace)::dot_do_o_kernel<64>(const float *, int)": "dot_do_o_kernel",
            "scores_kernel": "scores_kernel",
            "scores_kernel(const float *, float *)": "scores_kernel",
            "void kern<(int)2, ft::Tile<8, 4>>(float *)": "kern",
            "ch02::tiled_matmul_kernel<true>": "tiled_matmul_kernel",
            # As ncu 2025.3 printed them on the H200 (anonymous namespaces as <unnamed>):
            "void ch02::<unnamed>::tiled_matmul_kernel<0, 1>(int, int, const float *, long)":
                "tiled_matmul_kernel",
            "ch03::<unnamed>::online_softmax_kernel(const float *, float *, int, bool)":
                "online_softmax_kernel",
            "void unnamed>::fused_forward_kernel<unnamed>::FastTiles<64, 128, 32, 8>>(const float *)":
                "fused_forward_kernel",
            "void <unnamed>::kern<<unnamed>::Tiles<64, 8>>(float *)": "kern",
        }
        for demangled, base in cases.items():
            self.assertEqual(join_traffic.base_name(demangled), base, demangled)


class Join(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "traffic.csv")
        p = subprocess.run([sys.executable, os.path.join(SCRIPTS, "join_traffic.py"), self.out,
                            os.path.join(HERE, "fixtures", "ncu")],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.stdout = p.stdout
        with open(self.out) as fh:
            self.rows = list(csv.DictReader(fh))

    def tearDown(self):
        self.tmp.cleanup()

    def test_contract_columns(self):
        with open(self.out) as fh:
            header = next(csv.reader(io.StringIO(fh.readline())))
        self.assertEqual(header[:8], ["chapter", "kernel", "seq_len", "head_dim",
                                      "model_read_bytes", "model_write_bytes",
                                      "measured_read_bytes", "measured_write_bytes"])

    def test_only_the_runs_variant_and_its_timed_launches(self):
        # The ledger also lists a 'materialize' row: not this run's variant, so left out.
        # The forward kernel is not in the backward's ledger, so it is not a row either.
        self.assertEqual([r["kernel"] for r in self.rows],
                         ["dot_do_o_kernel", "flash_backward_kernel"])
        dot, bwd = self.rows
        # The last launch of each name is the timed one: 71 µs, not the first call's 70 µs.
        self.assertAlmostEqual(float(dot["measured_ms"]), 0.071)
        # Values in Mbyte / usecond with thousands separators are scaled to bytes / ms.
        self.assertEqual(bwd["measured_read_bytes"], "402500000")
        self.assertEqual(bwd["measured_write_bytes"], "205000000")
        self.assertAlmostEqual(float(bwd["measured_ms"]), 15.1)
        # L2 sectors are 32 bytes.
        self.assertEqual(bwd["measured_requested_read_bytes"], str(60_000_000 * 32))
        # Atomics and reductions (0 + 4.5 Msector) sum into one column; a kernel profiled
        # without those counters leaves it empty.
        self.assertEqual(bwd["measured_requested_atomic_bytes"], str(4_500_000 * 32))
        self.assertEqual(dot["measured_requested_atomic_bytes"], "")

    def test_model_columns_map_dram_and_requested(self):
        bwd = self.rows[1]
        # traffic.csv's model_read_bytes is the DRAM prediction (ledger model_dram_read_bytes);
        # the requested figure goes to model_requested_read_bytes.
        self.assertEqual(bwd["model_read_bytes"], "402653184")
        self.assertEqual(bwd["model_requested_read_bytes"], "1946157056")
        self.assertEqual((bwd["batch"], bwd["heads"], bwd["seq_len"], bwd["head_dim"]),
                         ("4", "32", "4096", "64"))
        self.assertEqual((bwd["variant"], bwd["pass"], bwd["chapter"]), ("flash", "backward", "05"))

    def test_summary_printed(self):
        self.assertIn("05  flash", self.stdout)
        self.assertIn("wrote", self.stdout)


class Keep(unittest.TestCase):
    """--keep OLD_CSV: rows of runs not measured again survive, measured runs are replaced."""

    def run_join(self, *extra):
        return subprocess.run([sys.executable, os.path.join(SCRIPTS, "join_traffic.py"), self.out,
                               os.path.join(HERE, "fixtures", "ncu"), *extra],
                              capture_output=True, text=True, timeout=60)

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "traffic.csv")
        self.old = os.path.join(self.tmp.name, "old.csv")
        header = join_traffic.COLUMNS[:-1]  # an older file, without the atomic column
        def row(kernel, n, read):
            r = dict.fromkeys(header, "1")
            r.update(chapter="05", kernel=kernel, seq_len=str(n), head_dim="64", causal="0",
                     variant="flash", measured_read_bytes=read)
            r["pass"] = "backward"
            return r
        with open(self.old, "w", newline="") as fh:
            w = csv.DictWriter(fh, header, lineterminator="\n")
            w.writeheader()
            w.writerow(row("flash_backward_kernel", 4096, "111"))   # measured again: replaced
            w.writerow(row("flash_backward_kernel", 16384, "222"))  # not: kept as it was

    def tearDown(self):
        self.tmp.cleanup()

    def test_keeps_only_runs_not_measured_again(self):
        p = self.run_join("--keep", self.old)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(self.out) as fh:
            rows = list(csv.DictReader(fh))
        got = [(r["kernel"], r["seq_len"], r["measured_read_bytes"]) for r in rows]
        self.assertEqual(got, [("dot_do_o_kernel", "4096", "134217728"),
                               ("flash_backward_kernel", "4096", "402500000"),
                               ("flash_backward_kernel", "16384", "222")])
        self.assertEqual(rows[2]["measured_requested_atomic_bytes"], "")
        self.assertIn("(2 from", p.stdout)
        self.assertIn("1 kept", p.stdout)

    def test_rejects_a_file_that_is_not_traffic_csv(self):
        with open(self.old, "w") as fh:
            fh.write("a,b\n1,2\n")
        p = self.run_join("--keep", self.old)
        self.assertEqual(p.returncode, 1)
        self.assertIn("not a traffic.csv", p.stderr)


class MissingLaunch(unittest.TestCase):
    def test_ledger_row_without_launch_is_kept_unmeasured(self):
        launches = [("a_kernel", {"measured_read_bytes": 1.0})]
        ledger = [{"chapter": "01", "variant": "v", "kernel": k, "pass": "forward", "batch": "1",
                   "heads": "1", "seq_len": "1", "head_dim": "64", "causal": "0",
                   "model_read_bytes": "1", "model_write_bytes": "1", "model_dram_read_bytes": "1",
                   "model_dram_write_bytes": "1", "flops": "0"} for k in ("a_kernel", "b_kernel")]
        rows, warnings = join_traffic.join(launches, ledger)
        self.assertEqual(rows[0]["measured_read_bytes"], 1.0)
        self.assertIsNone(rows[1]["measured_read_bytes"])
        self.assertEqual(len(warnings), 1)
        self.assertIn("b_kernel: 0 launch(es) for 1 ledger row(s)", warnings[0])


if __name__ == "__main__":
    unittest.main()
