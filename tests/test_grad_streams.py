"""Gradients through whole streams (issue 23): pathwise derivatives against finite
differences, the smoothed-gradient estimator against its analytic value and against a
finite difference of the same smoothed objective, and tuning by gradient."""
import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from scipy.stats import norm

import jaxstream as js
from jaxstream import differentiable as D



@pytest.fixture(autouse=True)
def _float64():
    """float64 for this file's tests only (a global switch would leak into every test the
    same pytest worker runs after it)."""
    with jax.enable_x64(True):
        yield

KEY = jax.random.key(0)


def _cubic(n_streams, T, seed0=0):
    return jnp.asarray(np.stack([js.datasets.make_cubic_stream(T, seed=seed0 + s) for s in range(n_streams)]))


def _paired_se(a, b):
    d = a.pair_values - b.pair_values
    return jnp.std(d, ddof=1) / jnp.sqrt(d.shape[0])


def _assert_matches_smoothed_fd(learner, streams, names, lt, est, kw, h=0.3):
    """Each component of the estimate `est` at log θ = `lt` agrees, within 4 combined standard
    errors, with a central difference of the same smoothed objective (common random numbers:
    the same key gives the same z, streams and learner keys on both sides)."""
    for j in range(len(names)):
        e = jnp.zeros(len(names)).at[j].set(h)
        hi = D.smoothed_grad(learner, KEY, streams, learner.params, names, lt + e, **kw)
        lo = D.smoothed_grad(learner, KEY, streams, learner.params, names, lt - e, **kw)
        fd = (hi.value - lo.value) / (2 * h)
        se_fd = _paired_se(hi, lo) / (2 * h)  # hi and lo are paired draw by draw
        assert abs(float(est.grad[j] - fd)) < 4 * float(jnp.sqrt(est.se[j] ** 2 + se_fd ** 2)), (j, est, fd)


@pytest.mark.slow  # ~45 s each: compiling reverse mode through the slpc round
@pytest.mark.parametrize("stream", ["cubic", "route", "drift"])
def test_slpc_pathwise_grad_matches_finite_difference(stream):
    """On a route arriving in order the loss counts the head path, fitted to the trace's newest
    points; on a drifting arc with a finite memory, the line moved by the drift offset, fitted to
    the stored rows: both are differentiated too."""
    learner = js.slpc(max_segments=6, history_size=32)
    if stream == "cubic":
        xs = _cubic(1, 50)[0]
    elif stream == "drift":
        learner = js.slpc(max_segments=6, history_size=32, memory=15.0)
        xs = jnp.asarray(js.datasets.make_drifting_curve_stream(60, shift=(0.0, 1.5), seed=2))
        still = js.slpc(max_segments=6, history_size=32, memory=15.0, drift_offset=False)
        assert float(D.stream_loss(learner, KEY, xs, reverse_mode=False)) != \
            float(D.stream_loss(still, KEY, xs, reverse_mode=False))       # the offset counts
    else:
        xs = jnp.asarray(js.datasets.make_route_stream(60, seed=3))
        plain = js.slpc(max_segments=6, history_size=32, end_lead=0.0)
        assert float(D.stream_loss(learner, KEY, xs, reverse_mode=False)) < \
            float(D.stream_loss(plain, KEY, xs, reverse_mode=False))      # the head path counts
    f = jax.jit(lambda xs: D.stream_loss(learner, KEY, xs))
    g = jax.grad(lambda xs: D.stream_loss(learner, KEY, xs))(xs)
    assert bool(jnp.all(jnp.isfinite(g))) and float(jnp.abs(g).sum()) > 0
    v = jnp.asarray(np.random.default_rng(1).normal(size=xs.shape))
    h = 1e-6
    fd = (f(xs + h * v) - f(xs - h * v)) / (2 * h)
    np.testing.assert_allclose(float(jnp.vdot(g, v)), float(fd), rtol=1e-5)
    # Hyper-parameters that only enter comparisons: derivative exactly 0 (documented).
    gp = jax.grad(lambda p: D.stream_loss(learner, KEY, xs, p))(learner.params)
    assert float(gp.h_scale) == 0.0 and float(gp.length_scale) == 0.0 and float(gp.z_scale) == 0.0


