"""Derivatives of the differentiable primitives (issue 23): finite at padding, masks,
zero-length segments and coincident points, and equal to finite differences."""
import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import jaxstream as js
from jaxstream import _ops, geometry as G
from jaxstream._linalg import eigh, polar
from jaxstream.clustering import quasi_posterior as Q
from jaxstream.curves.refine import refine
from jaxstream.embedding import landmark_stress, lmds_fit, lmds_transform, normalized_stress



@pytest.fixture(autouse=True)
def _float64():
    """float64 for this file's tests only (a global switch would leak into every test the
    same pytest worker runs after it)."""
    with jax.enable_x64(True):
        yield

TOL = dict(atol=1e-4, rtol=1e-4)

# Active vertices 0..2; padding row 3 repeats the last vertex (a zero-length padding
# segment), row 4 is zero. Points are generic (no projection parameter at a clip boundary).
V = np.array([[0., 0.], [1., 0.2], [1.1, 1.], [1.1, 1.], [0., 0.]])
P = np.array([[0.2, 0.35], [1.5, 0.5], [0.3, -0.4], [0.7, 1.3]])


def _finite(tree):
    return all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree_util.tree_leaves(tree))


def test_polyline_primitives_check_grads_with_padding():
    check_grads(lambda p, v: G.polyline_sq_dist(p, v, 3), (P, V), order=2, modes=["fwd", "rev"], **TOL)
    check_grads(lambda v: G.polyline_length(v, 3), (V,), order=2, modes=["fwd", "rev"], **TOL)
    check_grads(lambda p, v: G.polyline_projection(p, v, 3)["arclength"], (P, V), order=2,
                modes=["fwd", "rev"], **TOL)
    check_grads(lambda p, v, t: G.soft_polyline_sq_dist(p, v, 3, t), (P, V, 0.3), order=2,
                modes=["fwd", "rev"], **TOL)


def test_polyline_length_zero_length_segments_regression():
    # Before: sqrt(0) on the padding segment gave NaN for every vertex.
    g = jax.grad(lambda v: G.polyline_length(v, 4))(V)   # active segment 2 has length 0
    assert _finite(g)
    # Unit directions of the two non-degenerate segments; the degenerate one adds 0.
    u0 = (V[1] - V[0]) / jnp.linalg.norm(V[1] - V[0])
    u1 = (V[2] - V[1]) / jnp.linalg.norm(V[2] - V[1])
    chex.assert_trees_all_close(g, jnp.stack([-u0, u0 - u1, u1, jnp.zeros(2), jnp.zeros(2)]), atol=1e-12)
    assert _finite(jax.grad(lambda v: G.polyline_projection(P, v, 4)["arclength"].sum())(V))
    assert _finite(jax.jacfwd(lambda v: G.polyline_length(v, 2))(jnp.zeros((5, 2))))


def test_soft_polyline_temperature_with_spare_capacity_regression():
    # Before: NaN w.r.t. τ whenever capacity > n_vertices (inf·0 from the masked segments).
    g = jax.grad(lambda t: G.soft_polyline_sq_dist(P, V, 3, t).sum())(0.1)
    assert np.isfinite(float(g))
    # Never above the exact value, within τ·log(#segments) of it; τ = 0 is the exact value.
    hard = G.polyline_sq_dist(P, V, 3)
    soft = G.soft_polyline_sq_dist(P, V, 3, 0.1)
    assert bool(jnp.all(soft <= hard + 1e-12)) and bool(jnp.all(hard - soft <= 0.1 * np.log(2) + 1e-12))
    chex.assert_trees_all_close(G.soft_polyline_sq_dist(P, V, 3, 0.0), hard)
    # Tiny τ: no overflow, close to the hard minimum.
    chex.assert_trees_all_close(G.soft_polyline_sq_dist(P, V, 3, 1e-8), hard, atol=1e-7)


def test_refine_on_pca_state_is_finite_regression():
    xs = js.datasets.make_cubic_stream(60, seed=0)
    learner = js.slpc(max_segments=6, history_size=32, init="pca")
    s = learner.init(jax.random.key(0), xs[:20])
    r = refine(xs, s.vertices, s.n_vertices, steps=20)
    assert _finite(r)
    assert float(r.objective[-1]) < float(r.objective[0])


