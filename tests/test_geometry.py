"""Polyline geometry and lattice helpers versus loop-based NumPy references."""
import numpy as np
import jax
import jax.numpy as jnp
import pytest

from jaxstream import geometry as g

# The functions under test, jitted once (n_vertices traced): the checks are
# about values, and one compiled program per shape costs far less than
# compiling each operation eagerly (the eager path: the SLPC wrapper's test).
projection = jax.jit(g.polyline_projection)
sq_dist = jax.jit(g.polyline_sq_dist)
length = jax.jit(g.polyline_length)
soft_sq_dist = jax.jit(g.soft_polyline_sq_dist)


def np_seg_sqdist(p, a, b):
    ab = b - a
    den = ab @ ab
    t = 0.0 if den == 0 else min(max((p - a) @ ab / den, 0.0), 1.0)
    q = a + t * ab
    return float((p - q) @ (p - q)), t


def np_polyline(points, verts, nv):
    out = []
    for p in points:
        best = (np.inf, -1, 0.0)
        for j in range(nv - 1):
            d2, t = np_seg_sqdist(p, verts[j], verts[j + 1])
            if d2 < best[0]:
                best = (d2, j, t)
        out.append(best)
    return out


@pytest.mark.parametrize("d", [1, 2, 3, 5])
def test_polyline_distance_and_projection_match_numpy(d):
    rng = np.random.default_rng(d)
    verts = rng.normal(size=(8, d))
    verts[3] = verts[2]  # a zero-length segment must be handled exactly
    pts = rng.normal(size=(40, d)) * 2
    for nv in (2, 4, 6):
        ref = np_polyline(pts, verts, nv)
        got = projection(jnp.asarray(pts), jnp.asarray(verts), nv)
        np.testing.assert_allclose(got["sqdist"], [r[0] for r in ref], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(sq_dist(jnp.asarray(pts), jnp.asarray(verts), nv),
                                   [r[0] for r in ref], rtol=1e-5, atol=1e-6)
        seg = np.asarray(got["segment"])
        assert (seg < nv - 1).all()
        # projected point is on the polyline at the reported distance
        proj = np.asarray(got["point"])
        np.testing.assert_allclose(((proj - pts) ** 2).sum(1), [r[0] for r in ref], rtol=1e-4, atol=1e-5)
        seglen = np.linalg.norm(np.diff(verts[:nv], axis=0), axis=1)
        arc = np.concatenate([[0], np.cumsum(seglen)])[seg] + np.asarray(got["t"]) * seglen[seg]
        np.testing.assert_allclose(got["arclength"], arc, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(length(jnp.asarray(verts), nv), seglen.sum(), rtol=1e-6)


def test_exact_cases():
    verts = jnp.array([[0.0, 0.0], [2.0, 0.0], [2.0, 2.0]])
    pts = jnp.array([[1.0, 1.0], [3.0, 3.0], [-1.0, 0.0], [2.0, 1.0]])
    np.testing.assert_allclose(sq_dist(pts, verts, 3), [1.0, 2.0, 1.0, 0.0], atol=1e-7)
    pr = projection(pts, verts, 3)
    np.testing.assert_allclose(pr["arclength"][3], 3.0, atol=1e-6)


def test_batched_candidates_broadcast():
    rng = np.random.default_rng(0)
    cands = rng.normal(size=(5, 6, 2))
    nvs = np.array([2, 3, 4, 5, 6])
    pts = rng.normal(size=(7, 2))
    got = sq_dist(jnp.asarray(pts)[None], jnp.asarray(cands), jnp.asarray(nvs))
    for c in range(5):
        np.testing.assert_allclose(got[c], [r[0] for r in np_polyline(pts, cands[c], nvs[c])], rtol=1e-5, atol=1e-6)


def test_soft_distance_bounds_and_gradient():
    rng = np.random.default_rng(1)
    verts = jnp.asarray(rng.normal(size=(6, 2)))
    pts = jnp.asarray(rng.normal(size=(30, 2)))
    exact = sq_dist(pts, verts, 5)
    for tau in (1e-3, 1e-1):
        soft = soft_sq_dist(pts, verts, 5, tau)
        assert np.all(np.asarray(soft) <= np.asarray(exact) + 1e-6)
        assert np.all(np.asarray(exact - soft) <= tau * np.log(4) + 1e-5)
    grad = jax.jit(jax.grad(lambda v: g.soft_polyline_sq_dist(pts, v, 5, 0.1).sum()))(verts)
    assert np.all(np.isfinite(grad))
    # gradient of the exact loss agrees with finite differences away from kinks
    f = lambda v: float(sq_dist(pts, v, 5).sum())
    gr = np.asarray(jax.jit(jax.grad(lambda v: g.polyline_sq_dist(pts, v, 5).sum()))(verts))
    e = np.zeros((6, 2)); e[1, 0] = 1e-3
    fd = (f(np.asarray(verts) + e) - f(np.asarray(verts) - e)) / 2e-3
    np.testing.assert_allclose(gr[1, 0], fd, rtol=2e-2, atol=2e-3)


def test_lattice_helpers():
    st = g.lattice_stencil(2)
    assert st.shape == (9, 2) and (st[0] == 0).all() and len({tuple(r) for r in st}) == 9
    assert g.lattice_stencil(3, radius=2).shape == (125, 3)
    v = jnp.array([0.26, -0.74])
    np.testing.assert_allclose(g.snap_to_lattice(v, 0.5), [0.5, -0.5])
    nb = np.asarray(g.lattice_neighbours(v, 0.5))
    assert nb.shape == (9, 2)
    np.testing.assert_allclose(nb[0], [0.5, -0.5])
    assert np.allclose(np.round(nb / 0.5) * 0.5, nb)