@pytest.mark.slow  # ~40 s: compiling reverse mode through PACBO's round
@pytest.mark.parametrize("name", ["pacbo", "landmark_mds"])
def test_reverse_mode_pathwise_pacbo_landmarks(name):
    # max_clusters = 9: three blocks of slots, so the static form skips guarded iterations.
    learner = (js.pacbo(max_clusters=9, n_steps=50) if name == "pacbo"
               else js.landmark_mds(max_landmarks=6, n_components=2))
    xs = _cubic(1, 40)[0]
    f = jax.jit(lambda xs: D.stream_loss(learner, KEY, xs, reverse_mode=False))
    g = jax.jit(jax.grad(lambda xs: D.stream_loss(learner, KEY, xs)))(xs)
    assert bool(jnp.all(jnp.isfinite(g))) and float(jnp.abs(g).sum()) > 0
    v = jnp.asarray(np.random.default_rng(1).normal(size=xs.shape))
    _, tan = jax.jvp(f, (xs,), (v,))
    np.testing.assert_allclose(float(jnp.vdot(g, v)), float(tan), rtol=1e-9)  # the same linearisation
    h = 1e-6
    fd = (f(xs + h * v) - f(xs - h * v)) / (2 * h)
    np.testing.assert_allclose(float(tan), float(fd), rtol=1e-4)


def test_grad_after_the_fast_forms_were_compiled_and_through_run_stream():
    # The compiled fast forms (init's scan, run_stream's driver) must not be handed to jax.grad:
    # their caches are keyed on the loop form.
    learner = js.landmark_mds(max_landmarks=6, n_components=2)
    xs = _cubic(1, 40)[0]
    jax.jit(lambda xs: D.stream_loss(learner, KEY, xs, reverse_mode=False))(xs)
    js.run_stream(learner, KEY, xs[20:], learner.init(KEY, xs[:20]))
    g = jax.grad(lambda xs: D.stream_loss(learner, KEY, xs))(xs)
    assert bool(jnp.all(jnp.isfinite(g))) and float(jnp.abs(g).sum()) > 0

    def total(xs):
        with js.static_trip_counts():
            _, losses = js.run_stream(learner, KEY, xs[20:], learner.init(KEY, xs[:20]))
        return jnp.sum(losses)

    chex.assert_trees_all_close(jax.grad(total)(xs), g, rtol=1e-9, atol=1e-12)


def _assert_grad_needs_no_context(total, xs):
    """jax.grad(total) without `static_trip_counts()` is nonzero and equals it taken inside; so does
    jax.grad(jax.jit(total)) (traced before anything differentiates it), up to the jitted program's
    rounding."""
    def total_in_context(xs):
        with js.static_trip_counts():
            return total(xs)

    g = jax.grad(total)(xs)
    assert float(jnp.abs(g).sum()) > 0
    ref = jax.grad(total_in_context)(xs)
    chex.assert_trees_all_equal(g, ref)
    g_jit = jax.grad(jax.jit(total))(xs)
    np.testing.assert_allclose(g_jit, ref, rtol=1e-4, atol=1e-5 * float(jnp.abs(ref).max()))


@pytest.mark.parametrize("name", ["pacbo", "landmark_mds"])
def test_reverse_mode_through_run_stream_and_init_needs_no_context(name):
    """`jax.grad` of a loop over `init` and `run_stream` written as a user writes it, without
    `static_trip_counts()`: the learners' dynamic loops take their static form because their
    inputs are being differentiated, and the gradient equals the one taken inside the context."""
    learner = js.pacbo(6, 32, 20) if name == "pacbo" else js.landmark_mds(max_landmarks=6, n_components=2)
    xs = _cubic(1, 50, seed0=3)[0]

    def total(xs):
        _, losses = js.run_stream(learner, KEY, xs[20:], learner.init(KEY, xs[:20]))
        return jnp.sum(losses)

    _assert_grad_needs_no_context(total, xs)
    js.run_stream(learner, KEY, xs[20:], learner.init(KEY, xs[:20]))  # undifferentiated: the dynamic form


