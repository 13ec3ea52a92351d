"""PACBO's tracking (`jaxstream.clustering.forgetting.track_moved`): a moving cluster's points follow it."""
import json

import numpy as np
import pytest
import jax
import jax.numpy as jnp

import jaxstream
from jaxstream import checkpoint
from jaxstream.clustering import forgetting as F
from jaxstream._stats import chi2_upper
from jaxstream.datasets import make_drifting_clusters_stream

from test_pacbo_forgetting import _reference, _scene


def _track_reference(history, velocity, mask, index, centers, k, m, noise_var, level, born=None):
    """track_moved in float64, cluster by cluster, from the module docstring's definitions; the drift
    test's own outputs (stat, trail, trail_row, assign) from test_pacbo_forgetting's reference."""
    d = history.shape[1]
    thr, tq = float(chi2_upper(d, level)), float(chi2_upper(d, 1e-3))
    stat, trail, _, assign, trail_row = _reference(history, mask, index, centers, k, m, noise_var, thr, tq)
    x = np.asarray(history, np.float64).copy()
    v = np.asarray(velocity, np.float64).copy()
    now = index[mask].max()
    t = (index - now).astype(np.float64)
    keep = mask.copy()
    for j in range(k):
        rows = mask & (assign == j)
        sr = rows & (index <= now - 4)
        if sr.sum() >= 2 and stat[j] > thr:
            # Candidate lines: straight, and hinged at the q-th newest settled row (q = 12, 24, 48) where
            # the cluster has 2q settled rows; the one that explains most wins (the first on a tie).
            newest_first = np.sort(index[sr])[::-1]
            best = None
            for q in (None, 12, 24, 48):
                if q is not None and sr.sum() < 2 * q:
                    continue
                cut = -np.inf if q is None else float(newest_first[q - 1] - now)
                u = np.maximum(t, cut)
                uc, yc = u[sr] - u[sr].mean(), x[sr] - x[sr].mean(0)
                s_uu = uc @ uc
                s_uy = uc @ yc
                expl = s_uy @ s_uy / s_uu
                resid = ((yc ** 2).sum() - expl) / (d * max(sr.sum() - 2, 1))
                if best is None or expl > best[0]:
                    best = (expl, s_uy / s_uu, expl / resid, -cut, (u[rows] - u[sr].mean()) ** 2 / s_uu <= 16.0)
            _, b, z, tau, reach = best
            slope = b * max(0.0, 1.0 - thr / z)
            ri = np.flatnonzero(rows)
            fix = reach & (now - index[ri] <= tau)          # after a turn, the points older than the cut go
            x[ri[fix]] += slope * (now - index[ri[fix]])[:, None]
            v[ri[fix]] += slope
            keep[ri[~fix]] = False
        if trail[j]:
            keep[rows] = False
    keep &= ~trail_row
    out_v = np.zeros_like(v)
    for j in range(k):
        rows = keep & (assign == j)
        older = rows & (index < now)
        mean_v = v[older].mean(0) if older.any() else np.zeros(d)
        if born is not None and born[j] and rows.any() and now - index[rows].min() <= 16:
            mean_v = np.zeros(d)       # a new centre over points of the last 16 rounds: a new group, standing
        out_v[rows] = mean_v
        idx_j = index[mask & (assign == j)]
        stale = False
        if len(idx_j):
            gap = (idx_j.max() - idx_j.min()) / max(len(idx_j) - 1, 1)
            stale = (now - idx_j.max()) > 4 * gap + 1
        if stale and rows.any():
            # Lost: |v|·min(rounds since its last kept point, its kept points' span) beyond the trail tolerance.
            since, span = now - index[rows].max(), index[rows].max() - index[rows].min()
            if mean_v @ mean_v * min(since, span) ** 2 > tq * noise_var:
                keep[rows] = False
                out_v[rows] = 0.0
                continue
        if rows.any() and not stale:
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


