"""Tests of scripts/check_provenance.py: which files count as named by env.txt."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import check_provenance  # noqa: E402


def folder(env, files):
    """A results folder with env.txt (unless env is None) and empty files at the given paths."""
    root = tempfile.mkdtemp()
    if env is not None:
        with open(os.path.join(root, "env.txt"), "w") as fh:
            fh.write(env)
    for rel in files:
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        open(os.path.join(root, rel), "w").close()
    return root


class Provenance(unittest.TestCase):
    def test_braces_expand_like_the_shell(self):
        self.assertEqual(check_provenance.expand_braces("p_{a,b}_d{64,128}.txt"),
                         ["p_a_d64.txt", "p_a_d128.txt", "p_b_d64.txt", "p_b_d128.txt"])

    def test_names_brace_lists_and_wildcards_count(self):
        d = folder("  tour.csv, every row:\n    cmd\n"
                   "  profiles/profile_{async,dq}_d{64,128}.txt (Nsight Compute),\n"
                   "  training_*.log (300 steps).\n",
                   ["tour.csv", "profiles/profile_dq_d128.txt", "training_x_s0.log"])
        self.assertEqual(check_provenance.unnamed(d), [])
        self.assertEqual(check_provenance.main([d]), 0)

    def test_a_file_not_named_fails(self):
        d = folder("  tour.csv: cmd\n  ab.csv and _reverse: cmd\n",
                   ["tour.csv", "ab.csv", "ab_reverse.csv", "profiles/p_d64.txt"])
        # "_reverse" alone does not name ab_reverse.csv: the name must be written out.
        self.assertEqual(check_provenance.unnamed(d),
                         ["ab_reverse.csv", os.path.join("profiles", "p_d64.txt")])
        self.assertEqual(check_provenance.main([d]), 1)

    def test_a_name_inside_a_longer_word_does_not_count(self):
        d = folder("  old_decode.csv: cmd\n", ["decode.csv", "old_decode.csv"])
        self.assertEqual(check_provenance.unnamed(d), ["decode.csv"])

    def test_a_folder_without_env_txt_is_an_error(self):
        self.assertEqual(check_provenance.main([folder(None, ["a.csv"])]), 2)

    def test_the_committed_folders(self):
        self.assertEqual(check_provenance.main([]), 0)


if __name__ == "__main__":
    unittest.main()
