"""Tests of PACBO (jaxstream/pacbo.py) against slow NumPy references.

Small capacities (p = 5 clusters, H = 16 history slots, a few MCMC steps)
keep the whole file fast; statistical tests use fixed seeds.
"""
import math

import numpy as np
import pytest
from scipy import stats
from scipy.special import gammaln

import jax
import jax.numpy as jnp

import jaxstream
from jaxstream import clustering as P  # the pacbo module (jaxstream.pacbo is the factory)

D = 2
CAP = 5          # max_clusters for the small learner
HIST = 16        # history_size
STEPS = 10       # MCMC steps per round
MEANS4 = np.array([[0.0, 0.0], [-4.0, -1.0], [0.0, 7.0], [5.0, 2.0]])


def four_groups(seed, n):
    rng = np.random.default_rng(seed)
    return (MEANS4[rng.integers(0, 4, n)] + rng.standard_normal((n, 2))).astype(np.float32)


CALLS = {"update": 0}


def _trace(state, x, info):
    """Per round: the Info and the partition that predicted x (before the update)."""
    return info, state.centers, state.n_clusters


@pytest.fixture(scope="module")
def small():
    """A small learner, a stream and a jitted run_stream shared by several tests.

    ``run`` scans a copy of the learner whose update counts its Python
    executions (traces).
    """
    learner = P.pacbo(CAP, HIST, STEPS, radius=12.0)

    def counted(key, state, x):
        CALLS["update"] += 1
        return learner.update(key, state, x)

    counted_learner = learner._replace(update=counted)
    xs = four_groups(0, 24)
    run = jax.jit(lambda k, x, s: jaxstream.run_stream(counted_learner, k, x, s, trace=_trace))
    state0 = learner.init(jax.random.PRNGKey(0), xs[:0])
    return learner, xs, run, state0


# ----------------------------------------------------------------------------
# NumPy references
# ----------------------------------------------------------------------------

def np_loss(x, c, k):
    return min(float(np.sum((x - c[j]) ** 2)) for j in range(k))


def np_energy(c, k, hist, valid, hloss, lam2, weight):
    total = 0.0
    for i in range(len(hist)):
        if valid[i]:
            l = np_loss(hist[i], c, k)
            total += l + 0.5 * lam2[i] * (l - hloss[i]) ** 2
    return weight * total


def np_log_prior(c, k, ball):
    d = c.shape[1]
    if any(np.linalg.norm(c[j]) > ball for j in range(k)):
        return -np.inf
    return k * (gammaln(d / 2 + 1) - (d / 2) * math.log(math.pi) - d * math.log(ball))


def np_log_t(c, m, k, tau, df=3):
    d = c.shape[1]
    return sum(stats.multivariate_t(loc=m[j], shape=tau * np.eye(d), df=df).logpdf(c[j])
               for j in range(k))


def np_moves(k, p):
    return [kk for kk in (k - 1, k, k + 1) if 1 <= kk <= p]


def np_chain(draws, c0, k0, logdens, means, tau, p):
    """The reversible-jump MH chain, step by step, with given random numbers."""
    u_move, log_u, noise = (np.asarray(a, np.float64) for a in draws[:3])
    c, k = np.array(c0, np.float64), int(k0)
    ld, lq = logdens(c, k), np_log_t(c, means[k - 1], k, tau)
    out = []
    for n in range(len(u_move)):
        cands = np_moves(k, p)
        kn = cands[min(int(math.floor(u_move[n] * len(cands))), len(cands) - 1)]
        m = means[kn - 1]
        cn = np.zeros_like(c)
        cn[:kn] = m[:kn] + math.sqrt(tau) * noise[n, :kn]
        ldn, lqn = logdens(cn, kn), np_log_t(cn, m, kn, tau)
        log_a = ldn - ld + lq - lqn + math.log(len(cands)) - math.log(len(np_moves(kn, p)))
        if np.isnan(log_a):
            log_a = -np.inf
        acc = log_u[n] < log_a
        out.append((kn, min(1.0, math.exp(min(log_a, 0.0))), acc))
        if acc:
            c, k, ld, lq = cn, kn, ldn, lqn
    return c, k, out


