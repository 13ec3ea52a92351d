"""Tests of the Hastie–Stuetzle principal curve baseline (R princurve 2.1.6).

Every fit here is small; the references are slow, loop-based NumPy/SciPy
code written independently of the JAX implementation (SciPy's B-spline
design matrix, Gauss–Legendre quadrature of the penalty, Brent's method for
the df, explicit loops over points and segments for the projection).
"""
import numpy as np
import pytest
import jax
import jax.numpy as jnp
from scipy.interpolate import BSpline, make_smoothing_spline
from scipy.optimize import brentq

from jaxstream.curves import princurve as pc
from jaxstream.geometry import polyline_sq_dist

N_KNOTS = 40


# ---------------------------------------------------------------- references

def ref_knots(u, n_knots, tol=1e-6, min_gap=0.25):
    """The documented knot rule, written as loops."""
    su = np.sort(u)
    uniq = [su[0]] + [su[i] for i in range(1, len(su)) if su[i] > su[i - 1] + tol]
    nu = len(uniq)
    q = np.empty(n_knots)
    for k in range(n_knots):
        pos = k * (nu - 1) / (n_knots - 1)
        lo = int(np.floor(pos))
        hi = min(lo + 1, nu - 1)
        q[k] = uniq[lo] + (pos - lo) * (uniq[hi] - uniq[lo])
    q[0], q[-1] = 0.0, 1.0
    gap = min_gap / (n_knots - 1)
    knots = q.copy()
    for k in range(1, n_knots):
        knots[k] = max(q[k], knots[k - 1] + gap)
    return knots / knots[-1]


def ref_smoother_matrix(x, df, n_knots):
    """Dense n × n smoother matrix of the penalised cubic spline with trace df."""
    u = (x - x.min()) / (x.max() - x.min())
    knots = ref_knots(u, n_knots)
    t = np.r_[[knots[0]] * 3, knots, [knots[-1]] * 3]
    nb = n_knots + 2
    basis = BSpline.design_matrix(u, t, 3).toarray()
    second = BSpline(t, np.eye(nb), 3).derivative(2)  # all basis functions at once
    gx, gw = np.polynomial.legendre.leggauss(4)
    pen = np.zeros((nb, nb))
    for a, b in zip(knots[:-1], knots[1:]):
        d2 = second(0.5 * (b - a) * gx + 0.5 * (a + b))
        pen += (d2 * (0.5 * (b - a) * gw)[:, None]).T @ d2
    gram = basis.T @ basis

    def smoother(log_lam):
        return basis @ np.linalg.solve(gram + np.exp(log_lam) * pen, basis.T)

    log_lam = brentq(lambda ll: np.trace(smoother(ll)) - df, -40.0, 40.0, xtol=1e-13)
    return smoother(log_lam)


def ref_project(x, verts):
    """princurve's project_to_curve (already stretched curve), loops."""
    n = len(x)
    seg, tt, proj, sq = np.zeros(n, int), np.zeros(n), np.zeros_like(x), np.zeros(n)
    for i, p in enumerate(x):
        best = np.inf
        for j in range(len(verts) - 1):
            a, b = verts[j], verts[j + 1]
            den = np.dot(b - a, b - a)
            if den == 0.0:  # princurve skips zero-length segments (NaN test)
                continue
            v = min(max(np.dot(p - a, b - a) / den, 0.0), 1.0)
            q = a + v * (b - a)
            dd = np.dot(q - p, q - p)
            if dd < best:
                best, seg[i], tt[i], proj[i], sq[i] = dd, j, v, q, dd
    order = np.argsort(seg + 0.1 + 0.9 * tt, kind="stable")
    lam = np.zeros(n)
    for k in range(1, n):
        lam[order[k]] = lam[order[k - 1]] + np.linalg.norm(proj[order[k]] - proj[order[k - 1]])
    return lam, sq, proj


