"""Checkpoint and resume: bit-identical resumption, refusals, atomic writes."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import zipfile
from typing import NamedTuple

import chex
import numpy as np
import pytest
import jax
import jax.numpy as jnp

import jaxstream as js
from jaxstream import checkpoint, datasets
from jaxstream.checkpoint import CheckpointError

N_INIT, N_HALF = 20, 20

# Small configurations so the six round trips compile quickly.
FACTORIES = {
    "slpc": lambda: js.slpc(8, 64, t0=N_INIT),
    "pacbo": lambda: js.pacbo(4, 32, 10),
    "landmark_mds": lambda: js.landmark_mds(8, n_components=2, buffer_size=24),
}


def _configured(learner, name):
    """The factories record their configuration; a hand-set one stands in
    while a factory does not (yet)."""
    return learner if learner.config is not None else learner._replace(config=dict(learner=name))


def _stream(dtype):
    return datasets.make_cubic_stream(N_INIT + 2 * N_HALF, seed=3).astype(dtype)


def _run_halves_with_checkpoint(name, dtype, tmp_path):
    learner = _configured(FACTORIES[name](), name)
    xs = _stream(dtype)
    key = jax.random.key(7)
    state0 = learner.init(key, xs[:N_INIT])
    # One compiled scan of 2·N_HALF rounds serves the whole run and both
    # halves (a half is the first N_HALF rows, the rest masked out).
    run = jax.jit(lambda k, x, s, m, off: js.run_stream(learner, k, x, s, mask=m, step_offset=off))
    half = np.arange(2 * N_HALF) < N_HALF
    full_state, full_losses = run(key, xs[N_INIT:], state0, np.ones(2 * N_HALF, bool), 0)
    half_state, losses_a = run(key, xs[N_INIT:], state0, half, 0)
    path = tmp_path / f"{name}.ckpt"
    checkpoint.save(path, learner, half_state, metadata={"n_done": N_HALF})
    resumed, meta = checkpoint.load(path, learner)
    assert meta == {"n_done": N_HALF}
    chex.assert_trees_all_equal(resumed, half_state)
    chex.assert_trees_all_equal_dtypes(resumed, half_state)
    rest = np.concatenate([xs[N_INIT + N_HALF:], np.zeros_like(xs[:N_HALF])])
    end_state, losses_b = run(key, rest, resumed, half, N_HALF)
    chex.assert_trees_all_equal(end_state, full_state)
    losses = np.concatenate([np.asarray(losses_a)[:N_HALF], np.asarray(losses_b)[:N_HALF]])
    np.testing.assert_array_equal(losses, np.asarray(full_losses))
    assert losses.dtype == dtype and np.isfinite(losses[1:]).all()
    # The resumed state is not merely equal to the saved one by accident: learning moved it.
    assert not all(np.array_equal(a, b) for a, b in zip(jax.tree_util.tree_leaves(state0),
                                                        jax.tree_util.tree_leaves(half_state)))


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_resume_bit_identical_float32(name, tmp_path):
    _run_halves_with_checkpoint(name, np.float32, tmp_path)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_resume_bit_identical_float64(name, tmp_path):
    with jax.enable_x64(True):
        _run_halves_with_checkpoint(name, np.float64, tmp_path)
        learner = _configured(FACTORIES[name](), name)
        state, _ = checkpoint.load(tmp_path / f"{name}.ckpt", learner)
        assert any(leaf.dtype == jnp.float64 for leaf in jax.tree_util.tree_leaves(state))


@pytest.fixture(scope="module")
def slpc_saved(tmp_path_factory):
    """A small slpc state saved under a hand-set configuration."""
    learner = js.slpc(8, 64, t0=N_INIT)._replace(config=dict(learner="slpc", max_segments=8, history_size=64,
                                                             global_moves=8, drift_offset=True))
    xs = _stream(np.float32)
    state = learner.init(jax.random.key(0), xs[:N_INIT])
    path = tmp_path_factory.mktemp("ckpt") / "slpc.ckpt"
    checkpoint.save(path, learner, state, metadata={"note": "x"})
    return learner, state, path


def test_refuses_another_configuration(slpc_saved):
    learner, _, path = slpc_saved
    other = learner._replace(config=dict(learner="slpc", max_segments=12, history_size=64, global_moves=8,
                                         drift_offset=True))
    with pytest.raises(CheckpointError, match=r"another learner configuration \(max_segments: saved 8 vs learner 12\)"):
        checkpoint.load(path, other)
    pacbo = learner._replace(config=dict(learner="pacbo", max_clusters=8))
    with pytest.raises(CheckpointError, match="learner: saved 'slpc' vs learner 'pacbo'"):
        checkpoint.load(path, pacbo)


def test_config_keys_added_later_read_as_their_old_default(tmp_path):
    """landmark_mds gained ``weighted`` (default False) after its checkpoints
    existed: a checkpoint without the key loads into weighted=False and is
    refused by weighted=True; a key missing from another learner is still a
    different configuration."""
    L = js.landmark_mds(8, n_components=2, buffer_size=24)
    x = datasets.make_cubic_stream(30, seed=1).astype(np.float32)
    s = L.init(jax.random.key(0), x[:10])
    old = {k: v for k, v in js.config_record(L.config).items() if k != "weighted"}
    checkpoint.save(tmp_path / "old.ckpt", L._replace(config=old), s)
    assert "weighted" not in checkpoint.read_manifest(tmp_path / "old.ckpt")["config"]
    back, _ = checkpoint.load(tmp_path / "old.ckpt", L)
    chex.assert_trees_all_equal(back, s)
    # the dict landmark_mds recorded before its Config existed (same keys and values as Config.record())
    before = dict(learner="landmark_mds", max_landmarks=8, n_components=2, buffer_size=24, metric="euclidean",
                  align=False, cache_distances=False, embed_arrivals=False, weighted=False)
    assert js.config_record(L.config) == before
    checkpoint.save(tmp_path / "before.ckpt", L._replace(config=before), s)
    back, _ = checkpoint.load(tmp_path / "before.ckpt", L)
    chex.assert_trees_all_equal(back, s)
    with pytest.raises(CheckpointError, match="weighted: saved False vs learner True"):
        checkpoint.load(tmp_path / "old.ckpt", js.landmark_mds(8, n_components=2, buffer_size=24, weighted=True))
    P = js.pacbo(4, 32, 10)
    checkpoint.save(tmp_path / "p.ckpt", P._replace(config=dict(js.config_record(P.config), weighted=False)), P.init(
        jax.random.key(0), x[:10]))
    with pytest.raises(CheckpointError, match="weighted: saved False vs learner '<absent>'"):
        checkpoint.load(tmp_path / "p.ckpt", P)
    # slpc gained ``global_moves``; before it every deletion and reversal was
    # scored each round, which is global_moves=None.
    S = js.slpc(8, 64, t0=N_INIT)
    ss = S.init(jax.random.key(0), x[:N_INIT])
    checkpoint.save(tmp_path / "s.ckpt", S._replace(config={k: v for k, v in js.config_record(S.config).items() if k != "global_moves"}),
                    ss)
    back, _ = checkpoint.load(tmp_path / "s.ckpt", js.slpc(8, 64, t0=N_INIT, global_moves=None))
    chex.assert_trees_all_equal(back, ss)
    with pytest.raises(CheckpointError, match="global_moves: saved None vs learner 8"):
        checkpoint.load(tmp_path / "s.ckpt", S)


def test_tuple_and_list_configs_compare_equal(tmp_path):
    learner = js.slpc(8, 64, t0=N_INIT)._replace(config=dict(learner="slpc", shape=(2, 3), global_moves=8,
                                                             drift_offset=True))
    state = learner.init(jax.random.key(0), _stream(np.float32)[:N_INIT])
    checkpoint.save(tmp_path / "c", learner, state)
    checkpoint.load(tmp_path / "c", learner)


def test_refuses_incompatible_versions(slpc_saved, tmp_path, monkeypatch):
    learner, state, path = slpc_saved
    major, minor = (int(v) for v in js.__version__.split(".")[:2])
    saved, later = js.__version__, f"{major}.{minor + 1}.0"
    monkeypatch.setattr(js, "__version__", later)
    with pytest.raises(CheckpointError, match=f"written by jaxstream {saved}; this is jaxstream {later}"):
        checkpoint.load(path, learner)
    monkeypatch.setattr(js, "__version__", f"{major}.{minor}.99")  # a patch release reads it
    checkpoint.load(path, learner)
    monkeypatch.undo()

    manifest = checkpoint.read_manifest(path)
    manifest["format_version"] = checkpoint.FORMAT_VERSION + 1
    bad = tmp_path / "future.ckpt"
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    arrays["__manifest__"] = np.frombuffer(json.dumps(manifest).encode(), np.uint8)
    with open(bad, "wb") as f:
        np.savez(f, **arrays)
    with pytest.raises(CheckpointError, match=f"format version {checkpoint.FORMAT_VERSION + 1} cannot be read"):
        checkpoint.load(bad, learner)


def test_refuses_float64_file_without_x64(tmp_path):
    with jax.enable_x64(True):
        learner = js.slpc(8, 64, t0=N_INIT)._replace(config=dict(learner="slpc", global_moves=8, drift_offset=True))
        state = learner.init(jax.random.key(0), _stream(np.float64)[:N_INIT])
        checkpoint.save(tmp_path / "f64.ckpt", learner, state)
    assert not jax.config.jax_enable_x64
    with pytest.raises(CheckpointError, match="enable_x64"):
        checkpoint.load(tmp_path / "f64.ckpt", learner)


def test_missing_config_policy(tmp_path):
    bare = js.StreamLearner(None, None, None, None, None)
    state = {"a": jnp.arange(3.0)}
    with pytest.raises(CheckpointError, match="learner.config is None"):
        checkpoint.save(tmp_path / "s", bare, state)
    assert not (tmp_path / "s").exists()
    checkpoint.save(tmp_path / "s", bare, state, allow_missing_config=True)
    with pytest.raises(CheckpointError, match="no configuration to verify"):
        checkpoint.load(tmp_path / "s", bare)
    out, meta = checkpoint.load(tmp_path / "s", bare, allow_missing_config=True)
    chex.assert_trees_all_equal(out, state)
    configured = bare._replace(config=dict(learner="x"))
    with pytest.raises(CheckpointError, match="no configuration"):
        checkpoint.load(tmp_path / "s", configured)
    with pytest.raises(CheckpointError, match="one of the checkpoint and the learner"):
        checkpoint.load(tmp_path / "s", configured, allow_missing_config=True)


def test_refuses_unserialisable_config_and_metadata(tmp_path):
    state = {"a": jnp.zeros(2)}
    learner = js.StreamLearner(None, None, None, None, None, dict(learner="x", metric=np.hypot))
    with pytest.raises(CheckpointError, match="config holds a ufunc"):
        checkpoint.save(tmp_path / "s", learner, state)
    learner = learner._replace(config=dict(learner="x"))
    with pytest.raises(CheckpointError, match="metadata must be JSON-serialisable"):
        checkpoint.save(tmp_path / "s", learner, state, metadata={"f": object()})
    assert not (tmp_path / "s").exists()
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_refuses_corrupt_truncated_and_foreign_files(slpc_saved, tmp_path):
    learner, _, path = slpc_saved
    blob = path.read_bytes()
    (tmp_path / "trunc").write_bytes(blob[: len(blob) // 2])
    with pytest.raises(CheckpointError, match="not a readable jaxstream checkpoint"):
        checkpoint.load(tmp_path / "trunc", learner)
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(CheckpointError):
        checkpoint.load(tmp_path / "empty", learner)
    # Flip bytes inside the first stored array: the zip CRC catches it.
    corrupt = bytearray(blob)
    start = blob.index(b"leaf_00000.npy") + 200
    corrupt[start:start + 8] = bytes(8)
    (tmp_path / "corrupt").write_bytes(bytes(corrupt))
    with pytest.raises(CheckpointError, match="corrupt"):
        checkpoint.load(tmp_path / "corrupt", learner)
    np.savez(tmp_path / "plain.npz", a=np.zeros(3))
    with pytest.raises(CheckpointError, match="not a jaxstream checkpoint"):
        checkpoint.load(tmp_path / "plain.npz", learner)
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        checkpoint.load(tmp_path / "missing.ckpt", learner)


def test_file_is_plain_npz_with_json_manifest(slpc_saved):
    learner, state, path = slpc_saved
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
    assert "__manifest__.npy" in names
    manifest = checkpoint.read_manifest(path)
    leaves = jax.tree_util.tree_leaves(state)
    assert len(manifest["leaves"]) == len(leaves)
    for spec, leaf in zip(manifest["leaves"], leaves):
        assert spec["shape"] == list(leaf.shape) and spec["dtype"] == leaf.dtype.name
    assert manifest["config"] == {"learner": "slpc", "max_segments": 8, "history_size": 64, "global_moves": 8,
                                  "drift_offset": True}
    assert manifest["jaxstream_version"] == js.__version__
    assert manifest["metadata"] == {"note": "x"}
    with np.load(path, allow_pickle=False) as data:  # no pickled objects inside
        for k in data.files:
            assert data[k].dtype != object


class _KeyedState(NamedTuple):
    key: jax.Array
    keys: jax.Array
    count: jax.Array
    nested: tuple
    scalar: float


def test_typed_keys_containers_and_python_scalars_round_trip(tmp_path):
    learner = js.StreamLearner(None, None, None, None, None, dict(learner="toy"))
    state = _KeyedState(jax.random.key(3), jax.random.split(jax.random.key(4), 5), jnp.int32(7),
                        ({"b": jnp.ones((2, 0)), "a": [jnp.arange(4, dtype=jnp.uint8), None]},), 0.25)
    checkpoint.save(tmp_path / "k", learner, state)
    out, _ = checkpoint.load(tmp_path / "k", learner)
    assert isinstance(out, _KeyedState) and out.scalar == 0.25
    assert jnp.issubdtype(out.key.dtype, jax.dtypes.prng_key) and out.keys.shape == (5,)
    np.testing.assert_array_equal(jax.random.key_data(out.keys), jax.random.key_data(state.keys))
    np.testing.assert_array_equal(jax.random.uniform(out.key, (3,)), jax.random.uniform(state.key, (3,)))
    chex.assert_trees_all_equal(out._replace(key=0, keys=0), state._replace(key=0, keys=0))
    unsupported = {"f": lambda: 0}
    with pytest.raises(CheckpointError, match="cannot checkpoint a state node of type"):
        checkpoint.save(tmp_path / "u", learner, unsupported)


def test_an_edited_key_implementation_is_a_checkpoint_error(tmp_path):
    """A checkpoint whose PRNG key implementation name was edited (an unknown one, or one whose
    key data has another shape) is refused with `CheckpointError`, not JAX's raw error."""
    learner = js.StreamLearner(None, None, None, None, None, dict(learner="toy"))
    checkpoint.save(tmp_path / "k", learner, {"key": jax.random.key(3)})
    manifest = checkpoint.read_manifest(tmp_path / "k")
    with np.load(tmp_path / "k", allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    for impl in ("no_such_prng", "rbg"):  # rbg keys are 4 words, threefry's 2
        manifest["leaves"][0]["impl"] = impl
        arrays["__manifest__"] = np.frombuffer(json.dumps(manifest).encode(), np.uint8)
        with open(tmp_path / "edited", "wb") as f:
            np.savez(f, **arrays)
        with pytest.raises(CheckpointError, match="PRNG key of implementation"):
            checkpoint.load(tmp_path / "edited", learner)


def test_weak_type_is_restored(tmp_path):
    learner = js.StreamLearner(None, None, None, None, None, dict(learner="toy"))
    state = (jnp.asarray(1.5), jnp.float32(2.0))
    assert state[0].weak_type and not state[1].weak_type
    checkpoint.save(tmp_path / "w", learner, state)
    out, _ = checkpoint.load(tmp_path / "w", learner)
    assert out[0].weak_type and not out[1].weak_type


def test_batched_states_round_trip(tmp_path):
    learner = _configured(js.pacbo(4, 32, 10), "pacbo")
    xs = np.stack([_stream(np.float32)[:N_INIT] + i for i in range(3)])
    states = js.init_streams(learner, jax.random.split(jax.random.key(0), 3), xs)
    checkpoint.save(tmp_path / "b", learner, states)
    out, _ = checkpoint.load(tmp_path / "b", learner)
    chex.assert_trees_all_equal(out, states)


def test_failed_write_keeps_the_previous_checkpoint(slpc_saved, tmp_path, monkeypatch):
    learner, state, path = slpc_saved
    target = tmp_path / "atomic.ckpt"
    checkpoint.save(target, learner, state, metadata={"v": 1})

    def broken_savez(f, **arrays):
        f.write(b"PK\x03\x04partial")
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint.np, "savez", broken_savez)
    with pytest.raises(OSError, match="disk full"):
        checkpoint.save(target, learner, state, metadata={"v": 2})
    monkeypatch.undo()
    assert checkpoint.load(target, learner)[1] == {"v": 1}
    assert os.listdir(tmp_path) == ["atomic.ckpt"]
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(target).st_mode & 0o777 == 0o666 & ~umask