def test_reverse_mode_through_init_streams_and_run_streams_needs_no_context():
    """The batched drivers too: `jax.grad` through `init_streams` and `run_streams` without
    `static_trip_counts()` equals the gradient taken inside it (landmark MDS, 2 streams)."""
    learner = js.landmark_mds(max_landmarks=6, n_components=2)
    xs = _cubic(2, 40, seed0=7)
    keys = jax.random.split(KEY, 2)

    def total(xs):
        states = js.init_streams(learner, keys, xs[:, :20])
        _, losses = js.run_streams(learner, keys, xs[:, 20:], states)
        return jnp.sum(losses)

    _assert_grad_needs_no_context(total, xs)


def _final_state(learner, xs, n_init=20):
    from jaxstream._core import _scan_stream, _trace_loss
    with js.static_trip_counts():
        st = learner.init(KEY, xs[:n_init])
        return _scan_stream(learner.update, KEY, xs[n_init:], st, None, _trace_loss, 0, all_valid=True)[0]


def test_reverse_mode_through_landmark_state_eps():
    # ε grows by a fixed-point loop in the replacement rule; its derivative w.r.t. the data
    # (a pair distance's) comes back through the static form, and matches a central difference.
    learner = js.landmark_mds(max_landmarks=6, n_components=2)
    xs = _cubic(1, 60)[0]
    eps = jax.jit(lambda xs: _final_state(learner, xs).eps)
    assert float(eps(xs)) > 0  # replacements happened
    g = jax.grad(lambda xs: _final_state(learner, xs).eps)(xs)
    v = jnp.asarray(np.random.default_rng(2).normal(size=xs.shape))
    h = 1e-6
    fd = (eps(xs + h * v) - eps(xs - h * v)) / (2 * h)
    assert float(jnp.abs(fd)) > 0
    np.testing.assert_allclose(float(jnp.vdot(g, v)), float(fd), rtol=1e-5)


@pytest.mark.slow  # ~30 s: compiling reverse mode through PACBO's round
def test_pacbo_proposal_scale_pathwise_grad_matches_finite_difference():
    learner = js.pacbo(max_clusters=3, n_steps=50)
    xs = _cubic(1, 40)[0]
    gp = jax.grad(lambda p: D.stream_loss(learner, KEY, xs, p))(learner.params)
    f = jax.jit(lambda s: D.stream_loss(learner, KEY, xs, learner.params._replace(proposal_scale=s),
                                        reverse_mode=False))
    s, h = learner.params.proposal_scale, 1e-6
    fd = (f(s + h) - f(s - h)) / (2 * h)
    assert float(jnp.abs(fd)) > 0
    np.testing.assert_allclose(float(gp.proposal_scale), float(fd), rtol=1e-5)


def test_gaussian_smoothing_unbiased_on_step_function():
    # L(θ) = 1[θ > 0]: the smoothed derivative is φ(θ/σ)/σ.
    sigma = 0.5
    f = lambda th, k: (th[0] > 0).astype(jnp.float64)
    for theta in (0.0, 0.3, -0.6):
        est = D.gaussian_smoothing_grad(f, jnp.array([theta]), KEY, sigma=sigma, n_pairs=4000)
        exact = norm.pdf(theta / sigma) / sigma
        assert abs(float(est.grad[0]) - exact) < 4 * float(est.se[0]), (theta, est, exact)
    # And a wrong answer would be caught: the estimate is informative (se well below the value).
    assert float(est.se[0]) < 0.1 * exact


def test_smoothed_grad_slpc_matches_finite_difference_and_is_reproducible():
    learner = js.slpc(max_segments=6, history_size=32)
    streams = _cubic(8, 50)
    names = ("h_scale", "length_scale")
    lt = jnp.log(jnp.array([4.0, 4.0]))   # over-penalised: a clearly non-zero gradient
    kw = dict(sigma=0.3, n_pairs=256)
    est = D.smoothed_grad(learner, KEY, streams, learner.params, names, lt, **kw)
    again = D.smoothed_grad(learner, KEY, streams, learner.params, names, lt, **kw)
    chex.assert_trees_all_equal(est, again)                  # same key: bit-identical
    assert float(est.grad.sum()) > 4 * float(jnp.sqrt(jnp.sum(est.se ** 2)))   # informative: clearly > 0
    _assert_matches_smoothed_fd(learner, streams, names, lt, est, kw)