def test_stress_gradients_finite_and_correct():
    rng = np.random.default_rng(0)
    Y = jnp.asarray(rng.normal(size=(6, 2)))
    X = rng.normal(size=(6, 3))
    D = jnp.asarray(np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1)))
    # Before: NaN in reverse mode from sqrt on the zero diagonal.
    g = jax.grad(normalized_stress, argnums=(0, 1))(D, Y)
    assert _finite(g)
    check_grads(normalized_stress, (D, Y), order=2, modes=["fwd", "rev"], **TOL)
    check_grads(lambda Y: landmark_stress(D, Y, jnp.array([0, 2, 3, 5])), (Y,), order=2,
                modes=["fwd", "rev"], **TOL)
    # Coincident embedded points and a perfect embedding: finite (subgradient 0 at 0).
    assert _finite(jax.grad(normalized_stress, 1)(D, Y.at[1].set(Y[0])))
    Z = jnp.asarray(X[:, :2])
    Dz = jnp.sqrt(_ops.sq_dist(Z, Z))
    g0 = jax.grad(normalized_stress, 1)(Dz, Z)
    assert _finite(g0)


def test_safe_eigh_degenerate_spectrum():
    # Rank-2 Gram matrix with a zero (masked) row: repeated zero eigenvalues.
    rng = np.random.default_rng(1)
    A = rng.normal(size=(5, 2))
    B = jnp.asarray(np.pad(A @ A.T, ((0, 1), (0, 1))))
    top = lambda B: eigh(B)[0][-2:]
    assert _finite(jax.grad(lambda B: top(B).sum())(B))
    chex.assert_trees_all_close(jax.grad(lambda B: top(B).sum())(B),
                                jax.grad(lambda B: jnp.linalg.eigh(B)[0][-2:].sum())(B), atol=1e-10)
    def vec(B):  # the top eigenvector's projector (sign-free, smooth)
        v = eigh(B)[1][:, -1]
        return jnp.outer(v, v)

    assert _finite(jax.jacrev(vec)(B))
    check_grads(vec, (B,), order=1, modes=["fwd", "rev"], **TOL)
    # Exactly repeated eigenvalues (a diagonal matrix): JAX's rule gives inf/NaN, this one does not.
    Dg = jnp.diag(jnp.array([0., 0., 0., 1., 3.]))
    assert not _finite(jax.jacrev(lambda B: jnp.linalg.eigh(B)[1][:, -1])(Dg))
    assert _finite(jax.jacrev(lambda B: eigh(B)[1][:, -1])(Dg))


def test_polar_factor_values_and_derivatives():
    """``polar(m)`` is NumPy's U Vᵀ; its derivative equals central differences on a generic matrix
    and where singular values repeat (c·I: U Vᵀ is smooth there, the SVD's rule is NaN), and
    stays finite (0) at the zero matrix, where the factor is not unique."""
    rng = np.random.default_rng(3)
    M = jnp.asarray(rng.normal(size=(3, 3)))
    u, _, vt = np.linalg.svd(np.asarray(M))
    np.testing.assert_allclose(polar(M), u @ vt, atol=1e-12)
    check_grads(polar, (M,), order=1, modes=["fwd", "rev"], **TOL)
    cI = 2.0 * jnp.eye(3)
    naive = lambda m: (lambda usv: usv[0] @ usv[2])(jnp.linalg.svd(m))
    assert not _finite(jax.jacrev(naive)(cI))
    check_grads(polar, (cI,), order=1, modes=["fwd", "rev"], **TOL)
    dm = jnp.asarray(rng.normal(size=(3, 3)))
    np.testing.assert_allclose(jax.jvp(polar, (cI,), (dm,))[1], (dm - dm.T) / 4.0, atol=1e-12)
    assert _finite(jax.jacrev(polar)(jnp.zeros((3, 3))))


