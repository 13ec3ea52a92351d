"""Streams that move (issue 22): generators, reference predictors, the shipped trace.

Every truth value is checked against a slow, independent computation written
here (loops over points and segments, dense samples of the curve built
directly), never against the helpers the generators use.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from jaxstream import cli, datasets as D


def _slow_polyline_sqdist(points, verts):
    """min over segments of the squared distance to the segment, one point and segment at a time."""
    out = []
    for p in points:
        best = math.inf
        for a, b in zip(verts[:-1], verts[1:]):
            ab = b - a
            t = min(max(float((p - a) @ ab) / float(ab @ ab), 0.0), 1.0)
            best = min(best, float(((a + t * ab - p) ** 2).sum()))
        out.append(best)
    return np.array(out)


def _slow_arclength(points, verts):
    """Arclength of points lying on the polyline (found on the first segment within 1e-9)."""
    out = []
    for p in points:
        start = 0.0
        for a, b in zip(verts[:-1], verts[1:]):
            ab = b - a
            t = min(max(float((p - a) @ ab) / float(ab @ ab), 0.0), 1.0)
            if np.linalg.norm(a + t * ab - p) < 1e-9:
                out.append(start + t * np.linalg.norm(ab))
                break
            start += np.linalg.norm(ab)
        else:
            raise AssertionError(f"{p} is not on the polyline")
    return np.array(out)


GENERATORS = [
    ("route", lambda seed: D.make_route_stream(50, seed=seed), (50, 2)),
    ("loop", lambda seed: D.make_loop_stream(50, seed=seed), (50, 2)),
    ("rounded", lambda seed: D.make_loop_stream(50, seed=seed, shape="rounded_rectangle"), (50, 2)),
    ("drift_curve", lambda seed: D.make_drifting_curve_stream(50, seed=seed, rotation=0.5), (50, 2)),
    ("drift_clusters", lambda seed: D.make_drifting_clusters_stream(40, seed=seed), (40, 2)),
    ("ramp", lambda seed: D.make_ramp_clusters_stream(60, seed=seed), (60, 2)),
    ("four", lambda seed: D.make_four_groups_stream(40, seed=seed), (40, 2)),
    ("growing", lambda seed: D.make_growing_groups_stream(50, seed=seed), (50, 2)),
]


@pytest.mark.parametrize("name,make,shape", GENERATORS, ids=[g[0] for g in GENERATORS])
def test_shape_dtype_determinism(name, make, shape):
    a, b, c = make(3), make(3), make(4)
    assert a.shape == shape and a.dtype == np.float64 and np.isfinite(a).all()
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
    np.testing.assert_array_equal(make(np.random.default_rng(7)), make(np.random.default_rng(7)))


# --------------------------------------------------------------------------- route

def test_random_route_geometry():
    for seed in range(5):
        v = D.random_route(6, seed, leg_length=(1.0, 3.0), min_gap=0.5)
        assert v.shape == (7, 2)
        np.testing.assert_array_equal(v[0], 0.0)
        legs = np.diff(v, axis=0)
        lengths = np.linalg.norm(legs, axis=1)
        assert np.all((lengths >= 1.0) & (lengths <= 3.0))
        cos = (legs[1:] * legs[:-1]).sum(1) / (lengths[1:] * lengths[:-1])
        np.testing.assert_allclose(cos, 0.0, atol=1e-12)
        # Self-avoidance, checked on dense samples of the legs.
        u = np.linspace(0, 1, 400)[:, None]
        samples = [a + u * (b - a) for a, b in zip(v[:-1], v[1:])]
        for i in range(len(samples)):
            for j in range(i + 2, len(samples)):
                d = np.sqrt(((samples[i][:, None] - samples[j][None]) ** 2).sum(-1)).min()
                assert d >= 0.5 - 1e-9, (seed, i, j, d)


def test_random_route_impossible_gap_raises():
    with pytest.raises(ValueError, match="self-avoiding"):
        D.random_route(4, 0, leg_length=(1.0, 1.0), min_gap=2.0, max_tries=5)


def test_route_truth_against_brute_force():
    for heavy in (False, True):
        pts, truth = D.make_route_stream(80, n_legs=5, seed=11, heavy_tailed=heavy, return_truth=True)
        verts = D.random_route(5, np.random.default_rng(11))
        np.testing.assert_allclose(truth, _slow_polyline_sqdist(pts, verts), rtol=1e-10, atol=1e-14)


def test_route_points_advance_along_route():
    verts = D.random_route(5, np.random.default_rng(2))
    clean = D.make_route_stream(300, seed=2, noise=0.0)
    s = _slow_arclength(clean, verts)
    assert np.all(np.diff(s) >= -1e-12)
    length = np.linalg.norm(np.diff(verts, axis=0), axis=1).sum()
    assert s[0] < 0.05 * length and s[-1] > 0.95 * length

    shuffled = D.make_route_stream(300, seed=2, noise=0.0, ordered=False)
    np.testing.assert_array_equal(np.sort(shuffled, axis=0), np.sort(clean, axis=0))
    s_shuffled = _slow_arclength(shuffled, verts)
    assert abs(np.corrcoef(np.arange(300), s_shuffled)[0, 1]) < 0.2


def test_route_given_vertices_and_noise_law():
    verts = np.array([[0.0, 0.0], [100.0, 0.0]])
    n = 20000
    g = D.make_route_stream(n, seed=0, noise=0.1, heavy_tailed=False, vertices=verts)
    t = D.make_route_stream(n, seed=0, noise=0.1, heavy_tailed=True, vertices=verts)
    for pts in (g, t):
        assert abs(pts[:, 1].std() / 0.1 - 1.0) < 0.1
    kurt = lambda y: np.mean(y ** 4) / np.mean(y ** 2) ** 2
    assert abs(kurt(g[:, 1]) - 3.0) < 0.3
    assert kurt(t[:, 1]) > 6.0
    with pytest.raises(ValueError, match="differ"):
        D.make_route_stream(10, vertices=[[0.0, 0.0], [0.0, 0.0], [1.0, 0.0]])


def test_route_default_trace_is_dense():
    verts = D.random_route(5, np.random.default_rng(0))
    length = np.linalg.norm(np.diff(verts, axis=0), axis=1).sum()
    assert length / 600 < 0.1 / 3


# --------------------------------------------------------------------------- loops

def _dense_rounded_rectangle(width, height, corner, m=20000):
    a, b, c = width / 2 - corner, height / 2 - corner, corner
    u = np.linspace(0, 1, m)
    parts = [np.stack([-a + 2 * a * u, np.full(m, -b - c)], 1), np.stack([-a + 2 * a * u, np.full(m, b + c)], 1),
             np.stack([np.full(m, -a - c), -b + 2 * b * u], 1), np.stack([np.full(m, a + c), -b + 2 * b * u], 1)]
    # Each corner's quarter circle, in its own quadrant (sx, sy).
    th = np.linspace(0, 0.5 * np.pi, m)
    for sx, sy in [(1, 1), (-1, 1), (-1, -1), (1, -1)]:
        parts.append(np.stack([sx * (a + c * np.cos(th)), sy * (b + c * np.sin(th))], 1))
    return np.concatenate(parts)


def test_loop_truth_against_brute_force():
    pts, truth = D.make_loop_stream(200, seed=1, noise=0.3, radius=2.0, return_truth=True)
    np.testing.assert_allclose(truth, (np.linalg.norm(pts, axis=1) - 2.0) ** 2, rtol=1e-12, atol=1e-15)

    pts, truth = D.make_loop_stream(100, seed=1, noise=0.4, shape="rounded_rectangle", width=4.0, height=2.0,
                                    corner=0.5, heavy_tailed=True, return_truth=True)
    dense = _dense_rounded_rectangle(4.0, 2.0, 0.5)
    brute = np.array([((dense - p) ** 2).sum(1).min() for p in pts])
    np.testing.assert_allclose(np.sqrt(truth), np.sqrt(brute), atol=2e-4)
    assert np.all(truth <= brute + 1e-12)

    clean = D.make_loop_stream(500, seed=2, noise=0.0, shape="rounded_rectangle", width=3.0, height=5.0,
                               corner=1.0)
    dense = _dense_rounded_rectangle(3.0, 5.0, 1.0)
    d = np.array([((dense - p) ** 2).sum(1).min() for p in clean[:50]])
    assert d.max() < 1e-6
    assert clean[:, 0].max() == pytest.approx(1.5, abs=0.02) and clean[:, 1].max() == pytest.approx(2.5, abs=0.02)


def test_loop_order_and_laps():
    clean = D.make_loop_stream(400, n_laps=3, seed=4, noise=0.0)
    ang = np.unwrap(np.arctan2(clean[:, 1], clean[:, 0]))
    assert np.all(np.diff(ang) > 0)
    assert ang[-1] - ang[0] == pytest.approx(3 * 2 * np.pi, abs=0.3)
    assert np.arctan2(clean[0, 1], clean[0, 0]) == pytest.approx(-np.pi / 2, abs=0.1)

    shuffled = D.make_loop_stream(400, n_laps=3, seed=4, noise=0.0, ordered=False)
    np.testing.assert_array_equal(np.sort(shuffled, axis=0), np.sort(clean, axis=0))
    with pytest.raises(ValueError, match="shape"):
        D.make_loop_stream(10, shape="triangle")


# --------------------------------------------------------------------------- drifting curve

def test_drifting_curve_moves_with_shift():
    n = 200
    clean = D.make_drifting_curve_stream(n, shift=(1.0, 3.0), noise=0.0, seed=5)
    tau = np.arange(n) / (n - 1)
    base = clean - tau[:, None] * np.array([1.0, 3.0])
    np.testing.assert_allclose(base[:, 1], np.sin(base[:, 0]), atol=1e-12)
    assert base[:, 0].min() >= 0 and base[:, 0].max() <= 2 * np.pi


@pytest.mark.parametrize("rotation,amplitude", [(0.0, (1.0, 1.0)), (1.3, (0.5, 2.0))])
def test_drifting_curve_truth_is_distance_to_the_curve_of_its_round(rotation, amplitude):
    n = 60
    shift = np.array([2.0, 3.0])
    pts, truth = D.make_drifting_curve_stream(n, shift=shift, noise=0.3, seed=8, rotation=rotation,
                                              amplitude=amplitude, return_truth=True)
    u = np.linspace(0, 2 * np.pi, 200001)
    brute = []
    for t, p in enumerate(pts):
        tau = t / (n - 1)
        a = amplitude[0] + tau * (amplitude[1] - amplitude[0])
        th = tau * rotation
        x, y = u - np.pi, a * np.sin(u)
        cx = np.cos(th) * x - np.sin(th) * y + np.pi + tau * shift[0]
        cy = np.sin(th) * x + np.cos(th) * y + tau * shift[1]
        brute.append(((cx - p[0]) ** 2 + (cy - p[1]) ** 2).min())
    brute = np.array(brute)
    np.testing.assert_allclose(np.sqrt(truth), np.sqrt(brute), atol=1e-4)
    assert np.all(truth <= brute + 1e-12)
    assert np.mean(truth) == pytest.approx(0.09, rel=0.5)


def test_sine_arc_sqdist_endpoints_and_exactness():
    p = np.array([[-1.0, 0.0], [2 * np.pi + 2.0, 1.0], [np.pi / 2, 1.0], [np.pi / 2, 3.0]])
    np.testing.assert_allclose(D.sine_arc_sqdist(p), [1.0, 5.0, 0.0, 4.0], atol=1e-12)


# --------------------------------------------------------------------------- clusters

def test_drifting_clusters_means_and_labels():
    n = 4000
    pts, lab, means_t = D.make_drifting_clusters_stream(n, shift=(20.0, -4.0), seed=3, return_truth=True)
    assert means_t.shape == (n, 4, 2) and lab.shape == (n,)
    np.testing.assert_array_equal(np.bincount(lab), [1000] * 4)
    for t in (0, 1234, n - 1):
        np.testing.assert_allclose(means_t[t], D.PACBO_MEANS + t / (n - 1) * np.array([20.0, -4.0]))
    resid = pts - means_t[np.arange(n), lab]
    assert np.abs(resid.mean(0)).max() < 0.06 and abs(resid.std() - 1.0) < 0.03
    own = ((pts - means_t[np.arange(n), lab]) ** 2).sum(1).mean()
    static = ((pts - D.PACBO_MEANS[lab]) ** 2).sum(1).mean()
    assert own < 2.2 < 50 < static


def test_drifting_clusters_custom_means_dimension():
    m = np.array([[0.0, 0.0, 0.0], [5.0, 5.0, 5.0]])
    pts, lab, means_t = D.make_drifting_clusters_stream(11, means=m, shift=(1.0, 2.0, 3.0), seed=0,
                                                        return_truth=True)
    assert pts.shape == (11, 3) and means_t.shape == (11, 2, 3)
    np.testing.assert_allclose(means_t[-1], m + [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(np.bincount(lab), [6, 5])


def test_drifting_clusters_per_group_shift():
    shift = np.array([[20.0, 0.0], [0.0, 0.0], [0.0, 0.0], [-20.0, 0.0]])
    pts, lab, means_t = D.make_drifting_clusters_stream(9, shift=shift, seed=0, return_truth=True)
    np.testing.assert_allclose(means_t[0], D.PACBO_MEANS)
    np.testing.assert_allclose(means_t[-1], D.PACBO_MEANS + shift)
    np.testing.assert_allclose(means_t[4], D.PACBO_MEANS + shift / 2)
    # The same stream as a shared shift where the shifts agree: (d,) is the (k, d) row repeated.
    a = D.make_drifting_clusters_stream(9, shift=(3.0, 1.0), seed=5)
    b = D.make_drifting_clusters_stream(9, shift=np.tile([3.0, 1.0], (4, 1)), seed=5)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(D.make_drifting_clusters_stream(9, shift=2.0, seed=5),
                                  D.make_drifting_clusters_stream(9, shift=(2.0, 2.0), seed=5))
    for bad in (np.zeros((3, 2)), np.zeros(3), np.zeros((4, 2, 1))):
        with pytest.raises(ValueError, match="shift must have shape"):
            D.make_drifting_clusters_stream(9, shift=bad)


def test_ramp_clusters():
    pts, lab, means_t = D.make_ramp_clusters_stream(260, seed=2, return_truth=True)
    np.testing.assert_array_equal(lab[:200], np.repeat(np.arange(10), 20))
    assert lab[200:].min() >= 0 and lab[200:].max() <= 9 and len(np.unique(lab[200:])) > 5
    m = means_t[0]
    np.testing.assert_allclose(np.linalg.norm(m, axis=1), 10.0)
    np.testing.assert_allclose(np.linalg.norm(m[1] - m[0]), 2 * 10 * np.sin(np.pi / 10))
    np.testing.assert_allclose(m[3], [10 * np.cos(0.6 * np.pi), 10 * np.sin(0.6 * np.pi)])
    assert np.all(means_t == m)
    assert ((pts - m[lab]) ** 2).sum(1).mean() == pytest.approx(2.0, rel=0.25)


def test_growing_groups():
    """The staircase: j groups present in block j, the newest drawing 1/2 + 1/(2j) of it (binomial
    over 40 seeds × 200 rounds), the older ones uniformly;
    means in the box and min_sep apart; unit-variance noise about the true means."""
    newest, older, seen = 0, [], []
    for seed in range(40):
        pts, lab, means_t = D.make_growing_groups_stream(300, seed=seed, return_truth=True)
        present = np.minimum(np.arange(300) // 20 + 1, 10)
        assert np.all(lab < present) and lab.min() == 0
        m = means_t[0]
        assert np.all(means_t == m) and np.all(np.abs(m) <= 10.0)
        gaps = np.linalg.norm(m[:, None] - m[None], axis=-1)[np.triu_indices(10, 1)]
        assert gaps.min() >= 6.0
        newest += int(np.sum(lab[:200] == present[:200] - 1))
        old = (lab[:200] < present[:200] - 1) & (present[:200] >= 3)
        older.append(lab[:200][old] / (present[:200][old] - 2))
        seen.append(((pts - m[lab]) ** 2).sum(1))
    # P(newest) = 1/2 + 1/2 · E[1/j]; over blocks j = 1..10 (block 1 is all newest)
    p = np.mean([0.5 + 0.5 / j for j in range(1, 11)])
    n = 40 * 200
    assert abs(newest / n - p) < 4 * np.sqrt(p * (1 - p) / n)
    u = np.concatenate(older)  # an older group's label among 0..j−2, scaled to [0, 1]: mean 1/2
    assert abs(u.mean() - 0.5) < 4 * u.std() / np.sqrt(u.size)
    assert np.concatenate(seen).mean() == pytest.approx(2.0, rel=0.03)
    with pytest.raises(ValueError, match="could not place 30 means 6.0 apart"):  # cannot fit: refused at once
        D.make_growing_groups_stream(10, n_groups=30)
    for bad in (dict(n=-1), dict(n_groups=0), dict(block=0), dict(box=0.0), dict(min_sep=-1.0)):
        with pytest.raises(ValueError, match="need n >= 0, n_groups >= 1"):
            D.make_growing_groups_stream(**dict(dict(n=10), **bad))
    # greedy placement can leave no room (seed 4: the 10th mean never fits); it starts again
    assert D.make_growing_groups_stream(10, seed=4).shape == (10, 2)


def test_four_groups_balanced_and_cli_stream():
    pts, lab, means_t = D.make_four_groups_stream(200, seed=1, return_truth=True)
    np.testing.assert_array_equal(np.bincount(lab), [50] * 4)
    assert len(set(lab[:8])) > 1
    np.testing.assert_array_equal(np.bincount(D.make_four_groups_stream(202, 0, return_truth=True)[1]),
                                  [51, 51, 50, 50])
    # balanced=False and the command line's stream are the draws the command line always made.
    rng = np.random.default_rng(6)
    old_lab = rng.integers(0, 4, 80)
    old = np.array([[0.0, 0.0], [-4.0, -1.0], [0.0, 7.0], [5.0, 2.0]])[old_lab] + rng.standard_normal((80, 2))
    xs, labels = cli.four_groups_stream(80, seed=6)
    np.testing.assert_array_equal(xs, old)
    np.testing.assert_array_equal(labels, old_lab)
    np.testing.assert_array_equal(D.make_four_groups_stream(80, 6, balanced=False), old)


# --------------------------------------------------------------------------- reference predictors

def test_nearest_past_point_loss_against_double_loop():
    xs = np.random.default_rng(0).standard_normal((57, 3)) * [1.0, 10.0, 0.1]
    slow = np.array([min(((xs[t] - xs[s]) ** 2).sum() for s in range(t)) for t in range(5, 57)])
    np.testing.assert_allclose(D.nearest_past_point_loss(xs, t0=5), slow, rtol=1e-13)
    np.testing.assert_allclose(D.nearest_past_point_loss(xs, t0=5, max_block_elems=100), slow, rtol=1e-13)
    np.testing.assert_allclose(D.nearest_past_point_loss(xs, t0=1, max_block_elems=1)[4:], slow, rtol=1e-13)
    assert D.nearest_past_point_loss(xs, t0=57).shape == (0,)
    with pytest.raises(ValueError, match="t0"):
        D.nearest_past_point_loss(xs, t0=0)


def test_nearest_past_point_loss_duplicates_and_order():
    xs = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 0.0], [1.0, 0.0]])
    np.testing.assert_array_equal(D.nearest_past_point_loss(xs, t0=1), [9.0, 0.0, 1.0])


def _slow_oracle(xs, labels, window, new_group):
    out = []
    for t in range(len(xs)):
        past = {}
        for s in range(t):
            past.setdefault(labels[s], []).append(xs[s])
        preds = {g: np.mean(v[-window:], axis=0) for g, v in past.items()}
        if labels[t] in preds:
            out.append(((xs[t] - preds[labels[t]]) ** 2).sum())
        elif preds and new_group == "nearest":
            out.append(min(((xs[t] - p) ** 2).sum() for p in preds.values()))
        else:
            out.append(np.nan)
    return np.array(out)


@pytest.mark.parametrize("window", [1, 3, 10])
@pytest.mark.parametrize("new_group", ["nearest", "nan"])
def test_last_points_oracle_against_loop(window, new_group):
    pts, lab, _ = D.make_ramp_clusters_stream(70, n_groups=5, block=6, seed=1, return_truth=True)
    lab = lab.copy()
    lab[40:] = np.random.default_rng(0).integers(0, 6, 30)   # a sixth group appears late
    slow = _slow_oracle(pts, lab, window, new_group)
    fast = D.last_points_oracle_loss(pts, lab, window=window, t0=0, new_group=new_group)
    np.testing.assert_allclose(fast, slow, rtol=1e-12, equal_nan=True)
    np.testing.assert_allclose(D.last_points_oracle_loss(pts, lab, window, t0=9, new_group=new_group),
                               slow[9:], rtol=1e-12, equal_nan=True)
    assert np.isnan(fast[0])
    assert np.isnan(fast[6]) == (new_group == "nan")


def test_last_points_oracle_tracks_drift():
    pts, lab, _ = D.make_drifting_clusters_stream(2000, shift=(200.0, 0.0), seed=0, return_truth=True)
    lag = D.last_points_oracle_loss(pts, lab, window=10, t0=100)
    # A group's last 10 points lag its mean by about 5.5 of its rounds, 4 · 5.5 · 0.1 = 2.2 in x:
    # expected loss ≈ 2 (noise) + 0.2 (10-point mean) + 2.2² ≈ 7.
    assert 5.5 < lag.mean() < 9.0


# --------------------------------------------------------------------------- make_s_curve order

def test_s_curve_sorted_by_intrinsic_coordinate():
    X, t = D.make_s_curve(300, noise=0.05, random_state=3)
    Xs, ts = D.make_s_curve(300, noise=0.05, random_state=3, sort_by_t=True)
    assert np.all(np.diff(ts) >= 0)
    order = np.argsort(t, kind="stable")
    np.testing.assert_array_equal(Xs, X[order])
    np.testing.assert_array_equal(ts, t[order])


# --------------------------------------------------------------------------- shipped trace

def test_load_trace():
    ll, times = D.load_trace("staten_island_ferry", lonlat=True, return_time=True)
    assert ll.shape == (3729, 2) and np.isfinite(ll).all()
    assert times.dtype == np.dtype("datetime64[s]")
    assert np.all(np.diff(times) > np.timedelta64(0, "s"))
    assert times[0] == np.datetime64("2020-12-01T08:11:22") and times[-1] == np.datetime64("2020-12-05T21:04:49")
    assert np.all((ll[:, 0] > -74.1) & (ll[:, 0] < -74.0) & (ll[:, 1] > 40.6) & (ll[:, 1] < 40.71))

    km = D.load_trace()
    np.testing.assert_allclose(km.mean(0), 0.0, atol=1e-9)
    np.testing.assert_allclose(np.ptp(km, axis=0), [5.19, 8.49], atol=0.02)
    # Local distances agree with great-circle (haversine) distances to better than 0.5 %.
    i, j = np.argmin(km[:, 1]), np.argmax(km[:, 1])
    lon1, lat1, lon2, lat2 = map(np.radians, (ll[i, 0], ll[i, 1], ll[j, 0], ll[j, 1]))
    h = np.sin((lat2 - lat1) / 2) ** 2 + np.cos(lat1) * np.cos(lat2) * np.sin((lon2 - lon1) / 2) ** 2
    great_circle = 2 * D.EARTH_RADIUS_KM * np.arcsin(np.sqrt(h))
    assert np.linalg.norm(km[j] - km[i]) == pytest.approx(great_circle, rel=5e-3)
    # The ferry shuttles: most consecutive reports are less than 1 km apart.
    assert np.median(np.linalg.norm(np.diff(km, axis=0), axis=1)) < 0.2
    with pytest.raises(ValueError, match="unknown trace"):
        D.load_trace("nope")


def test_lonlat_to_local_km():
    xy = D.lonlat_to_local_km([10.0, 11.0, 10.0], [60.0, 60.0, 61.0], lon0=10.0, lat0=60.0)
    deg = np.pi / 180 * D.EARTH_RADIUS_KM
    np.testing.assert_allclose(xy, [[0.0, 0.0], [0.5 * deg, 0.0], [0.0, deg]], atol=1e-9)


def test_shipped_data_has_its_provenance():
    from importlib import resources
    readme = resources.files("jaxstream").joinpath("data").joinpath("README.md").read_text(encoding="utf-8")
    for name in D.TRACES.values():
        assert name in readme
    assert "BSD 2-Clause" in readme and "National Technology and Engineering Solutions" in readme
    assert D.USGS_FILE in readme
