"""Property tests (hypothesis): geometry vs NumPy, input checks, learners'
`update` on random finite streams of extreme scale.

Examples are derandomised (the same examples every run, so CI cannot flake);
set JAXSTREAM_FUZZ=random to draw fresh ones and JAXSTREAM_FUZZ_EXAMPLES=N to
draw more. Shapes are fixed per test so each configuration compiles once.
"""
from __future__ import annotations

import os

import numpy as np
import pytest
import jax
import jax.numpy as jnp
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import jaxstream as js
from jaxstream import _checks, geometry

_SCALE = int(os.environ.get("JAXSTREAM_FUZZ_EXAMPLES", "1"))
_RANDOM = os.environ.get("JAXSTREAM_FUZZ") == "random"


def fuzz(n):
    return settings(max_examples=n * _SCALE, deadline=None, derandomize=not _RANDOM, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ---------------------------------------------------------------------------
# Geometry vs a NumPy float64 reference
# ---------------------------------------------------------------------------

def ref_segment(p, a, b):
    """Squared distance and parameter, float64, one point and one segment."""
    p, a, b = (np.asarray(v, np.float64) for v in (p, a, b))
    ab = b - a
    L = ab @ ab
    t = 0.0 if L == 0 else min(max((p - a) @ ab / L, 0.0), 1.0)
    q = a + t * ab
    return float((p - q) @ (p - q)), t


D = 3
N_PTS = 6
V = 6
# Coordinates in [-1, 1] away from the subnormal range (XLA on CPU flushes
# subnormals to zero), with exact zeros and a coarse grid for ties.
COORD = st.one_of(st.floats(1e-3, 1.0), st.floats(-1.0, -1e-3), st.just(0.0),
                  st.integers(-8, 8).map(lambda i: i / 8))


@st.composite
def segments(draw):
    """Points and segments with random, degenerate (a == b) and zero-length
    segments, points on the segment's ends and on its line, at one scale."""
    exp = draw(st.integers(-6, 6))
    coords = hnp.arrays(np.float64, (N_PTS, 3, D), elements=COORD)
    x = draw(coords) * 10.0 ** exp
    kind = draw(st.sampled_from(["random", "zero_length", "point_at_end", "on_line", "tiny_segment"]))
    p, a, b = x[:, 0], x[:, 1], x[:, 2]
    if kind == "zero_length":
        b = a.copy()
    elif kind == "point_at_end":
        p = np.where(draw(st.booleans()), a, b)
    elif kind == "on_line":
        s = draw(hnp.arrays(np.float64, (N_PTS, 1), elements=st.floats(-2, 3)))
        p = a + s * (b - a)
    elif kind == "tiny_segment":
        b = a + (b - a) * 1e-7
    return p, a, b


_seg_jit = jax.jit(geometry.segment_sq_dist)


@fuzz(60)
@given(segments())
def test_segment_sq_dist_matches_numpy(pab):
    p, a, b = pab
    with jax.enable_x64(True):
        d2, t = map(np.asarray, _seg_jit(jnp.asarray(p), jnp.asarray(a), jnp.asarray(b)))
    for i in range(N_PTS):
        r, rt = ref_segment(p[i], a[i], b[i])
        scale = max(np.abs(p[i] - a[i]).max(), np.abs(b[i] - a[i]).max(), 1e-300) ** 2
        assert 0.0 <= t[i] <= 1.0
        assert d2[i] >= 0.0
        np.testing.assert_allclose(d2[i], r, rtol=1e-9, atol=1e-12 * scale)
        if np.all(a[i] == b[i]):
            assert t[i] == 0.0 and d2[i] == pytest.approx(((p[i] - a[i]) ** 2).sum(), rel=1e-12)
        # the parameter is the projection's: distance to a + t(b - a) equals the distance
        q = a[i] + t[i] * (b[i] - a[i])
        np.testing.assert_allclose(((p[i] - q) ** 2).sum(), r, rtol=1e-9, atol=1e-12 * scale)


@fuzz(30)
@given(segments())
def test_segment_sq_dist_float32_is_close(pab):
    """float32: errors bounded by a few ulps of the problem's scale, never NaN."""
    p, a, b = (v.astype(np.float32) for v in pab)
    d2, t = map(np.asarray, _seg_jit(jnp.asarray(p), jnp.asarray(a), jnp.asarray(b)))
    assert d2.dtype == np.float32 and np.isfinite(d2).all() and np.isfinite(t).all()
    for i in range(N_PTS):
        r, _ = ref_segment(p[i], a[i], b[i])
        scale = float(max(np.abs(p[i] - a[i]).max(), np.abs(b[i] - a[i]).max())) ** 2 * D
        assert abs(d2[i] - r) <= 1e-5 * scale + 1e-30, (d2[i], r, scale)


@st.composite
def polylines(draw):
    exp = draw(st.integers(-6, 6))
    pts = draw(hnp.arrays(np.float64, (N_PTS, D), elements=COORD)) * 10.0 ** exp
    verts = draw(hnp.arrays(np.float64, (V, D), elements=COORD)) * 10.0 ** exp
    n = draw(st.integers(2, V))
    repeat = draw(st.lists(st.integers(1, V - 1), max_size=3))
    for j in repeat:  # zero-length segments inside the line
        verts[j] = verts[j - 1]
    if draw(st.booleans()):
        pts[: n] = verts[: min(n, N_PTS)]  # points exactly on vertices
    return pts, verts, n


_proj_jit = jax.jit(geometry.polyline_projection)
_dist_jit = jax.jit(geometry.polyline_sq_dist)
_len_jit = jax.jit(geometry.polyline_length)


@fuzz(60)
@given(polylines())
def test_polyline_projection_matches_numpy(line):
    pts, verts, n = line
    with jax.enable_x64(True):
        args = (jnp.asarray(pts), jnp.asarray(verts), jnp.asarray(n))
        out = {k: np.asarray(v) for k, v in _proj_jit(*args).items()}
        d2 = np.asarray(_dist_jit(*args))
        length = float(_len_jit(jnp.asarray(verts), jnp.asarray(n)))
    seg_len = np.linalg.norm(np.diff(verts[:n], axis=0), axis=1)
    np.testing.assert_allclose(length, seg_len.sum(), rtol=1e-12, atol=0)
    scale = max(np.abs(pts).max(), np.abs(verts).max(), 1e-300) ** 2
    for i in range(N_PTS):
        per_seg = [ref_segment(pts[i], verts[j], verts[j + 1])[0] for j in range(n - 1)]
        best = min(per_seg)
        np.testing.assert_allclose(d2[i], best, rtol=1e-9, atol=1e-12 * scale)
        np.testing.assert_allclose(out["sqdist"][i], best, rtol=1e-9, atol=1e-12 * scale)
        j = int(out["segment"][i])
        assert 0 <= j < n - 1, "projection onto an inactive segment"
        np.testing.assert_allclose(per_seg[j], best, rtol=1e-9, atol=1e-12 * scale)
        assert 0.0 <= out["t"][i] <= 1.0
        q = verts[j] + out["t"][i] * (verts[j + 1] - verts[j])
        np.testing.assert_allclose(out["point"][i], q, rtol=1e-9, atol=1e-12 * np.sqrt(scale))
        np.testing.assert_allclose(((pts[i] - out["point"][i]) ** 2).sum(), best, rtol=1e-9,
                                   atol=1e-12 * scale)
        arc = seg_len[:j].sum() + out["t"][i] * seg_len[j]
        np.testing.assert_allclose(out["arclength"][i], arc, rtol=1e-9, atol=1e-12 * np.sqrt(scale))
        assert -1e-12 * np.sqrt(scale) <= out["arclength"][i] <= length * (1 + 1e-12) + 1e-12 * np.sqrt(scale)


# ---------------------------------------------------------------------------
# Input checks
# ---------------------------------------------------------------------------

_DTYPES = [np.float16, np.float32, np.float64, np.int8, np.int32, np.int64, np.uint8, np.bool_]


@st.composite
def arrays_of_any_shape(draw):
    ndim = draw(st.integers(0, 3))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim)))
    dtype = draw(st.sampled_from(_DTYPES))
    x = draw(hnp.arrays(dtype, shape))  # floats include NaN and inf
    return x


