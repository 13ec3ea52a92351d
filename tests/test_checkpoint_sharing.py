"""Checkpoints shared between jobs (issue 56, item 2): one writer per checkpoint path, a writer
never removes another writer's files, and a resume on another stream is refused. The second
writer is a real process (tests/_sharing_worker.py)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import jax

import jaxstream as js
from jaxstream import checkpoint
from jaxstream._chunked import _RowHash

HERE = os.path.dirname(os.path.abspath(__file__))
T = 160


def _learner():
    return js.landmark_mds(4, buffer_size=12), jax.random.key(5)


def _stream(seed):
    return np.random.default_rng(seed).normal(size=(T, 3)).astype(np.float32)


def _run(xs, ckpt, x0=None, **kw):
    L, key = _learner()
    x0 = np.asarray(xs)[:8] if x0 is None else x0
    return js.run_stream_chunked(L, key, xs, L.init(key, jax.numpy.asarray(x0)), chunk_size=16, checkpoint=ckpt,
                                 **kw)


def _start_worker(tmp_path, data, ckpt, tag):
    ready, go, out = (str(tmp_path / f"{tag}.{n}") for n in ("ready", "go", "out.npy"))
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "_sharing_worker.py"), data, ckpt, ready, go, out],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    end = time.time() + 180
    while not os.path.exists(ready):
        if proc.poll() is not None or time.time() > end:
            proc.kill()
            pytest.fail(f"the worker did not reach its second chunk: {proc.communicate()[0].decode()[-2000:]}")
        time.sleep(0.05)
    return proc, go, out


def test_a_second_job_is_refused_and_removes_nothing_of_the_first(tmp_path):
    """While a job runs on a checkpoint, a second job on the same path is refused with the holder's
    pid, and neither it nor `remove_stale_temporaries` deletes the first job's files (here a
    temporary standing for a save in progress); the first job then finishes with the result of an
    uninterrupted run, and once it is gone the temporaries are removable."""
    xs = _stream(0)
    data, ckpt = str(tmp_path / "xs.npy"), str(tmp_path / "ck.jxs")
    np.save(data, xs)
    proc, go, out = _start_worker(tmp_path, data, ckpt, "a")
    in_progress = tmp_path / ".ck.jxs.other.tmp"
    in_progress.write_bytes(b"a save in progress")
    try:
        with pytest.raises(checkpoint.CheckpointBusy, match=f"pid {proc.pid} on"):
            _run(xs, ckpt)
        with pytest.raises(checkpoint.CheckpointBusy):
            _run(xs, ckpt, resume=True)
        with pytest.raises(checkpoint.CheckpointBusy):
            checkpoint.remove_stale_temporaries(ckpt)
        assert in_progress.exists() and os.path.exists(ckpt)
    finally:
        open(go, "w").close()
        stdout = proc.communicate(timeout=300)[0].decode()
    assert proc.returncode == 0, stdout[-2000:]
    _, alone = _run(xs, str(tmp_path / "alone.jxs"))
    assert float(np.load(out)[0]) == alone.cumulative_loss
    assert checkpoint.remove_stale_temporaries(ckpt) == [str(in_progress)]


def test_a_killed_job_leaves_no_lock(tmp_path):
    """The lock is the operating system's: a job killed with SIGKILL while holding it releases it,
    and a new job resumes from its checkpoint to the uninterrupted result."""
    xs = _stream(1)
    data, ckpt = str(tmp_path / "xs.npy"), str(tmp_path / "ck.jxs")
    np.save(data, xs)
    proc, go, _ = _start_worker(tmp_path, data, ckpt, "b")
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert checkpoint.read_manifest(ckpt)["metadata"]["n_done"] >= 32
    _, resumed = _run(xs, ckpt, resume=True)
    _, alone = _run(xs, str(tmp_path / "alone.jxs"))
    assert resumed.cumulative_loss == alone.cumulative_loss and resumed.n_points == T


def test_the_lock_excludes_a_second_holder_in_the_same_process(tmp_path):
    ckpt = str(tmp_path / "ck.jxs")
    with checkpoint.lock(ckpt):
        with pytest.raises(checkpoint.CheckpointBusy, match=f"pid {os.getpid()}"):
            _run(_stream(0), ckpt)
    _run(_stream(0), ckpt)  # released on exit


@pytest.mark.parametrize("as_blocks", [False, True])
def test_a_resume_on_another_stream_is_refused(tmp_path, as_blocks):
    """A checkpoint records a digest of the rows it has learned: resuming with a stream whose first
    rows differ (same length, same key) is a `StreamMismatch` naming the fix, from an array and
    from an iterable of blocks of other sizes; the same stream resumes."""
    xs, other = _stream(2), _stream(3)
    ckpt = str(tmp_path / "ck.jxs")

    def stop(n_done, state, losses):
        if n_done == 48:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _run(xs, ckpt, on_chunk=stop)
    assert checkpoint.read_manifest(ckpt)["metadata"]["n_done"] == 48

    def blocks(a):
        return (a[i:i + 7] for i in range(0, T, 7)) if as_blocks else a

    changed = xs.copy()
    changed[47, 1] += 1e-3                            # one value of the last row learned
    for bad in (other, changed):
        with pytest.raises(js.StreamMismatch, match="first 48 rows of this stream differ"):
            _run(blocks(bad), ckpt, x0=xs[:8], resume=True)
    assert checkpoint.read_manifest(ckpt)["metadata"]["n_done"] == 48  # a refused resume saves nothing
    _, resumed = _run(blocks(xs.astype(np.float64)), ckpt, x0=xs[:8], resume=True)  # the same values in another dtype
    _, alone = _run(xs, str(tmp_path / "alone.jxs"))
    assert resumed.cumulative_loss == alone.cumulative_loss


def test_the_row_digest_ignores_how_the_rows_are_split():
    xs = _stream(4)
    whole, parts = _RowHash(), _RowHash()
    whole.update(xs)
    for i in range(0, T, 13):
        parts.update(xs[i:i + 13].astype(np.float64))
    assert whole.hexdigest() == parts.hexdigest()
    other = _RowHash()
    other.update(xs[::-1])
    assert other.hexdigest() != whole.hexdigest()
