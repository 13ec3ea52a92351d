"""slpc's drift offset (`tracking.drift_offset`, `offset_fit`; the ``drift_offset`` option): the
prequential loss on a drifting source measures the next point against the line moved by the
source's estimated offset. Tested against a NumPy loop, exact cases, `check_grads`, and on
streams: drifting arcs lose less, stationary and ordered streams are unchanged bit for bit."""
import numpy as np
import jax
import jax.numpy as jnp
import pytest
from jax.test_util import check_grads

import jaxstream as js
from jaxstream import checkpoint, datasets
from jaxstream.curves import learner as slpc_learner
from jaxstream.curves import tracking


def _np_offset(rows, w, s, verts, ridge=tracking.DRIFT_RIDGE):
    """`offset_fit` by a loop over rows and segments (NumPy, float64): each row's nearest segment (the
    first on ties), its residual and the projector across that segment (I at an end), the 2d × 2d normal
    equations of Σ w‖P(r − o + s·v)‖², the ridge, and o."""
    rows, verts = np.asarray(rows, np.float64), np.asarray(verts, np.float64)
    d = rows.shape[1]
    G, b = np.zeros((2 * d, 2 * d)), np.zeros(2 * d)
    for x, wi, si in zip(rows, np.asarray(w, np.float64), np.asarray(s, np.float64)):
        best = None
        for a, c in zip(verts[:-1], verts[1:]):
            ab = c - a
            t = 0.0 if ab @ ab == 0 else min(max((x - a) @ ab / (ab @ ab), 0.0), 1.0)
            q = a + t * ab
            if best is None or ((x - q) ** 2).sum() < best[0]:
                best = (((x - q) ** 2).sum(), x - q, ab, t)
        _, r, ab, t = best
        P = np.eye(d)
        if 0 < t < 1 and ab @ ab > 0:
            u = ab / np.sqrt(ab @ ab)
            P = P - np.outer(u, u)
        A = np.hstack([P, -si * P])  # residual model: P·(o − s·v)
        G += wi * A.T @ A
        b += wi * A.T @ (P @ r)
    G += (ridge * np.trace(G) / (2 * d) + np.finfo(np.float32).tiny) * np.eye(2 * d)
    return np.linalg.solve(G, b)[:d]


def _drifting_state(memory=40.0, n=300, seed=4):
    L = js.slpc(max_segments=12, history_size=64, memory=memory)
    xs = datasets.make_drifting_curve_stream(n, shift=(0.0, 1.0), seed=seed).astype(np.float32)
    s = L.init(jax.random.key(0), xs[:20])
    s, _ = js.run_stream(L, jax.random.key(1), xs[20:], s)
    return L, s


def test_drift_offset_matches_a_numpy_loop():
    """On a state after a drifting stream with a fixed memory, `tracking.drift_offset` is the NumPy fit
    over the stored rows, weighted by the objective's row weights, ages in units of τ."""
    L, s = _drifting_state()
    n, tau = int(s.n_stored), float(s.params.memory)
    rows = np.asarray(s.hist_x[:n], np.float64)
    w = np.asarray(tracking.row_weights(s)[:n], np.float64)
    age = (int(s.n_seen) - np.asarray(s.hist_t[:n], np.float64)) / tau
    verts = np.asarray(s.std_vertices[: int(s.n_vertices)], np.float64)
    ref = _np_offset(rows, w, age, verts)
    got = np.asarray(tracking.drift_offset(s), np.float64)
    np.testing.assert_allclose(got, ref, rtol=2e-3, atol=2e-3 * np.abs(ref).max())
    # data units, and the loss of the moved line
    # two compiled float32 programs: XLA may order the fit's sums differently (1.4e-6 apart on an AMD EPYC)
    np.testing.assert_allclose(np.asarray(slpc_learner.drift_offset(s)), got * float(s.scale), rtol=1e-5)
    x = np.asarray(s.centre) + 0.3
    moved = verts * float(s.scale) + np.asarray(s.centre, np.float64) + got * float(s.scale)
    from _refs import np_polyline_sqdist
    np.testing.assert_allclose(float(L.loss(s, jnp.asarray(x, jnp.float32))), np_polyline_sqdist(x[None], moved)[0],
                               rtol=1e-4)


