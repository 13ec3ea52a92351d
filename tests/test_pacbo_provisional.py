"""PACBO's provisional centres (issue 25): recent points the partition does not explain predict
(the loss) beside it, and change nothing else (k̂, centres, labels, the quasi-posterior). NumPy references for the marking rule and for `loss`,
`predict` and `soft_loss`; the quasi-posterior bit for bit with and without them."""
import chex
import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

import jax
import jax.numpy as jnp
from jax.test_util import check_grads

import jaxstream
from jaxstream.clustering import pacbo as P

CAP, HIST, STEPS, A = 10, 32, 16, 8


@pytest.fixture(autouse=True)
def _float64():
    """float64 for this file's tests only (exact comparisons with NumPy)."""
    with jax.enable_x64(True):
        yield


@pytest.fixture(scope="module")
def learner():
    return jaxstream.pacbo(CAP, HIST, STEPS)


def _state(learner, seed=0, k=3, n_seen=11):
    """A state with k active centres, a full ring of A points (some far from every centre)."""
    rng = np.random.default_rng(seed)
    s = learner.init(jax.random.key(0), jnp.asarray(rng.normal(size=(n_seen, 2)), jnp.float64))
    centers = np.zeros((CAP, 2))
    centers[:k] = rng.normal(scale=3.0, size=(k, 2))
    ids = np.full(CAP, -1, np.int32)
    ids[:k] = [7, 3, 11][:k]
    return s._replace(centers=jnp.asarray(centers), n_clusters=jnp.asarray(k, jnp.int32), ids=jnp.asarray(ids))


def test_ring_after_init_holds_the_last_points(learner):
    x0 = np.arange(22.0).reshape(11, 2)
    s = learner.init(jax.random.key(0), jnp.asarray(x0))
    assert s.recent.shape == (A, 2) and not np.any(np.asarray(s.provisional))
    for i in range(11 - A, 11):                         # x_{i+1} in row i mod A
        np.testing.assert_array_equal(np.asarray(s.recent[i % A]), x0[i])
        assert int(s.recent_index[i % A]) == i + 1
    s0 = learner.init(jax.random.key(0), jnp.zeros((0, 2)))
    assert np.all(np.asarray(s0.recent_index) == 0)


@pytest.mark.parametrize("level,sd", [(1e-3, 0.7), (0.2, 0.7), (0.0, 0.7)])
def test_marks_match_numpy(learner, level, sd):
    s = _state(learner)
    s = s._replace(params=s.params._replace(provisional_level=jnp.asarray(level)))
    s = s._replace(n_seen=jnp.asarray(12, jnp.int32))  # the round's point is x_12
    x = jnp.asarray([9.0, -8.0])
    out = P._provisional(s, x, jnp.asarray(sd), A)
    recent = np.asarray(s.recent).copy()
    index = np.asarray(s.recent_index).copy()
    recent[11 % A], index[11 % A] = np.asarray(x), 12
    np.testing.assert_array_equal(np.asarray(out.recent), recent)
    np.testing.assert_array_equal(np.asarray(out.recent_index), index)
    c = np.asarray(s.centers)[: int(s.n_clusters)]
    far = ((recent[:, None, :] - c[None]) ** 2).sum(-1).min(1)
    q = stats.chi2.isf(level, 2) if level > 0 else np.inf
    want = (index > 0) & (far > q * sd ** 2)
    np.testing.assert_array_equal(np.asarray(out.provisional), want)
    if level == 1e-3:
        assert want[11 % A]                              # the far new point
    if level == 0.0:
        assert not want.any()