@fuzz(150)
@given(arrays_of_any_shape(), st.one_of(st.none(), st.integers(1, 4)), st.integers(0, 3))
def test_check_points_accepts_exactly_the_valid_inputs(x, dim, min_rows):
    overflow = x.dtype == np.float64 and bool((np.isfinite(x) & (np.abs(x) > np.finfo(np.float32).max)).any())
    # the learned dtype's range: squares must not overflow, squared distances must not underflow
    learned = np.float64 if x.dtype == np.float64 and jax.config.jax_enable_x64 else np.float32
    x64 = x.astype(np.float64)
    fin = x64[np.isfinite(x64)]
    too_big = bool((np.abs(fin) > np.sqrt(np.finfo(learned).max) / 1024).any())
    too_small = False
    if x.ndim == 2 and x.shape[0] >= 2 and x.shape[1] >= 1 and np.isfinite(x64).all():
        with np.errstate(over="ignore"):
            spread = float((x64.max(0) - x64.min(0)).max())
        too_small = 0 < spread < np.sqrt(np.finfo(learned).tiny) * 1024
    valid = (x.ndim == 2 and x.shape[1] >= 1 and (dim is None or x.shape[1] == dim)
             and x.shape[0] >= min_rows and not overflow and not too_big and not too_small
             and (not np.issubdtype(x.dtype, np.floating) or bool(np.isfinite(x).all())))
    if not valid:
        with pytest.raises(ValueError) as exc:
            _checks.check_points(x, "pts", dim=dim, min_rows=min_rows)
        assert "pts" in str(exc.value)
        return
    out = _checks.check_points(x, "pts", dim=dim, min_rows=min_rows)
    assert isinstance(out, jax.Array) and out.shape == x.shape
    assert jnp.issubdtype(out.dtype, jnp.floating)
    assert out.dtype != jnp.float16  # half precision is promoted, not used for learning
    # values are kept exactly in the learned dtype (every tested dtype fits in float32 except int32/64
    # beyond 2^24, and float64 values below float32's range, which round to 0 or a subnormal)
    ref = x.astype(out.dtype).astype(np.float64)
    if np.abs(ref).max(initial=0) < 2 ** 24:
        np.testing.assert_array_equal(np.asarray(out, np.float64), ref)


