#!/usr/bin/env python3
"""scripts/tune_step.py against a stand-in benchmark (fake_step_bench.py): it must find, in the whole step,
the choices the fastest-alone tuning misses, leave the problems of other batches and small ones alone, keep
the cache readable by the plugin, and fail clearly on a command that prints no step time."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "scripts", "tune_step.py")
FAKE = [sys.executable, os.path.join(HERE, "fake_step_bench.py")]


def last_choices(path):
    out = {}
    with open(path) as lines:
        for line in lines:
            if not line.startswith("#"):
                f = line.rstrip("\n").split("\t")
                out[f[0].split(" ")[2]] = int(f[1])
    return out


class TuneStep(unittest.TestCase):
    def run_tool(self, cache, *extra, cmd=FAKE):
        return subprocess.run([sys.executable, TOOL, "--cache", cache, "--batch", "1024", *extra, "--", *cmd],
                              capture_output=True, text=True, timeout=120)

    def test_finds_the_step_choices(self):
        with tempfile.TemporaryDirectory() as d:
            cache = os.path.join(d, "tuning.tsv")
            r = self.run_tool(cache)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("step 0.27670 -> 0.25000 ms", r.stdout)
            c = last_choices(cache)
            self.assertEqual(c["10,1024,784,1024,00"], 0)  # 51.30 us alone, not the 51.21 split-4
            self.assertEqual(c["01,1024,512,1024,11"], 0)
            self.assertEqual(c["01,608,1024,784,11"], 1)  # another batch: left as tuned alone
            self.assertEqual(c["00,1024,10,256,00"], 1)  # below --min-macs: left as tuned alone
            # The plugin (here its stand-in) reads the file back and runs the tuned step.
            out = subprocess.run(FAKE, env=dict(os.environ, FRESCO_CUDA_TUNING_CACHE=cache),
                                 capture_output=True, text=True).stdout
            self.assertIn('"ms_step": 0.25}', out)

    def test_stops_when_a_pass_changes_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            cache = os.path.join(d, "tuning.tsv")
            self.assertEqual(self.run_tool(cache, "--passes", "5").returncode, 0)
            r = self.run_tool(cache, "--passes", "5")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.count("pass 1 "), 2)
            self.assertNotIn("pass 2 ", r.stdout)
            self.assertIn("step 0.25000 -> 0.25000 ms", r.stdout)

    def test_a_command_without_a_step_time_fails(self):
        with tempfile.TemporaryDirectory() as d:
            r = self.run_tool(os.path.join(d, "t.tsv"), cmd=[sys.executable, "-c", "print('hello')"])
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("printed no JSON line with ms_step", r.stderr)

    def test_a_failing_command_fails(self):
        with tempfile.TemporaryDirectory() as d:
            r = self.run_tool(os.path.join(d, "t.tsv"), cmd=[sys.executable, "-c", "import sys; sys.exit(3)"])
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("exited with 3", r.stderr)


if __name__ == "__main__":
    unittest.main()
