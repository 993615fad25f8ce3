#!/usr/bin/env python3
"""scripts/tune_step.py against a stand-in benchmark (fake_step_bench.py): it must find, in the whole step,
the choices the fastest-alone tuning misses (a weight gradient's k is the batch), leave the problems of other
batches and small ones alone, write only entries the plugin accepts, keep the cache valid when a run fails,
ignore other machines' entries, and fail clearly on a command that prints no step time."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "scripts", "tune_step.py")
FAKE = [sys.executable, os.path.join(HERE, "fake_step_bench.py")]
WGRAD, FWD, WGRAD_SMALL_M = "10,1024,784,1024,00", "01,1024,512,1024,11", "10,256,1024,1024,00"
PARTIAL, SMALL = "01,608,1024,784,11", "00,1024,10,256,00"


def last_choices(path):
    out = {}
    with open(path) as lines:
        for line in lines:
            if not line.startswith("#"):
                f = line.rstrip("\n").split("\t")
                out[f[0].split(" ")[2]] = int(f[1])
    return out


def fake_step(cache):
    out = subprocess.run(FAKE, env=dict(os.environ, FRESCO_CUDA_TUNING_CACHE=cache), capture_output=True,
                         text=True, check=True).stdout
    return out.strip().splitlines()[-1]


class TuneStep(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.cache = os.path.join(self.dir.name, "tuning.tsv")

    def tearDown(self):
        self.dir.cleanup()

    def run_tool(self, *extra, cmd=FAKE, env=None):
        return subprocess.run([sys.executable, TOOL, "--cache", self.cache, "--batch", "1024", *extra, "--", *cmd],
                              capture_output=True, text=True, timeout=120, env=env)

    def test_layouts_limit_the_problems(self):
        r = self.run_tool("--layouts", "01")
        self.assertEqual(r.returncode, 0, r.stderr)
        c = last_choices(self.cache)
        self.assertEqual(c[FWD], 0)  # a forward: tried and changed
        self.assertEqual(c[WGRAD], 3)  # a weight gradient: left as tuned alone (the split-4 tie)
        self.assertEqual(c[WGRAD_SMALL_M], 1)
        os.remove(self.cache)
        r = self.run_tool("--layouts", "10")
        self.assertEqual(r.returncode, 0, r.stderr)
        c = last_choices(self.cache)
        self.assertEqual(c[WGRAD], 0)  # a weight gradient: tried and changed
        self.assertEqual(c[FWD], 3)  # a forward: left as tuned alone
        # A bad value is refused before any benchmark runs (nothing is written).
        os.remove(self.cache)
        r = self.run_tool("--layouts", "10,x")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--layouts takes", r.stderr)
        self.assertFalse(os.path.exists(self.cache))

    def test_finds_the_step_choices(self):
        r = self.run_tool()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("step 0.28320 -> 0.25350 ms", r.stdout)
        c = last_choices(self.cache)
        self.assertEqual(c[WGRAD], 0)  # 51.30 us alone, not the 51.21 split-4
        self.assertEqual(c[FWD], 0)
        self.assertEqual(c[WGRAD_SMALL_M], 0)  # k = 1024 is the batch, m = 256 is not
        self.assertEqual(c[PARTIAL], 1)  # another batch: left as tuned alone
        self.assertEqual(c[SMALL], 1)  # below --min-macs: left as tuned alone
        # The plugin (here its stand-in) reads the file back and runs the tuned step.
        self.assertEqual(fake_step(self.cache), '{"bench": "mlp_step", "ms_step": 0.2535}')
        self.assertFalse(os.path.exists(self.cache + ".tune_step"))

    def test_stops_when_a_pass_changes_nothing(self):
        self.assertEqual(self.run_tool("--passes", "5").returncode, 0)
        r = self.run_tool("--passes", "5")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.count("pass 1 "), 3)
        self.assertNotIn("pass 2 ", r.stdout)
        self.assertIn("step 0.25350 -> 0.25350 ms", r.stdout)

    def test_a_failed_run_leaves_only_decided_choices(self):
        # Runs: 1 log, 2 baseline, 3-5 the weight gradient's three alternatives, 6 the first of the forward's.
        env = dict(os.environ, FAKE_COUNTER=os.path.join(self.dir.name, "runs"), FAKE_FAIL_RUN="6")
        r = self.run_tool(env=env)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("exited with 5", r.stderr)
        c = last_choices(self.cache)
        self.assertEqual(c[WGRAD], 0)  # decided before the failure
        self.assertEqual(c[FWD], 3)  # as tuned alone: no trial left behind
        self.assertFalse(os.path.exists(self.cache + ".tune_step"))
        self.assertEqual(fake_step(self.cache), '{"bench": "mlp_step", "ms_step": 0.2582}')

    def test_other_machines_entries_are_left_alone(self):
        fake_step(self.cache)  # this machine's entries
        other = f"matmul OTHER_GPU/sm80x108 {WGRAD} autotune 2 own 0 ws 33554432 ties splits\t1\tx ws 0\t1.0,2.0\n"
        with open(self.cache, "a") as f:
            f.write(other)
        r = self.run_tool()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("-> 0.25350 ms", r.stdout)
        with open(self.cache) as f:
            self.assertEqual(sum(line == other for line in f), 1)

    def test_a_file_that_is_not_a_cache_is_refused(self):
        with open(self.cache, "w") as f:
            f.write("not a tuning cache\n")
        r = self.run_tool()
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("not a fresco CUDA tuning cache", r.stderr)

    def test_a_command_without_a_step_time_fails(self):
        r = self.run_tool(cmd=[sys.executable, "-c", "print('hello')"])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("printed no JSON line with ms_step", r.stderr)

    def test_a_failing_command_fails(self):
        r = self.run_tool(cmd=[sys.executable, "-c", "import sys; sys.exit(3)"])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("exited with 3", r.stderr)

    def test_convs_find_the_step_engines(self):
        env = dict(os.environ, FAKE_CONVS="1")
        r = subprocess.run([sys.executable, TOOL, "--cache", self.cache, "--convs", "--top", "2", "--", *FAKE],
                           capture_output=True, text=True, timeout=120, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        # fc GEMMs as tuned alone (0.2832); the convolutions from 39 us (the fastest alone) to the 4 of the small one
        self.assertIn("step 0.32220 -> 0.28720 ms", r.stdout)
        entries = {}
        with open(self.cache) as lines:
            for line in lines:
                if line.startswith("conv "):
                    f = line.rstrip("\n").split("\t")
                    entries[f[0]] = f
        by_what = {k.split(" ", 2)[2]: e for k, e in entries.items()}
        wgrad = by_what["backward-filter x [512,32,32,64] w [64,3,3,64] dtype 2 candidates 64 ws 1073741824"]
        self.assertEqual(wgrad[1:], ["1", "engine 12 (1 of 3)", repr(0.105)])  # slower alone, faster in the step
        fwd = by_what["forward x [512,32,32,64] w [64,3,3,64] dtype 2 stats candidates 64 ws 1073741824"]
        self.assertEqual(fwd[1:], ["1", "engine 9 (1 of 2)", repr(0.09) + "," + repr(0.027)])  # the sums time kept
        small = by_what["forward x [512,4,4,512] w [512,1,1,256] dtype 2 candidates 64 ws 1073741824"]
        self.assertEqual(small[1], "0")  # below --min-us
        self.assertFalse(os.path.exists(self.cache + ".tune_step"))
        self.assertFalse(os.path.exists(self.cache + ".tune_step_fresh"))
        # The plugin's stand-in reads the file back: the step with the kept engines, nothing retuned.
        out = subprocess.run(FAKE, env=dict(env, FRESCO_CUDA_TUNING_CACHE=self.cache), capture_output=True,
                             text=True, check=True).stdout
        self.assertEqual(out.strip().splitlines()[-1], '{"bench": "mlp_step", "ms_step": 0.2872}')

    def test_convs_without_engines_fail_clearly(self):
        r = subprocess.run([sys.executable, TOOL, "--cache", self.cache, "--convs", "--", *FAKE],
                           capture_output=True, text=True, timeout=120)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no timed convolution engine", r.stderr)

    def test_batch_is_required_for_gemms(self):
        r = subprocess.run([sys.executable, TOOL, "--cache", self.cache, "--", *FAKE], capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--batch is required", r.stderr)

    def test_bad_arguments_are_refused(self):
        for args in (["--passes", "0"], ["--keep", "-1"], ["--timeout", "0"]):
            r = self.run_tool(*args)
            self.assertEqual(r.returncode, 2, args)


if __name__ == "__main__":
    unittest.main()
