"""CPU tests of scripts/stall_phases.py (ctest scripts_stall_phases) on a made-up source page
(fixtures/source_page.csv): the phases begin at the loop's HMMA; what runs too few times to
be the loop's (an HMMA among them) is summed apart as "other"; a predicate does not hide an
opcode; the shares add up to 100%; a file that is not a source page is refused with a
message."""
import contextlib
import io
import os
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
import stall_phases

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
        groups, other, hmma = stall_phases.phases(rows, per_phase=1, min_exec=1e6)
        self.assertEqual(hmma, 2)  # the HMMA executed 10 times is not the loop's
        self.assertEqual([(i, [r[0] for r in part]) for i, part in groups],
                         [(None, ["BAR"]), (0, ["HMMA", "MUFU"]), (1, ["HMMA", "BRA"])])
        self.assertEqual([r[0] for r in other], ["LDC", "HMMA"])

    def test_table_shares(self):
        lines = run(FIXTURE, "--per-phase", "1", "--names", "S,dP")
        self.assertIn("10000 samples, 2 HMMA in the loop", lines[0])
        table = {line.split()[0]: line.split() for line in lines[2:]}
        self.assertEqual([line.split()[0] for line in lines[2:]], ["pre", "S", "dP", "other"])
        shares = {name: float(row[1].rstrip("%")) for name, row in table.items()}
        self.assertEqual(shares, {"pre": 6.0, "S": 30.0, "dP": 60.0, "other": 4.0})
        self.assertAlmostEqual(sum(shares.values()), 100.0)
        # wait is the first reason (5% of the samples in S, 40% in dP), short_sb the second
        # (5% and 20%), mio the third (20% in S); then executed instructions, and samples in
        # thousands.
        self.assertEqual(table["S"][2:5], ["5.0%", "5.0%", "20.0%"])
        self.assertEqual(table["dP"][2:4], ["40.0%", "20.0%"])
        self.assertEqual(table["S"][-2:], ["4e+06", "3.0"])  # 3000 samples
        self.assertEqual(table["other"][-2], "110")

    def test_two_hmma_a_phase_and_default_names(self):
        lines = run(FIXTURE, "--per-phase", "2")
        self.assertEqual([line.split()[0] for line in lines[2:]], ["pre", "g0", "other"])

    def test_top_instructions(self):
        # The predicated HMMA and the loop's branch hold 3000 samples each (30%): the first in
        # page order lists first, its reasons short_sb (20%) then wait (10%).
        lines = run(FIXTURE, "--top", "2")
        head = next(i for i, line in enumerate(lines) if line.split()[:2] == ["place", "samples"])
        top = lines[head + 1:]
        self.assertEqual(len(top), 2)
        samples = [float(line.split()[1].rstrip("%")) for line in top]
        self.assertEqual(samples, sorted(samples, reverse=True))
        self.assertEqual(samples, [30.0, 30.0])
        self.assertIn("HMMA", top[0])
        self.assertIn("BRA", top[1])
        self.assertIn("short_sb 20.0% wait 10.0%", top[0])

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
