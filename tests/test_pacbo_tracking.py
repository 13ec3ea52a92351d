"""PACBO's tracking (`jaxstream.clustering.forgetting.track_moved`): a moving cluster's points follow it."""
import json

import numpy as np
import pytest
import jax
import jax.numpy as jnp

import jaxstream
from jaxstream import checkpoint
from jaxstream.clustering import forgetting as F
from jaxstream.datasets import make_drifting_clusters_stream

from test_pacbo_forgetting import _reference, _scene


def _track_reference(history, velocity, mask, index, centers, k, m, noise_var, level):
    """track_moved in float64, cluster by cluster, from the module docstring's definitions; the drift
    test's own outputs (stat, trail, trail_row, assign) from test_pacbo_forgetting's reference."""
    d = history.shape[1]
    thr, tq = float(F.chi2_quantile(level, d)), float(F.chi2_quantile(1e-3, d))
    stat, trail, _, assign, trail_row = _reference(history, mask, index, centers, k, m, noise_var, thr, tq)
    x = np.asarray(history, np.float64).copy()
    v = np.asarray(velocity, np.float64).copy()
    now = index[mask].max()
    t = (index - now).astype(np.float64)
    t = np.where(mask, t - t[mask].mean(), 0.0)
    keep = mask.copy()
    slope = np.zeros((k, d))
    for j in range(k):
        rows = mask & (assign == j)
        sr = rows & (index <= now - 4)
        if sr.sum() >= 2 and stat[j] > thr:
            tc = t[sr] - t[sr].mean()
            b = tc @ (x[sr] - x[sr].mean(0)) / (tc @ tc)
            slope[j] = b * max(0.0, 1.0 - thr / stat[j])
            s_tt = tc @ tc
            reach = (t[rows] - t[sr].mean()) ** 2 / s_tt <= 16.0
            ri = np.flatnonzero(rows)
            x[ri[reach]] += slope[j] * (now - index[ri[reach]])[:, None]
            v[ri[reach]] += slope[j]
            keep[ri[~reach]] = False
        if trail[j]:
            keep[rows] = False
    keep &= ~trail_row
    out_v = np.zeros_like(v)
    for j in range(k):
        rows = keep & (assign == j)
        older = rows & (index < now)
        mean_v = v[older].mean(0) if older.any() else np.zeros(d)
        out_v[rows] = mean_v
        n = rows.sum() + 0
        idx_j = index[mask & (assign == j)]
        if len(idx_j):
            gap = (idx_j.max() - idx_j.min()) / max(len(idx_j) - 1, 1)
            stale = (now - idx_j.max()) > 4 * gap + 1
        else:
            stale = False
        if n and not stale:
            x[rows] += mean_v
    return keep, x, out_v


@pytest.mark.parametrize("seed", range(3))
def test_track_moved_against_numpy_reference(seed):
    history, mask, index, centers, k = _scene(seed)
    rng = np.random.default_rng(seed)
    # Rows may already carry velocities (from earlier rounds): the newest row, the round's point, has none.
    velocity = np.where(mask[:, None], rng.normal(0, 0.01, history.shape), 0.0)
    velocity[index == index[mask].max()] = 0.0
    m, nv, level = 6, 0.25, 3e-3
    got = jax.jit(F.track_moved, static_argnums=7)(
        jnp.asarray(history, jnp.float32), jnp.asarray(velocity, jnp.float32), jnp.asarray(mask), jnp.asarray(index),
        jnp.asarray(centers, jnp.float32), jnp.int32(k), jnp.float32(level), m, jnp.float32(nv))
    keep, x, v = _track_reference(history, velocity, mask, index, centers, k, m, nv, level)
    np.testing.assert_array_equal(np.asarray(got[0]), keep)
    np.testing.assert_allclose(np.asarray(got[1])[keep], x[keep], rtol=1e-4, atol=2e-4)
    np.testing.assert_allclose(np.asarray(got[2])[keep], v[keep], rtol=1e-3, atol=1e-5)
    # What the scene shows: the moving group (rows 100..198, +0.1 a round) now moves at about +0.1;
    # the group that stopped long ago keeps every point where it was; the trail is gone.
    moving = keep & (index >= 100)
    assert np.all(np.abs(v[moving, 0] - 0.1) < 0.03) and np.all(np.abs(v[moving, 1]) < 0.03)
    stopped = mask & (index <= 20)
    assert keep[stopped].all()
    np.testing.assert_array_equal(np.asarray(got[1])[stopped], history[stopped].astype(np.float32))
    assert not keep[mask & (index >= 22) & (index <= 50)].any()


