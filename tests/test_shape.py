"""Shape measures of a polyline against a reference (`jaxstream.curves.shape`) and the curve
families with their true curves (`jaxstream.datasets.curve_family`), against closed forms."""
import numpy as np
import jax
import jax.numpy as jnp
import pytest

from jaxstream import datasets
from jaxstream.curves import shape

from _refs import np_polyline_sqdist


def _arr(v):
    return jnp.asarray(np.asarray(v, np.float32))


def test_arclength_points_are_evenly_spread_and_ignore_padding():
    """Midpoints of equal pieces of arc length on an L-shaped line (closed form), padding rows
    and a zero-length segment ignored."""
    verts = np.array([[0, 0], [3, 0], [3, 0], [3, 1], [9, 9], [9, 9]], np.float32)  # 3 active segments
    pts = np.asarray(shape.arclength_points(_arr(verts), 4, n_points=8))
    s = (np.arange(8) + 0.5) / 8 * 4.0
    want = np.where(s[:, None] <= 3, np.stack([s, 0 * s], 1), np.stack([3 + 0 * s, s - 3], 1))
    np.testing.assert_allclose(pts, want, atol=1e-6)
    # a line of length 0: every point at its vertex
    np.testing.assert_allclose(shape.arclength_points(_arr([[1, 2], [1, 2]]), 2, n_points=3), [[1, 2]] * 3)


def test_parallel_offset_segment_has_fidelity_and_coverage_equal_to_the_offset():
    """A segment offset by h from a reference segment of the same extent: every point is h
    away both ways, length ratio 1."""
    ref = _arr([[0, 0], [4, 0]])
    m = shape.shape_measures(_arr([[0, 0.3], [4, 0.3], [7, 7]]), 2, ref)
    np.testing.assert_allclose([m.fidelity, m.coverage, m.length_ratio, m.length], [0.3, 0.3, 1.0, 4.0], rtol=1e-5)
    assert int(m.n_segments) == 1


def test_a_half_line_covers_half_and_a_fold_keeps_fidelity_but_doubles_length():
    """Closed forms on a reference [0, 2] × {0}: the half [0, 1] has fidelity 0 and coverage
    sqrt(∫_1^2 (s − 1)² ds / 2) = sqrt(1/6); a line folded back over the reference has
    fidelity 0, coverage 0 and length ratio 2; a spike of height h at the middle raises
    fidelity to sqrt(h²/3 · (2h)/(2 + 2h)) (the spike's share of the length, RMS h/√3 on it)."""
    ref = _arr([[0, 0], [2, 0]])
    half = shape.shape_measures(_arr([[0, 0], [1, 0]]), None, ref, n_points=4096)
    np.testing.assert_allclose([half.fidelity, half.coverage, half.length_ratio], [0, np.sqrt(1 / 6), 0.5],
                               atol=1e-4)
    fold = shape.shape_measures(_arr([[0, 0], [2, 0], [0, 0]]), 3, ref, n_points=4096)
    np.testing.assert_allclose([fold.fidelity, fold.coverage, fold.length_ratio], [0, 0, 2], atol=1e-4)
    h = 0.5
    spike = shape.shape_measures(_arr([[0, 0], [1, 0], [1, h], [1, 0], [2, 0]]), 5, ref, n_points=8192)
    want = np.sqrt(h ** 2 / 3 * (2 * h) / (2 + 2 * h))
    np.testing.assert_allclose(float(spike.fidelity), want, rtol=1e-3)
    np.testing.assert_allclose(float(spike.coverage), 0.0, atol=1e-6)


def test_circle_of_another_radius():
    """A dense polygon of radius r against the unit circle: fidelity = coverage = |r − 1|
    (up to the polygon's sagitta), length ratio r."""
    a = np.linspace(0, 2 * np.pi, 2001)
    unit = np.stack([np.cos(a), np.sin(a)], 1)
    for r in (0.8, 1.25):
        m = shape.shape_measures(_arr(r * unit), None, _arr(unit))
        np.testing.assert_allclose([m.fidelity, m.coverage, m.length_ratio], [abs(r - 1), abs(r - 1), r], rtol=1e-3)


