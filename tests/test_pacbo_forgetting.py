"""PACBO's forgetting (`jaxstream.clustering.forgetting`): the tests against a NumPy reference, what
fires and what does not, the reservoir's bookkeeping, and the learner on moving and stopped groups."""
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxstream
from jaxstream.clustering import forgetting as F
from jaxstream._stats import chi2_lower_wh, chi2_upper, normal_ppf
from jaxstream.clustering import pacbo as P
from jaxstream.datasets import make_drifting_clusters_stream

SETTLE, LINE_CAP, REACH, CONTINUITY = F._SETTLE, F._LINE_CAP, F._REACH, 1.3


def test_chi2_upper_against_scipy():
    """Against scipy's quantile (float32 precision); tail 0 is +inf (never fires)."""
    stats = pytest.importorskip("scipy.stats")
    for d in (1, 2, 3, 5, 10):
        for level in (1e-2, 3e-3, 1e-3, 1e-4):
            got = float(chi2_upper(d, level))
            want = stats.chi2.isf(level, d)
            assert got == pytest.approx(want, rel=1e-4), (d, level)
    assert float(chi2_upper(2, 0.0)) == math.inf


def test_chi2_lower_wh_is_wilson_hilferty_and_exact_for_one_degree():
    """slpc's static quantile: exact for df = 1 (scipy), Wilson–Hilferty's closed form otherwise
    (within 2 % of the exact median for df ≥ 2), and the normal quantile it is built on."""
    stats = pytest.importorskip("scipy.stats")
    assert normal_ppf(0.975) == pytest.approx(stats.norm.ppf(0.975), rel=1e-9)
    assert chi2_lower_wh(1, 0.5) == pytest.approx(stats.chi2.ppf(0.5, 1), rel=1e-9)
    for df in (2, 3, 5, 10):
        wh = df * (1 - 2 / (9 * df)) ** 3  # z(0.5) = 0
        assert chi2_lower_wh(df, 0.5) == pytest.approx(wh, abs=1e-9)
        assert chi2_lower_wh(df, 0.5) == pytest.approx(stats.chi2.ppf(0.5, df), rel=0.02)


