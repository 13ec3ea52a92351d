"""`jaxstream._ops`: every CPU-tuned operation against its portable reference version."""
import chex
import numpy as np
import jax
import jax.extend.core
import jax.numpy as jnp
import pytest

from jaxstream import _ops


def _both(fn, *args):
    """fn traced for the CPU (its tuned version) and under `reference_ops` (its reference), jitted."""
    tuned = jax.jit(lambda *a: fn(*a))(*args)
    with _ops.reference_ops():
        ref = jax.jit(lambda *a: fn(*a))(*args)
    return tuned, ref


def test_materialize_leaves_every_value_unchanged():
    """`materialize` is the identity on what a round computes, bit for bit,
    on both paths: negative and large integers, booleans, signed zeros,
    infinities, NaN, float32 and float64; its derivative is the identity."""
    rng = np.random.default_rng(0)
    f32 = np.concatenate([rng.normal(size=500) * 10.0 ** rng.integers(-30, 30, 500),
                          [0.0, -0.0, np.inf, -np.inf, np.nan, np.finfo(np.float32).max, np.finfo(np.float32).tiny]])
    tree = {"f": jnp.asarray(f32, jnp.float32), "i": jnp.asarray(rng.integers(-2 ** 31 + 2, 2 ** 31 - 2, 300), jnp.int32),
            "s": jnp.int32(-1), "b": jnp.asarray([True, False, True]), "m": jnp.asarray(rng.normal(size=(3, 4)), jnp.float32),
            "none": None}
    for out in _both(_ops.materialize, tree):
        assert out["none"] is None
        for k in tree:
            if tree[k] is None:
                continue
            assert out[k].dtype == tree[k].dtype and out[k].shape == tree[k].shape
            np.testing.assert_array_equal(np.atleast_1d(out[k]).view(np.uint8), np.atleast_1d(tree[k]).view(np.uint8))
    with jax.enable_x64(True):
        # 1 − 2⁻⁵³ and the float below 2 have a low 32-bit word of all ones
        # (float64 bits are pinned whole, not as two 32-bit words)
        x = jnp.asarray(np.concatenate([rng.normal(size=50), [-0.0, np.inf, np.nan, 1 - 2 ** -53,
                                                               np.nextafter(2.0, 0.0)]]), jnp.float64)
        y = jax.jit(_ops.materialize)((x, jnp.arange(-3, 3)))
        assert y[0].dtype == jnp.float64 and y[1].dtype == jnp.int64
        np.testing.assert_array_equal(np.asarray(y[0]).view(np.uint64), np.asarray(x).view(np.uint64))
        np.testing.assert_array_equal(y[1], np.arange(-3, 3))
    with pytest.raises(TypeError, match="unsupported dtype"):
        _ops.materialize(jnp.zeros(3, jnp.float16))
    g = jax.grad(lambda v: jnp.sum(_ops.materialize(v) ** 2))(jnp.arange(3.0))
    np.testing.assert_array_equal(g, 2 * np.arange(3.0))


@pytest.mark.parametrize("K", [1, 5, 130])
@pytest.mark.parametrize("op", ["min", "sum"])
def test_rows_reduce_tree_equals_reference(K, op):
    """The written-out tree (K <= TREE_ROWS) against one reduction of the
    stacked rows: minima bit for bit (inf rows, ties), integer sums bit for
    bit, float sums to rounding; the masks built inside `row` are applied."""
    rng = np.random.default_rng(K)
    A = rng.integers(0, 7, (K, 300)).astype(np.float32)
    A[rng.random((K, 300)) < 0.2] = np.inf
    mask = rng.random(K) < 0.7
    fill = jnp.inf if op == "min" else 0.0
    Af = jnp.where(jnp.isinf(jnp.asarray(A)), 0.0, jnp.asarray(A)) if op == "sum" else jnp.asarray(A)
    f = lambda a, m: _ops.rows_reduce(K, lambda k: jnp.where(m[k], a[k], fill), op)  # noqa: E731
    tuned, ref = _both(f, Af, jnp.asarray(mask))
    want = np.where(mask[:, None], np.asarray(Af), np.inf if op == "min" else 0.0)
    want = want.min(0) if op == "min" else want.sum(0)
    np.testing.assert_array_equal(ref, want)
    if op == "min":
        np.testing.assert_array_equal(tuned, ref)
    else:
        np.testing.assert_allclose(tuned, ref, rtol=1e-6)
        fi = lambda a: _ops.rows_reduce(K, lambda k: a[k], "sum")  # noqa: E731
        ti, ri = _both(fi, jnp.asarray(A == 3, jnp.int32))
        np.testing.assert_array_equal(ti, ri)
    with pytest.raises(ValueError, match="op"):
        _ops.rows_reduce(2, lambda k: Af[k], "max")