def test_measures_match_numpy_on_random_lines_and_vmap():
    """Random polylines against a random reference: fidelity and coverage equal a NumPy loop over
    the same arc-length points; under vmap (different vertex counts) each equals its own call."""
    rng = np.random.default_rng(3)
    ref = rng.normal(size=(9, 3))
    lines = rng.normal(size=(4, 7, 3))
    counts = np.array([2, 4, 7, 5])

    def np_points(v, n):
        seg = np.linalg.norm(np.diff(v, axis=0), axis=1)
        cum = np.concatenate([[0], np.cumsum(seg)])
        s = (np.arange(n) + 0.5) / n * cum[-1]
        i = np.clip(np.searchsorted(cum, s, side="right") - 1, 0, len(seg) - 1)
        return v[i] + ((s - cum[i]) / seg[i])[:, None] * (v[i + 1] - v[i])

    got = jax.vmap(lambda v, n: shape.shape_measures(v, n, _arr(ref), n_points=300))(_arr(lines), jnp.asarray(counts))
    for b in range(4):
        v = lines[b, : counts[b]]
        fid = np.sqrt(np_polyline_sqdist(np_points(v, 300), ref).mean())
        cov = np.sqrt(np_polyline_sqdist(np_points(ref, 300), v).mean())
        np.testing.assert_allclose([got.fidelity[b], got.coverage[b]], [fid, cov], rtol=2e-4)
        one = shape.shape_measures(_arr(lines[b]), int(counts[b]), _arr(ref), n_points=300)
        np.testing.assert_allclose(got.fidelity[b], one.fidelity, rtol=1e-6)


def test_far_length_counts_curve_away_from_every_point():
    """A line from 0 to 10 along x with points only near [0, 4]: the stretch farther than 1 from
    every point is [5, 10], length 5; with every point masked out the whole line is far."""
    pts = _arr(np.stack([np.linspace(0, 4, 41), np.zeros(41)], 1))
    line = _arr([[0, 0], [10, 0]])
    np.testing.assert_allclose(float(shape.far_length(line, 2, pts, 1.0, n_points=1000)), 5.0, atol=0.02)
    np.testing.assert_allclose(float(shape.far_length(line, 2, pts, 1.0, mask=jnp.zeros(41, bool))), 10.0,
                               rtol=1e-5)


@pytest.mark.parametrize("name", sorted(datasets.CURVE_FAMILIES))
def test_curve_families_points_lie_around_their_true_curve(name):
    """Every family: the clean points lie on the true curve (exactly, or on the last round's
    curve for the drifting ones at the end), the noise has the stated sd, the same seed gives
    the same stream."""
    s = datasets.curve_family(name, seed=5, n=600)
    assert s.points.shape == s.clean.shape == (600, s.curve.shape[1])
    d_clean = np.sqrt(datasets.curve_sqdist(s.clean, s.curve))
    if name.startswith("drift"):
        assert d_clean[-5:].max() < 0.05  # the last rounds' points are on the last round's curve
    else:
        assert d_clean.max() < 1e-3 * (1 + np.abs(s.curve).max())
    noise = s.points - s.clean
    per_coord = noise[:, 1] if name == "cubic" else noise.ravel()  # the cubic's noise is on y only
    # the median absolute noise, in sd units: 0.674 for Gaussian noise, 0.765/√3 for Student t (3 dof)
    mad = np.median(np.abs(per_coord)) / s.noise
    heavy = name in ("route", "route_shuffled", "commute_t3")
    np.testing.assert_allclose(mad, 0.765 / np.sqrt(3) if heavy else 0.6745, rtol=0.1)
    np.testing.assert_array_equal(datasets.curve_family(name, seed=5, n=600).points, s.points)
    with pytest.raises(ValueError, match="unknown curve family"):
        datasets.curve_family("nope")


def test_commute_stream_goes_there_and_back():
    """Positions alternate direction pass by pass: the clean points of the first pass advance
    from the route's start, the second pass's come back; a pass offset moves whole passes."""
    route = np.array([[0.0, 0.0], [4.0, 0.0]])
    clean = datasets.make_commute_stream(400, n_passes=4, noise=0.0, seed=1, vertices=route)
    x = clean[:, 0]
    assert np.all(np.diff(x[:100]) >= -1e-12) and x[:10].max() < 1.0
    assert np.all(np.diff(x[100:200]) <= 1e-12) and x[100:110].min() > 3.0
    off = datasets.make_commute_stream(400, n_passes=4, noise=0.0, seed=1, vertices=route, pass_offset=0.5)
    shift = off - clean
    # one offset per pass: four distinct offsets, each held over a run of consecutive points
    distinct = np.unique(np.round(shift, 9), axis=0)
    assert len(distinct) == 4
    changes = np.flatnonzero(np.abs(np.diff(shift, axis=0)).max(1) > 1e-9)
    assert len(changes) == 3


def test_ferry_lane_is_the_pier_to_pier_line():
    """The two terminals, in the trace's local kilometres: 8.2 km apart, and the trace's
    reports pile up at both ends of the lane."""
    lane = datasets.ferry_lane()
    np.testing.assert_allclose(np.linalg.norm(lane[1] - lane[0]), 8.18, atol=0.05)
    trace = datasets.load_trace()
    for end in lane:
        assert np.sqrt(((trace - end) ** 2).sum(1)).min() < 0.3