def ref_principal_curve(x, df=5.0, max_iter=10, thresh=1e-3, stretch=2.0, n_knots=N_KNOTS):
    """princurve 2.1.6 principal_curve, with the smoother above."""
    n = len(x)
    xbar = x.mean(0)
    xc = x - xbar
    _, dd, vt = np.linalg.svd(xc, full_matrices=False)
    v1 = vt[0] * (-1.0 if vt[0][np.argmax(np.abs(vt[0]))] < 0 else 1.0)
    lam = xc @ v1
    dist_old = np.sum(np.var(x, axis=0, ddof=1))
    dist = n * np.sum(dd[1:] ** 2)
    converged = abs(dist_old - dist) <= thresh * dist_old
    it = 0
    verts = None
    while not converged and it < max_iter:
        it += 1
        order = np.argsort(lam, kind="stable")
        fitted = ref_smoother_matrix(lam, df, n_knots) @ x
        verts = fitted[order].copy()
        verts[0] = verts[0] + stretch * (verts[0] - verts[1])
        verts[-1] = verts[-1] + stretch * (verts[-1] - verts[-2])
        lam, sq, _ = ref_project(x, verts)
        dist_old, dist = dist, sq.sum()
        converged = abs(dist_old - dist) <= thresh * dist_old
    return dict(vertices=verts, lam=lam, dist=dist, n_iter=it, converged=converged)


def noisy_arc(n, seed, noise=0.05):
    rng = np.random.default_rng(seed)
    s = rng.uniform(-1.0, 1.0, n)
    return np.stack([s, s ** 2], axis=1) + noise * rng.standard_normal((n, 2))


# ---------------------------------------------------------------- smoother

def test_smoother_equals_scipy_smoothing_spline_with_knots_at_the_data():
    # With one knot per (well separated) data point the penalised regression
    # spline is the natural cubic smoothing spline, which SciPy computes.
    with jax.enable_x64(True):
        rng = np.random.default_rng(0)
        n = 30
        x = np.sort(np.linspace(0.0, 10.0, n) + rng.uniform(-0.05, 0.05, n))
        y = np.sin(x) + 0.3 * rng.standard_normal(n)
        ys = np.concatenate([y[:, None], np.eye(n)], axis=1)  # columns e_i give S itself
        fit = pc.smooth_spline(x, ys, df=5.0, n_knots=n)
        smat = np.asarray(fit.fitted[:, 1:])
        assert np.trace(smat) == pytest.approx(5.0, abs=1e-9)
        assert float(fit.df) == pytest.approx(5.0, abs=1e-9)

        def scipy_trace(ll):
            return np.trace(make_smoothing_spline(x, np.eye(n), lam=np.exp(ll))(x))

        ll = brentq(lambda v: scipy_trace(v) - 5.0, -20.0, 20.0, xtol=1e-13)
        ref = make_smoothing_spline(x, y, lam=np.exp(ll))(x)
        np.testing.assert_allclose(np.asarray(fit.fitted[:, 0]), ref, atol=1e-8)


def test_smoother_with_fewer_knots_than_points_and_padding():
    with jax.enable_x64(True):
        rng = np.random.default_rng(1)
        n, cap = 110, 120
        x = rng.uniform(0.0, 10.0, n)
        y = np.sin(x) + 0.3 * rng.standard_normal(n)
        x[:6] = x[0]  # ties are fine
        ys = np.concatenate([y[:, None], np.eye(n)], axis=1)  # columns e_i give S itself
        # valid rows scattered in a larger capacity; garbage in the padding
        slots = np.sort(rng.choice(cap, n, replace=False))
        mask = np.zeros(cap, bool)
        mask[slots] = True
        xp = np.full(cap, 1e6)
        yp = np.full((cap, n + 1), np.nan)
        xp[slots], yp[slots] = x, ys
        fit = pc.smooth_spline(xp, yp, mask, df=5.0, n_knots=N_KNOTS)
        assert np.all(np.asarray(fit.fitted[~mask]) == 0.0)
        got = np.asarray(fit.fitted[slots])
        smat = got[:, 1:]
        # Exact against the dense reference of the same estimator ...
        np.testing.assert_allclose(smat, ref_smoother_matrix(x, 5.0, N_KNOTS), atol=1e-9)
        assert np.trace(smat) == pytest.approx(5.0, abs=1e-9)
        assert float(fit.df) == pytest.approx(5.0, abs=1e-9)
        # ... and close to the full smoothing spline (a knot at every x; tied x
        # merged with weights = counts and y = group means, as R does; the
        # trace over all n points is then Σ_u S_uu of the merged problem).
        ux, inv = np.unique(x, return_inverse=True)
        w = np.bincount(inv).astype(float)
        ym = np.bincount(inv, weights=y) / w

        def full_trace(ll):
            return np.trace(make_smoothing_spline(ux, np.eye(len(ux)), w=w, lam=np.exp(ll))(ux))

        ll = brentq(lambda v: full_trace(v) - 5.0, -20.0, 20.0, xtol=1e-10)
        full = make_smoothing_spline(ux, ym, w=w, lam=np.exp(ll))(x)
        err = np.abs(got[:, 0] - full).max()
        assert err < 0.01 * 0.3, err  # 1 % of the noise sd


