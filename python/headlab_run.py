"""Report from a program that headlab runs as a `command` run (schema/command.md).

The worker starts the program in the attempt's directory with the run's config in
$HEADLAB_CONFIG and a report descriptor in $HEADLAB_FD; every call here writes one JSON
line to it. No dependencies beyond the standard library. Outside headlab (no $HEADLAB_FD)
the reports go to stderr, so the same script also runs by hand.

    import headlab_run as hl

    cfg = hl.config()                       # the run config, e.g. cfg["params"]["hidden"]
    lr = cfg["train"]["lr"]
    start = hl.resume()                     # {"path", "step", "kind"} of a checkpoint, or None
    for step in range(...):
        hl.metrics(step, {"train.loss": loss})
    hl.artifact("model.ckpt", kind="checkpoint", step=step)
    hl.summary({"eval.loss": eval_loss, "eval.ppl": math.exp(eval_loss)})
"""

import json
import math
import os
import sys
import threading
import time

__all__ = ["config", "params", "run_dir", "run_id", "attempt", "resume", "metric", "metrics",
           "summary", "artifact", "provenance", "log"]

_lock = threading.Lock()
_out = None
_config = None


def _stream():
    global _out
    if _out is None:
        fd = os.environ.get("HEADLAB_FD")
        _out = os.fdopen(int(fd), "w", buffering=1, closefd=False) if fd else sys.stderr
    return _out


def _finite(v):
    """A number JSON can carry, or None (NaN and infinities have no JSON form)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError("headlab_run: expected a number, got %r" % (v,))
    return v if math.isfinite(v) else None


def _step(step):
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError("headlab_run: step must be an int >= 0, got %r" % (step,))
    return step


def _send(obj):
    line = json.dumps(obj, separators=(",", ":"), allow_nan=False)
    with _lock:
        out = _stream()
        out.write(line + "\n")
        out.flush()


def config():
    """The run's config as a dict (schema/grid.md, "Run config"); {} outside headlab."""
    global _config
    if _config is None:
        path = os.environ.get("HEADLAB_CONFIG")
        if path:
            with open(path) as f:
                _config = json.load(f)
        else:
            _config = {}
    return _config


def params():
    """The run's free-form parameters: config()["params"] ({} when it has none)."""
    return config().get("params", {})


def run_dir():
    """The attempt's directory (the program's working directory)."""
    return os.environ.get("HEADLAB_RUN_DIR", os.getcwd())


def run_id():
    """The run's id, or None outside headlab."""
    v = os.environ.get("HEADLAB_RUN")
    return int(v) if v and v.isdigit() else v


def attempt():
    """The attempt number (1 for the first), or 0 outside headlab."""
    return int(os.environ.get("HEADLAB_ATTEMPT", "0") or 0)


def resume():
    """The checkpoint to continue from, or None: {"path", "step", "kind"} where kind is
    "resume" (this run's own checkpoint, from an earlier attempt) or "parent" (the
    checkpoint of parent.run that a continuation starts from)."""
    path = os.environ.get("HEADLAB_RESUME_PATH")
    if not path:
        return None
    return {"path": path, "step": int(os.environ.get("HEADLAB_RESUME_STEP", "0")),
            "kind": os.environ.get("HEADLAB_RESUME_KIND", "resume")}


def metric(key, value, step, t=None):
    """One metric point: `key` (e.g. "train.loss") at training step `step`."""
    metrics(step, {key: value}, t)


def metrics(step, values, t=None):
    """Several metric points at one step: values = {"train.loss": 2.31, ...}."""
    obj = {"ev": "metrics", "step": _step(step),
           "values": {str(k): _finite(v) for k, v in values.items()}}
    obj["t"] = time.time() if t is None else float(t)
    _send(obj)


def summary(values):
    """Final figures of the run (what `headlab results` aggregates and compares). Several
    calls merge; without any, each metric's last value is the summary."""
    clean = {}
    for k, v in values.items():
        f = _finite(v)
        if f is None:
            raise ValueError("headlab_run: summary %s is not finite (%r)" % (k, v))
        clean[str(k)] = f
    _send({"ev": "summary", "values": clean})


def artifact(path, kind, step=0):
    """A file the run produced, inside the run directory (relative or absolute). headlab
    records its SHA-256 and size; kind "checkpoint" is what a retried attempt resumes."""
    _send({"ev": "artifact", "kind": str(kind), "path": os.fspath(path), "step": _step(step)})


def provenance(fields):
    """Facts about what ran (e.g. {"dataset": "...", "dataset_sha256": "..."})."""
    _send({"ev": "provenance", "fields": dict(fields)})


def log(msg):
    """A line for the worker's log."""
    _send({"ev": "log", "msg": str(msg)})
