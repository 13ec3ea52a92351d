"""slpc's prequential loss on streams arriving in order: the line's ends continued (`end_lead`).

`geometry.prolong_ends` against a NumPy construction and its gradients; the learner's
``info.loss`` and `loss` against NumPy distances to the line and its two prolongations (their
length from the raw stream's last 64 steps); the line itself, `predict`, and every stream in
random order unchanged."""
import chex
import numpy as np
import jax
import jax.numpy as jnp
import pytest
from jax.test_util import check_grads

import jaxstream as js
from jaxstream import datasets
from jaxstream import geometry as g
from jaxstream.curves import history

from _refs import np_polyline_sqdist

SMALL = dict(max_segments=12, history_size=64)
LEAD = 4.0


def _np_prolongations(verts, length):
    """The two prolongation segments from the end vertices, along their end segments, of length
    min(ℓ, the segment's length)."""
    v = np.asarray(verts, np.float64)
    out = []
    for end, before in ((v[0], v[1]), (v[-1], v[-2])):
        step = end - before
        norm = np.sqrt(step @ step)
        out.append((end, end + (min(length, norm) / norm * step if norm > 0 else 0.0)))
    return out


def _np_prolonged_sqdist(points, verts, length):
    best = np_polyline_sqdist(points, verts)
    for a, b in _np_prolongations(verts, length):
        best = np.minimum(best, np_polyline_sqdist(points, np.stack([a, b])))
    return best


@pytest.mark.parametrize("nv,length", [(2, 2.0), (3, 0.5), (5, 2.0), (7, 1.3), (5, 0.0)])
def test_prolong_ends_matches_numpy(nv, length):
    rng = np.random.default_rng(nv)
    V = 7
    verts = rng.normal(size=(V, 2))
    verts[nv:] = 50.0                                 # padding must not count
    pts = np.concatenate([rng.normal(scale=3.0, size=(40, 2)), verts[:nv]])  # points on vertices too
    ext, n_ext = g.prolong_ends(jnp.asarray(verts), nv, length)
    assert int(n_ext) == nv + 2 and ext.shape == (V + 2, 2)
    (_, h1), (_, t1) = _np_prolongations(verts[:nv], length)
    want = np.concatenate([h1[None], verts[:nv], t1[None]])
    np.testing.assert_allclose(np.asarray(ext)[: nv + 2], want, rtol=1e-6, atol=1e-6)
    got = np.asarray(g.polyline_sq_dist(jnp.asarray(pts), ext, n_ext))
    np.testing.assert_allclose(got, _np_prolonged_sqdist(pts, verts[:nv], length), rtol=1e-5, atol=1e-6)
    if length == 0:                                   # nothing prolonged: the line's own distances
        np.testing.assert_allclose(got, np_polyline_sqdist(pts, verts[:nv]), rtol=1e-6, atol=1e-7)