def _reference(history, mask, index, centers, k, m, noise_var, threshold, trail_q):
    """drift_statistics, point by point in float64 (module docstring's definitions)."""
    H, d = history.shape
    p = centers.shape[0]
    x = np.asarray(history, np.float64)
    c = np.asarray(centers, np.float64)[:k]
    assign = np.argmin(((x[:, None] - c[None]) ** 2).sum(-1), axis=1)
    now = index[mask].max()
    stat = np.zeros(p); trail = np.zeros(p, bool); old = np.zeros(H, bool)
    lines, stale, moving = {}, {}, {}

    def fit(rows):
        t = index[rows].astype(np.float64); y = x[rows]
        tb, yb = t.mean(), y.mean(0)
        stt = ((t - tb) ** 2).sum(); sty = ((t - tb)[:, None] * (y - yb)).sum(0)
        syy = ((y - yb) ** 2).sum()
        expl = (sty ** 2).sum() / stt if stt > 0 else 0.0
        return dict(n=len(rows), tb=tb, yb=yb, stt=stt, beta=sty / stt if stt > 0 else 0 * sty,
                    expl=expl, resid=max(syy - expl, 0.0) / (d * max(len(rows) - 2, 1)))

    for j in range(k):
        rows = np.flatnonzero(mask & (assign == j))
        if len(rows) == 0:
            stale[j] = False; moving[j] = False
            continue
        order = rows[np.argsort(index[rows])]
        if len(order) >= m:
            cut = index[order[-m]]
            old[order[index[order] < cut]] = True
        lines[j] = fit(rows)
        n = len(rows)
        srt = np.sort(index[rows])
        gap = (srt[-1] - srt[0]) / max(n - 1, 1)
        stale[j] = (now - srt[-1]) > 4 * gap + 1
        steady = (np.diff(srt).max() if n > 1 else 0) <= (2 + math.log(n)) * gap + 1
        settled = rows[index[rows] <= now - SETTLE]
        if len(settled) >= 2 * m:
            s = fit(settled)
            if s["resid"] <= CONTINUITY * noise_var and steady:
                stat[j] = s["expl"] / s["resid"]
        moving[j] = (not stale[j]) and stat[j] > threshold
    for i in lines:
        if not stale[i] or lines[i]["n"] < 2:
            continue
        for j in lines:
            if not moving[j]:
                continue
            a, b = lines[i], lines[j]
            dt = a["tb"] - b["tb"]
            err2 = ((b["yb"] + dt * b["beta"] - a["yb"]) ** 2).sum()
            se2 = noise_var * (1 / a["n"] + 1 / b["n"] + min(dt ** 2 / b["stt"], LINE_CAP))
            if err2 <= trail_q * se2 and dt ** 2 / b["stt"] <= REACH:
                trail[i] = True
    # Rows a moving cluster left behind in other clusters.
    trail_row = np.zeros(H, bool)
    t_all = index.astype(np.float64)
    for j in lines:
        if not moving[j]:
            continue
        b = lines[j]
        rows_j = np.flatnonzero(mask & (assign == j))
        first_recent = np.sort(index[rows_j])[-m:].min()
        for r in np.flatnonzero(mask & (assign != j) & (index < first_recent)):
            dt = t_all[r] - b["tb"]
            if dt ** 2 / b["stt"] > REACH:
                continue
            e2 = ((x[r] - b["yb"] - dt * b["beta"]) ** 2).sum()
            if e2 <= trail_q * noise_var * (1 + 1 / b["n"] + min(dt ** 2 / b["stt"], LINE_CAP)):
                trail_row[r] = True
    return stat, trail, old, assign, trail_row


def _scene(seed, moving=True, stopped=True, trail=True, H=128):
    """A history with (a) a group moving +0.1 per round along x, arriving every other round up to now,
    (b) a group far away that stopped sending long ago, (c) the moving group's trail: points it left
    on its line early on. Returns (history, mask, index, centers, k)."""
    rng = np.random.default_rng(seed)
    rows, idx, cen = [], [], []
    if moving:
        t = np.arange(100, 200, 2)
        rows.append(np.c_[0.1 * t, np.zeros_like(t)] + 0.5 * rng.standard_normal((len(t), 2)))
        idx.append(t)
        cen.append([0.1 * 150, 0.0])
    if stopped:
        t = np.arange(1, 21)
        rows.append(np.c_[np.full(20, 5.0), np.full(20, 20.0)] + 0.5 * rng.standard_normal((20, 2)))
        idx.append(t)
        cen.append([5.0, 20.0])
    if trail:
        t = np.arange(22, 52, 2)
        rows.append(np.c_[0.1 * t, np.zeros_like(t)] + 0.5 * rng.standard_normal((len(t), 2)))
        idx.append(t)
        cen.append([0.1 * 36, 0.0])
    x = np.concatenate(rows); i = np.concatenate(idx)
    n = len(x)
    history = np.zeros((H, 2)); history[:n] = x
    index = np.zeros(H, np.int32); index[:n] = i
    mask = np.zeros(H, bool); mask[:n] = True
    perm = rng.permutation(H)                     # rows in any order, free rows anywhere
    centers = np.zeros((6, 2)); centers[:len(cen)] = cen
    return history[perm], mask[perm], index[perm], centers, len(cen)