@fuzz(40)
@given(st.integers(1, 6), st.integers(1, 4), st.data())
def test_check_points_nonfinite_policy(n, d, data):
    # values away from the float32 spreads that `check_magnitude` refuses (below 1.1e-16)
    elements = st.one_of(st.just(0.0), st.floats(0.125, 1e6, width=32), st.floats(-1e6, -0.125, width=32))
    x = data.draw(hnp.arrays(np.float32, (n, d), elements=elements))
    bad_row = data.draw(st.integers(0, n - 1))
    x[bad_row, data.draw(st.integers(0, d - 1))] = data.draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    with pytest.raises(ValueError, match=rf"1 row\(s\) with NaN or inf \(first at index {bad_row}\)"):
        _checks.check_points(x)
    out = _checks.check_points(x, allow_nonfinite=True)
    np.testing.assert_array_equal(np.asarray(out), x)


def test_check_points_refuses_non_numeric_and_ragged():
    with pytest.raises(ValueError, match="complex"):
        _checks.check_points(np.ones((2, 2), np.complex64))
    with pytest.raises(ValueError, match="numeric"):
        _checks.check_points(np.array([["1", "2"]]))
    with pytest.raises(ValueError, match="numeric"):
        _checks.check_points(np.array([[object()]], dtype=object))
    with pytest.raises(ValueError, match="rectangular"):
        _checks.check_points([[1.0, 2.0], [3.0]])
    out = _checks.check_points([[1, 2], [3, 4]])  # nested lists are fine
    assert out.shape == (2, 2) and jnp.issubdtype(out.dtype, jnp.floating)


@fuzz(40)
@given(st.one_of(st.integers(-3, 5), st.booleans(), st.floats(-2, 5), st.text(max_size=2), st.none(),
                 st.integers(-3, 5).map(np.int64)), st.integers(0, 2))
def test_check_capacity(value, minimum):
    is_int = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    if not is_int:
        with pytest.raises(TypeError, match="cap must be a Python int"):
            _checks.check_capacity(value, "cap", minimum)
    elif value < minimum:
        with pytest.raises(ValueError, match=f"cap must be >= {minimum}"):
            _checks.check_capacity(value, "cap", minimum)
    else:
        out = _checks.check_capacity(value, "cap", minimum)
        assert out == value and type(out) is int