def _turned_group(seed, turn=72, now=120, H=160):
    """One group that moved +0.05 a round along x until round `turn`, then +0.05 along y (noise sd 1),
    one point a round; tracked as if it had kept the old velocity: every point carries (0.05, 0) and
    stands where that velocity took it by round `now` (the newest row, the round's point, not yet)."""
    rng = np.random.default_rng(seed)
    s = np.arange(1, now + 1)
    path = lambda r: np.c_[0.05 * np.minimum(r, turn), 0.05 * np.maximum(r - turn, 0)]
    tracked = path(s) + rng.standard_normal((now, 2)) + 0.05 * np.c_[now - s, 0 * s]
    history = np.zeros((H, 2)); history[:now] = tracked
    velocity = np.zeros((H, 2)); velocity[:now - 1] = (0.05, 0.0)
    index = np.zeros(H, np.int32); index[:now] = s
    centers = np.zeros((4, 2)); centers[0] = tracked.mean(0)
    return history, velocity, np.arange(H) < now, index, centers, path(np.array([now + 1]))[0]


@pytest.mark.parametrize("seed", range(3))
def test_a_turn_is_read_from_the_newest_points(seed, monkeypatch):
    """48 rounds after a turn the straight line through the cluster's points reads a slope halfway
    between the two velocities and moves every point by slope·age; the hinge reads the new velocity
    from the points after the turn, keeps those (the older ones go) and brings them to where the group is."""
    history, velocity, mask, index, centers, target = _turned_group(seed)

    def track():
        m, h, v, fired = F.track_moved(jnp.asarray(history), jnp.asarray(velocity), jnp.asarray(mask),
                                       jnp.asarray(index), jnp.asarray(centers), 1, 3e-3, 6, 1.0)
        m = np.asarray(m)
        assert bool(fired[0])
        return m, np.asarray(h)[m], np.asarray(v)[m][0]

    m, h, v = track()
    monkeypatch.setattr(F, "_HINGES", ())
    m_line, h_line, v_line = track()
    assert m_line.sum() == 120                                  # the straight line reaches every point
    # The hinge keeps the points no older than its cut (12, 24 or 48 settled rows back, + 4 unsettled).
    assert m.sum() in (12 + 4, 24 + 4, 48 + 4) and np.all(index[m] > index[mask].max() - m.sum())
    msd = lambda y: ((y - target) ** 2).sum(1).mean()
    assert msd(h) < 0.6 * msd(h_line), (msd(h), msd(h_line))
    assert v[1] > 0.03 and abs(v[0]) < 0.02, v                  # nearer the new velocity, (0, 0.05)
    assert v_line[1] < 0.02 and v_line[0] > 0.03, v_line       # the straight line: still mostly the old one
    off = lambda y: np.linalg.norm(y.mean(0) - target)
    assert off(h) < 0.5 * off(h_line), (off(h), off(h_line))


def test_track_moved_check_grads_with_padding_masks_and_coincident_points():
    """Tracking is on the default path, so the moved positions and velocities must be differentiable in
    the stored ones: check_grads (forward and reverse, float64) on a turned group that fires (the hinge
    and the shrink on the path), with 28 free rows (mask False), two coincident rows and a second
    cluster of two rows (residual variance 0: a statistic of explained/tiny)."""
    from jax.test_util import check_grads
    history, velocity, mask, index, centers, _ = _turned_group(0, H=150)
    history[10] = history[11]
    history[120:122] = (50.0, 50.0), (50.5, 49.5)
    index[120:122], mask[120:122] = (60, 61), True
    centers[1] = (50.25, 49.75)
    with jax.enable_x64(True):
        def f(h, v):
            _, h2, v2, fired = F.track_moved(h, v, jnp.asarray(mask), jnp.asarray(index), jnp.asarray(centers),
                                             2, 3e-3, 6, 1.0)
            return h2, v2
        h0, v0 = jnp.asarray(history, jnp.float64), jnp.asarray(velocity, jnp.float64)
        fired = F.track_moved(h0, v0, jnp.asarray(mask), jnp.asarray(index), jnp.asarray(centers), 2, 3e-3, 6, 1.0)[3]
        assert bool(fired[0]) and not bool(fired[1])
        g = jax.grad(lambda h: sum(jnp.sum(o ** 2) for o in f(h, v0)))(h0)
        assert bool(jnp.all(jnp.isfinite(g)))
        check_grads(f, (h0, v0), order=1, modes=["fwd", "rev"], atol=1e-4, rtol=1e-4)


