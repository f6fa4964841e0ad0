"""Tests of scripts/check_readme_commands.py on fixtures (ctest scripts_readme_commands_fixture;
`python3 -m unittest -v test_check_readme_commands` here works too).

The Markdown fixtures are in fixtures/; the build folders are made up for each test: a
CTestTestfile.cmake with a few add_test() lines, so that the real ctest lists them without
any test executable. FT_CTEST names the ctest to use (default: ctest on PATH).
"""
import io
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
import check_readme_commands as crc

FIXTURES = os.path.join(HERE, "fixtures")
CTEST = os.environ.get("FT_CTEST") or shutil.which("ctest")
TESTS = """add_test(ch01.One.A true)
set_tests_properties(ch01.One.A PROPERTIES LABELS cpu)
add_test(ch01.Two.B true)
set_tests_properties(ch01.Two.B PROPERTIES LABELS gpu)
add_test(ch01.Two.slow true)
set_tests_properties(ch01.Two.slow PROPERTIES LABELS gpu)
"""


def commands(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as fh:
        return crc.commands_in(name, fh.read())


class Extraction(unittest.TestCase):
    def test_finds_fenced_inline_and_continued_commands(self):
        found = [(c.line, c.selection) for c in commands("readme_match.md") if c.selects]
        self.assertEqual(found, [
            (3, ["-R", "^ch01\\."]),           # inline span; --output-on-failure left out
            (4, ["-L", "gpu", "-E", "slow"]),  # inline, no --test-dir
            (8, ["-L", "cpu"]),                # continued line; -j4 and the comment left out
            (10, ["-R", "^ch01\\.One"]),       # unquoted: one backslash left; '&&' ends it
        ])

    def test_prose_and_unfiltered_commands_are_not_checked(self):
        every = commands("readme_match.md")
        self.assertEqual([c.line for c in every if not c.selects], [5])  # `ctest --test-dir build`

    def test_unclosed_quote_is_an_error(self):
        (c,) = crc.commands_in("x.md", "```\nctest -R 'oops\n```\n")
        self.assertTrue(c.selects)
        self.assertIn("cannot split", c.error)

    def test_fixture_folders_are_not_scanned(self):
        files = [os.path.relpath(f, crc.ROOT) for f in crc.markdown_files(crc.ROOT)]
        self.assertIn("README.md", files)
        self.assertFalse([f for f in files if "fixtures" in f.split(os.sep)], files)


@unittest.skipUnless(CTEST, "no ctest executable (set FT_CTEST)")
class AgainstCtest(unittest.TestCase):
    def setUp(self):
        self.build = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.build)

    def run_check(self, testfile, *markdown):
        with open(os.path.join(self.build, "CTestTestfile.cmake"), "w") as fh:
            fh.write(testfile)
        out = io.StringIO()
        cmds = [c for name in markdown for c in commands(name)]
        code = crc.check(cmds, crc.Listing(CTEST, self.build, attempts=2, pause=0), out)
        return code, out.getvalue()

    def test_every_filter_selects(self):
        code, out = self.run_check(TESTS, "readme_match.md")
        self.assertEqual(code, 0, out)
        self.assertIn("all 4 ctest filters select tests", out)

    def test_filter_that_selects_nothing_fails_naming_file_and_line(self):
        code, out = self.run_check(TESTS, "readme_no_match.md")
        self.assertEqual(code, 1, out)
        self.assertIn("FAIL readme_no_match.md:8: `ctest --test-dir build -R '^ch99\\.'", out)
        self.assertIn("ok   readme_no_match.md:7", out)

    def test_the_script_itself_fails_on_the_fixture(self):
        with open(os.path.join(self.build, "CTestTestfile.cmake"), "w") as fh:
            fh.write(TESTS)
        out = io.StringIO()
        stdout, sys.stdout = sys.stdout, out
        try:
            code = crc.main(["--build-dir", self.build, "--ctest", CTEST, "--root", FIXTURES,
                             os.path.join(FIXTURES, "readme_no_match.md")])
        finally:
            sys.stdout = stdout
        self.assertEqual(code, 1, out.getvalue())
        self.assertIn("readme_no_match.md:8", out.getvalue())

    def test_unbuilt_executables_make_an_empty_selection_a_skip(self):
        code, out = self.run_check(TESTS + "add_test(test_ch99_gpu_NOT_BUILT test_ch99_gpu_NOT_BUILT)\n",
                                   "readme_no_match.md")
        self.assertEqual(code, crc.SKIP, out)
        self.assertIn("test_ch99_gpu", out)

    def test_a_listing_that_failed_is_never_trusted(self):
        # What ctest prints when PRE_TEST discovery cannot run a test executable.
        code, out = self.run_check(TESTS + 'message(FATAL_ERROR "Error running test executable.")\n',
                                   "readme_match.md")
        self.assertEqual(code, 1, out)
        self.assertIn("listing the tests failed", out)

    def test_an_empty_build_folder_fails(self):
        code, out = self.run_check("", "readme_match.md")
        self.assertEqual(code, 1, out)
        self.assertIn("lists no test at all", out)


if __name__ == "__main__":
    unittest.main()