def test_offset_fit_recovers_an_exact_offset_and_velocity():
    """Rows exactly on a right-angled line moved by o − s·v (each leg sees one coordinate, the rows past
    the corner's end both) give o back; padding rows (weight 0, anywhere) change nothing; rows along one
    straight segment leave the direction along it at 0."""
    with jax.enable_x64(True):
        verts = jnp.array([[0.0, 0.0], [5.0, 0.0], [5.0, 5.0]])
        o, v = np.array([0.3, -0.2]), np.array([0.5, 0.25])
        rng = np.random.default_rng(0)
        s = rng.uniform(0.0, 3.0, 40)
        leg1 = np.stack([rng.uniform(0.5, 4.5, 20), o[1] - s[:20] * v[1]], 1)
        leg2 = np.stack([5.0 + o[0] - s[20:] * v[0], rng.uniform(0.5, 4.5, 20)], 1)
        rows = np.concatenate([leg1, leg2])
        w = rng.uniform(0.5, 2.0, 40)
        got = tracking.offset_fit(jnp.asarray(rows), jnp.asarray(w), jnp.asarray(s), verts, 3)
        np.testing.assert_allclose(np.asarray(got), o, atol=1e-5)
        pad = jnp.concatenate([jnp.asarray(rows), jnp.full((5, 2), 7.0)])
        got_pad = tracking.offset_fit(pad, jnp.concatenate([jnp.asarray(w), jnp.zeros(5)]),
                                      jnp.concatenate([jnp.asarray(s), jnp.full(5, 9.0)]),
                                      jnp.concatenate([verts, jnp.full((2, 2), 3.0)]), 3)
        np.testing.assert_allclose(np.asarray(got_pad), np.asarray(got), rtol=1e-12, atol=1e-12)
        one = tracking.offset_fit(jnp.asarray(leg1), jnp.asarray(w[:20]), jnp.asarray(s[:20]), verts, 3)
        np.testing.assert_allclose(np.asarray(one), [0.0, o[1]], atol=1e-5)
        zero = tracking.offset_fit(jnp.asarray(rows), jnp.zeros(40), jnp.asarray(s), verts, 3)
        np.testing.assert_array_equal(np.asarray(zero), [0.0, 0.0])


def test_offset_fit_check_grads_with_padding_and_coincident_points():
    """Gradients of the fit in the rows, weights, ages and vertices, with padding rows and vertices
    and coincident rows (float64, both modes)."""
    with jax.enable_x64(True):
        rng = np.random.default_rng(1)
        verts = jnp.array([[0.0, 0.0], [2.0, 0.3], [3.0, 2.0], [9.0, 9.0], [9.0, 9.0]])
        rows = rng.uniform(0.2, 2.8, (12, 2)) * [1.0, 0.6]
        rows[5] = rows[4]  # coincident points
        rows = jnp.asarray(rows)
        w = jnp.asarray(np.r_[rng.uniform(0.5, 1.5, 10), 0.0, 0.0])  # two padding rows
        s = jnp.asarray(rng.uniform(0.0, 2.0, 12))
        f = lambda r, w, s, V: tracking.offset_fit(r, w, s, V, 3)  # noqa: E731
        check_grads(f, (rows, w, s, verts), order=1, modes=("fwd", "rev"), eps=1e-6, atol=1e-5, rtol=1e-5)


def test_no_offset_with_an_unlimited_memory():
    """With τ = inf the offset is exactly zero and the whole stream's losses, and the learner's
    ``loss``, are bit for bit those of ``drift_offset=False``; so are a route arriving in order
    (finite memory possible, the head path instead)."""
    xs = datasets.make_cubic_stream(200, seed=0).astype(np.float32)
    route = datasets.make_route_stream(300, seed=1).astype(np.float32)
    for x, kw in ((xs, dict(memory=float("inf"))), (route, dict(memory=50.0))):
        out = []
        for flag in (True, False):
            L = js.slpc(max_segments=12, history_size=64, drift_offset=flag, **kw)
            s = L.init(jax.random.key(0), x[:20])
            fin, loss = js.run_stream(L, jax.random.key(1), x[20:], s)
            out.append((np.asarray(loss), np.asarray(L.loss(fin, x[-1]))))
        np.testing.assert_array_equal(out[0][0], out[1][0])
        np.testing.assert_array_equal(out[0][1], out[1][1])
    _, s = _drifting_state(memory=float("inf"))
    np.testing.assert_array_equal(np.asarray(tracking.drift_offset(s)), [0.0, 0.0])