def test_a_stale_cluster_whose_points_moved_is_lost_and_a_standing_one_kept():
    """Three clusters that stopped receiving points 100+ rounds ago, each of 20 points: one never moved,
    one moved at 0.1 a round over a 40-round span (a remnant of a group that went elsewhere), one at 0.1
    a round over a 10-round span (|v|·span below the trail tolerance: a false alarm on a short burst).
    Only the remnant goes; a fourth, live cluster keeps sending."""
    rng = np.random.default_rng(0)
    groups = [((-20.0, 0.0), np.linspace(1, 58, 20).astype(int), 0.0),
              ((20.0, 0.0), np.linspace(10, 50, 20).astype(int), 0.1),
              ((0.0, 20.0), np.arange(60, 70, 0.5).astype(int), 0.1),
              ((0.0, -20.0), np.arange(100, 200, 2), 0.0)]
    H = 128
    history, velocity = np.zeros((H, 2)), np.zeros((H, 2))
    index, mask, centers = np.zeros(H, np.int32), np.zeros(H, bool), np.zeros((6, 2))
    i = 0
    for j, (c, t, speed) in enumerate(groups):
        n = len(t)
        history[i:i + n] = np.asarray(c) + 0.5 * rng.standard_normal((n, 2))
        velocity[i:i + n] = (speed, 0.0)
        index[i:i + n], mask[i:i + n] = t, True
        centers[j] = c
        i += n
    velocity[index == 198] = 0.0
    m, h, v, fired = F.track_moved(jnp.asarray(history), jnp.asarray(velocity), jnp.asarray(mask),
                                   jnp.asarray(index), jnp.asarray(centers), 4, 3e-3, 6, 0.25)
    m = np.asarray(m)
    kept = [m[:i][j * 20:(j + 1) * 20].all() if j < 3 else m[60:i].all() for j in range(4)]
    assert kept == [True, False, True, True]
    assert bool(fired[1]) and not bool(fired[0]) and not bool(fired[2])
    keep, x, vv = _track_reference(history, velocity, mask, index, centers, 4, 6, 0.25, 3e-3)
    np.testing.assert_array_equal(m, keep)
    # A stale cluster stops moving: the kept burst stands where it was.
    np.testing.assert_array_equal(np.asarray(h)[40:60], history[40:60].astype(np.float32))


def test_a_new_group_born_in_a_moving_cluster_stands_and_a_re_split_keeps_its_velocity():
    """Every row carries (0.1, 0), the velocity of the moving cluster it was in. Centres 1 and 2 are born
    this round: centre 1 over 4 points of the last 12 rounds and the round's point (a new group whose
    first points landed in the moving cluster) starts standing; centre 2 over points of the last 89
    rounds (a moving group re-split) keeps the velocity; so does the old centre 0. With born=None every
    cluster keeps it. Both against the NumPy reference."""
    rng = np.random.default_rng(1)
    parts = [((0.0, 0.0), np.arange(39, 100, 3)), ((0.0, 10.0), np.array([88, 91, 94, 97, 100])),
             ((10.0, 0.0), np.arange(11, 100, 3))]
    H = 96
    history, velocity = np.zeros((H, 2)), np.zeros((H, 2))
    index, mask, centers = np.zeros(H, np.int32), np.zeros(H, bool), np.zeros((5, 2))
    rows = []
    i = 0
    for j, (c, t) in enumerate(parts):
        n = len(t)
        history[i:i + n] = np.asarray(c) + 0.3 * rng.standard_normal((n, 2))
        velocity[i:i + n] = (0.1, 0.0)
        index[i:i + n], mask[i:i + n], centers[j] = t, True, c
        rows.append(np.arange(i, i + n))
        i += n
    velocity[index == 100] = 0.0                                           # the round's point
    born = np.array([False, True, True, False, False])
    for b in (born, None):
        m, h, v, _ = F.track_moved(jnp.asarray(history), jnp.asarray(velocity), jnp.asarray(mask),
                                   jnp.asarray(index), jnp.asarray(centers), 3, 3e-3, 6, 0.09,
                                   None if b is None else jnp.asarray(b))
        m, v = np.asarray(m), np.asarray(v)
        keep, x, vv = _track_reference(history, velocity, mask, index, centers, 3, 6, 0.09, 3e-3, b)
        np.testing.assert_array_equal(m, keep)
        np.testing.assert_allclose(v[keep], vv[keep], atol=1e-5)
        np.testing.assert_allclose(np.asarray(h)[keep], x[keep], atol=1e-4)
        assert m[:i].all()
        moving = np.tile([0.1, 0.0], (H, 1))
        np.testing.assert_allclose(v[rows[1]], 0.0 if b is not None else moving[rows[1]], atol=1e-6)
        np.testing.assert_allclose(v[rows[0]], moving[rows[0]], atol=1e-6)
        np.testing.assert_allclose(v[rows[2]], moving[rows[2]], atol=1e-6)