def np_lloyd(X, C, k, iters):
    C = C.copy()
    for _ in range(iters):
        a = np.array([np.argmin([np.sum((x - C[j]) ** 2) for j in range(k)]) for x in X])
        for j in range(k):
            if np.any(a == j):
                C[j] = X[a == j].mean(0)
    return C


def np_add(X, C, k):
    C = C.copy()
    dm = [np_loss(x, C, k) for x in X]
    C[k] = X[int(np.argmax(dm))]
    return C


def np_remove(X, C, k):
    d2 = np.array([[np.sum((x - C[j]) ** 2) for j in range(k)] for x in X])
    a = d2.argmin(1)
    cost = np.zeros(k)
    for i in range(len(X)):
        s = np.sort(d2[i])
        cost[a[i]] += s[1] - s[0]
    j = int(np.argmin(cost))
    out = np.zeros_like(C)
    out[:k - 1] = C[[c for c in range(k) if c != j]]
    return out


def np_table(X, C, k, iters):
    p, d = C.shape
    C = C.copy()
    C[k:] = 0
    T = np.zeros((p, p, d))
    T[k - 1] = C
    row = C
    for j in range(k + 1, p + 1):
        row = np_add(X, row, j - 1)
        T[j - 1] = row
    row = C
    for j in range(k - 1, 0, -1):
        row = np_remove(X, row, j + 1)
        T[j - 1] = row
    for kk in (k - 1, k, k + 1):
        if 1 <= kk <= p:
            r = np_lloyd(X, T[kk - 1], kk, iters)
            r[kk:] = 0
            T[kk - 1] = r
    return T


# ----------------------------------------------------------------------------
# MCMC kernel
# ----------------------------------------------------------------------------

def _prior_draws(rng, n, p, d, ball):
    """n exact draws from the prior: k uniform on 1..p, active centres uniform in the ball."""
    k = rng.integers(1, p + 1, n)
    u = rng.standard_normal((n, p, d))
    u /= np.linalg.norm(u, axis=2, keepdims=True)
    c = u * (ball * rng.uniform(size=(n, p, 1)) ** (1.0 / d))
    c[np.arange(p)[None, :] >= k[:, None]] = 0.0
    return c.astype(np.float32), k.astype(np.int32)


def test_kernel_leaves_prior_invariant():
    """λ = 0, data-free proposal means: the prior (k uniform on 1..p, centres
    uniform in the ball) is invariant. Chains start from exact prior draws;
    after 20 steps k must still be uniform (χ²) and the centres uniform
    (radius^d and angle uniform, KS). p = 10 > 8 slots also exercises the
    noise of the second slot block, drawn inside the step. The same test must reject a target
    tilted by exp(0.3·k) (after 20 steps the chains have moved only part
    of the way to it), so it has power against a modest bias."""
    p, d, n_chains, n_steps, ball, tau = 10, 2, 20000, 20, 1.0, 0.3
    rng = np.random.default_rng(0)
    means = np.zeros((p, p, d), np.float32)
    for k in range(1, p + 1):
        means[k - 1, :k] = rng.uniform(-0.5, 0.5, (k, d))
    means = jnp.asarray(means)

    @jax.jit
    def run(key, c0, k0, tilt):
        logdens = lambda c, k: P.log_prior(c, k, ball) + tilt * k

        def one(kk, c, k):
            st = P.init_chain(c, k, logdens, means, tau)
            fin, info = P.sample_chain(kk, st, logdens, means, tau, n_steps)
            return fin, jnp.mean(info.is_accepted)

        return jax.vmap(one)(jax.random.split(key, n_chains), c0, k0)

    c0, k0 = _prior_draws(rng, n_chains, p, d, ball)
    fin, acc = run(jax.random.PRNGKey(0), c0, k0, 0.0)
    ks = np.asarray(fin.n_clusters)
    counts = np.bincount(ks, minlength=p + 1)[1:]
    assert counts.sum() == n_chains
    assert float(acc.mean()) > 0.05  # the chains do move (≈ 2 accepted moves each)
    assert stats.chisquare(counts).pvalue > 1e-3, counts
    c = np.asarray(fin.centers)
    active = np.arange(p)[None, :] < ks[:, None]
    pts = c[active]
    assert np.all(np.linalg.norm(pts, axis=1) <= ball * (1 + 1e-6))
    assert stats.kstest((np.linalg.norm(pts, axis=1) / ball) ** d, "uniform").pvalue > 1e-3
    angle = (np.arctan2(pts[:, 1], pts[:, 0]) + np.pi) / (2 * np.pi)
    assert stats.kstest(angle, "uniform").pvalue > 1e-3
    assert np.all(c[~active] == 0)

    fin, _ = run(jax.random.PRNGKey(0), c0, k0, 0.3)
    counts = np.bincount(np.asarray(fin.n_clusters), minlength=p + 1)[1:]
    assert stats.chisquare(counts).pvalue < 1e-6, counts