@pytest.mark.parametrize("seed", range(4))
def test_drift_statistics_against_numpy_reference(seed):
    history, mask, index, centers, k = _scene(seed)
    m, nv = 6, 0.25
    thr, tq = float(chi2_upper(2, 3e-3)), float(chi2_upper(2, 1e-3))
    got = jax.jit(F.drift_statistics, static_argnums=5)(
        jnp.asarray(history, jnp.float32), jnp.asarray(mask), jnp.asarray(index), jnp.asarray(centers, jnp.float32),
        jnp.int32(k), m, jnp.float32(nv), jnp.float32(thr), jnp.float32(tq))
    stat, trail, old, assign, trail_row = _reference(history, mask, index, centers, k, m, nv, thr, tq)
    np.testing.assert_array_equal(np.asarray(got.assign)[mask], assign[mask])
    np.testing.assert_array_equal(np.asarray(got.old) & mask, old)
    np.testing.assert_allclose(np.asarray(got.stat), stat, rtol=2e-3, atol=1e-3)
    np.testing.assert_array_equal(np.asarray(got.trail), trail)
    np.testing.assert_array_equal(np.asarray(got.trail_row), trail_row)
    # What the scene is built to show: the moving group moves, the trail is its trail, the group
    # that stopped far away is neither.
    assert stat[0] > thr and trail[2] and not trail[1] and stat[1] < thr
    # Row by row: the trail's points are where the moving group was when they arrived; the stopped
    # group's are not.
    assert trail_row[mask & (index >= 22) & (index <= 50)].all() and not trail_row[mask & (index <= 20)].any()


def test_forget_moved_keeps_the_newest_of_a_moving_cluster_drops_the_trail_and_keeps_a_stopped_group():
    history, mask, index, centers, k = _scene(0)
    new_mask, fired = F.forget_moved(jnp.asarray(history), jnp.asarray(mask), jnp.asarray(index),
                                     jnp.asarray(centers), k, 3e-3, 6, 0.25)
    new_mask = np.asarray(new_mask)
    kept = index[new_mask]
    moving_kept = np.sort(kept[kept >= 100])
    np.testing.assert_array_equal(moving_kept, np.arange(188, 200, 2))          # its 6 newest
    assert not np.any((kept >= 22) & (kept < 52))                                # the trail: all gone
    assert np.sum((kept >= 1) & (kept <= 20)) == 20                              # the stopped group: all kept
    np.testing.assert_array_equal(np.asarray(fired)[:3], [True, False, True])
    # Level 0: nothing is ever forgotten.
    same, fired0 = F.forget_moved(jnp.asarray(history), jnp.asarray(mask), jnp.asarray(index),
                                  jnp.asarray(centers), k, 0.0, 6, 0.25)
    np.testing.assert_array_equal(np.asarray(same), mask)
    assert not np.any(np.asarray(fired0))


def test_a_short_line_is_not_extrapolated_far_back(monkeypatch):
    """A group seen moving for 20 rounds says nothing about where it was 140 rounds ago: a stale
    cluster that happens to lie on that line, that far back, is not its trail (the ten-group ramp's
    failure: a chance trend in the newest group erased old groups). Without the reach it would be."""
    rng = np.random.default_rng(0)
    t1 = np.arange(180, 200)
    t0 = np.arange(40, 60)
    x = np.concatenate([np.c_[0.3 * (t1 - 180.0), np.zeros(20)], np.c_[0.3 * (t0 - 180.0), np.zeros(20)]])
    x = x + 0.5 * rng.standard_normal(x.shape)
    H = 64
    history = np.zeros((H, 2), np.float32); history[:40] = x
    index = np.zeros(H, np.int32); index[:40] = np.r_[t1, t0]
    mask = np.zeros(H, bool); mask[:40] = True
    centers = np.zeros((4, 2), np.float32); centers[0] = x[:20].mean(0); centers[1] = x[20:].mean(0)
    args = (jnp.asarray(history), jnp.asarray(mask), jnp.asarray(index), jnp.asarray(centers), jnp.int32(2), 6,
            jnp.float32(0.25), chi2_upper(2, 3e-3), chi2_upper(2, 1e-3))
    test = F.drift_statistics(*args)
    assert float(test.stat[0]) > float(chi2_upper(2, 3e-3))   # the new group moves
    assert not bool(test.trail[1])
    monkeypatch.setattr(F, "_REACH", math.inf)
    assert bool(F.drift_statistics(*args).trail[1])


