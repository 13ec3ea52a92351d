"""slpc's prequential loss on streams arriving in order: the line and its head path (`end_lead`).

`history.trace_head` against a NumPy straight-line fit in time, with its gradients; the
learner's ``info.loss`` and `loss` against NumPy distances to the line, the join from its end to
where the trace is now, and the lead past it; the line itself, `predict`, and every stream in
random order unchanged."""
import chex
import numpy as np
import jax
import jax.numpy as jnp
import pytest
from jax.test_util import check_grads

import jaxstream as js
from jaxstream import datasets
from jaxstream.curves import history

from _refs import np_polyline_sqdist

SMALL = dict(max_segments=12, history_size=64)
LEAD = 8.0


def _np_trace_head(xs, n_seen):
    """The least-squares line in time through the last HEAD_WINDOW of the first n_seen points,
    at the newest of them, and its step per point (NumPy, float64)."""
    P = np.asarray(xs[n_seen - history.HEAD_WINDOW:n_seen], np.float64)
    t = np.arange(len(P), dtype=np.float64)
    slope, icpt = np.polyfit(t, P, 1)
    return icpt + slope * t[-1], slope


def _np_head_segments(xs, n_seen, verts, lead):
    """The head path's segments the loss counts: the lead [here, here + lead·step], and the join
    [nearer end, here] where here lies past that end along its end segment."""
    here, step = _np_trace_head(xs, n_seen)
    v = np.asarray(verts, np.float64)
    first = ((v[0] - here) ** 2).sum() <= ((v[-1] - here) ** 2).sum()
    end, inner = (v[0], v[1]) if first else (v[-1], v[-2])
    segs = [(here, here + lead * step)]
    if (here - end) @ (end - inner) > 0:
        segs.append((end, here))
    return segs


def _np_head_sqdist(points, xs, n_seen, verts, lead):
    best = np_polyline_sqdist(points, verts)
    for a, b in _np_head_segments(xs, n_seen, verts, lead):
        best = np.minimum(best, np_polyline_sqdist(points, np.stack([a, b])))
    return best


@pytest.mark.parametrize("n_seen", [16, 40, 64, 65, 150])
def test_trace_head_matches_numpy(n_seen):
    """The fit over the ring of recent points (wrapped or not) against np.polyfit."""
    rng = np.random.default_rng(n_seen)
    xs = np.cumsum(rng.normal(size=(n_seen, 3)), 0) + rng.normal(scale=0.3, size=(n_seen, 3))
    R = history.NN_ROWS
    ring = np.zeros((R, 3))
    for i in range(n_seen):
        ring[i % R] = xs[i]
    here, step = history.trace_head(jnp.asarray(ring, jnp.float32), jnp.int32(n_seen))
    want_here, want_step = _np_trace_head(xs, n_seen)
    np.testing.assert_allclose(np.asarray(here), want_here, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(step), want_step, rtol=1e-4, atol=1e-5)


def test_trace_head_check_grads_with_coincident_points():
    rng = np.random.default_rng(0)
    with jax.enable_x64(True):
        ring = rng.normal(size=(history.NN_ROWS, 2))
        ring[10] = ring[11]                             # coincident points
        f = lambda r: jnp.sum(jnp.stack(history.trace_head(r, jnp.int32(70))) ** 2)  # noqa: E731
        check_grads(f, (jnp.asarray(ring),), order=2, modes=["fwd", "rev"], atol=1e-6, rtol=1e-5)
        g = np.asarray(jax.grad(f)(jnp.asarray(ring)))
        used = {(70 - history.HEAD_WINDOW + i) % history.NN_ROWS for i in range(history.HEAD_WINDOW)}
        assert all(np.all(g[i] == 0) for i in range(history.NN_ROWS) if i not in used)  # only the last points


def _trace(state, x, info):
    return (info.loss, state.vertices, state.n_vertices, history.arrival_order(state.recent, state.n_seen))


def _run(learner, xs, key=1):
    st = learner.init(jax.random.key(0), xs[:20])
    return js.run_stream(learner, jax.random.key(key), xs[20:], st, trace=_trace)


@pytest.fixture(scope="module")
def route_runs():
    xs = datasets.make_route_stream(260, seed=3).astype(np.float32)
    out = {lead: _run(js.slpc(**SMALL, end_lead=lead), xs) for lead in (LEAD, 0.0)}
    return xs, out