def _round_setup(n_seen, n_stored, H=12):
    """A learner state built by hand (float64): n_stored points in an H-slot
    history standing for n_seen points seen, 3 active centres."""
    rng = np.random.default_rng(n_seen)
    hist = np.zeros((H, D))
    hist[:n_stored] = four_groups(3, n_stored)
    idx = np.zeros(H, np.int32)
    idx[:n_stored] = np.sort(rng.choice(np.arange(1, n_seen + 1), n_stored, replace=False))
    hloss = np.where(np.arange(H) < n_stored, rng.uniform(0.5, 30.0, H), 0.0)
    centers = np.zeros((CAP, D))
    centers[:3] = [[0.5, 0.5], [-3.0, -1.0], [1.0, 6.0]]
    params = P.default_params(11.0)
    return P.State(jnp.asarray(centers), jnp.asarray(3, jnp.int32), jnp.asarray(hist), jnp.asarray(hloss),
                   jnp.asarray(idx), jnp.asarray(n_stored, jnp.int32), jnp.asarray(n_seen, jnp.int32),
                   P.Params(*(jnp.asarray(v, jnp.float64) for v in params)))


N_CHAIN = 40


@jax.jit
def _round_and_chain(state, key):
    t = P.round_target(state, kmeans_iters=4)
    rows = jnp.stack([t.logdensity_fn(t.means[k - 1], k) for k in (1, 3, CAP)])
    chain0 = P.init_chain(state.centers, state.n_clusters, t.logdensity_fn, t.means, t.tau)
    fin, infos = P.sample_chain(key, chain0, t.logdensity_fn, t.means, t.tau, N_CHAIN)
    one = P.build_kernel(3)(jax.random.fold_in(key, 1), chain0, t.logdensity_fn, t.means, t.tau)
    # The chain's own random numbers, for the reference (XLA computes them once).
    draws = P._draws(key, N_CHAIN, CAP, D, 3, state.centers.dtype)
    return t._replace(logdensity_fn=None), rows, chain0, fin, infos, one, draws


