"""Streams sharded over devices (4 forced host devices in a subprocess)."""
import os
import subprocess
import sys

import jax
import pytest

import jaxstream as js

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _env(**extra):
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cache = os.environ.get("JAXSTREAM_JAX_CACHE", "")
    if cache:  # the tests' compilation cache when asked for (tests/conftest.py), for the subprocesses too
        env.setdefault("JAX_COMPILATION_CACHE_DIR", cache)
        env.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")
    env.update(extra)
    return env


def test_four_host_devices_equal_one_device_bit_for_bit():
    env = _env(XLA_FLAGS=os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4")
    proc = subprocess.run([sys.executable, os.path.join(HERE, "_sharding_worker.py")], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "ALL OK" in proc.stdout


def test_devices_argument_is_checked():
    from test_core import mean_learner
    L = mean_learner()
    keys = jax.random.split(jax.random.key(0), 2)
    x = jax.numpy.zeros((2, 5, 3))
    with pytest.raises(ValueError, match="devices"):
        js.init_streams(L, keys, x, devices=len(jax.devices()) + 1)
    with pytest.raises(ValueError, match="devices"):
        js.run_streams(L, keys, x, js.init_streams(L, keys, x), devices=[])
    with pytest.raises(ValueError, match="twice"):
        js.run_streams(L, keys, x, js.init_streams(L, keys, x), devices=[jax.devices()[0]] * 2)


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_through_jax_distributed(tmp_path, on_cpu):
    """Two local processes (one CPU device each) joined by jax.distributed:
    each runs its share of the streams; gathered results equal one process
    running the same blocks, bit for bit."""
    import numpy as np
    from test_core import big_learner, mean_learner
    port = str(_free_port())
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "_distributed_worker.py"), str(i), port,
                               str(tmp_path / f"out{i}.npz")], env=_env(XLA_FLAGS=""), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for i in range(2)]
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=240)[0])
    finally:
        for p in procs:  # the test stops by itself even if a worker hangs
            if p.poll() is None:
                p.kill()
                p.wait()
    assert all(p.returncode == 0 for p in procs), "\n----\n".join(l[-3000:] for l in logs)
    got = [dict(np.load(tmp_path / f"out{i}.npz")) for i in range(2)]
    for k in got[0]:
        if not k.startswith("local"):
            np.testing.assert_array_equal(got[0][k], got[1][k], err_msg=k)
    # the reference: one process, one device, on each device's block of the padded batch (B=5 -> 6 = 2 x 3)
    rng = np.random.default_rng(0)
    B = 5
    X = rng.normal(size=(B, 30, 3)).astype(np.float32)
    mask = np.arange(25)[None] < rng.integers(3, 26, B)[:, None]
    keys = jax.random.split(jax.random.key(1), B)
    pad = lambda a: np.concatenate([np.asarray(a), np.asarray(a)[:1]])
    kd = pad(jax.random.key_data(keys))
    ref = {}
    for lo in (0, 3):
        k = jax.random.wrap_key_data(kd[lo:lo + 3])
        L = mean_learner()
        s = js.init_streams(L, k, pad(X[:, :5])[lo:lo + 3])
        st, tr = js.run_streams(L, k, pad(X[:, 5:])[lo:lo + 3], s, mask=pad(mask)[lo:lo + 3], trace="info")
        Lb = big_learner(8)
        sb, trb = js.run_streams(Lb, k, pad(X[:, 5:])[lo:lo + 3], js.init_streams(Lb, k, pad(X[:, :5])[lo:lo + 3]))
        for name, v in dict(mean=st.mean, n=st.n, loss=tr.loss, noise=tr.noise, table=sb.table, big_loss=trb).items():
            ref.setdefault(name, []).append(np.asarray(v))
    for name, blocks in ref.items():
        np.testing.assert_array_equal(got[0][name], np.concatenate(blocks)[:B], err_msg=name)
    # gather=False: process i holds rows 2i, 2i+1 of the 4 streams
    for i in range(2):
        np.testing.assert_array_equal(got[i]["local_rows"], [2 * i, 2 * i + 2])
        assert got[i]["local_mean"].shape == (2, 3)


def _x0_and_stream(n=200, seed=0):
    import numpy as np
    X = np.random.default_rng(seed).normal(size=(n + 8, 3)).astype(np.float32)
    return X[:8], X


def test_chunked_resume_after_a_kill_equals_one_run(tmp_path, on_cpu):
    """Issue 11 item 2 (chunked part): kill a run mid-way, resume from its
    checkpoint, get the uninterrupted result bit for bit."""
    import numpy as np
    x0, X = _x0_and_stream()
    data = tmp_path / "stream.npy"
    np.save(data, X)  # the worker learns all of X (x0 = its first rows also initialise)
    ckpt = tmp_path / "run.ckpt"
    proc = subprocess.run([sys.executable, os.path.join(HERE, "_chunked_worker.py"), str(data), str(ckpt)],
                          env=_env(XLA_FLAGS=""), capture_output=True, text=True, timeout=240)
    assert proc.returncode == -9, proc.stdout[-2000:] + proc.stderr[-2000:]  # SIGKILL, mid-run
    from jaxstream import checkpoint
    L = js.landmark_mds(4, buffer_size=12)
    key = jax.random.key(5)
    _, meta = checkpoint.load(ckpt, L)
    assert meta["n_done"] == 4 * 16  # the last checkpoint before the kill (chunk 5 was lost)
    s0 = L.init(key, x0)
    st_r, res_r = js.run_stream_chunked(L, key, str(data), s0, chunk_size=16, keep_losses=True,
                                        checkpoint=ckpt, checkpoint_every=2, resume=True)
    st, tr = js.run_stream(L, key, X, s0)
    import chex
    chex.assert_trees_all_equal(st_r, st)
    np.testing.assert_array_equal(res_r.losses, tr)
    assert res_r.n_points == X.shape[0]
    # a checkpoint written for another key is refused
    with pytest.raises(ValueError, match="another key"):
        js.run_stream_chunked(L, jax.random.key(6), str(data), s0, chunk_size=16, keep_losses=True,
                              checkpoint=ckpt, resume=True)
