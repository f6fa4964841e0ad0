"""CPU tests of scripts/stall_phases.py (ctest scripts_stall_phases) on a made-up source page
(fixtures/source_page.csv): the phases begin at the loop's HMMA, not at one executed too few
times to be the loop's; a predicate does not hide an opcode; the shares add up; a file
that is not a source page is refused with a message."""
import contextlib
import io
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE)))
import stall_phases  # noqa: E402

FIXTURE = os.path.join(HERE, "fixtures", "source_page.csv")


def run(*args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        stall_phases.main(list(args))
    return out.getvalue().splitlines()


class Phases(unittest.TestCase):
    def test_one_hmma_a_phase(self):
        rows = stall_phases.read_rows(FIXTURE)
        self.assertEqual([r[0] for r in rows], ["LDC", "BAR", "HMMA", "MUFU", "HMMA", "HMMA", "BRA"])
        groups, hmma = stall_phases.phases(rows, per_phase=1, min_exec=1e6)
        self.assertEqual(hmma, 2)  # the HMMA executed 10 times is not the loop's
        self.assertEqual([(i, [r[0] for r in part]) for i, part in groups],
                         [(None, ["LDC", "BAR"]), (0, ["HMMA", "MUFU"]), (1, ["HMMA", "HMMA", "BRA"])])

    def test_table_shares(self):
        lines = run(FIXTURE, "--per-phase", "1", "--names", "S,dP")
        self.assertIn("100 samples, 2 HMMA in the loop", lines[0])
        table = {line.split()[0]: line.split() for line in lines[2:]}
        self.assertEqual(sorted(table), ["S", "dP", "pre"])
        self.assertEqual(table["pre"][1], "10.0%")
        self.assertEqual(table["S"][1], "30.0%")
        self.assertEqual(table["dP"][1], "60.0%")
        # wait is the first reason: 5 of 100 samples in S, 40 in dP; mio the third.
        self.assertEqual(table["S"][2], "5.0%")
        self.assertEqual(table["dP"][2], "40.0%")
        self.assertEqual(table["S"][4], "20.0%")

    def test_two_hmma_a_phase_and_default_names(self):
        lines = run(FIXTURE, "--per-phase", "2")
        self.assertEqual([line.split()[0] for line in lines[2:]], ["pre", "g0"])

    def test_not_a_source_page(self):
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write("a,b\n1,2\n")
        try:
            with self.assertRaises(SystemExit) as e:
                stall_phases.read_rows(f.name)
            self.assertIn("not an Nsight Compute source page", str(e.exception))
        finally:
            os.unlink(f.name)


if __name__ == "__main__":
    unittest.main()