def test_chain_matches_numpy_reference():
    """Every step of sample_chain (move, proposal, acceptance probability,
    decision) equals a NumPy loop with the same random numbers, with λ, λ₂, τ
    and the prior written from the spec's formulas and scipy's multivariate
    t density. Cases: reservoir with a full history, a history not yet full,
    and a window whose prior ball passes through a proposal mean (so about
    half the proposals around it are refused by the prior). (The window
    policy differs only by `effective_count`, tested with the reservoir.)"""
    key = jax.random.PRNGKey(7)
    p, d, R = CAP, D, 11.0
    accepted = []
    with jax.enable_x64(True), np.errstate(invalid="ignore"):
        for n_seen, n_stored, boundary in [(30, 12, False), (9, 9, False), (30, 12, True)]:
            policy = "reservoir"
            state = _round_setup(n_seen, n_stored)
            run = _round_and_chain
            if boundary:
                means = np.asarray(run(state, key)[0].means)
                norm = np.linalg.norm(means[2, :3], axis=1).max()
                state = state._replace(params=state.params._replace(prior_scale=jnp.asarray(norm / R)))
            target, rows, chain0, fin, infos, (new, one), draws = run(state, key)
            # One `kernel` step (its own draws) is consistent with its info.
            assert int(one.proposed_k) in (2, 3, 4) and int(one.proposal.n_clusters) == int(one.proposed_k)
            chosen = one.proposal if bool(one.is_accepted) else chain0
            np.testing.assert_array_equal(np.asarray(new.centers), np.asarray(chosen.centers))
            assert 0.0 <= float(one.acceptance_prob) <= 1.0
            prior_scale = float(state.params.prior_scale)
            n_seen, n_stored = int(state.n_seen), int(state.n_stored)
            n = n_seen if policy == "reservoir" else n_stored
            lam = 2.0 * (d + 2) / (R * math.sqrt(max(n - 1, 1)))
            tau = 1.0 / math.sqrt(p * (n + 1) * d)
            weight = n_seen / n_stored if policy == "reservoir" else 1.0
            assert float(target.lam) == pytest.approx(lam, rel=1e-12)
            assert float(target.tau) == pytest.approx(tau, rel=1e-12)
            assert float(target.weight) == pytest.approx(weight, rel=1e-12)
            hist = np.asarray(state.history)
            valid = np.arange(len(hist)) < n_stored
            idx = np.asarray(state.history_index)
            lam2 = np.where(valid, (d + 2) / (np.sqrt(np.maximum(idx, 1)) * (prior_scale * R) ** 4), 0)
            hloss = np.asarray(state.history_loss)
            ball = prior_scale * R

            def logdens(c, k):
                return -lam * np_energy(c, k, hist, valid, hloss, lam2, weight) + np_log_prior(c, k, ball)

            means = np.asarray(target.means)
            for r, k in zip(np.asarray(rows), (1, 3, CAP)):
                assert r == pytest.approx(logdens(means[k - 1], k), rel=1e-9)
            assert float(chain0.log_proposal) == pytest.approx(
                np_log_t(np.asarray(state.centers), means[2], 3, tau), rel=1e-9)
            c_ref, k_ref, steps = np_chain(draws, state.centers, 3, logdens, means, tau, p)
            assert np.array_equal(np.asarray(infos.proposed_k), [s[0] for s in steps])
            np.testing.assert_allclose(np.asarray(infos.acceptance_prob), [s[1] for s in steps],
                                       rtol=1e-7, atol=1e-12)
            assert np.array_equal(np.asarray(infos.is_accepted), [s[2] for s in steps])
            assert int(fin.n_clusters) == k_ref
            np.testing.assert_allclose(np.asarray(fin.centers), c_ref, rtol=1e-12, atol=1e-12)
            accepted.extend(np.asarray(infos.is_accepted).tolist())
            if boundary:  # some proposals fell outside the ball and were refused by the prior
                assert np.any(np.asarray(infos.acceptance_prob) == 0.0)
    assert 0 < np.mean(accepted) < 1  # both branches of the MH test were exercised


# ----------------------------------------------------------------------------
# k-means, masks, proposal means
# ----------------------------------------------------------------------------