def test_a_group_moving_at_constant_velocity_stands_still_after_one_correction():
    """Rows of one group moving +0.1 a round along x: after track_moved their positions, regressed on
    arrival time, have no trend left, and their mean is the group's position at the next round."""
    rng = np.random.default_rng(0)
    H, d = 64, 2
    t = np.arange(1, 61)
    u = np.array([0.1, -0.05])
    x = t[:, None] * u + 0.3 * rng.standard_normal((60, d))
    history = np.zeros((H, d)); history[:60] = x
    index = np.zeros(H, np.int32); index[:60] = t
    mask = np.arange(H) < 60
    centers = np.zeros((4, d)); centers[0] = x.mean(0)
    mask_out, h, v, fired = F.track_moved(jnp.asarray(history), jnp.zeros((H, d)), jnp.asarray(mask),
                                          jnp.asarray(index), jnp.asarray(centers), 1, 3e-3, 6, 0.09)
    h, v = np.asarray(h)[:60], np.asarray(v)[:60]
    assert bool(fired[0]) and np.asarray(mask_out)[:60].all()
    # The velocity: the slope, shrunk by (1 − threshold/z) with z in the hundreds here.
    np.testing.assert_allclose(v[0], u, atol=0.01)
    assert np.ptp(v, axis=0).max() == 0.0                                    # one velocity per cluster
    slope = np.polyfit(t.astype(float), h, 1)[0]
    assert np.abs(slope).max() < 0.01, slope
    np.testing.assert_allclose(h.mean(0), 61 * u, atol=0.15)


def test_level_zero_with_tracking_is_the_plain_reservoir():
    x = make_drifting_clusters_stream(80, seed=2).astype(np.float32)
    out = []
    for tracking in (True, False):
        lr = jaxstream.pacbo(10, 32, 20, drift_level=0.0, tracking=tracking)
        s = lr.init(jax.random.key(0), x[:0])
        s, loss = jaxstream.run_stream(lr, jax.random.key(1), x, s, trace=lambda s_, x_, i: i.loss)
        out.append((s, loss))
    (a, la), (b, lb) = out
    np.testing.assert_array_equal(np.asarray(la), np.asarray(lb))
    for name in ("centers", "n_clusters", "history", "history_mask", "n_remembered"):
        np.testing.assert_array_equal(np.asarray(getattr(a, name)), np.asarray(getattr(b, name)), err_msg=name)
    assert not np.any(np.asarray(a.history_velocity))


def test_tracking_beats_keeping_the_newest_on_drifting_groups():
    """Four drifting groups (T = 400), 6 streams × 1 key, n_steps 100: following the groups' points
    predicts better on average than keeping each moving cluster's 6 newest (held-out benchmark:
    0.85× against 1.06× the last-10 oracle), and ends at k̂ = 4 at least as often."""
    xs = np.stack([make_drifting_clusters_stream(400, seed=s) for s in range(6)]).astype(np.float32)
    res = {}
    for tracking in (True, False):
        lr = jaxstream.pacbo(20, 256, 100, tracking=tracking)

        def run(x, lr=lr):
            s = lr.init(jax.random.key(0), x[:0])
            s, tr = jaxstream.run_stream(lr, jax.random.key(7), x, s, trace=lambda s_, x_, i: i.loss)
            return jnp.sum(tr[1:]), s.n_clusters

        res[tracking] = tuple(map(np.asarray, jax.jit(jax.vmap(run))(xs)))
    loss_t, k_t = res[True]
    loss_f, k_f = res[False]
    assert loss_t.mean() < 0.95 * loss_f.mean(), (loss_t, loss_f)
    assert np.sum(k_t == 4) >= np.sum(k_f == 4), (k_t, k_f)


def test_tracking_is_checked_and_an_old_checkpoint_loads_with_its_points_standing(tmp_path):
    with pytest.raises(TypeError, match="tracking"):
        jaxstream.pacbo(10, 16, 8, tracking="yes")
    assert jaxstream.pacbo(10, 16, 8).config.tracking is False
    m = jaxstream.PACBO(max_clusters=10, history_size=16, n_steps=8, tracking=True)
    assert m.get_params()["tracking"] is True and m.learner.config.tracking is True
    lr = jaxstream.pacbo(10, 16, 8, tracking=True)
    x = make_drifting_clusters_stream(30, seed=0).astype(np.float32)
    s, _ = jaxstream.run_stream(lr, jax.random.key(1), x, lr.init(jax.random.key(0), x[:0]))
    # A state as 0.4.x wrote it: no history_velocity in the manifest, no tracking in the config.
    leaves, specs = [], []
    desc = checkpoint._encode_tree(s, leaves, specs)
    i = desc["fields"].index("history_velocity")
    old = dict(desc, fields=desc["fields"][:i] + desc["fields"][i + 1:], c=desc["c"][:i] + desc["c"][i + 1:])
    filled = []
    back = checkpoint._decode_tree(json.loads(json.dumps(old)), leaves, filled)
    assert filled == ["jaxstream.clustering.types:State.history_velocity"]
    np.testing.assert_array_equal(np.asarray(back.history_velocity), np.zeros_like(np.asarray(s.history)))
    np.testing.assert_array_equal(np.asarray(back.history), np.asarray(s.history))
    # An unknown missing field is still refused.
    bad = dict(desc, fields=desc["fields"][1:], c=desc["c"][1:])
    with pytest.raises(checkpoint.CheckpointError, match="fields"):
        checkpoint._decode_tree(bad, leaves)
    assert checkpoint.ADDED_CONFIG_KEYS["pacbo"]["tracking"] is False