_WRITER = textwrap.dedent("""
    import sys, jax.numpy as jnp, numpy as np
    from jaxstream import StreamLearner, checkpoint
    learner = StreamLearner(None, None, None, None, None, dict(learner="toy"))
    big = np.random.default_rng(0).standard_normal((256, 1024)).astype(np.float32)  # 1 MiB
    i = 0
    while True:
        checkpoint.save(sys.argv[1], learner, {"x": jnp.asarray(big + i), "i": jnp.int32(i)},
                        metadata={"i": i})
        i += 1
""")


def test_kill_mid_save_leaves_a_valid_checkpoint(tmp_path):
    """SIGKILL a process that saves in a loop: the file is always complete."""
    path = tmp_path / "loop.ckpt"
    learner = js.StreamLearner(None, None, None, None, None, dict(learner="toy"))
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], env=env)
    try:
        deadline = time.time() + 60
        while not path.exists() and time.time() < deadline:
            time.sleep(0.05)
        assert path.exists(), "the writer never saved"
        seen = set()
        deadline = time.time() + 60
        while (len(seen) < 3 or time.time() < deadline - 59.5) and time.time() < deadline:
            state, meta = checkpoint.load(path, learner)  # read while it is being replaced
            assert int(state["i"]) == meta["i"]
            seen.add(meta["i"])
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    state, meta = checkpoint.load(path, learner)
    base = np.random.default_rng(0).standard_normal((256, 1024)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(state["x"]), base + meta["i"])
    assert len(seen) > 1, "the writer was not saving while the test read"