def test_aligned_landmark_embedding_gradient_through_a_stream():
    """``align=True`` aligns each new embedding by Procrustes: its derivative through a whole
    stream is finite and equals a central difference (the SVD's own rule gave NaN)."""
    from jaxstream import differentiable as D
    learner = js.landmark_mds(max_landmarks=6, n_components=2, align=True)
    xs = jnp.asarray(js.datasets.make_cubic_stream(40, seed=1000))
    key = jax.random.key(0)

    def energy(state):
        y = learner.predict(state, state.points)
        return jnp.sum(jnp.where(state.is_landmark[:, None], y, 0.0) ** 2)

    f = jax.jit(lambda x: D.stream_loss(learner, key, x, penalty=energy))
    g = jax.grad(lambda x: D.stream_loss(learner, key, x, penalty=energy))(xs)
    assert _finite(g)
    v = jnp.asarray(np.random.default_rng(0).normal(size=xs.shape))
    h = 1e-6
    np.testing.assert_allclose(float(jnp.vdot(g, v)), float((f(xs + h * v) - f(xs - h * v)) / (2 * h)), rtol=1e-6)


def test_lmds_gradients_with_mask_and_weights():
    rng = np.random.default_rng(0)
    L = jnp.asarray(rng.normal(size=(6, 2)))          # exactly rank 2: degenerate zero eigenvalues
    X = jnp.asarray(rng.normal(size=(5, 2)))
    mask = jnp.array([True] * 5 + [False])

    def emb(L, X, w=None):
        m = lmds_fit(_ops.sq_dist(L, L) + 0.3 * (1 - jnp.eye(6)), 2, mask, weights=w)
        return lmds_transform(m, _ops.sq_dist(X, L))

    check_grads(emb, (L, X), order=1, modes=["fwd", "rev"], **TOL)
    w = jnp.array([1.1, 2., 3., 1., .6, 0.])             # a zero weight: masked like the mask
    assert _finite(jax.jacrev(lambda w: emb(L, X, w))(w))
    check_grads(lambda w: emb(L, X, w), (w,), order=1, modes=["fwd", "rev"], **TOL)

    def stress(L):
        D = jnp.sqrt(_ops.sq_dist(X, X) + 0.01) * (1 - jnp.eye(5))
        return normalized_stress(D, lmds_transform(lmds_fit(_ops.sq_dist(L, L), 2, mask), _ops.sq_dist(X, L)))

    assert _finite(jax.grad(stress)(L))


def test_quasi_posterior_energies_inactive_slots():
    rng = np.random.default_rng(0)
    C = jnp.asarray(rng.normal(size=(3, 6, 2)))
    k = jnp.array([2, 6, 4])
    Pt = jnp.asarray(rng.normal(size=(2, 7)))
    pm = jnp.array([True] * 6 + [False])
    pl, l2 = jnp.full(7, 0.5), jnp.full(7, 0.1)
    f = lambda C, Pt: Q.energies(C, k, Pt, pm, pl, l2, 1.5)
    # Before: jvp NaN (inactive slots at +inf). Reverse mode is not available (dynamic loop).
    _, tan = jax.jvp(f, (C, Pt), (jnp.asarray(rng.normal(size=C.shape)), jnp.zeros_like(Pt)))
    assert _finite(tan) and float(jnp.abs(tan).sum()) > 0
    check_grads(f, (C, Pt), order=1, modes=["fwd"], **TOL)
    g = lambda c, Pt: Q.quasi_posterior_energy(c, 4, Pt.T, pm, pl, l2, 1.5)
    check_grads(g, (C[1], Pt), order=2, modes=["fwd", "rev"], **TOL)
    # Same values as the dense reference.
    chex.assert_trees_all_close(f(C, Pt)[2], g(C[2], Pt), atol=1e-10)


def test_pacbo_soft_functions():
    from jaxstream.clustering import pacbo as PB
    xs = jnp.asarray(js.datasets.make_cubic_stream(40, seed=0))
    learner = js.pacbo(max_clusters=5)
    s = learner.init(jax.random.key(0), xs[:20])
    s = s._replace(centers=s.centers + 0.1 * jnp.arange(10.).reshape(5, 2))
    x = xs[20:25]
    check_grads(lambda c, x, t: PB.soft_loss(s._replace(centers=c), x, t), (s.centers, x, 0.5), order=2,
                modes=["fwd", "rev"], **TOL)
    check_grads(lambda c, x: PB.soft_assign(s._replace(centers=c), x, 0.5), (s.centers, x), order=1,
                modes=["fwd", "rev"], **TOL)