def test_info_loss_is_the_learner_loss_of_the_state_before():
    """On a drifting stream with a finite memory, each round's ``info.loss`` equals ``learner.loss`` of the
    state before the round at that point (the same moved line)."""
    L = js.slpc(max_segments=12, history_size=64, memory=40.0)
    xs = datasets.make_drifting_curve_stream(200, shift=(0.0, 2.0), seed=2).astype(np.float32)
    s = L.init(jax.random.key(0), xs[:20])
    _, (info_loss, own, off, fresh) = js.run_stream(
        L, jax.random.key(1), xs[20:], s,
        trace=lambda st, x, info: (info.loss, L.loss(st, x), slpc_learner.drift_offset(st),
                                   st.scale * jnp.where(slpc_learner._moves(st), tracking.drift_offset(st), 0.0)))
    np.testing.assert_allclose(np.asarray(own), np.asarray(info_loss), rtol=1e-6, atol=1e-7)
    assert np.abs(np.asarray(off)[50:]).max() > 0.01  # the offset is in use
    # the learner reads the rows' projections from its cache; a fresh projection of every row agrees
    np.testing.assert_allclose(np.asarray(off), np.asarray(fresh), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shift", [(0.0, 3.0), (3.0, 0.0)])
def test_drifting_arcs_lose_less_with_the_offset(shift):
    """Default learner, automatic memory: on sine arcs drifting 3 units over 600 rounds (noise 0.05) the
    offset lowers every stream's prequential loss, by a quarter or more on average (measured 0.5-0.6 of
    the line's own, `bench_slpc.py`)."""
    streams = [datasets.make_drifting_curve_stream(600, shift=shift, noise=0.05, seed=s).astype(np.float32)
               for s in range(4)]
    totals = {}
    for flag in (True, False):
        L = js.slpc(drift_offset=flag)
        keys = jax.random.split(jax.random.key(0), 4)
        xs = np.stack(streams)
        st = js.init_streams(L, keys, xs[:, :20])
        _, loss = js.run_streams(L, keys, xs[:, 20:], st)
        totals[flag] = np.asarray(loss, np.float64).sum(1)
    ratio = totals[True] / totals[False]
    assert (ratio < 1.0).all(), ratio
    assert ratio.mean() < 0.75, ratio


@pytest.mark.slow
def test_the_line_on_a_drifting_arc_neither_folds_nor_doubles():
    """Default learner on the "drift" family (seeds 0-9, T = 1000, noise 0.1): the line moved by its
    offset summarises the arc of the last round, length within [0.85, 1.2] of it and RMS distance from
    it ≤ 1.5σ, on at least 8 of 10 streams (all 10 measured; 3 of 10 when the smear over the memory was
    not priced: folds, a strand for the older rows and one for the newer, spikes to where it had been)."""
    from jaxstream.curves import shape
    data = [datasets.curve_family("drift", s, 1000) for s in range(10)]
    L = js.slpc()
    keys = jax.random.split(jax.random.key(0), 10)
    xs = np.stack([d.points for d in data]).astype(np.float32)
    fin, _ = js.run_streams(L, keys, xs[:, 20:], js.init_streams(L, keys, xs[:, :20]))
    moved = fin.vertices + jax.vmap(slpc_learner.drift_offset)(fin)[:, None]
    m = jax.vmap(shape.shape_measures)(moved, fin.n_vertices, jnp.asarray(np.stack([d.curve for d in data]),
                                                                           jnp.float32))
    length, fid = np.asarray(m.length_ratio), np.asarray(m.fidelity) / 0.1
    ok = (length >= 0.85) & (length <= 1.2) & (fid <= 1.5)
    assert ok.sum() >= 8, (length, fid)


def test_the_price_counts_the_smear_only_where_the_line_is_moved():
    """Each round's ``info.sigma2`` is the noise level plus ‖o‖²/d (o the drift offset of the state before
    the round, data units) where the memory is finite and the order random, and is unchanged by the
    ``drift_offset`` option (it only moves the prediction): the same lines and σ̂² with either."""
    xs = datasets.make_drifting_curve_stream(200, shift=(0.0, 2.0), seed=2).astype(np.float32)
    out = {}
    for flag in (True, False):
        L = js.slpc(max_segments=12, history_size=64, memory=40.0, drift_offset=flag)
        s = L.init(jax.random.key(0), xs[:20])
        out[flag] = js.run_stream(L, jax.random.key(1), xs[20:], s,
                                  trace=lambda st, x, info: (info.sigma2, slpc_learner.drift_offset(st), st.vertex_idx))
    (sig, off, verts), (sig_f, _, verts_f) = out[True][1], out[False][1]
    np.testing.assert_array_equal(np.asarray(sig), np.asarray(sig_f))
    np.testing.assert_array_equal(np.asarray(verts), np.asarray(verts_f))
    sig, smear = np.asarray(sig, np.float64), (np.asarray(off, np.float64) ** 2).sum(1) / 2
    assert smear[50:].max() > 3 * 0.1 ** 2  # the smear is larger than the noise (sd 0.1) here
    noise = sig - smear
    assert noise.min() >= -1e-6 * sig.max()  # σ̂² counts all of the smear
    # and what is left is a noise level, of the noise's order (the curve-free residual of 64 rows over-reads
    # it here, ~3x), not the smear again
    assert 0.3 * 0.1 ** 2 < np.median(noise[50:]) < 5 * 0.1 ** 2 < np.median(smear[50:]) + np.median(noise[50:])


def test_option_checks_and_old_checkpoints():
    """``drift_offset`` must be a bool; configurations saved before it existed load with it off (their
    losses stay what they were)."""
    with pytest.raises(TypeError, match="drift_offset"):
        js.slpc(drift_offset="yes")
    assert js.slpc().config.drift_offset is True
    assert js.slpc(drift_offset=np.bool_(False)).config.drift_offset is False
    assert checkpoint.ADDED_CONFIG_KEYS["slpc"]["drift_offset"] is False
    assert js.SLPC(drift_offset=False).learner.config.drift_offset is False