@pytest.mark.parametrize("edit", ["no leaves", "no tree", "leaves cut short", "leaves not a list"])
def test_an_edited_manifest_is_a_checkpoint_error(tmp_path, edit):
    """A manifest edited by hand (a key removed, a list cut short, a wrong type) is refused with
    `CheckpointError`, not a bare KeyError or IndexError."""
    learner = js.StreamLearner(None, None, None, None, None, dict(learner="toy"))
    checkpoint.save(tmp_path / "k", learner, {"a": jnp.arange(3.0), "b": jnp.ones(2)})
    manifest = checkpoint.read_manifest(tmp_path / "k")
    with np.load(tmp_path / "k", allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    if edit == "no leaves":
        del manifest["leaves"]
    elif edit == "no tree":
        del manifest["tree"]
    elif edit == "leaves cut short":
        manifest["leaves"] = manifest["leaves"][:1]
    else:
        manifest["leaves"] = 3
    arrays["__manifest__"] = np.frombuffer(json.dumps(manifest).encode(), np.uint8)
    with open(tmp_path / "edited", "wb") as f:
        np.savez(f, **arrays)
    with pytest.raises(CheckpointError, match="manifest is corrupt|structure"):
        checkpoint.load(tmp_path / "edited", learner)


def _rewrite(src, dst, edit_arrays=None, edit_manifest=None):
    """Copy checkpoint ``src`` to ``dst`` as a user would edit it: load every array, change some
    (``edit_arrays(arrays)``) and the manifest (``edit_manifest(manifest)``), ``np.savez`` again."""
    manifest = checkpoint.read_manifest(src)
    with np.load(src, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    if edit_arrays:
        edit_arrays(arrays)
    if edit_manifest:
        edit_manifest(manifest)
    arrays["__manifest__"] = np.frombuffer(json.dumps(manifest).encode(), np.uint8)
    with open(dst, "wb") as f:
        np.savez(f, **arrays)


@pytest.mark.parametrize("value", [np.nan, np.inf, 0.5])
def test_an_array_edited_after_the_save_is_refused(slpc_saved, tmp_path, value):
    """A state array (or an extra array) whose values were changed after the save, a NaN, an inf or
    a finite number, is a `CheckpointError` naming the array, not a state that runs on silently."""
    learner, state, path = slpc_saved
    checkpoint.save(tmp_path / "ok", learner, state, arrays={"losses": np.arange(4.0)})
    checkpoint.load_with_arrays(tmp_path / "ok", learner)
    i = next(i for i, leaf in enumerate(jax.tree_util.tree_leaves(state))
             if jnp.issubdtype(leaf.dtype, jnp.floating) and leaf.size > 1)

    def poke(name):
        def edit(arrays):
            a = arrays[name].copy()
            a.flat[0] = value
            arrays[name] = a
        return edit

    _rewrite(tmp_path / "ok", tmp_path / "leaf", poke(f"leaf_{i:05d}"))
    with pytest.raises(CheckpointError, match=f"array {i} differs from what was saved"):
        checkpoint.load(tmp_path / "leaf", learner)
    _rewrite(tmp_path / "ok", tmp_path / "extra", poke("array_losses"))
    with pytest.raises(CheckpointError, match="extra array 'losses' differs from what was saved"):
        checkpoint.load_with_arrays(tmp_path / "extra", learner)


def test_a_checkpoint_without_checksums_still_loads(slpc_saved, tmp_path):
    """Checkpoints written before the manifest recorded checksums load as before (unchecked)."""
    learner, state, path = slpc_saved
    _rewrite(path, tmp_path / "old", edit_manifest=lambda m: m.pop("digests"))
    got, meta = checkpoint.load(tmp_path / "old", learner)
    chex.assert_trees_all_equal(got, state)
    assert meta == {"note": "x"}