def test_a_jump_is_not_a_movement():
    """A new group's first points landing in a stopped neighbour's cluster (the ramp): the newest
    rounds are left out of the trend and the neighbour keeps every point."""
    rng = np.random.default_rng(3)
    old = np.c_[np.zeros(20), np.zeros(20)] + rng.standard_normal((20, 2))
    new = np.c_[np.full(3, 6.0), np.zeros(3)] + rng.standard_normal((3, 2))
    history = np.zeros((32, 2)); history[:23] = np.r_[old, new]
    index = np.zeros(32, np.int32); index[:23] = np.r_[np.arange(101, 121), np.arange(121, 124)]
    mask = np.arange(32) < 23
    centers = np.zeros((4, 2))
    new_mask, fired = F.forget_moved(jnp.asarray(history), jnp.asarray(mask), jnp.asarray(index),
                                     jnp.asarray(centers), 1, 1e-2, 6, 1.0)
    np.testing.assert_array_equal(np.asarray(new_mask), mask)
    assert not bool(fired[0])


def test_false_alarms_on_stationary_clusters_stay_near_the_level():
    """Stationary Gaussian clusters fed at random times: the share of clusters the test fires on is
    ≤ 4× the level (0.01) over 400 histories (it is conservative: σ̂² and the continuity check)."""
    level, fires, n = 1e-2, 0, 400
    run = jax.jit(lambda h, mk, ix, c: F.forget_moved(h, mk, ix, c, 2, level, 6, 1.0)[1])
    rng = np.random.default_rng(0)
    for r in range(n):
        lab = rng.integers(0, 2, 60)
        x = np.where(lab[:, None] == 0, 0.0, 10.0) + rng.standard_normal((60, 2))
        idx = np.sort(rng.choice(np.arange(1, 200), 60, replace=False)).astype(np.int32)
        centers = np.array([[0.0, 0.0], [10.0, 10.0], [0, 0]])
        fires += int(np.sum(np.asarray(run(jnp.asarray(x), jnp.ones(60, bool), jnp.asarray(idx),
                                           jnp.asarray(centers)))[:2]))
    assert fires / (2 * n) <= 4 * level, fires


def test_insert_fills_freed_rows_first_and_remembered_count_follows():
    """After a forgetting, the next point goes to a freed row (not a reservoir draw), and the
    remembered count loses the forgotten rows' share (n_remembered/n_stored each)."""
    lr = jaxstream.pacbo(8, 16, 8)
    xs = np.random.default_rng(0).standard_normal((40, 2)).astype(np.float32)
    s = lr.init(jax.random.key(0), xs)                      # reservoir full: 16 of 40
    assert int(s.n_stored) == 16 and int(s.n_remembered) == 40
    mask = np.asarray(s.history_mask).copy(); mask[[3, 7]] = False
    s = s._replace(history_mask=jnp.asarray(mask), n_stored=jnp.int32(14))
    s2 = P._insert(jax.random.key(1), s, jnp.ones(2, jnp.float32), jnp.float32(0.0), "reservoir")
    assert bool(s2.history_mask[3]) and not bool(s2.history_mask[7])
    np.testing.assert_array_equal(np.asarray(s2.history[3]), [1.0, 1.0])
    assert int(s2.n_stored) == 15 and int(s2.n_seen) == 41 and int(s2.n_remembered) == 41
    # _forget's bookkeeping: the forgotten rows take their share of n_remembered with them.
    history, mask, index, centers, k = _scene(0)
    lr = jaxstream.pacbo(6, len(mask), 8)
    st = lr.init(jax.random.key(0), np.zeros((0, 2), np.float32))
    n = int(mask.sum())
    st = st._replace(history=jnp.asarray(history, jnp.float32), history_mask=jnp.asarray(mask),
                     history_index=jnp.asarray(index), centers=jnp.asarray(centers, jnp.float32),
                     n_clusters=jnp.int32(k), n_stored=jnp.int32(n), n_remembered=jnp.int32(2 * n),
                     n_seen=jnp.int32(200))
    st2, gone = P._forget(st, 6, jnp.float32(0.5), False)
    assert int(gone) == 44 + 15                       # the moving group's old rows and the trail
    assert int(st2.n_stored) == n - 59 and int(st2.n_remembered) == 2 * n - 2 * 59