def test_update_starts_a_new_centre_standing_when_its_points_took_a_neighbours_velocity():
    """The learner's wiring of `born`: one group A tracked as moving ((0.1, 0) on every row), and the first
    three points of a group B, 12 units away, that landed in A's cluster and took its velocity. The fourth
    B point arrives: the round adds B's centre, and B's points start standing while A's keep moving."""
    lr = jaxstream.pacbo(6, 64, 200, tracking=True)
    rng = np.random.default_rng(0)
    a_pts = rng.normal(0.0, 1.0, (30, 2)).astype(np.float32)
    b_pts = (np.array([12.0, 0.0]) + rng.normal(0.0, 1.0, (4, 2))).astype(np.float32)
    s, _ = jaxstream.run_stream(lr, jax.random.key(0), a_pts, lr.init(jax.random.key(1), a_pts[:0]), trace=None)
    n = int(s.n_stored)
    s = s._replace(centers=s.centers.at[0].set(a_pts.mean(0)), n_clusters=jnp.int32(1),
                   ids=jnp.where(jnp.arange(6) == 0, s.ids[0], -1).astype(jnp.int32), history=s.history.at[n:n + 3].set(b_pts[:3]),
                   history_index=s.history_index.at[n:n + 3].set(jnp.arange(31, 34, dtype=jnp.int32)),
                   history_mask=s.history_mask.at[n:n + 3].set(True),
                   history_velocity=jnp.where(jnp.arange(64)[:, None] < n + 3, jnp.float32([0.1, 0.0]), 0.0),
                   n_stored=jnp.int32(n + 3), n_seen=jnp.int32(33), n_remembered=jnp.int32(n + 3))
    s2, info = lr.update(jax.random.key(2), s, jnp.asarray(b_pts[3]))
    assert int(s2.n_clusters) == 2
    m, idx, v = np.asarray(s2.history_mask), np.asarray(s2.history_index), np.asarray(s2.history_velocity)
    b_rows = m & (idx > 30)
    assert b_rows.sum() == 4
    np.testing.assert_array_equal(v[b_rows], 0.0)
    np.testing.assert_allclose(v[m & (idx <= 30)], np.tile([0.1, 0.0], ((m & (idx <= 30)).sum(), 1)), atol=1e-6)


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
    assert jaxstream.pacbo(10, 16, 8).config.tracking is True                       # the default (0.4.5)
    assert jaxstream.pacbo(10, 16, 8, preset="paper").config.tracking is False      # the paper forgets nothing
    assert jaxstream.pacbo(10, 16, 8, preset="paper", tracking=True).config.tracking is True
    assert jaxstream.PACBO(max_clusters=10, history_size=16, n_steps=8).learner.config.tracking is True
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
    # A run under the old default (tracking=False) resumes under tracking=False; the new default's
    # learner is refused with a message that says so.
    old_lr = jaxstream.pacbo(10, 16, 8, tracking=False)
    s_old, _ = jaxstream.run_stream(old_lr, jax.random.key(1), x, old_lr.init(jax.random.key(0), x[:0]))
    checkpoint.save(tmp_path / "old.ckpt", old_lr, s_old)
    with pytest.raises(checkpoint.CheckpointError, match="build the learner with tracking=False"):
        checkpoint.load(tmp_path / "old.ckpt", jaxstream.pacbo(10, 16, 8))
    back, _ = checkpoint.load(tmp_path / "old.ckpt", jaxstream.pacbo(10, 16, 8, tracking=False))
    np.testing.assert_array_equal(np.asarray(back.history), np.asarray(s_old.history))