def test_prolong_ends_check_grads_with_padding_and_coincident_points():
    """Gradients through the prolonged line's distances, in the vertices, the points and the
    length: padding rows, a first segment shorter than ℓ (its prolongation capped at its own
    length), a last one longer, two coincident points. A zero-length end segment (v_0 = v_1)
    has no prolongation, finite gradients, and the prolonged line is continuous there."""
    rng = np.random.default_rng(3)
    with jax.enable_x64(True):
        verts = rng.normal(size=(6, 2))
        verts[1] = verts[0] + np.array([0.3, 0.4])    # first segment of length 0.5 < ℓ
        verts[4:] = 1e3                               # padding
        nv = 4
        pts = rng.normal(scale=2.0, size=(9, 2))
        pts[5] = pts[4]                               # coincident points
        e = (verts[3] - verts[2]) / np.linalg.norm(verts[3] - verts[2])
        pts[6] = verts[3] + 0.7 * e + np.array([0.05, -0.03])  # beside the tail's prolongation
        pts[7] = verts[0] + 0.3 * np.array([0.6, 0.8]) + np.array([0.02, -0.02])  # beside the head's

        def f(v, p, length):
            ext, n_ext = g.prolong_ends(v, nv, length)
            return g.polyline_sq_dist(p, ext, n_ext)

        args = (jnp.asarray(verts), jnp.asarray(pts), jnp.asarray(1.5))
        check_grads(f, args, order=1, modes=["fwd", "rev"], atol=1e-6, rtol=1e-5)
        grads = jax.grad(lambda *a: jnp.sum(f(*a)), argnums=(0, 1, 2))(*args)
        assert all(np.all(np.isfinite(np.asarray(x))) for x in grads)
        assert np.all(np.asarray(grads[0])[nv:] == 0)  # padding rows get no gradient
        assert float(grads[2]) != 0.0                   # a point is explained by the tail's prolongation

        flat = verts.copy()
        flat[1] = flat[0]                              # zero-length first segment
        ext, _ = g.prolong_ends(jnp.asarray(flat), nv, 1.5)
        np.testing.assert_array_equal(np.asarray(ext[0]), flat[0])
        grads = jax.grad(lambda *a: jnp.sum(f(*a)), argnums=(0, 1, 2))(jnp.asarray(flat), args[1], args[2])
        assert all(np.all(np.isfinite(np.asarray(x))) for x in grads)
        for eps in (1e-3, 1e-6):                       # continuous: a short first segment, a short prolongation
            near = flat.copy()
            near[0] = flat[0] + eps * np.array([0.6, 0.8])
            gap = np.asarray(f(jnp.asarray(near), args[1], args[2]) - f(jnp.asarray(flat), args[1], args[2]))
            assert np.max(np.abs(gap)) < 50 * eps


def _trace(state, x, info):
    return (info.loss, state.vertices, state.n_vertices, history.arrival_order(state.recent, state.n_seen))


def _run(learner, xs, key=1):
    st = learner.init(jax.random.key(0), xs[:20])
    return js.run_stream(learner, jax.random.key(key), xs[20:], st, trace=_trace)


def _np_rms_step(xs, n_seen, ring=history.NN_ROWS):
    """The RMS distance between consecutive points among the last `ring` of the first n_seen."""
    last = np.asarray(xs[max(n_seen - ring, 0):n_seen], np.float64)
    return np.sqrt(((last[1:] - last[:-1]) ** 2).sum(1).mean())


@pytest.fixture(scope="module")
def route_runs():
    xs = datasets.make_route_stream(260, seed=3).astype(np.float32)
    out = {lead: _run(js.slpc(**SMALL, end_lead=lead), xs) for lead in (LEAD, 0.0)}
    return xs, out


def test_ordered_stream_loss_counts_the_prolonged_ends(route_runs):
    """info.loss on a route in order: min(the line, its two prolongations of 4 RMS steps of the
    last 64 points) from the line before the round, wherever the order weight passes
    `history.ORDERED` (NumPy, float64)."""
    xs, out = route_runs
    _, (loss, V, nv, order) = out[LEAD]
    loss, V, nv, order = (np.asarray(a) for a in (loss, V, nv, order))
    gated = order >= history.ORDERED
    assert gated.mean() > 0.8                         # a route: ordered on most rounds
    lower = 0
    for t in range(len(loss)):
        x = xs[20 + t][None].astype(np.float64)
        v = V[t, : nv[t]]
        plain = np_polyline_sqdist(x, v)[0]
        want = _np_prolonged_sqdist(x, v, LEAD * _np_rms_step(xs, 20 + t))[0] if gated[t] else plain
        assert loss[t] == pytest.approx(want, rel=2e-4, abs=1e-6), t
        lower += want < plain * (1 - 1e-3)
    assert lower > 0.1 * len(loss)                    # the prolongation matters on this stream