# ---------------------------------------------------------------- HS iteration

@pytest.fixture(scope="module")
def arc():
    return noisy_arc(40, seed=3)


def _padded(x, extra, seed):
    """x inside a capacity-(n + extra) array at random slots; NaN padding."""
    rng = np.random.default_rng(seed)
    n = len(x) + extra
    slots = np.sort(rng.choice(n, len(x), replace=False))
    big = np.full((n, x.shape[1]), np.nan)
    big[slots] = x
    mask = np.zeros(n, bool)
    mask[slots] = True
    return big, mask, slots


def test_principal_curve_matches_loop_reference(arc):
    with jax.enable_x64(True):
        ref = ref_principal_curve(arc)
        big, mask, slots = _padded(arc, 8, seed=0)
        fit = pc.principal_curve(big, mask)
        assert int(fit.n_iter) == ref["n_iter"] >= 2
        assert bool(fit.converged) == ref["converged"]
        assert int(fit.n_vertices) == len(arc)
        np.testing.assert_allclose(float(fit.dist), ref["dist"], rtol=1e-9)
        np.testing.assert_allclose(np.asarray(fit.vertices[:len(arc)]), ref["vertices"], atol=1e-9)
        np.testing.assert_allclose(np.asarray(fit.lam[slots]), ref["lam"], atol=1e-9)
        sq = jax.jit(polyline_sq_dist)(jnp.asarray(arc), fit.vertices, fit.n_vertices)
        np.testing.assert_allclose(np.asarray(sq), np.asarray(fit.sqdist[slots]), atol=1e-12)
        np.testing.assert_allclose(float(jnp.sum(sq)), float(fit.dist), rtol=1e-12)


def test_padding_never_changes_the_fit(arc):
    with jax.enable_x64(True):
        a_big, a_mask, a_slots = _padded(arc, 8, seed=0)
        b_big, b_mask, b_slots = _padded(arc, 8, seed=1)
        b_big[~b_mask] = 1e3  # other garbage, other slots
        fa = pc.principal_curve(a_big, a_mask)
        fb = pc.principal_curve(b_big, b_mask)
        m = len(arc)
        np.testing.assert_allclose(np.asarray(fa.vertices[:m]), np.asarray(fb.vertices[:m]), atol=1e-12)
        np.testing.assert_allclose(np.asarray(fa.lam[a_slots]), np.asarray(fb.lam[b_slots]), atol=1e-12)
        assert float(fa.dist) == pytest.approx(float(fb.dist), rel=1e-12)
        assert np.all(np.asarray(fa.sqdist[~a_mask]) == 0.0)
        # masked vertices repeat the last one, so the polyline is unchanged
        assert np.all(np.asarray(fa.vertices[m:]) == np.asarray(fa.vertices[m - 1]))


def test_first_principal_component_start(arc):
    with jax.enable_x64(True):
        big, mask, slots = _padded(arc, 8, seed=0)
        fit = pc.principal_curve(big, mask, max_iter=0)
        xc = arc - arc.mean(0)
        v1 = np.linalg.svd(xc, full_matrices=False)[2][0]
        scores = xc @ v1
        proj = arc.mean(0) + np.outer(scores, v1)
        line = proj[np.argsort(scores)]
        line[0] += 2.0 * (line[0] - line[1])
        line[-1] += 2.0 * (line[-1] - line[-2])
        assert int(fit.n_iter) == 0
        np.testing.assert_allclose(np.abs(np.asarray(fit.lam[slots])), np.abs(scores), atol=1e-12)
        # the curve is the first principal component line through the data
        m = len(arc)
        verts = np.asarray(fit.vertices[:m])
        if np.dot(verts[-1] - verts[0], line[-1] - line[0]) < 0:
            verts = verts[::-1]
        np.testing.assert_allclose(verts, line, atol=1e-12)
        resid = np.sum((arc - proj) ** 2, axis=1)
        np.testing.assert_allclose(np.asarray(fit.sqdist[slots]), resid, atol=1e-12)
        assert float(fit.dist) == pytest.approx(resid.sum(), rel=1e-12)