def test_without_a_scale_every_recent_point_off_a_centre_predicts(learner):
    """While σ̂ rests on fewer than 2 residual points (n − k̂ − 1 < 2: the first rounds) there is no
    scale to test against, so every ring point off a centre is provisional (NumPy), not only the far
    ones; from 2 residual points on the χ² rule alone; provisional_level=0 marks none."""
    s = _state(learner)._replace(n_seen=jnp.asarray(12, jnp.int32))
    k = int(s.n_clusters)
    x = jnp.asarray(s.centers[0])                        # the round's point sits on a centre: never marked
    sd = jnp.asarray(0.7)
    index = np.asarray(s.recent_index).copy()
    index[11 % A] = 12
    q = stats.chi2.isf(1e-3, 2)
    for n_stored in (k + 1, k + 2, k + 3, k + 8):
        out = P._provisional(s._replace(n_stored=jnp.asarray(n_stored, jnp.int32)), x, sd, A)
        c = np.asarray(s.centers)[:k]
        far = ((np.asarray(out.recent)[:, None, :] - c[None]) ** 2).sum(-1).min(1)
        no_scale = n_stored - k - 1 < P.PROVISIONAL_FREE_DOF
        want = (index > 0) & ((far > q * 0.49) | (no_scale & (far > 0)))
        np.testing.assert_array_equal(np.asarray(out.provisional), want)
        assert not want[11 % A]
        assert want.sum() == (int(np.sum(index > 0)) - 1 if no_scale else int(np.sum((index > 0) & (far > q * 0.49))))
    off = s._replace(n_stored=jnp.asarray(k + 1, jnp.int32),
                     params=s.params._replace(provisional_level=jnp.asarray(0.0)))
    assert not np.any(np.asarray(P._provisional(off, x, sd, A).provisional))


def test_loss_predict_soft_loss_match_numpy(learner):
    s = _state(learner)
    prov = np.array([True, False, True, False, False, True, False, False])
    s = s._replace(provisional=jnp.asarray(prov))
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.normal(scale=3.0, size=(20, 2)), np.asarray(s.recent)[prov] + 1e-3])
    c, k, r = np.asarray(s.centers), int(s.n_clusters), np.asarray(s.recent)
    dc = ((x[:, None] - c[None, :k]) ** 2).sum(-1)
    dp = ((x[:, None] - r[None, prov]) ** 2).sum(-1)
    np.testing.assert_allclose(np.asarray(P.loss(s, jnp.asarray(x))), np.minimum(dc.min(1), dp.min(1)), rtol=1e-12)
    # Labels are the partition's, even next to a provisional centre.
    np.testing.assert_array_equal(np.asarray(P.predict(s, jnp.asarray(x))), np.asarray(s.ids)[dc.argmin(1)])
    assert np.all(dp.min(1)[-3:] < dc.min(1)[-3:])
    T = 0.8
    soft = -T * logsumexp(-np.concatenate([dc, dp], 1) / T, axis=1)
    np.testing.assert_allclose(np.asarray(P.soft_loss(s, jnp.asarray(x), T)), soft, rtol=1e-10)
    # Without provisional rows: the partition's ℓ(ĉ, x).
    s0 = s._replace(provisional=jnp.zeros(A, bool))
    np.testing.assert_allclose(np.asarray(P.loss(s0, jnp.asarray(x))), dc.min(1), rtol=1e-12)


def test_soft_loss_gradients_with_provisional_rows(learner):
    """check_grads through centres (inactive slots padded), provisional rows (masked ones
    included) and points, one of them on a provisional centre."""
    s = _state(learner)._replace(provisional=jnp.asarray([True, False, True] + [False] * (A - 3)))
    x = jnp.concatenate([jnp.asarray([[0.5, -1.0], [2.0, 2.0]]), s.recent[:1]])   # x[2] coincides
    f = lambda c, r, x, t: P.soft_loss(s._replace(centers=c, recent=r), x, t)
    check_grads(f, (s.centers, s.recent, x, 0.6), order=2, modes=["fwd", "rev"], atol=1e-5, rtol=1e-5)
    g = jax.grad(lambda x: jnp.sum(P.loss(s, x)))(x)
    assert np.all(np.isfinite(np.asarray(g)))
    np.testing.assert_allclose(np.asarray(g[2]), 0.0, atol=1e-12)  # on its provisional centre


