"""CPU tests of scripts/pack_build.py (ctest scripts_pack_build): on a made-up build folder,
which file each target names, the pack's layout (the build folder's, so that a program
still finds the library by its RUNPATH), which files travel gzipped, PACKED.txt, and the
unpacking gpu_run.py does on the GPU machine, back to the same bytes. No compiler needed.
"""
import contextlib
import io
import os
import stat
import tempfile
import unittest

import pack_build


def put(folder, rel, data=b"#!/bin/sh\nexit 0\n", executable=True):
    path = os.path.join(folder, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    if executable:
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


class Pack(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.build = os.path.join(self.tmp.name, "build90a")
        self.dest = os.path.join(self.tmp.name, "build_pack")
        self.library = bytes(range(256)) * 4096  # 1 MiB, over the test's gzip threshold
        put(self.build, "common/libflashtut.so", self.library)
        put(self.build, "chapters/10_hopper_backward/ch10_hopper_backward")
        put(self.build, "chapters/10_hopper_backward/test_ch10_hopper_backward_gpu")
        # CMake's own copies and objects are not the target's file.
        put(self.build, "chapters/10_hopper_backward/CMakeFiles/ch10_hopper_backward")
        put(self.build, "chapters/10_hopper_backward/notes", executable=False)

    def tearDown(self):
        self.tmp.cleanup()

    def test_each_target_names_one_file(self):
        self.assertEqual(pack_build.outputs(self.build, "flashtut"), "common/libflashtut.so")
        self.assertEqual(pack_build.outputs(self.build, "ch10_hopper_backward"),
                         "chapters/10_hopper_backward/ch10_hopper_backward")
        for missing in ("ch09_hopper_forward", "notes"):  # not built; not executable
            with self.assertRaisesRegex(LookupError, missing):
                pack_build.outputs(self.build, missing)
        put(self.build, "tools/ch10_hopper_backward")  # two files of one name: refused
        with self.assertRaisesRegex(LookupError, "2 files"):
            pack_build.outputs(self.build, "ch10_hopper_backward")

    def test_the_pack_keeps_the_layout_and_gzips_the_large(self):
        put(self.dest, "stale/file")  # an earlier pack is replaced whole
        put(self.dest, pack_build.MARKER, b"targets: tour\n", executable=False)
        targets = ["flashtut", "ch10_hopper_backward", "test_ch10_hopper_backward_gpu"]
        packed = pack_build.pack(self.build, targets, self.dest, ["commit: abc"], gzip_over=1 << 19)
        self.assertEqual([rel for rel, _ in packed],
                         ["common/libflashtut.so.gz", "chapters/10_hopper_backward/ch10_hopper_backward",
                          "chapters/10_hopper_backward/test_ch10_hopper_backward_gpu"])
        self.assertLess(packed[0][1], len(self.library) // 10)  # it compresses
        self.assertFalse(os.path.exists(os.path.join(self.dest, "stale")))
        self.assertTrue(os.access(os.path.join(self.dest, packed[1][0]), os.X_OK))
        with open(os.path.join(self.dest, pack_build.MARKER)) as f:
            self.assertEqual(f.read(), "targets: " + " ".join(targets) + "\ncommit: abc\n")
        # The GPU machine's side: the library back, byte for byte, and executable.
        self.assertEqual(pack_build.unpack(self.dest), [os.path.join(self.dest, "common", "libflashtut.so")])
        with open(os.path.join(self.dest, "common", "libflashtut.so"), "rb") as f:
            self.assertEqual(f.read(), self.library)
        self.assertTrue(os.access(os.path.join(self.dest, "common", "libflashtut.so"), os.X_OK))
        self.assertEqual(pack_build.unpack(self.dest), [])  # once

    def test_a_missing_target_packs_nothing(self):
        with self.assertRaises(LookupError):
            pack_build.pack(self.build, ["flashtut", "tour"], self.dest, [])
        self.assertFalse(os.path.exists(self.dest))

    def test_a_folder_that_is_not_a_pack_is_left_alone(self):
        kept = put(self.dest, "CMakeCache.txt", executable=False)  # e.g. someone's build/
        with self.assertRaisesRegex(ValueError, "not a pack"):
            pack_build.pack(self.build, ["flashtut"], self.dest, [])
        self.assertTrue(os.path.isfile(kept))
        self.assertFalse(os.path.exists(self.dest + ".partial"))

    def test_dir_may_not_be_the_tree_or_the_build(self):
        for bad in (pack_build.ROOT, pack_build.BUILD, os.path.dirname(pack_build.ROOT)):
            with self.assertRaises(SystemExit), contextlib.redirect_stderr(io.StringIO()) as err:
                pack_build.main([bad, "flashtut"])
            self.assertIn("a folder of its own", err.getvalue())


if __name__ == "__main__":
    unittest.main()