@fuzz(30)
@given(st.integers(0, 3), st.integers(1, 4), st.integers(1, 4))
def test_check_point_shapes(ndim, d, dim):
    x = jnp.zeros((d,) * ndim)
    if ndim == 1 and d == dim:
        _checks.check_point(x, dim)
    else:
        with pytest.raises(ValueError, match=rf"must have shape \({dim},\)"):
            _checks.check_point(x, dim)


# ---------------------------------------------------------------------------
# Learners on random finite streams of extreme scale
# ---------------------------------------------------------------------------

N0, T, DIM = 8, 24, 2


KINDS = ["gauss", "clusters", "line", "duplicates", "constant", "heavy", "grid"]


def make_stream(seed, kind, log_scale, offset):
    """(N0 + T, DIM) float32 stream: a shape, a scale 10**log_scale and an
    offset (large offsets with small scales are exactly degenerate in float32)."""
    rng = np.random.default_rng(seed)
    n = N0 + T
    if kind == "gauss":
        z = rng.standard_normal((n, DIM))
    elif kind == "clusters":
        z = rng.standard_normal((3, DIM))[rng.integers(0, 3, n)] * 5 + rng.standard_normal((n, DIM))
    elif kind == "line":
        z = rng.uniform(-1, 1, (n, 1)) * rng.standard_normal(DIM)
    elif kind == "duplicates":
        z = rng.standard_normal((3, DIM))[rng.integers(0, 3, n)]
    elif kind == "constant":
        z = np.zeros((n, DIM))
    elif kind == "heavy":
        z = rng.standard_cauchy((n, DIM))
    else:
        z = np.round(rng.uniform(-2, 2, (n, DIM)))
    return (offset + 10.0 ** log_scale * z).astype(np.float32)


def _params_unchanged_and_no_nan(state0, state, what):
    """Numeric params never change in `update` (a NaN there can be a documented
    sentinel, e.g. PACBO's learned radius); nothing else may be NaN."""
    if hasattr(state, "params"):
        for a, b in zip(jax.tree_util.tree_leaves(state0.params), jax.tree_util.tree_leaves(state.params)):
            np.testing.assert_array_equal(np.asarray(b), np.broadcast_to(np.asarray(a), np.shape(b)),
                                          err_msg=f"update changed {what}.params")
        state = state._replace(params=None)
    _no_nan(state, what)


def _no_nan(tree, what):
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        leaf = np.asarray(leaf)
        if np.issubdtype(leaf.dtype, np.floating):
            assert not np.isnan(leaf).any(), f"NaN in {what}{jax.tree_util.keystr(path)}"


class _Case:
    """A learner configuration, its jitted init and its jitted run (compiled once)."""

    def __init__(self, learner, check):
        self.learner = learner
        self.check = check
        self.init = jax.jit(learner.init)
        trace = lambda s, x, info: (s, info, learner.loss(s, x), learner.predict(s, x))
        self.run = jax.jit(lambda k, xs, s: js.run_stream(learner, k, xs, s, trace=trace))


def _check_slpc(states, final, infos, xs, cfg):
    nv = np.append(np.asarray(states.n_vertices), int(final.n_vertices))
    assert ((nv >= 2) & (nv <= cfg["max_segments"] + 1)).all(), nv
    verts = np.concatenate([np.asarray(states.vertices), np.asarray(final.vertices)[None]])
    for t, k in enumerate(nv):
        assert np.isfinite(verts[t, :k]).all(), f"non-finite vertex after step {t}"
    assert np.array_equal(np.asarray(infos.n_segments), nv[1:] - 1)


def _check_pacbo(states, final, infos, xs, cfg):
    k = np.append(np.asarray(states.n_clusters), int(final.n_clusters))
    assert ((k >= 1) & (k <= cfg["max_clusters"])).all(), k
    centers = np.concatenate([np.asarray(states.centers), np.asarray(final.centers)[None]])
    for t, kk in enumerate(k):
        assert np.isfinite(centers[t, :kk]).all(), f"non-finite centre after step {t}"
    assert np.array_equal(np.asarray(infos.n_clusters), k[1:])


def _check_landmarks(states, final, infos, xs, cfg):
    is_lm = np.concatenate([np.asarray(states.is_landmark), np.asarray(final.is_landmark)[None]])
    valid = np.concatenate([np.asarray(states.valid), np.asarray(final.valid)[None]])
    n_lm = is_lm.sum(1)
    assert (n_lm >= 1).all() and (n_lm <= cfg["max_landmarks"]).all(), n_lm
    assert not (is_lm & ~valid).any(), "a landmark slot is not a buffered point"
    assert np.array_equal(np.asarray(infos.n_landmarks), n_lm[1:])
    eps = np.append(np.asarray(states.eps), float(final.eps))
    assert np.isfinite(eps).all() and (eps >= 0).all() and (np.diff(eps) >= 0).all(), eps


