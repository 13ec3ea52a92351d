"""Kills during checkpointed runs (issue 26, item 1): whatever instant a run
dies at, inside a save included, it resumes from its checkpoint and ends bit
for bit where an uninterrupted run ends.

Two kinds of kill:

* every write step of every save, deterministically: each call that changes
  the disk during `checkpoint.save` (creating the temporary, every write of
  the archive, the rename) is followed by a copy of the checkpoint's
  directory, which is what a SIGKILL at that instant would leave (data still
  in Python's buffers is not on disk and is not copied). Every such state
  must hold either no checkpoint or one complete save, plus nothing but
  temporaries; from 60 of them, spread over every save, the run is resumed
  and compared bit for bit with the uninterrupted one.
* real SIGKILLs of a worker process at random moments (a save after every
  chunk, so many land inside one), restarted with ``resume=True`` after each
  kill until it finishes.
"""
from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import time

import chex
import numpy as np
import pytest
import jax

import jaxstream as js
from jaxstream import checkpoint

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import _kill_worker as worker  # noqa: E402

N_RESUMED = 60
N_REAL_KILLS = int(os.environ.get("JAXSTREAM_KILLS", "3"))


def _stream(n_chunks: int):
    return np.random.default_rng(0).normal(size=(worker.CHUNK * n_chunks + 3, 3)).astype(np.float32)


@pytest.fixture(scope="module")
def setup():
    L = worker.learner()
    key = jax.random.key(5)
    X = _stream(8)
    s0 = L.init(key, X[:8])
    ref_state, ref_losses = js.run_stream(L, key, X, s0)
    return L, key, X, s0, ref_state, np.asarray(ref_losses)


def _listing(directory) -> dict:
    out = {}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), "rb") as f:
            out[name] = f.read()
    return out


class _Recorder:
    """The directory's files after every disk-changing step of `checkpoint.save`."""

    def __init__(self, directory):
        self.directory = directory
        self.snaps: list = []  # (step label, {name: bytes})
        self.complete: list = []  # the checkpoint's bytes after each rename

    def snap(self, label):
        self.snaps.append((label, _listing(self.directory)))

    def install(self, monkeypatch):
        rec = self
        real_mkstemp, real_fdopen, real_replace = checkpoint.tempfile.mkstemp, os.fdopen, os.replace

        class File:
            def __init__(self, f):
                self._f = f

            def write(self, b):
                n = self._f.write(b)
                rec.snap("write")
                return n

            def flush(self):
                self._f.flush()
                rec.snap("flush")

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self._f.close()
                rec.snap("close")
                return False

            def __getattr__(self, name):
                return getattr(self._f, name)

        def mkstemp(*a, **k):
            out = real_mkstemp(*a, **k)
            rec.snap("mkstemp")
            return out

        def fdopen(fd, *a, **k):
            return File(real_fdopen(fd, *a, **k))

        def replace(src, dst):
            real_replace(src, dst)
            rec.snap("replace")
            rec.complete.append(rec.snaps[-1][1][os.path.basename(dst)])

        monkeypatch.setattr(checkpoint.tempfile, "mkstemp", mkstemp)
        monkeypatch.setattr(checkpoint.os, "fdopen", fdopen)
        monkeypatch.setattr(checkpoint.os, "replace", replace)