def test_smoothed_grad_compiles_once():
    learner = js.slpc(max_segments=6, history_size=32)
    streams = _cubic(2, 30)
    names = ("h_scale",)
    fn = D._smoothed_grad_fn(learner.init, learner.update, names, 0.2, 4, 20, D.log_bounds(learner, names), None)
    for s in range(3):
        D.smoothed_grad(learner, jax.random.key(s), streams, learner.params, names, jnp.array([s * 0.1]),
                        n_pairs=4)
    assert fn._cache_size() == 1


def test_expected_loss_value_and_grad_are_smoothed_grads_estimate():
    learner = js.slpc(max_segments=6, history_size=32)
    streams, names, lt = _cubic(2, 30), ("h_scale", "length_scale"), jnp.log(jnp.array([0.5, 0.3]))
    est = D.smoothed_grad(learner, KEY, streams, learner.params, names, lt, n_pairs=4)
    val, g = jax.value_and_grad(lambda t: D.expected_loss(learner, KEY, streams, learner.params, names, t,
                                                          n_pairs=4))(lt)
    chex.assert_trees_all_equal((val, g), (est.value, est.grad))
    # It composes: a penalty added to it differentiates through both.
    g2 = jax.grad(lambda t: 3.0 * D.expected_loss(learner, KEY, streams, learner.params, names, t, n_pairs=4)
                  + jnp.sum(t ** 2))(lt)
    chex.assert_trees_all_close(g2, 3.0 * est.grad + 2 * lt)


@pytest.mark.slow  # ~30 s: 128 runs of each estimator
def test_smoothing_estimator_agrees_with_optax_perturbations():
    # An independent implementation of the same smoothed gradient (for one frozen learner key):
    # optax's score-function estimator with Normal noise and a baseline. Same number of runs
    # (64); the means over 8 repeats agree within 4 combined standard errors.
    perturbations = pytest.importorskip("optax.perturbations")  # an API optax says is changing
    learner = js.slpc(max_segments=6, history_size=32)
    streams = _cubic(4, 40)
    lt0 = jnp.log(jnp.array([0.5, 0.3]))
    key = jax.random.key(3)

    def L(lt):
        p = learner.params._replace(h_scale=jnp.exp(lt[0]), length_scale=jnp.exp(lt[1]))
        return jnp.mean(jax.vmap(lambda x: D.stream_loss(learner, key, x, p, reverse_mode=False))(streams))

    ours = jax.jit(lambda k: D.gaussian_smoothing_grad(lambda th, _: L(th), lt0, k, sigma=0.2, n_pairs=32).grad)
    pert = perturbations.make_perturbed_fun(L, num_samples=64, sigma=0.2, noise=perturbations.Normal())
    theirs = jax.jit(jax.grad(pert, argnums=1))
    o = np.array([ours(jax.random.key(i)) for i in range(8)])
    q = np.array([theirs(jax.random.key(100 + i), lt0) for i in range(8)])
    se = np.sqrt(o.var(0, ddof=1) / 8 + q.var(0, ddof=1) / 8)
    assert np.all(np.abs(o.mean(0) - q.mean(0)) < 4 * se), (o.mean(0), q.mean(0), se)
    assert np.all(np.abs(o.mean(0)) > 0)


def test_tune_keeps_parameters_in_their_valid_range():
    learner = js.slpc(max_segments=6, history_size=32)
    assert D.log_bounds(learner, ("epsilon", "h_scale")) == ((-np.inf, 0.0), (-np.inf, np.inf))
    # An optimiser that always raises log ε by 5: without the projection ε would reach e^5·0.1.
    up = optax.GradientTransformation(lambda p: optax.EmptyState(),
                                      lambda g, s, p=None: (jnp.full_like(g, 5.0), s))
    r = D.tune(learner, KEY, _cubic(2, 30), ("epsilon",), optimizer=up, steps=2, n_pairs=2)
    np.testing.assert_allclose(np.asarray(r.log_theta[1:, 0]), 0.0)
    assert float(r.params.epsilon) == 1.0