CASES = {
    "slpc": (lambda: js.slpc(6, 32, t0=N0), _check_slpc, dict(max_segments=6)),
    "pacbo": (lambda: js.pacbo(5, 32, 20), _check_pacbo, dict(max_clusters=5)),
    "landmark_mds": (lambda: js.landmark_mds(6, n_components=2, buffer_size=12), _check_landmarks,
                     dict(max_landmarks=6)),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    factory, check, cfg = CASES[request.param]
    c = _Case(factory(), check)
    c.name, c.cfg = request.param, cfg
    return c


EXTREMES = [  # always run, whatever hypothesis draws
    (1, "gauss", -6.0, 0.0), (2, "gauss", 6.0, 0.0), (3, "constant", 0.0, 1e6), (4, "gauss", -6.0, 1e6),
    (5, "heavy", 6.0, -1e3), (6, "duplicates", -3.0, 1.0), (7, "line", 5.0, 1e6), (8, "clusters", -5.0, -1e3),
]


@pytest.mark.parametrize("extreme", EXTREMES, ids=[f"{k}-1e{s:+.0f}-off{o:g}" for _, k, s, o in EXTREMES])
def test_update_on_chosen_extremes(case, extreme):
    seed, kind, log_scale, offset = extreme
    _check_update(case, make_stream(seed, kind, log_scale, offset), seed)


@fuzz(10)
@given(seed=st.integers(0, 2 ** 16), kind=st.sampled_from(KINDS), log_scale=st.floats(-6, 6),
       offset=st.sampled_from([0.0, 1.0, -1e3, 1e6]), offset_exp=st.floats(-6, 0))
def test_update_on_extreme_scales(case, seed, kind, log_scale, offset, offset_exp):
    xs = make_stream(seed, kind, log_scale, offset * 10.0 ** offset_exp)
    assume(np.isfinite(xs).all())
    event(f"kind={kind}")
    event(f"scale=1e{int(np.floor(log_scale / 3) * 3):+d}")
    event("degenerate in float32" if np.unique(xs, axis=0).shape[0] < 3 else "not degenerate")
    _check_update(case, xs, seed)


def _check_update(case, xs, seed):
    """After every step: no NaN anywhere in the state (params unchanged), the
    summary finite and within its capacities, info.loss = loss(state before,
    x) ≥ 0 and finite, predictions finite with the right shape."""
    key = jax.random.key(seed)
    state0 = case.init(key, xs[:N0])
    final, (states, infos, losses, preds) = case.run(key, xs[N0:], state0)
    _params_unchanged_and_no_nan(state0, final, "final state")
    _params_unchanged_and_no_nan(state0, states, "state")
    info_loss = np.asarray(infos.loss, np.float64)
    assert np.isfinite(info_loss).all() and (info_loss >= 0).all(), info_loss
    np.testing.assert_allclose(info_loss, np.asarray(losses, np.float64), rtol=1e-5,
                               atol=1e-6 * float(np.abs(xs - xs.mean(0)).max()) ** 2)
    preds = np.asarray(preds)
    assert preds.shape[0] == T and np.isfinite(preds).all()
    if case.name == "slpc":
        assert preds.shape == (T, DIM)
    elif case.name == "landmark_mds":
        assert preds.shape == (T, 2)
    else:  # a label of one of the current clusters (stable labels: `state.ids`)
        assert preds.shape == (T,)
        k = np.asarray(states.n_clusters)
        ids = np.asarray(getattr(states, "ids", np.broadcast_to(np.arange(case.cfg["max_clusters"]), (T, case.cfg["max_clusters"]))))
        for t in range(T):
            assert preds[t] in ids[t, : k[t]], (t, preds[t], ids[t, : k[t]])
    assert jax.tree_util.tree_structure(final) == jax.tree_util.tree_structure(state0)
    for a, b in zip(jax.tree_util.tree_leaves(final), jax.tree_util.tree_leaves(state0)):
        assert a.shape == b.shape and a.dtype == b.dtype
    case.check(states, final, infos, xs, case.cfg)