def test_points_on_a_straight_line_have_zero_loss():
    with jax.enable_x64(True):
        rng = np.random.default_rng(4)
        s = rng.uniform(-2.0, 3.0, 40)
        direction = np.array([0.6, -0.8])
        x = np.array([1.0, 2.0]) + s[:, None] * direction
        big, mask, _ = _padded(x, 8, seed=0)
        fit = pc.principal_curve(big, mask)
        assert float(fit.dist) < 1e-20
        new = np.array([1.0, 2.0]) + np.array([-1.5, 0.1, 2.9])[:, None] * direction
        assert float(jnp.max(jax.jit(polyline_sq_dist)(jnp.asarray(new), fit.vertices, fit.n_vertices))) < 1e-20


def test_jit_and_eager_agree():
    # float32 and the shapes of the sequential test below (shared compile)
    xs = small_cubic_stream()
    args = (jnp.asarray(xs[:29]), jnp.arange(29) < 25, jnp.float32(5.0), jnp.int32(10),
            jnp.float32(1e-3), jnp.float32(2.0))
    jitted = pc._principal_curve_jit(*args, N_KNOTS)
    with jax.disable_jit():
        eager = pc._principal_curve(*args, N_KNOTS)
    assert int(jitted.n_iter) == int(eager.n_iter)
    np.testing.assert_allclose(np.asarray(jitted.vertices), np.asarray(eager.vertices), atol=1e-4)
    np.testing.assert_allclose(float(jitted.dist), float(eager.dist), rtol=1e-4)


# ---------------------------------------------------------------- sequential

def small_cubic_stream():
    rng = np.random.default_rng(6)
    x = rng.uniform(0.0, 10.0, 30)
    y = 0.05 * (x - 5.0) ** 3 + 0.1 * rng.standard_normal(30)
    return np.stack([x, y], axis=1).astype(np.float32)


def test_sequential_equals_loop_of_single_fits():
    xs = small_cubic_stream()
    t0 = 20
    res = pc.sequential_principal_curve_losses(xs, t0=t0, batch_size=4)
    assert res.losses.shape == (30,)
    assert np.all(np.isnan(np.asarray(res.losses[:t0])))
    total = 0.0
    sq_dist = jax.jit(polyline_sq_dist)
    for t in range(t0, 30):
        fit = pc.principal_curve(xs[:29], np.arange(29) < t)
        loss = float(sq_dist(jnp.asarray(xs[t:t + 1]), fit.vertices, fit.n_vertices)[0])
        assert float(res.losses[t]) == pytest.approx(loss, rel=1e-4, abs=1e-6), t
        assert int(res.n_iter[t]) == int(fit.n_iter)
        total += loss
    assert float(res.total) == pytest.approx(total, rel=1e-4)
    assert float(res.total) == pytest.approx(float(np.sum(np.asarray(res.losses[t0:]))), rel=1e-6)


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("points, match", [
    (np.zeros(10), "2-D"),
    (np.zeros((10, 2, 1)), "2-D"),
    (np.ones((3, 2)), "at least 4"),
    (np.ones((10, 2)), "same point"),
    (np.r_[np.random.default_rng(0).random((9, 2)), [[np.nan, 0.0]]], "NaN"),
])
def test_principal_curve_bad_points(points, match):
    with pytest.raises(ValueError, match=match):
        pc.principal_curve(points)


@pytest.mark.parametrize("kwargs, match", [
    (dict(df=1.0), "df"), (dict(stretch=2.5), "stretch"), (dict(stretch=-1.0), "stretch"),
    (dict(max_iter=-1), "max_iter"), (dict(thresh=-1e-3), "thresh"), (dict(mask=np.ones(5, bool)), "mask"),
    (dict(mask=np.arange(10) < 3), "at least 4"),
])
def test_principal_curve_bad_parameters(kwargs, match):
    x = np.random.default_rng(0).random((10, 2))
    with pytest.raises(ValueError, match=match):
        pc.principal_curve(x, **kwargs)


def test_sequential_bad_input():
    x = np.random.default_rng(0).random((30, 2))
    with pytest.raises(ValueError, match="at least 31"):
        pc.sequential_principal_curve_losses(x, t0=30)
    with pytest.raises(ValueError, match="t0"):
        pc.sequential_principal_curve_losses(x, t0=2)
    bad = x.copy()
    bad[25, 0] = np.inf
    with pytest.raises(ValueError, match="NaN or inf"):
        pc.sequential_principal_curve_losses(bad)
    with pytest.raises(ValueError, match="2-D"):
        pc.sequential_principal_curve_losses(x[:, 0])
    with pytest.raises(ValueError, match="smooth_spline needs at least 2 distinct"):
        pc.smooth_spline(np.ones(5), np.arange(5.0))