def test_tune_improves_held_out_loss():
    learner = js.slpc(max_segments=8, history_size=32)
    train, test = _cubic(8, 60), _cubic(16, 60, seed0=1000)
    p0 = learner.params._replace(h_scale=jnp.asarray(4.0), length_scale=jnp.asarray(4.0))
    r = D.tune(learner, KEY, train, ("h_scale", "length_scale"), params=p0, steps=8, n_pairs=16,
               optimizer=optax.adam(0.3))
    assert r.log_theta.shape == (9, 2)
    ev = jax.jit(jax.vmap(lambda xs, k, p: D.stream_loss(learner, k, xs, p), in_axes=(0, 0, None)))
    keys = jax.random.split(jax.random.key(5), 16)
    diff = ev(test, keys, r.params) - ev(test, keys, p0)      # paired: same streams and keys
    assert float(diff.mean()) < -2 * float(diff.std(ddof=1) / np.sqrt(16)), diff


def test_size_penalty_adds_the_final_curves_price():
    """`stream_loss` with `size_penalty(a, b)` is the plain loss plus a·K + b·ℓ of the final curve
    (K and ℓ from `run_stream`'s final state, in NumPy); equal arguments give equal penalties."""
    learner = js.slpc(max_segments=8, history_size=32)
    xs = _cubic(1, 60)[0]
    pen = D.size_penalty(per_segment=2.0, per_length=0.7)
    assert pen == D.size_penalty(2.0, 0.7) and hash(pen) == hash(D.size_penalty(2.0, 0.7))
    plain = D.stream_loss(learner, KEY, xs, reverse_mode=False)
    priced = D.stream_loss(learner, KEY, xs, reverse_mode=False, penalty=pen)
    s, _ = js.run_stream(learner, KEY, xs[20:], learner.init(KEY, xs[:20]))
    v = np.asarray(s.vertices[: int(s.n_vertices)], np.float64)
    want = 2.0 * (len(v) - 1) + 0.7 * np.linalg.norm(np.diff(v, axis=0), axis=1).sum()
    np.testing.assert_allclose(float(priced - plain), want, rtol=1e-9)


def test_smoothed_grad_penalty_of_the_state_or_of_the_stream_index():
    """A penalty of (state, i) sees the stream index of each run: a constant adds itself to the
    value and nothing to the gradient; a penalty of the state alone is accepted as such."""
    learner = js.slpc(max_segments=6, history_size=32)
    streams, names, lt = _cubic(2, 30), ("h_scale",), jnp.log(jnp.array([0.5]))
    base = D.smoothed_grad(learner, KEY, streams, learner.params, names, lt, n_pairs=4)
    const = D.smoothed_grad(learner, KEY, streams, learner.params, names, lt, n_pairs=4,
                            penalty=lambda s, i: 5.0 + 0.0 * i)
    np.testing.assert_allclose(float(const.value - base.value), 5.0, rtol=1e-9)
    np.testing.assert_allclose(np.asarray(const.grad), np.asarray(base.grad), atol=1e-9)
    by_index = D.smoothed_grad(learner, KEY, streams, learner.params, names, lt, n_pairs=4,
                               penalty=lambda s, i: 100.0 * i)
    extra = float(by_index.value - base.value) / 12.5  # 8 runs, each on stream 0 or 1: a multiple of 100/8
    assert 0 <= round(extra) <= 8 and abs(extra - round(extra)) < 1e-9, extra
    state_only = D.smoothed_grad(learner, KEY, streams, learner.params, names, lt, n_pairs=4,
                                 penalty=D.size_penalty(per_segment=1.0))
    assert float(state_only.value) > float(base.value)


def test_refine_embedding_lowers_stress_of_lmds():
    from jaxstream import _ops
    from jaxstream.embedding import lmds_fit, lmds_transform, normalized_stress
    X = jnp.asarray(js.datasets.make_s_curve(120, random_state=0)[0])
    Dm = jnp.sqrt(_ops.sq_dist(X, X))
    idx = jnp.arange(0, 120, 12)
    Y0 = lmds_transform(lmds_fit(_ops.sq_dist(X[idx], X[idx]), 2), _ops.sq_dist(X, X[idx]))
    r = D.refine_embedding(Dm, Y0, optimizer=optax.adam(0.05), steps=150)
    s0, s1 = float(normalized_stress(Dm, Y0)), float(normalized_stress(Dm, r.Y))
    assert np.all(np.isfinite(np.asarray(r.stress)))
    assert s1 < 0.9 * s0, (s0, s1)