def _late_group_stream(seed, n_first=14, n_second=10):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n_first, 2))
    b = np.array([12.0, 5.0]) + rng.normal(size=(n_second, 2))
    return np.concatenate([a, b])


def _trace(state, x, info):
    return info.loss, info.n_clusters, info.n_provisional, state.centers, state.recent, state.provisional


def test_quasi_posterior_is_the_same_and_loss_is_the_min(learner):
    xs = jnp.asarray(_late_group_stream(3))
    key = jax.random.key(5)
    runs = {}
    for level in (1e-3, 0.0):
        params = learner.params._replace(provisional_level=jnp.asarray(level))
        st = learner.init(jax.random.key(0), xs[:0], params)
        runs[level] = jaxstream.run_stream(learner, key, xs, st, trace=_trace)
    (s1, (l1, k1, n1, c1, r1, p1)), (s0, (l0, k0, n0, c0, _, _)) = runs[1e-3], runs[0.0]
    # The partition, its labels and the history are bit for bit the same.
    chex.assert_trees_all_equal((s1.centers, s1.n_clusters, s1.ids, s1.history_loss, s1.history_mask),
                                (s0.centers, s0.n_clusters, s0.ids, s0.history_loss, s0.history_mask))
    chex.assert_trees_all_equal((k1, c1), (k0, c0))
    assert int(np.sum(n0)) == 0 and int(np.sum(n1)) > 0
    # The prediction's loss: min(partition, provisional centres of the state before the round).
    xs_ = np.asarray(xs)
    dp = ((xs_[:, None] - np.asarray(r1)) ** 2).sum(-1)
    want = np.minimum(np.asarray(l0), np.where(np.asarray(p1), dp, np.inf).min(1))
    np.testing.assert_allclose(np.asarray(l1), want, rtol=1e-12)


@pytest.mark.parametrize("a,b", [(2.0 ** 5, 0.0), (2.0 ** -5, 0.0), (1.0, 64.0)])
def test_marks_follow_a_change_of_units(learner, a, b):
    """The threshold is q·σ̂² and σ̂ is in the data's units, so on a·x + b (a a power of 2) the same
    rows are marked, the ring's rows map the same way and the losses scale by a²."""
    xs = _late_group_stream(3)
    key = jax.random.key(5)
    outs = []
    for scale, shift in [(1.0, 0.0), (a, b)]:
        ys = jnp.asarray(scale * xs + shift)
        st = learner.init(jax.random.key(0), ys[:0])
        outs.append(jaxstream.run_stream(learner, key, ys, st, trace=_trace)[1])
    (l0, k0, n0, _, r0, p0), (l1, k1, n1, _, r1, p1) = outs
    assert int(np.sum(n0)) > 0                              # marks happen: not vacuous
    np.testing.assert_array_equal(np.asarray(k1), np.asarray(k0))
    np.testing.assert_array_equal(np.asarray(p1), np.asarray(p0))
    filled = (np.arange(A)[None, :] < np.arange(len(xs))[:, None])[..., None]  # rows written before round t
    np.testing.assert_allclose(np.where(filled, (np.asarray(r1) - b) / a, 0.0), np.where(filled, np.asarray(r0), 0.0),
                               rtol=1e-9, atol=1e-9)
    # A shift changes the rounding of the chain's sums (a centre moves by ~1e-3): close, not equal.
    np.testing.assert_allclose(np.asarray(l1)[1:] / a ** 2, np.asarray(l0)[1:], rtol=1e-6 if b == 0 else 1e-2)