@pytest.mark.parametrize("d", [1, 2, 3, 7, 20])
def test_coordinate_sums_and_distances_equal_their_references(d):
    """coord_sum, sq_dist and segment_sq_dist: the written-out coordinates
    against the reductions, bit for bit for d <= 2 and to rounding above;
    sq_dist against a float64 NumPy loop; segment_sq_dist with zero-length
    segments, points past either end and a point on a shared vertex (two
    segments tie exactly)."""
    rng = np.random.default_rng(d)
    P = rng.normal(size=(50, d)).astype(np.float32)
    A = rng.normal(size=(6, d)).astype(np.float32)
    B = rng.normal(size=(6, d)).astype(np.float32)
    B[0] = A[0]  # zero length
    A[2], B[1] = B[1], P[0]  # segments 1 and 2 meet at P[0] ... (1 ends there, 2 starts there)
    A[2] = P[0]
    exact = d <= 2
    check = np.testing.assert_array_equal if exact else (lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-6))
    t, r = _both(_ops.coord_sum, jnp.asarray(P))
    check(t, r)
    t, r = _both(_ops.sq_dist, jnp.asarray(A), jnp.asarray(P))
    check(t, r)
    ref = np.array([[np.sum((a.astype(np.float64) - p) ** 2) for p in P] for a in A])
    np.testing.assert_allclose(t, ref, rtol=1e-5, atol=1e-6)
    (td, tt), (rd, rt) = _both(_ops.segment_sq_dist, jnp.asarray(P), jnp.asarray(A), jnp.asarray(B))
    check(td, rd)
    check(tt, rt)
    for s in range(6):
        a, b = A[s].astype(np.float64), B[s].astype(np.float64)
        ab = b - a
        tp = np.zeros(len(P)) if ab @ ab == 0 else np.clip((P - a) @ ab / (ab @ ab), 0, 1)
        np.testing.assert_allclose(td[s], ((a + tp[:, None] * ab - P) ** 2).sum(1), rtol=1e-4, atol=1e-5)
    assert td[1, 0] == 0 and td[2, 0] == 0  # P[0] is the end of segment 1 and the start of segment 2


def test_first_argmin_is_the_first_minimum():
    x = jnp.asarray([[3.0, 1.0, 1.0, 2.0], [jnp.inf, jnp.inf, jnp.inf, jnp.inf], [0.0, -1.0, 5.0, -1.0]])
    np.testing.assert_array_equal(_ops.first_argmin(x), [1, 0, 1])
    np.testing.assert_array_equal(_ops.first_argmin(x, axis=0), [2, 2, 0, 2])
    assert _ops.first_argmin(x).dtype == jnp.int32