@pytest.mark.slow
def test_smoothed_grad_pacbo_two_hyper_parameters_match_finite_difference():
    learner = js.pacbo(max_clusters=4)
    streams = _cubic(4, 40)
    names = ("lambda_scale", "price_scale")
    lt = jnp.log(jnp.array([5.0, 1.0]))
    kw = dict(sigma=0.3, n_pairs=64)
    est = D.smoothed_grad(learner, KEY, streams, learner.params, names, lt, **kw)
    assert bool(jnp.all(jnp.isfinite(est.grad)))
    _assert_matches_smoothed_fd(learner, streams, names, lt, est, kw)


@pytest.mark.slow
@pytest.mark.parametrize("options", [{}, {"preset": "paper"}, {"split_guard": False}, {"tracking": False}],
                         ids=["default", "paper", "no-split-guard", "no-tracking"])
def test_pacbo_tangent_equals_a_central_difference(options):
    """PACBO's pathwise derivative (forward mode, float64) equals a central difference on smooth
    (stream, key, direction) cases: the difference quotient must agree at h = 1e-5 and 1e-6 (else
    a discrete choice flips inside the step and the case is not smooth), then the tangent must
    equal it to 1e-6 relative. ``preset="paper"`` (no cap on λ: inf / σ²) gave a NaN tangent."""
    learner = js.pacbo(6, 64, 30, **options)
    f = jax.jit(lambda x, k: D.stream_loss(learner, k, x, reverse_mode=False))
    tangent = jax.jit(lambda x, k, v: jax.jvp(lambda y: D.stream_loss(learner, k, y, reverse_mode=False),
                                              (x,), (v,))[1])
    smooth = 0
    for case in range(8):
        xs = _cubic(1, 59, seed0=100 + case)[0]
        key = jax.random.key(case)
        v = jnp.asarray(np.random.default_rng(case).normal(size=xs.shape))
        cd = [float((f(xs + h * v, key) - f(xs - h * v, key)) / (2 * h)) for h in (1e-5, 1e-6)]
        if abs(cd[0] - cd[1]) > 1e-6 * abs(cd[1]):
            continue
        smooth += 1
        t = float(tangent(xs, key, v))
        assert abs(t - cd[1]) <= 1e-6 * abs(cd[1]) + 1e-9, (case, t, cd)
    assert smooth >= 3  # the paper preset's choices flip inside the step more often (3 of 6 smooth)


@pytest.mark.slow  # ~60 s: compiling reverse mode through PACBO's round, with its parameters
@pytest.mark.parametrize("options", [{}, {"provisional_size": 0}], ids=["default", "no-ring"])
def test_pacbo_reverse_mode_in_data_and_parameters_equals_a_central_difference(options):
    """``jax.grad`` with respect to the data and every finite, non-zero numeric parameter at once
    (no context), against a central difference along a random direction, on smooth cases
    (quotients at h = 1e-5 and 1e-6 agree to 1e-6); `benchmarks/grad_check.py` runs more."""
    learner = js.pacbo(6, 64, 30, **options)
    names = [n for n, p in learner.params._asdict().items() if np.isfinite(p) and p != 0]
    loss = lambda x, k, q: D.stream_loss(learner, k, x, learner.params._replace(**q))
    f, g = jax.jit(loss), jax.jit(jax.grad(loss, argnums=(0, 2)))
    p0 = {n: jnp.asarray(getattr(learner.params, n), jnp.float64) for n in names}
    smooth = 0
    for case in range(6):
        xs = _cubic(1, 59, seed0=200 + case)[0]
        key = jax.random.key(case)
        rng = np.random.default_rng(case)
        v = jnp.asarray(rng.normal(size=xs.shape))
        u = {n: p * rng.normal() for n, p in p0.items()}
        step = lambda h: {n: p0[n] + h * u[n] for n in names}
        cd = [float((f(xs + h * v, key, step(h)) - f(xs - h * v, key, step(-h))) / (2 * h)) for h in (1e-5, 1e-6)]
        if abs(cd[0] - cd[1]) > 1e-6 * abs(cd[1]):
            continue
        smooth += 1
        gx, gp = g(xs, key, p0)
        gv = float(jnp.vdot(gx, v) + sum(gp[n] * u[n] for n in names))
        assert abs(gv - cd[1]) <= 1e-5 * abs(cd[1]), (case, gv, cd)
    assert smooth >= 4