def test_unexplained_points_predict_while_the_partition_waits(learner):
    """A prohibitive price keeps k̂ = 1 once the first group has a few points: the late group's points are never explained, so from
    its second point on each is predicted by the nearest of the group's earlier points in the ring."""
    xs = jnp.asarray(_late_group_stream(3))
    key = jax.random.key(5)
    out = {}
    for level in (1e-3, 0.0):
        params = learner.params._replace(provisional_level=jnp.asarray(level), price_scale=jnp.asarray(1e6))
        st = learner.init(jax.random.key(0), xs[:0], params)
        out[level] = jaxstream.run_stream(learner, key, xs, st, trace=_trace)[1]
    l1, k1, n1 = (np.asarray(a) for a in out[1e-3][:3])
    l0 = np.asarray(out[0.0][0])
    assert np.all(k1[8:] == 1)                             # (a few noisy first rounds aside)
    xs_ = np.asarray(xs)
    for t in range(15, 24):
        prev = xs_[max(14, t - A):t]                       # the group's earlier points still in the ring
        assert l1[t] == pytest.approx(((prev - xs_[t]) ** 2).sum(1).min(), rel=1e-12)
        assert l1[t] < l0[t]
    # Before the late group nothing is unexplained, except in the first rounds, where σ̂ rests on
    # fewer than 2 residual points and every earlier point predicts (no scale yet): never worse there.
    np.testing.assert_array_equal(l1[3:15], l0[3:15])
    assert np.all(l1[:3] <= l0[:3])
    assert n1[14] == 1 and n1[-1] == A
    state = jaxstream.run_stream(learner, key, xs, learner.init(
        jax.random.key(0), xs[:0], learner.params._replace(price_scale=jnp.asarray(1e6))))[0]
    assert int(state.n_clusters) == 1 and int(np.sum(state.provisional)) == A
    assert np.all(np.asarray(P.predict(state, xs)) == int(state.ids[0]))


def test_no_ring_and_paper_preset():
    xs = jnp.asarray(_late_group_stream(4))
    key = jax.random.key(1)
    none = jaxstream.pacbo(CAP, HIST, STEPS, provisional_size=0)
    s = none.init(jax.random.key(0), xs[:3])
    assert s.recent.shape == (0, 2)
    _, l_none = jaxstream.run_stream(none, key, xs[3:], s)
    off = jaxstream.pacbo(CAP, HIST, STEPS)
    s = off.init(jax.random.key(0), xs[:3], off.params._replace(provisional_level=jnp.asarray(0.0)))
    _, l_off = jaxstream.run_stream(off, key, xs[3:], s)
    chex.assert_trees_all_equal(l_none, l_off)
    assert float(jaxstream.pacbo(CAP, HIST, STEPS, preset="paper").params.provisional_level) == 0.0



def test_no_ring_loss_derivatives_are_the_partitions(learner):
    """provisional_size=0: the loss's derivatives (forward and reverse) are those of
    min_j ||x − c_j||² (a minimum over the empty ring once gave a NaN tangent)."""
    none = jaxstream.pacbo(CAP, HIST, STEPS, provisional_size=0)
    s = _state(learner)._replace(recent=jnp.zeros((0, 2)), provisional=jnp.zeros((0,), bool))
    x = jnp.array([0.3, -0.7])

    def ref(c, x):
        return jnp.min(jnp.sum((x - c[:3]) ** 2, -1))

    f = lambda c, x: none.loss(s._replace(centers=c), x)
    check_grads(f, (s.centers, x), order=1, modes=["fwd", "rev"])
    v = (jnp.ones_like(s.centers), jnp.array([1.0, 2.0]))
    np.testing.assert_allclose(jax.jvp(f, (s.centers, x), v)[1], jax.jvp(ref, (s.centers, x), v)[1], rtol=1e-12)

@pytest.mark.parametrize("bad", [-0.1, 1.0, float("nan")])
def test_bad_level_is_refused(learner, bad):
    with pytest.raises(ValueError, match="provisional_level"):
        jaxstream.pacbo(CAP, HIST, STEPS, provisional_level=bad)
    with pytest.raises(ValueError, match="provisional_level must be in"):
        learner.init(jax.random.key(0), jnp.zeros((2, 2)), learner.params._replace(provisional_level=jnp.asarray(bad)))


def test_bad_ring_size_is_refused():
    with pytest.raises(ValueError, match="provisional_size"):
        jaxstream.pacbo(CAP, HIST, STEPS, provisional_size=-1)