def test_ordered_stream_loss_counts_the_head_path(route_runs):
    """info.loss on a route in order: min(the line, the lead, the join where it applies) from
    the line before the round, wherever the order weight passes `history.ORDERED` (NumPy,
    float64)."""
    xs, out = route_runs
    _, (loss, V, nv, order) = out[LEAD]
    loss, V, nv, order = (np.asarray(a) for a in (loss, V, nv, order))
    gated = order >= history.ORDERED
    assert gated.mean() > 0.8                         # a route: ordered on most rounds
    lower = joined = 0
    for t in range(len(loss)):
        x = xs[20 + t][None].astype(np.float64)
        v = V[t, : nv[t]]
        plain = np_polyline_sqdist(x, v)[0]
        want = _np_head_sqdist(x, xs, 20 + t, v, LEAD)[0] if gated[t] else plain
        assert loss[t] == pytest.approx(want, rel=2e-4, abs=1e-6), t
        lower += want < plain * (1 - 1e-3)
        joined += gated[t] and len(_np_head_segments(xs, 20 + t, v, LEAD)) == 2
    assert lower > 0.3 * len(loss)                    # the head path matters on this stream
    assert 0 < joined < gated.sum()                   # the join: sometimes, not always


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
    """`loss(state, x)` is the round's info.loss (and the line's own with end_lead=0);
    `head_path` gives the segments it counts; `predict` is the projection onto the line itself."""
    xs, out = route_runs
    l2, l0 = np.asarray(out[LEAD][1][0]), np.asarray(out[0.0][1][0])
    t = 100 + int(np.argmax(l2[100:] < 0.5 * l0[100:]))  # a round the head path predicts
    assert l2[t] < 0.5 * l0[t]
    L, plain = js.slpc(**SMALL, end_lead=LEAD), js.slpc(**SMALL, end_lead=0.0)
    st = L.init(jax.random.key(0), xs[:20])
    st, _ = js.run_stream(L, jax.random.key(1), xs[20:20 + t], st)
    x = jnp.asarray(xs[20 + t])
    assert float(L.loss(st, x)) == pytest.approx(float(l2[t]), rel=1e-5)
    assert float(plain.loss(st, x)) == pytest.approx(float(l0[t]), rel=1e-5)
    v = np.asarray(st.vertices[: int(st.n_vertices)], np.float64)
    seg, ok, in_order = js.curves.learner.head_path(st, LEAD)   # what the CLI draws
    assert bool(in_order) and bool(ok[1])
    want = _np_head_segments(xs, 20 + t, v, LEAD)
    np.testing.assert_allclose(np.asarray(seg[1]), np.stack(want[0]), rtol=1e-4, atol=1e-4)
    assert bool(ok[0]) == (len(want) == 2)
    if len(want) == 2:
        np.testing.assert_allclose(np.asarray(seg[0]), np.stack(want[1]), rtol=1e-4, atol=1e-4)
    pts = np.asarray(xs[20 + t - 10:20 + t + 10])
    proj = np.asarray(L.predict(st, jnp.asarray(pts)))
    np.testing.assert_allclose(((pts - proj) ** 2).sum(1), np_polyline_sqdist(pts, v), rtol=1e-4, atol=1e-7)


def test_streams_in_random_order_are_unchanged():
    xs = datasets.make_cubic_stream(160, seed=2).astype(np.float32)
    (s2, o2), (s0, o0) = (_run(js.slpc(**SMALL, end_lead=lead), xs) for lead in (LEAD, 0.0))
    assert float(np.max(np.asarray(o0[3]))) == 0.0    # never seen as ordered
    chex.assert_trees_all_equal((s2, o2), (s0, o0))


def test_equivariant_under_scale_and_reflection(route_runs):
    """On a·S·x (a a power of 2, S a reflection of one axis) the losses scale by a².

    Both are exact in floating point; a quarter turn is not quite: it swaps the coordinates,
    and XLA:CPU's fused multiply-adds round x·x + y·y and y·y + x·x differently, so the lattice
    line can round one vertex one step apart after a few dozen rounds."""
    xs, out = route_runs
    S = np.array([[-1.0, 0.0], [0.0, 1.0]], np.float32)
    loss2 = np.asarray(_run(js.slpc(**SMALL, end_lead=LEAD), (8.0 * xs @ S.T).astype(np.float32))[1][0])
    np.testing.assert_allclose(loss2 / 64.0, np.asarray(out[LEAD][1][0]), rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("bad", [-1.0, float("inf"), float("nan")])
def test_bad_end_lead_is_refused(bad):
    with pytest.raises(ValueError, match="end_lead"):
        js.slpc(end_lead=bad)
    st = js.slpc(**SMALL).init(jax.random.key(0), datasets.make_cubic_stream(20, seed=0).astype(np.float32))
    with pytest.raises(ValueError, match="end_lead"):
        js.curves.learner.head_path(st, bad)
    with pytest.raises(ValueError, match="end_lead"):
        js.curves.learner.loss(st, st.centre, bad)