def test_kmeans_matches_numpy_and_masks():
    rng = np.random.default_rng(0)
    n, p = 40, 6

    @jax.jit
    def f(X, C, n_valid, k):
        cm = jnp.arange(p) < k
        return (P.kmeans(X, C, point_mask=jnp.arange(n) < n_valid, center_mask=cm, n_iters=7),
                P.nearest_center(X, C, cm))

    with jax.enable_x64(True):
        for trial in range(4):
            X = rng.standard_normal((n, 2)) * 3
            n_valid = int(rng.integers(10, n))
            k = int(rng.integers(1, p + 1))
            C = rng.standard_normal((p, 2)) * 3
            # Inactive slots sit exactly on data points: they must never win.
            C[k:] = X[: p - k]
            got, (dist, lab) = f(jnp.asarray(X), jnp.asarray(C), n_valid, k)
            got = np.asarray(got)
            ref = np_lloyd(X[:n_valid], C, k, 7)
            np.testing.assert_allclose(got[:k], ref[:k], rtol=1e-12, atol=1e-12)
            np.testing.assert_array_equal(got[k:], C[k:])
            assert np.all(np.asarray(lab) < k)
            np.testing.assert_allclose(np.asarray(dist), [np_loss(x, C, k) for x in X], rtol=1e-12)