def test_a_whole_slpc_round_on_the_reference_path():
    """slpc traced with every operation's reference version (what a GPU
    runs): the same curve and losses as the CPU path on a 2-D stream, where
    every tuned version is bit-equal to its reference."""
    import jaxstream as js
    from jaxstream import datasets

    xs = datasets.make_cubic_stream(120, seed=3).astype(np.float32)
    L = js.slpc(max_segments=8, history_size=64)
    key = jax.random.key(0)
    s0 = L.init(key, xs[:20])
    rest = jnp.asarray(xs[20:])
    run = lambda s: jax.lax.scan(lambda c, i: L.update(jax.random.fold_in(key, i), c, rest[i]),  # noqa: E731
                                 s, jnp.arange(100))
    tuned = jax.jit(run)(s0)
    with _ops.reference_ops():
        ref = jax.jit(lambda s: run(s))(s0)
    for a, b in zip(jax.tree_util.tree_leaves(tuned), jax.tree_util.tree_leaves(ref)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_serial_scan_unrolled_equals_the_plain_scan():
    """The GPU version (unrolled) against the reference, bit for bit, on the
    accept chain it serves: -inf and NaN weights, a length not a multiple
    of the unroll factor."""
    from jaxstream.clustering import kernel

    rng = np.random.default_rng(0)
    n = 3 * _ops.SERIAL_UNROLL_GPU + 7
    w = rng.normal(size=n).astype(np.float32)
    w[[3, 40]] = -np.inf
    w[[10, 11]] = np.nan
    log_u = np.log(rng.uniform(size=n)).astype(np.float32)
    for w0 in (0.0, -np.inf):
        with np.errstate(invalid="ignore"):  # the NumPy chain: NaN ratios where both weights are -inf or w is NaN
            cur, w_cur, ref_idx, ref_acc = -1, np.float32(w0), [], []
            for i in range(n):
                log_a = np.float32(w[i] - w_cur)
                if np.isnan(log_a):
                    log_a = 0.0 if w_cur == -np.inf else -np.inf
                ref_acc.append(log_u[i] < log_a)
                if ref_acc[-1]:
                    cur, w_cur = i, w[i]
                ref_idx.append(cur)
        xs = (jnp.asarray(log_u), jnp.asarray(w), jnp.arange(n, dtype=jnp.int32))
        init = (jnp.float32(w0), jnp.asarray(-1, jnp.int32))
        unrolled = jax.jit(lambda i, x: _ops._serial_scan_gpu(kernel._accept_step, i, x))(init, xs)
        plain = jax.jit(lambda i, x: _ops._serial_scan_reference(kernel._accept_step, i, x))(init, xs)
        chex.assert_trees_all_equal(unrolled, plain)
        (_, last), (idx, acc, _) = plain
        np.testing.assert_array_equal(idx, ref_idx)
        np.testing.assert_array_equal(acc, ref_acc)
        assert int(last) == cur and 0 < sum(ref_acc) < n
        chex.assert_trees_all_equal(tuple(kernel._accept_scan(*xs[:2], jnp.float32(w0))), (last, idx, acc, plain[1][2]))


def _dot_precisions(jaxpr):
    """Every dot_general's precision in a (closed) jaxpr, sub-jaxprs included."""
    out = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            out.append(eqn.params["precision"])
        for v in eqn.params.values():
            for sub in (v if isinstance(v, (tuple, list)) else (v,)):
                if isinstance(sub, jax.extend.core.ClosedJaxpr):
                    out += _dot_precisions(sub.jaxpr)
                elif isinstance(sub, jax.extend.core.Jaxpr):
                    out += _dot_precisions(sub)
    return out


def test_every_matrix_product_is_taken_at_full_precision():
    """No learner leaves a float32 product to the backend's default (TF32 on
    recent GPUs, which moved an H100's landmark embedding by 6e-4): every
    dot_general traced by init, update, predict and their gradients carries
    `_ops.EXACT`. Checked on the jaxprs, so on a CPU too."""
    import jaxstream as js
    from jaxstream import datasets
    from jaxstream.curves import princurve
    from jaxstream.embedding import lmds

    key = jax.random.key(0)
    xs = jnp.asarray(datasets.make_cubic_stream(40, seed=0), jnp.float32)
    x3 = jnp.asarray(np.random.default_rng(0).normal(size=(40, 3)), jnp.float32)
    found = {}
    for name, L, x in (("slpc", js.slpc(max_segments=6, history_size=32), xs),
                       ("pacbo", js.pacbo(), xs),
                       ("landmark_mds", js.landmark_mds(8, n_components=2), x3)):
        s0 = L.init(key, x[:20])
        found[name + " init"] = _dot_precisions(jax.make_jaxpr(lambda a: L.init(key, a))(x[:20]).jaxpr)
        found[name + " update"] = _dot_precisions(jax.make_jaxpr(lambda s, a: L.update(key, s, a))(s0, x[20]).jaxpr)
        found[name + " predict"] = _dot_precisions(jax.make_jaxpr(L.predict)(s0, x[21:25]).jaxpr)
    sq = jnp.sum((x3[:10, None] - x3[None, :10]) ** 2, -1)
    found["lmds_fit and its gradient"] = _dot_precisions(jax.make_jaxpr(jax.grad(
        lambda s: jnp.sum(lmds.lmds_fit(s, 2).coords ** 2)))(sq).jaxpr)
    found["principal_curve"] = _dot_precisions(jax.make_jaxpr(lambda a: princurve.principal_curve(a))(xs).jaxpr)
    assert sum(map(len, found.values())) > 10  # the audit sees products
    exact = (_ops.EXACT, _ops.EXACT)
    bad = {k: [p for p in v if p != exact] for k, v in found.items()}
    assert not any(bad.values()), bad


def test_segment_sum_matches_its_reference_and_a_loop():
    """`segment_sum`: the CPU scatter-add and the dense reference against a NumPy loop, with
    collisions, empty ids, ids out of range (dropped) and float64."""
    rng = np.random.default_rng(4)
    for dtype, n, m in ((np.float32, 50, 513), (np.float64, 7, 40), (np.float32, 1, 5)):
        with jax.enable_x64(dtype == np.float64):
            vals = rng.normal(size=m).astype(dtype)
            ids = rng.integers(-2, n + 2, m).astype(np.int32)
            want = np.zeros(n)
            for v, i in zip(vals, ids):
                if 0 <= i < n:
                    want[i] += v
            tuned, ref = _both(lambda v, i: _ops.segment_sum(v, i, n), jnp.asarray(vals), jnp.asarray(ids))
            assert tuned.dtype == ref.dtype == dtype
            for got in (tuned, ref):
                np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-5, atol=1e-5)
