"""Unit test of headlab_run.py: the lines it writes are the report protocol of
schema/command.md (python3 -m unittest headlab_run_test, from python/)."""

import importlib
import json
import math
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class HeadlabRunTest(unittest.TestCase):
    def setUp(self):
        self.read_fd, write_fd = os.pipe()
        self.tmp = tempfile.TemporaryDirectory()
        cfg = os.path.join(self.tmp.name, "config.json")
        with open(cfg, "w") as f:
            json.dump({"kind": "command", "train": {"lr": 0.01}, "params": {"hidden": 8}}, f)
        os.environ.update({"HEADLAB_FD": str(write_fd), "HEADLAB_CONFIG": cfg,
                           "HEADLAB_ATTEMPT": "2", "HEADLAB_RUN": "17",
                           "HEADLAB_RESUME_PATH": "/x/ckpt", "HEADLAB_RESUME_STEP": "40",
                           "HEADLAB_RESUME_KIND": "resume"})
        import headlab_run
        self.hl = importlib.reload(headlab_run)
        self.write_fd = write_fd

    def tearDown(self):
        os.close(self.write_fd)
        os.close(self.read_fd)
        for k in ("HEADLAB_FD", "HEADLAB_CONFIG", "HEADLAB_ATTEMPT", "HEADLAB_RUN",
                  "HEADLAB_RESUME_PATH", "HEADLAB_RESUME_STEP", "HEADLAB_RESUME_KIND"):
            os.environ.pop(k, None)
        self.tmp.cleanup()

    def lines(self):
        data = os.read(self.read_fd, 1 << 16).decode()
        return [json.loads(l) for l in data.splitlines()]

    def test_config_and_environment(self):
        self.assertEqual(self.hl.config()["train"]["lr"], 0.01)
        self.assertEqual(self.hl.params(), {"hidden": 8})
        self.assertEqual(self.hl.attempt(), 2)
        self.assertEqual(self.hl.run_id(), 17)
        self.assertEqual(self.hl.resume(), {"path": "/x/ckpt", "step": 40, "kind": "resume"})

    def test_lines(self):
        self.hl.metrics(10, {"train.loss": 2.5, "train.lr": 0.01}, t=100.0)
        self.hl.metric("eval.loss", float("nan"), 10, t=101.0)
        self.hl.summary({"eval.ppl": math.exp(1.0)})
        self.hl.artifact("ckpt.bin", kind="checkpoint", step=10)
        self.hl.provenance({"dataset": "d"})
        self.hl.log("hello")
        got = self.lines()
        self.assertEqual(got[0], {"ev": "metrics", "step": 10, "t": 100.0,
                                  "values": {"train.loss": 2.5, "train.lr": 0.01}})
        self.assertEqual(got[1]["values"], {"eval.loss": None})  # NaN has no JSON form
        self.assertAlmostEqual(got[2]["values"]["eval.ppl"], math.e)
        self.assertEqual(got[3], {"ev": "artifact", "kind": "checkpoint", "path": "ckpt.bin", "step": 10})
        self.assertEqual(got[4], {"ev": "provenance", "fields": {"dataset": "d"}})
        self.assertEqual(got[5], {"ev": "log", "msg": "hello"})

    def test_bad_input_raises(self):
        with self.assertRaises(ValueError):
            self.hl.metric("x", 1.0, -1)
        with self.assertRaises(TypeError):
            self.hl.metric("x", "1", 0)
        with self.assertRaises(ValueError):
            self.hl.summary({"x": float("inf")})


if __name__ == "__main__":
    unittest.main()