@pytest.mark.parametrize("keep_losses", [True, False])
def test_a_kill_at_every_write_step_of_every_save_resumes_bit_equal(setup, tmp_path, monkeypatch, keep_losses):
    L, key, X, s0, ref_state, ref_losses = setup
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    ckpt = run_dir / "c.ckpt"
    rec = _Recorder(run_dir)
    rec.snap("start")
    rec.install(monkeypatch)
    state, res = js.run_stream_chunked(L, key, X, s0, chunk_size=worker.CHUNK, keep_losses=keep_losses,
                                       checkpoint=ckpt, checkpoint_every=1, prefetch=0)
    monkeypatch.undo()
    chex.assert_trees_all_equal(state, ref_state)
    n_saves = len(rec.complete)
    assert n_saves == 9  # 8 full chunks and the short last one, one save each
    assert len(rec.snaps) > 20 * n_saves  # many kill points inside each save

    # Every instant leaves no checkpoint or a complete one, and only temporaries besides (and the
    # run's lock file, which the OS releases with the process).
    complete = {hashlib.sha256(b).hexdigest(): i for i, b in enumerate(rec.complete)}
    inside_save = 0
    for label, files in rec.snaps:
        others = [n for n in files if n not in (ckpt.name, ckpt.name + ".lock")]
        assert all(n.startswith(f".{ckpt.name}.") and n.endswith(".tmp") for n in others), others
        inside_save += bool(others)
        if ckpt.name in files:
            assert hashlib.sha256(files[ckpt.name]).hexdigest() in complete, label
    assert inside_save > 10 * n_saves

    # Resume from kill points spread over the whole run (every rename's neighbours included).
    idx = set(np.linspace(0, len(rec.snaps) - 1, N_RESUMED).astype(int).tolist())
    idx |= {i for i, (label, _) in enumerate(rec.snaps) if label == "replace"}
    idx |= {i - 1 for i, (label, _) in enumerate(rec.snaps) if label == "replace"}
    assert len(idx) >= 50
    positions = set()
    for n_resume, i in enumerate(sorted(idx)):
        d = tmp_path / f"kill{n_resume}"
        d.mkdir()
        for name, data in rec.snaps[i][1].items():
            (d / name).write_bytes(data)
        if (d / ckpt.name).exists():
            positions.add(checkpoint.read_manifest(d / ckpt.name)["metadata"]["n_done"])
        else:
            positions.add(0)
        st, res = js.run_stream_chunked(L, key, X, s0, chunk_size=worker.CHUNK, keep_losses=keep_losses,
                                        checkpoint=d / ckpt.name, checkpoint_every=1, resume=True, prefetch=0)
        chex.assert_trees_all_equal(st, ref_state)
        assert res.n_points == X.shape[0]
        assert res.cumulative_loss == pytest.approx(float(ref_losses.astype(np.float64).sum()), rel=1e-12)
        if keep_losses:
            np.testing.assert_array_equal(res.losses, ref_losses)
        assert sorted(os.listdir(d)) == [ckpt.name, ckpt.name + ".lock"]  # the killed save's temporary is gone
    assert positions == {0, *range(worker.CHUNK, X.shape[0], worker.CHUNK), X.shape[0]}  # every save resumed from


def test_random_sigkills_of_a_checkpointing_process_then_resume(tmp_path, on_cpu):
    """SIGKILL a worker at random moments, restart it with resume=True each time, until it finishes."""
    L = worker.learner()
    key = jax.random.key(5)
    X = _stream(150)
    data, ckpt = tmp_path / "x.npy", tmp_path / "run.ckpt"
    np.save(data, X)
    rng = random.Random(26)
    kills, tmp_left, positions = 0, 0, []
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join(
        [os.path.dirname(HERE)] + os.environ.get("PYTHONPATH", "").split(os.pathsep)))
    for attempt in range(N_REAL_KILLS + 5):
        # Unbuffered: readline() on the raw pipe reads byte by byte, so nothing after the first line
        # is read ahead into a buffer that communicate() (which reads the descriptor) never sees. A
        # worker resumed at the last chunk prints "ready" and "done" together; a buffered readline
        # swallowed the "done" (CI, 2026-11-27).
        proc = subprocess.Popen([sys.executable, os.path.join(HERE, "_kill_worker.py"), str(data), str(ckpt), "1"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0, env=env)
        try:
            line = proc.stdout.readline().decode()
            if kills < N_REAL_KILLS and line.startswith("ready"):
                time.sleep(rng.uniform(0.0, 0.25))
                proc.send_signal(signal.SIGKILL)
            out, err = (b.decode(errors="replace") for b in proc.communicate(timeout=120))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if proc.returncode == -signal.SIGKILL:
            kills += 1
            tmp_left += any(n.endswith(".tmp") for n in os.listdir(tmp_path))
            if ckpt.exists():
                meta = checkpoint.read_manifest(ckpt)["metadata"]
                positions.append(meta["n_done"])
            continue
        assert proc.returncode == 0, err[-3000:]
        # A kill after the last save leaves a finished checkpoint: the next worker learns no chunk,
        # so its first line (read above) is already "done".
        assert "done" in line + out
        break
    else:
        pytest.fail("the worker never finished")
    assert kills == N_REAL_KILLS
    assert positions == sorted(positions) and len(set(positions)) == len(positions)  # each run got further
    s0 = L.init(key, X[:8])
    ref_state, ref_losses = js.run_stream(L, key, X, s0)
    state, meta, arrays = checkpoint.load_with_arrays(ckpt, L)
    chex.assert_trees_all_equal(state, ref_state)
    np.testing.assert_array_equal(arrays["losses"], np.asarray(ref_losses))
    assert meta["n_done"] == X.shape[0]
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    # Resuming a finished run learns nothing more and leaves the checkpoint as it was.
    before = ckpt.read_bytes()
    again = subprocess.run([sys.executable, os.path.join(HERE, "_kill_worker.py"), str(data), str(ckpt), "1"],
                           capture_output=True, text=True, env=env, timeout=120)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout == "done\n"
    assert ckpt.read_bytes() == before
    print(f"{kills} SIGKILLs, {tmp_left} of them inside a save, checkpoints at {positions}")