def test_proposal_means_match_numpy():
    rng = np.random.default_rng(1)
    with jax.enable_x64(True):
        f = jax.jit(lambda X, m, C, k: P.proposal_means(X, m, C, k, 5))
        for trial in range(5):
            p, H = 7, 30
            n = int(rng.integers(6, H))
            X = rng.standard_normal((H, 2)) * 2
            X[n:] = 99.0  # invalid slots: must be ignored
            k = [1, 2, 4, 7, int(rng.integers(1, p + 1))][trial]
            C = rng.standard_normal((p, 2))
            got = np.asarray(f(jnp.asarray(X), jnp.arange(H) < n, jnp.asarray(C), k))
            np.testing.assert_allclose(got, np_table(X[:n], C, k, 5), rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------
# The learner
# ----------------------------------------------------------------------------

def test_update_records_prequential_loss_and_history(small):
    learner, xs, run, state0 = small
    state, (info, centers, ks) = run(jax.random.PRNGKey(2), xs, state0)
    assert int(state.n_seen) == len(xs) and int(state.n_stored) == HIST
    assert np.all(np.asarray(info.n_clusters) >= 1) and np.all(np.asarray(info.n_clusters) <= CAP)
    # The loss of round t is that of the partition before x_t; that partition
    # is the one the previous round ended with.
    centers, ks = np.asarray(centers), np.asarray(ks)
    for t in range(len(xs)):
        assert float(info.loss[t]) == pytest.approx(np_loss(xs[t], centers[t], ks[t]), rel=1e-5, abs=1e-6)
        assert np.all(centers[t][ks[t]:] == 0)
        if t:
            assert ks[t] == int(info.n_clusters[t - 1])
    assert ks[0] == 1 and np.all(centers[0] == 0)  # the empty init: one centre at the origin
    assert np.all(np.asarray(info.acceptance_rate) >= 0) and np.all(np.asarray(info.acceptance_rate) <= 1)
    assert not np.any(np.asarray(info.outside_radius))
    # Stored points are stream points, with their prequential losses.
    hist = np.asarray(state.history)
    for h, s_idx, hl in zip(hist, np.asarray(state.history_index), np.asarray(state.history_loss)):
        np.testing.assert_array_equal(h, xs[s_idx - 1])
        assert hl == pytest.approx(float(info.loss[s_idx - 1]), rel=1e-6)

    # A point outside the radius R (functional policy): learned as it is, flagged;
    # the centres stay in the prior's ball of radius 1.5·R.
    far = xs.copy()
    far[5] = [30.0, 0.0]
    s, (info, _, _) = run(jax.random.PRNGKey(2), far, state0)
    assert np.asarray(info.outside_radius).tolist() == [t == 5 for t in range(len(xs))]
    assert int(s.n_seen) == len(xs) and np.all(np.isfinite(np.asarray(s.centers)))
    assert np.all(np.linalg.norm(np.asarray(s.centers), axis=1) <= 1.5 * 12.0 + 1e-4)


def test_same_key_same_result_and_vmap_equals_loop(small):
    learner, xs, run, state0 = small
    a = run(jax.random.PRNGKey(5), xs, state0)
    b = run(jax.random.PRNGKey(5), xs, state0)
    for la, lb in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_array_equal(np.asarray(la), np.asarray(lb))
    c = run(jax.random.PRNGKey(6), xs, state0)
    assert not np.array_equal(np.asarray(a[1][0].acceptance_rate), np.asarray(c[1][0].acceptance_rate))

    B = 3
    streams = np.stack([four_groups(s, len(xs)) for s in range(B)])
    keys = jax.random.split(jax.random.PRNGKey(9), B)
    states = jaxstream.init_streams(learner, keys, streams[:, :0])
    vst, vinfo = jax.jit(lambda k, x, s: jaxstream.run_streams(learner, k, x, s, trace="info"))(
        keys, streams, states)
    for i in range(B):
        st, (info, _, _) = run(keys[i], streams[i], learner.init(keys[i], streams[i, :0]))
        np.testing.assert_array_equal(np.asarray(vinfo.n_clusters[i]), np.asarray(info.n_clusters))
        np.testing.assert_allclose(np.asarray(vst.centers[i]), np.asarray(st.centers), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(vinfo.loss[i]), np.asarray(info.loss), rtol=1e-5, atol=1e-5)


def test_update_traced_once_per_stream(small):
    learner, xs, run, state0 = small
    _, (info, _, _) = run(jax.random.PRNGKey(0), xs, state0)
    run(jax.random.PRNGKey(1), four_groups(1, len(xs)), state0)
    assert CALLS["update"] == 1
    assert len(np.unique(np.asarray(info.n_clusters))) > 1  # k changed without retracing


def test_jit_matches_no_jit(small):
    """run_stream called without jax.jit (only the scan's body is compiled)
    equals the jitted call."""
    learner, xs, run, state0 = small
    s_j, (i_j, _, _) = run(jax.random.PRNGKey(4), xs, state0)
    s_e, (i_e, _, _) = jaxstream.run_stream(learner, jax.random.PRNGKey(4), xs, state0, trace=_trace)
    np.testing.assert_array_equal(np.asarray(i_e.n_clusters), np.asarray(i_j.n_clusters))
    np.testing.assert_allclose(np.asarray(s_e.centers), np.asarray(s_j.centers), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(i_e.loss), np.asarray(i_j.loss), rtol=1e-5, atol=1e-6)


def test_float64():
    with jax.enable_x64(True):
        learner = P.pacbo(CAP, HIST, STEPS)
        xs = four_groups(2, 12).astype(np.float64)
        state = learner.init(jax.random.PRNGKey(0), xs[:2])
        assert state.centers.dtype == jnp.float64 and state.params.radius.dtype == jnp.float64
        assert float(state.params.radius) == pytest.approx(np.linalg.norm(xs[:2], axis=1).max())
        state = state._replace(params=state.params._replace(radius=jnp.asarray(12.0)))
        state, info = jaxstream.run_stream(learner, jax.random.PRNGKey(1), xs[2:], state, trace="info")
        assert state.centers.dtype == jnp.float64 and info.loss.dtype == jnp.float64
        assert np.all(np.isfinite(np.asarray(info.loss)))


def test_reservoir_is_uniform_and_window_keeps_last():
    n, H, reps = 40, 10, 2000
    xs = np.stack([np.arange(n), np.zeros(n)], axis=1).astype(np.float32)
    learner = P.pacbo(CAP, H, 1, radius=100.0)
    states = jax.jit(jax.vmap(lambda k: learner.init(k, xs)))(jax.random.split(jax.random.PRNGKey(0), reps))
    assert np.all(np.asarray(states.n_stored) == H) and np.all(np.asarray(states.n_seen) == n)
    idx = np.asarray(states.history_index)
    np.testing.assert_array_equal(np.asarray(states.history)[..., 0], idx - 1)  # index ↔ point
    assert np.all(np.sort(idx, axis=1)[:, 1:] != np.sort(idx, axis=1)[:, :-1])  # no duplicates
    freq = np.bincount(idx.ravel(), minlength=n + 1)[1:] / reps
    sd = math.sqrt(H / n * (1 - H / n) / reps)
    assert np.all(np.abs(freq - H / n) < 5 * sd), freq
    n_eff, weight = P.effective_count(jax.tree_util.tree_map(lambda a: a[0], states), "reservoir")
    assert int(n_eff) == n and float(weight) == pytest.approx(n / H)

    window = P.pacbo(CAP, H, 1, radius=100.0, history_policy="window")
    s = window.init(jax.random.PRNGKey(0), xs)
    assert sorted(np.asarray(s.history_index).tolist()) == list(range(n - H + 1, n + 1))
    n_eff, weight = P.effective_count(s, "window")
    assert int(n_eff) == H and float(weight) == 1.0


def test_learner_finds_separated_clusters():
    centres = np.array([[-6.0, 0.0], [6.0, 0.0], [0.0, 8.0]])
    rng = np.random.default_rng(0)
    n = 88
    truth = rng.integers(0, 3, n)
    xs = (centres[truth] + 0.5 * rng.standard_normal((n, 2))).astype(np.float32)
    model = P.PACBO(radius=10.0, max_clusters=CAP, history_size=HIST, n_steps=STEPS, seed=0)
    for i in range(0, n, 8):  # batches of 8: the compiled shape of the other wrapper tests
        model.learn_many(xs[i:i + 8])
    assert model.n_clusters == 3
    labels = model.predict(xs)
    assert labels.shape == (n,)
    # The partition is the true one (up to the names of the clusters).
    assert len(set(zip(labels.tolist(), truth.tolist()))) == 3
    # Centres near the groups' means (the reservoir holds 16 of the 88 points,
    # and the centres are one draw from a Student-t proposal around them).
    for j in range(3):
        assert np.min(np.linalg.norm(model.centers - centres[j], axis=1)) < 1.5
    assert model.cumulative_loss_ > 0 and model.n_seen_ == n


# ----------------------------------------------------------------------------
# Wrapper and bad input
# ----------------------------------------------------------------------------

def test_wrapper_learn_one_equals_learn_many():
    xs = four_groups(4, 11)
    a = P.PACBO(radius=12.0, max_clusters=CAP, history_size=HIST, n_steps=STEPS, seed=3)
    b = P.PACBO(radius=12.0, max_clusters=CAP, history_size=HIST, n_steps=STEPS, seed=3)
    a.learn_many(xs[:5]).learn_many(xs[5:])  # both padded to 8 rows: one compiled shape
    for x in xs:
        b.learn_one(x)
    assert a.n_clusters == b.n_clusters
    np.testing.assert_allclose(a.centers, b.centers, rtol=1e-5, atol=1e-5)
    assert a.cumulative_loss_ == pytest.approx(b.cumulative_loss_, rel=1e-5)
    assert a.centers.shape == (a.n_clusters, 2)
    assert a.predict(xs[0]).shape == () and a.predict(xs).shape == (11,)
    np.testing.assert_allclose(a.loss(xs), [np_loss(x, a.centers, a.n_clusters) for x in xs], rtol=1e-5)


def test_bad_input(small):
    learner, xs, run, state0 = small
    with pytest.raises(ValueError, match="max_clusters"):
        P.pacbo(0)
    with pytest.raises(ValueError, match="history_size"):
        P.pacbo(5, 0)
    with pytest.raises(ValueError, match="n_steps"):
        P.pacbo(5, 10, 0)
    with pytest.raises(TypeError, match="static capacity"):
        P.pacbo(5.0)
    with pytest.raises(ValueError, match="history_policy"):
        P.pacbo(5, 10, history_policy="fifo")
    with pytest.raises(ValueError, match="radius is not set"):
        P.pacbo(5).init(jax.random.PRNGKey(0), np.zeros((0, 2)))
    with pytest.raises(ValueError, match="radius must be"):
        P.pacbo(5, radius=-1.0).init(jax.random.PRNGKey(0), np.ones((1, 2)))
    with pytest.raises(ValueError, match="outside the radius"):
        P.pacbo(5, radius=1.0).init(jax.random.PRNGKey(0), np.array([[0.5, 0.0], [3.0, 0.0]]))
    with pytest.raises(ValueError, match="NaN"):
        learner.init(jax.random.PRNGKey(0), np.array([[np.nan, 0.0]]))
    with pytest.raises(ValueError, match="shape"):
        learner.update(jax.random.PRNGKey(0), state0, jnp.zeros(3))
    with pytest.raises(ValueError, match="NaN"):
        jaxstream.run_stream(learner, jax.random.PRNGKey(0), np.array([[0.0, np.nan]]), state0)
    with pytest.raises(ValueError, match="shape"):
        jaxstream.run_stream(learner, jax.random.PRNGKey(0), np.zeros((4, 3), np.float32), state0)

    # The wrapper raises instead, and learns nothing of the batch.
    m = P.PACBO(radius=12.0, max_clusters=CAP, history_size=HIST, n_steps=STEPS)
    with pytest.raises(RuntimeError):
        m.predict(xs[:2])
    m.learn_many(xs[:5])
    with pytest.raises(ValueError, match="outside the radius"):
        m.learn_many(np.array([[0.0, 0.0], [30.0, 0.0]]))
    assert m.n_seen_ == 5
    with pytest.raises(ValueError, match="empty"):
        m.learn_many(np.zeros((0, 2)))
    with pytest.raises(ValueError, match="dimension"):
        m.learn_many(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="NaN"):
        m.learn_one(np.array([np.inf, 0.0]))
    with pytest.raises(ValueError, match="shape"):
        m.learn_one(np.zeros((2, 2)))
    assert m.n_seen_ == 5
    # radius=None: fixed by the first batch.
    auto = P.PACBO(max_clusters=CAP, history_size=HIST, n_steps=STEPS)
    auto.learn_many(xs[:6])
    assert float(auto.state_.params.radius) == pytest.approx(np.linalg.norm(xs[:6], axis=1).max(), rel=1e-6)


def test_losses_are_differentiable(small):
    learner, xs, run, state0 = small
    state, _ = run(jax.random.PRNGKey(2), xs, state0)
    pm = jnp.arange(HIST) < state.n_stored
    lam2 = P.lambda2_schedule(state.params, state.history_index, D)

    @jax.jit
    def values(state, x):
        k = state.n_clusters
        g = jax.grad(lambda c: jnp.sum(P.loss(state._replace(centers=c), x)))(state.centers)
        gs = jax.grad(lambda c: jnp.sum(P.soft_loss(state._replace(centers=c), x, 1.0)))(state.centers)
        energy = lambda c: P.quasi_posterior_energy(c, k, state.history, pm, state.history_loss, lam2, 1.5)
        ge = jax.grad(energy)(state.centers)
        e_blk = P._energy_blocked(state.centers, k, state.history.T, pm, state.history_loss, lam2, 1.5)
        return g, gs, ge, energy(state.centers), e_blk, P.soft_loss(state, x, 1e-3), P.loss(state, x)

    g, gs, ge, e_full, e_blk, soft, hard = values(state, jnp.asarray(xs))
    k = int(state.n_clusters)
    assert np.all(np.asarray(g)[k:] == 0) and np.any(np.asarray(g)[:k] != 0)
    assert np.all(np.isfinite(np.asarray(gs))) and np.all(np.isfinite(np.asarray(ge)))
    np.testing.assert_allclose(np.asarray(soft), np.asarray(hard), atol=1e-2)
    # The public energy (full masked form) equals the blocked one used in the chain.
    assert float(e_full) == pytest.approx(float(e_blk), rel=1e-6)
    assert float(e_full) == pytest.approx(np_energy(np.asarray(state.centers), k, np.asarray(state.history),
                                                    np.asarray(pm), np.asarray(state.history_loss),
                                                    np.asarray(lam2), 1.5), rel=1e-5)