def test_level_zero_is_the_plain_reservoir_and_the_paper_preset_never_forgets():
    """drift_level = 0: no row is ever freed (the history is the prefix reservoir of Algorithm R) and
    n_remembered = n_seen; preset="paper" sets it."""
    x = make_drifting_clusters_stream(120, seed=1).astype(np.float32)
    for lr in (jaxstream.pacbo(10, 32, 16, drift_level=0.0), jaxstream.pacbo(10, 32, 16, preset="paper")):
        assert float(lr.params.drift_level) == 0.0
        s, info = jaxstream.run_stream(lr, jax.random.key(0), x, lr.init(jax.random.key(1), x[:0]),
                                       trace=lambda s_, x_, i: i.n_forgotten)
        assert int(np.sum(np.asarray(info))) == 0
        assert np.all(np.asarray(s.history_mask)) and int(s.n_remembered) == int(s.n_seen) == 120


def test_recent_size_and_drift_level_are_checked_and_passed_on():
    assert jaxstream.pacbo(10, 4, 8).config.recent_size == 4            # default min(6, H)
    assert jaxstream.pacbo(10, 64, 8).config.recent_size == 6
    assert jaxstream.pacbo(10, 64, 8, recent_size=9).config.recent_size == 9
    with pytest.raises(ValueError, match="recent_size"):
        jaxstream.pacbo(10, 4, 8, recent_size=5)
    with pytest.raises(ValueError, match="recent_size"):
        jaxstream.pacbo(10, 64, 8, recent_size=1)
    for bad in (-0.1, 1.0, float("nan")):
        with pytest.raises(ValueError, match="drift_level"):
            jaxstream.pacbo(10, 64, 8, drift_level=bad)
    m = jaxstream.PACBO(max_clusters=10, history_size=64, n_steps=8, drift_level=0.0, recent_size=9)
    assert m.learner.config.recent_size == 9 and float(m.learner.params.drift_level) == 0.0


def test_moving_groups_are_followed_and_stopped_groups_kept():
    """The learner on the drifting four groups (T = 400) against drift_level = 0, 4 streams × 1 key,
    batched: forgetting lowers every stream's loss by ≥ 25 % and ends nearer k = 4; on the ten-group
    ramp (groups that stop) it keeps k̂_T = 10 as the plain reservoir does."""
    lr = jaxstream.pacbo(20, 256, 100)
    pb = [lr.params, lr.params._replace(drift_level=jnp.asarray(0.0, lr.params.drift_level.dtype))]
    xs = np.stack([make_drifting_clusters_stream(400, seed=s) for s in range(4)]).astype(np.float32)

    def run(params, x):
        s = lr.init(jax.random.key(0), x[:0], params)
        s, tr = jaxstream.run_stream(lr, jax.random.key(7), x, s, trace=lambda s_, x_, i: i.loss)
        return jnp.sum(tr[1:]), s.n_clusters

    f = jax.jit(jax.vmap(jax.vmap(run, (None, 0)), (0, None)))
    pbs = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *pb)
    loss, k = map(np.asarray, f(pbs, xs))
    assert np.all(loss[0] < 0.75 * loss[1]), loss
    assert np.abs(k[0] - 4).sum() < np.abs(k[1] - 4).sum(), k
    from jaxstream.datasets import make_ramp_clusters_stream
    ramp = np.stack([make_ramp_clusters_stream(200, seed=s) for s in range(2)]).astype(np.float32)
    _, kr = map(np.asarray, f(pbs, ramp))
    np.testing.assert_array_equal(kr[0], kr[1])
