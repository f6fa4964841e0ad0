"""CPU tests of scripts/wave_schedule.py (ctest scripts_wave_schedule): the block scheduler's
greedy order, the fixed walk of chapter 10's step 9, and the key tiles' lengths, each on a
case small enough to count by hand; and the script's table on the comparison's shapes."""
import contextlib
import io
import sys
import unittest

import wave_schedule


class WaveSchedule(unittest.TestCase):
    def test_the_greedy_order_gives_each_block_to_the_sm_free_first(self):
        # Two SMs: 4 and 3 start; 1 goes to the SM free at 3 (4), 1 more to the one at 4 (5).
        self.assertEqual(wave_schedule.makespan([4, 3, 1, 1], 2), 5)
        self.assertEqual(wave_schedule.makespan([5], 132), 5)

    def test_a_fixed_walk_sums_every_sms_th_block_whatever_its_length(self):
        # SM 0 walks blocks 0 and 2 (4 + 4), SM 1 blocks 1 and 3 (1 + 1): 8, where the
        # greedy order hands block 3 to the SM that is free first and ends at 5.
        self.assertEqual(wave_schedule.fixed_walk([4, 1, 4, 1], 2), 8)
        self.assertEqual(wave_schedule.makespan([4, 1, 4, 1], 2), 5)
        # Equal lengths: both orders are the same waves.
        self.assertEqual(wave_schedule.fixed_walk([2] * 7, 3), wave_schedule.makespan([2] * 7, 3))

    def test_a_causal_key_tile_visits_the_query_tiles_from_the_diagonal_on(self):
        # N = 512, d = 128: Br = 64 (8 query tiles), Bc = 128 (4 key tiles, 2 query tiles each).
        self.assertEqual(wave_schedule.tile_lengths(512, 128, True), [8, 6, 4, 2])
        self.assertEqual(wave_schedule.tile_lengths(512, 128, False), [8, 8, 8, 8])
        # d = 64: Br = 128; a ragged N rounds the tiles up.
        self.assertEqual(wave_schedule.tile_lengths(300, 64, True), [3, 2, 1])

    def test_the_table_has_a_row_a_shape_and_the_walk_loses_only_under_the_mask(self):
        out = io.StringIO()
        argv, sys.argv = sys.argv, ["wave_schedule.py", "--sizes", "16384", "--dims", "128"]
        try:
            with contextlib.redirect_stdout(out):
                wave_schedule.main()
        finally:
            sys.argv = argv
        rows = [line.split() for line in out.getvalue().splitlines()[1:]]
        self.assertEqual([(r[0], r[1], r[2]) for r in rows], [("16384", "128", "no"), ("16384", "128", "yes")])
        self.assertEqual(float(rows[0][-1]), 1.0)  # equal lengths: the walk is the waves
        self.assertLess(float(rows[1][-1]), 0.7)  # 2048 key tiles of 2 to 256 query tiles

    def test_values_the_model_cannot_count_are_refused_naming_the_flag(self):
        for args, flag in ((["--sizes", "32768"], "--sizes 32768"), (["--dims", "48"], "--dims 48"),
                           (["--sms", "0"], "--sms 0"), (["--overhead", "-5"], "--overhead -5"),
                           (["--width", "100"], "--width 100"), (["--sizes", "0"], "--sizes 0"),
                           (["--sizes", "10000000000", "--tokens", "10000000000"], "ten million blocks")):
            err = io.StringIO()
            argv, sys.argv = sys.argv, ["wave_schedule.py"] + args
            try:
                with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as exit_:
                    wave_schedule.main()
            finally:
                sys.argv = argv
            self.assertEqual(exit_.exception.code, 2, args)
            self.assertIn(flag, err.getvalue())


if __name__ == "__main__":
    unittest.main()