def test_the_line_is_the_same_with_and_without_lead(route_runs):
    """Only the loss changes: the states (line, history, noise estimate, memory) are bit for bit
    equal, and the losses differ only where the order weight gates them."""
    _, out = route_runs
    (s2, (l2, *_)), (s0, (l0, _, _, order)) = out[LEAD], out[0.0]
    chex.assert_trees_all_equal(s2, s0)
    l2, l0, order = np.asarray(l2), np.asarray(l0), np.asarray(order)
    assert np.all(l2 <= l0)
    np.testing.assert_array_equal(l2[order < history.ORDERED], l0[order < history.ORDERED])


def test_loss_agrees_with_info_loss_and_predict_is_the_line(route_runs):
    """`loss(state, x)` is the round's info.loss (and the line's own with end_lead=0); `predict`
    is the projection onto the line itself."""
    xs, out = route_runs
    l2, l0 = np.asarray(out[LEAD][1][0]), np.asarray(out[0.0][1][0])
    t = 100 + int(np.argmax(l2[100:] < 0.5 * l0[100:]))  # a round the prolongation predicts
    assert l2[t] < 0.5 * l0[t]
    L, plain = js.slpc(**SMALL), js.slpc(**SMALL, end_lead=0.0)
    st = L.init(jax.random.key(0), xs[:20])
    st, _ = js.run_stream(L, jax.random.key(1), xs[20:20 + t], st)
    x = jnp.asarray(xs[20 + t])
    assert float(L.loss(st, x)) == pytest.approx(float(l2[t]), rel=1e-5)
    assert float(plain.loss(st, x)) == pytest.approx(float(l0[t]), rel=1e-5)
    v = np.asarray(st.vertices[: int(st.n_vertices)], np.float64)
    ext, n_ext, in_order = js.curves.learner.prolonged_line(st, LEAD)   # what the CLI draws
    assert bool(in_order) and int(n_ext) == len(v) + 2
    (_, h1), (_, t1) = _np_prolongations(v, LEAD * _np_rms_step(xs, 20 + t))
    np.testing.assert_allclose(np.asarray(ext)[: len(v) + 2], np.concatenate([h1[None], v, t1[None]]),
                               rtol=1e-4, atol=1e-5)
    pts = np.asarray(xs[20 + t - 10:20 + t + 10])
    proj = np.asarray(L.predict(st, jnp.asarray(pts)))
    np.testing.assert_allclose(((pts - proj) ** 2).sum(1), np_polyline_sqdist(pts, v), rtol=1e-4, atol=1e-7)


def test_streams_in_random_order_are_unchanged():
    xs = datasets.make_cubic_stream(160, seed=2).astype(np.float32)
    (s2, o2), (s0, o0) = (_run(js.slpc(**SMALL, end_lead=lead), xs) for lead in (LEAD, 0.0))
    assert float(np.max(np.asarray(o0[3]))) == 0.0    # never seen as ordered
    chex.assert_trees_all_equal((s2, o2), (s0, o0))


def test_equivariant_under_scale_and_rotation(route_runs):
    """On a·Q·x (a a power of 2, Q a quarter turn: exact in floating point) the losses scale by a²."""
    xs, out = route_runs
    Q = np.array([[0.0, -1.0], [1.0, 0.0]], np.float32)
    loss2 = np.asarray(_run(js.slpc(**SMALL, end_lead=LEAD), (8.0 * xs @ Q.T).astype(np.float32))[1][0])
    np.testing.assert_allclose(loss2 / 64.0, np.asarray(out[LEAD][1][0]), rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("bad", [-1.0, float("inf"), float("nan")])
def test_bad_end_lead_is_refused(bad):
    with pytest.raises(ValueError, match="end_lead"):
        js.slpc(end_lead=bad)
    st = js.slpc(**SMALL).init(jax.random.key(0), datasets.make_cubic_stream(20, seed=0).astype(np.float32))
    with pytest.raises(ValueError, match="end_lead"):
        js.curves.learner.prolonged_line(st, bad)
    with pytest.raises(ValueError, match="end_lead"):
        js.curves.learner.loss(st, st.centre, bad)
