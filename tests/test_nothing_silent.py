"""Issue 26: every bad input a clear error or a documented, tested policy;
every interrupted run resumable and consistent.

One test (or a table of cases) per item of the issue; kills during saves are
in `test_kill.py`. Small learner configurations, each compiled once.
"""
from __future__ import annotations

import math
import os

import chex
import numpy as np
import pytest
import jax
import jax.numpy as jnp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jaxstream as js
from jaxstream import _checks, _wrapper, checkpoint, cli
from jaxstream.checkpoint import CheckpointError

RNG = np.random.default_rng(26)
X = RNG.normal(size=(96, 2)).astype(np.float32)

FACTORIES = {
    "slpc": lambda **kw: js.slpc(8, 64, t0=20, **kw),
    "pacbo": lambda **kw: js.pacbo(4, 32, 10, **kw),
    "landmark_mds": lambda **kw: js.landmark_mds(8, n_components=2, buffer_size=24, **kw),
}
WRAPPERS = {
    "slpc": lambda **kw: js.SLPC(max_segments=8, history_size=64, t0=20, **kw),
    "pacbo": lambda **kw: js.PACBO(max_clusters=4, history_size=32, n_steps=10, **kw),
    "landmark_mds": lambda **kw: js.LandmarkMDS(8, buffer_size=24, **kw),
}


# ---------------------------------------------------------------------------
# Item 3: factories validate their numeric hyper-parameters
# ---------------------------------------------------------------------------

INVALID = {
    "slpc": [("delta", 0.0), ("delta", -0.01), ("delta", 1e-9), ("R", -1.0), ("L", -1.0), ("h_scale", 0.0),
             ("length_scale", -0.3), ("eta_scale", -1.0), ("z_scale", -1.0), ("epsilon", 1.5),
             ("epsilon", -0.1), ("outlier_scale", -1.0), ("outlier_scale", 0.0), ("memory", 0.5),
             ("memory", -1.0), ("delta", math.nan), ("h_scale", math.inf)],
    "pacbo": [("lambda_scale", -1.0), ("lambda_scale", 0.0), ("lambda_power", -0.5), ("lambda_power", 22.0),
              ("lambda_power", 1.5), ("lambda2_scale", 0.0),
              ("prior_scale", -1.5), ("price_scale", -1.0), ("log_n_weight", -0.5), ("noise_scale", 0.0),
              ("proposal_scale", 0.0), ("scale_spread", 0.5), ("adapt_rate", -1.0), ("stay_prob", 2.0),
              ("stay_prob", -0.1), ("radius", 0.0), ("radius", -1.0), ("lambda_scale", math.nan),
              ("noise_prior_points", -1.0), ("noise_prior_points", math.nan)],
    "landmark_mds": [("eps0", -1.0), ("eps0", math.nan), ("eps0", math.inf), ("min_support", -1),
                     ("min_support", 1.5), ("density_shift", 1.5), ("density_shift", -0.5)],
}
VALID_EDGES = {
    "slpc": dict(delta=1e-6, R=0.0, L=0.0, length_scale=0.0, z_scale=0.0, epsilon=1.0, outlier_scale=math.inf,
                 memory=math.inf),
    "pacbo": dict(lambda_power=1.0, price_scale=0.0, log_n_weight=0.0, scale_spread=1.0, adapt_rate=0.0,
                  stay_prob=1.0, radius=None, noise_scale=None, noise_prior_points=math.inf),
    "landmark_mds": dict(eps0=0.0, min_support=0, density_shift=1.0),
}


@pytest.mark.parametrize("name,param,value", [(n, p, v) for n, cases in INVALID.items() for p, v in cases])
def test_factories_refuse_out_of_range_parameters(name, param, value):
    with pytest.raises(ValueError, match=rf"^{name}: {param} must be .*; got") as exc:
        FACTORIES[name](**{param: value})
    rng = _checks.PARAM_RANGES[name][param]
    assert rng.describe() in str(exc.value)  # the message states the valid range


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_factories_accept_the_edges_of_the_ranges(name):
    learner = FACTORIES[name](**VALID_EDGES[name])
    for p in learner.params._fields:
        assert p in _checks.PARAM_RANGES[name] or p == "distances"  # every numeric parameter has a range


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_init_checks_given_params_and_grids_elementwise(name):
    learner = FACTORIES[name]()
    param, value = INVALID[name][0]
    bad = learner.params._replace(**{param: jnp.asarray(value, jnp.asarray(getattr(learner.params, param)).dtype)})
    with pytest.raises(ValueError, match=rf"{param} must be"):
        learner.init(jax.random.key(0), X[:20], bad)
    grid = np.array([float(getattr(learner.params, param)), value])
    with pytest.raises(ValueError, match=r"in an array of shape \(2,\)"):
        _checks.check_params(name, {param: grid})
    # traced params cannot be checked and are not: vmapping a grid of valid values works
    if name == "pacbo":  # (one learner is enough; slpc's vmapped init is a slow compile)
        params = jax.tree_util.tree_map(lambda a: jnp.stack([a, a]), learner.params)
        states = jax.vmap(learner.init, in_axes=(None, None, 0))(jax.random.key(0), X[:20], params)
        assert jax.tree_util.tree_leaves(states)[0].shape[0] == 2


def test_wrappers_and_cli_use_the_same_ranges(capsys):
    with pytest.raises(ValueError, match="pacbo: lambda_scale must be > 0"):
        WRAPPERS["pacbo"](lambda_scale=-1.0).fit(X)
    with pytest.raises(ValueError, match="slpc: outlier_scale must be > 0"):
        WRAPPERS["slpc"](outlier_scale=-1.0).fit(X)


# ---------------------------------------------------------------------------
# Item 2: huge (and tiny) values: a clear error, never NaN summaries
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_one_huge_row_is_a_clear_error_everywhere(name, tmp_path):
    bad = X.copy()
    bad[50] = 1e30
    msg = r"1 row\(s\) with values beyond \+-1.8e\+16 \(first at index {}.*rescale the data"
    with pytest.raises(ValueError, match=msg.format(50)):
        WRAPPERS[name]().fit(bad)
    learner = FACTORIES[name]()
    state = learner.init(jax.random.key(0), X[:20])
    with pytest.raises(ValueError, match=msg.format(30) + ".*float64"):
        js.run_stream(learner, jax.random.key(0), bad[20:], state)
    with pytest.raises(ValueError, match=msg.format(30)):  # nonfinite="skip" does not hide it: it is finite
        js.run_stream(learner, jax.random.key(0), bad[20:], state, nonfinite="skip")
    with pytest.raises(ValueError, match=r"the chunk starting at row 16\) has 1 row"):
        js.run_stream_chunked(learner, jax.random.key(0), bad[20:], state, chunk_size=16)
    big = X * np.float32(1e30)
    with pytest.raises(ValueError, match="beyond"):
        learner.init(jax.random.key(0), big[:20])


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_huge_data_is_fine_in_float64(name):
    """The error's advice works: in float64 the same data at 1e30 learns finite summaries."""
    with jax.enable_x64(True):
        m = WRAPPERS[name]().fit(X.astype(np.float64) * 1e30)
        losses = m.last_losses_[~np.isnan(m.last_losses_)]
        losses = losses[np.isfinite(losses) | (np.arange(losses.size) > 0)]  # landmark's first loss is inf
        assert np.isfinite(losses).all() and losses.max() > 1e58
        leaves = [np.asarray(a) for a in jax.tree_util.tree_leaves(m.state_._replace(params=None))]
        assert not any(np.isnan(a).any() for a in leaves if a.dtype.kind == "f")


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_data_too_tiny_for_the_dtype_is_a_clear_error(name):
    with pytest.raises(ValueError, match=r"spans only .* underflow float32.*multiply it by 1e\+25"):
        WRAPPERS[name]().fit(X * np.float32(1e-25))
    WRAPPERS[name]().fit(X * np.float32(1e-12))  # small but in range: learned


def test_magnitude_limits_documented_values():
    assert _checks.magnitude_limit(np.float32) == pytest.approx(1.8e16, rel=0.01)
    assert _checks.magnitude_limit(np.float64) == pytest.approx(1.3e151, rel=0.01)
    assert _checks.spread_limit(np.float32) == pytest.approx(1.1e-16, rel=0.01)
    lim = _checks.magnitude_limit(np.float32)
    _checks.check_magnitude(np.array([[lim, -lim]], np.float32))  # the limit itself is accepted
    with pytest.raises(ValueError):
        _checks.check_magnitude(np.array([[np.nextafter(np.float32(lim), np.float32(np.inf)), 0]], np.float32))
    _checks.check_magnitude(np.array([[np.nan, 1e30]], np.float64))  # float64 in float64: fine
    with pytest.raises(ValueError, match="overflow float32"):
        _checks.check_magnitude(np.array([[np.nan, 1e30]], np.float64), dtype=np.float32)
    _checks.check_magnitude(np.array([[np.inf, 1.0]], np.float32))  # inf is the NaN/inf policy's business
    _checks.check_magnitude(np.ones((5, 2), np.float32))  # zero spread (all equal) is not "tiny"


def test_cli_huge_or_tiny_values_one_line_exit_2(tmp_path, capsys):
    huge = tmp_path / "huge.csv"
    rows = [f"{float(a)!r},{float(b)!r}" for a, b in X.astype(np.float64)]
    rows[40] = "1e30,0.5"
    huge.write_text("x,y\n" + "\n".join(rows) + "\n")
    tiny = tmp_path / "tiny.npy"
    np.save(tiny, X.astype(np.float64) * 1e-25)
    beyond = tmp_path / "beyond.csv"  # beyond float32's range: the cast to float32 would make infs
    beyond.write_text("x,y\n" + "\n".join(rows[:40] + ["1e300,0.5"]) + "\n")
    for command in ("curve", "cluster", "embed"):
        for path, message in ((huge, "beyond +-1.8e+16 (first at index 40"), (tiny, "spans only"),
                              (beyond, "beyond the float32 range (|x| > 3.4e38; first in data row 41)")):
            code = cli.main([command, "--csv", str(path), "--out", ""])
            out, err = capsys.readouterr()
            assert code == 2, (command, path, out, err)
            lines = err.strip().splitlines()
            assert len(lines) == 1 and message in lines[0] and "Traceback" not in err, err
            assert "--float64" in lines[0]


# ---------------------------------------------------------------------------
# Item 4: the smaller ones
# ---------------------------------------------------------------------------

def test_cli_csv_row_with_an_extra_cell_is_an_error(tmp_path, capsys):
    path = tmp_path / "extra.csv"
    body = "".join(f"{float(a)!r},{float(b)!r}\n" for a, b in X[:40].astype(np.float64))
    path.write_text("x,y\n" + body + "1.0,2.0,3.0\n")
    for command in ("curve", "cluster", "embed"):
        assert cli.main([command, "--csv", str(path), "--out", ""]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "line 42 has 3 cells; the header has 2 (extra value '3.0')" in err[0]
    # an empty trailing cell (a trailing comma) carries no value: accepted, documented
    ok = tmp_path / "trailing.csv"
    ok.write_text("x,y\n" + body.replace("\n", ",\n"))
    xs, names = cli.read_csv_points(str(ok))
    np.testing.assert_array_equal(xs, X[:40].astype(np.float64))
    assert names == ["x", "y"]


def test_read_csv_blocks_rows_of_another_width_are_a_clear_error(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("1,2\n3,4\n5,6,7\n")
    with pytest.raises(ValueError, match=r"s.csv, lines 1-3: .*columns"):
        list(js.read_csv_blocks(path))
    with pytest.raises(ValueError, match=r"rows from line 3 on have 3 cells; the first rows have 2"):
        list(js.read_csv_blocks(path, block_rows=2))


def test_cli_history_size_below_t0_is_an_error(tmp_path, capsys):
    path = tmp_path / "s.csv"
    path.write_text("x,y\n" + "".join(f"{float(a)!r},{float(b)!r}\n" for a, b in X.astype(np.float64)))
    code = cli.main(["curve", "--csv", str(path), "--t0", "30", "--history-size", "16", "--out", ""])
    err = capsys.readouterr().err
    assert code == 2 and "--history-size 16 cannot hold the t0=30 initial points" in err
    with pytest.raises(ValueError, match="history_size=16 must be at least t0=30"):
        js.slpc(8, 16, t0=30)


def test_slpc_capacities_beyond_the_devices_memory_are_refused_at_once(monkeypatch):
    """A history too large for the device is refused by the factory, naming the capacities, instead
    of an init that swaps or hangs while it allocates (2·10⁹ rows: minutes with no output)."""
    with pytest.raises(ValueError, match=r"max_segments=50 × history_size=2000000000 values\) needs 372.5 GiB, "
                                         r"more than this device's memory"):
        js.slpc(50, 2_000_000_000)
    monkeypatch.setattr(_checks, "memory_limit", lambda: 4 * 50 * 200)  # just enough for slpc(50, 199)
    js.slpc(50, 199)
    with pytest.raises(ValueError, match="lower history_size or max_segments"):
        js.slpc(50, 200)


@pytest.mark.parametrize("V,H,d", [(50, 1024, 2), (10, 2048, 10), (50, 512, 40)])
def test_slpc_round_bytes_cover_the_compiled_round(V, H, d):
    """The bytes slpc's init checks against the device's memory cover what XLA allocates for one
    round (arguments, outputs and temporaries, from the compiled program's memory analysis), and
    overstate it by less than half."""
    from jaxstream.curves.learner import round_bytes
    x = np.random.default_rng(d).normal(size=(30, d)).astype(np.float32)
    learner = js.slpc(V, H, init="pca")
    s = learner.init(jax.random.key(0), x[:20])
    m = jax.jit(learner.update).lower(jax.random.key(1), s, x[20]).compile().memory_analysis()
    real = m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
    est = round_bytes(jnp.asarray(x[:20]), learner.params, learner.config)
    assert real <= est <= 1.5 * real, (real, est)


def test_slpc_init_refuses_a_round_beyond_the_devices_memory(monkeypatch):
    """The factory counts the distance cache alone (it does not know d); `init` counts the round:
    the state in and out and its temporaries. Exactly enough passes, one byte less is refused."""
    from jaxstream.curves.learner import round_bytes
    x = np.random.default_rng(0).normal(size=(30, 3)).astype(np.float32)
    learner = js.slpc(20, 256, init="pca")
    need = round_bytes(jnp.asarray(x), learner.params, learner.config)
    assert need > 4 * 20 * 257  # more than the cache the factory counted
    monkeypatch.setattr(_checks, "memory_limit", lambda: need)
    learner.init(jax.random.key(0), x)
    monkeypatch.setattr(_checks, "memory_limit", lambda: need - 1)
    with pytest.raises(ValueError, match=r"slpc's round \(max_segments=20, history_size=256, d=3: .* needs "
                                         r".* GiB, more than this device's memory .*; lower history_size"):
        learner.init(jax.random.key(0), x)


@pytest.mark.parametrize("p,H,C,d", [(50, 1024, 1, 2), (10, 2048, 4, 2), (20, 512, 2, 10), (6, 64, 1, 3)])
def test_pacbo_round_bytes_cover_the_compiled_round(p, H, C, d):
    """PACBO's estimate of a round's bytes covers what XLA allocates for it (arguments, outputs,
    temporaries: the compiled program's memory analysis) and overstates it by less than half."""
    from jaxstream.clustering.pacbo import round_bytes
    x = np.random.default_rng(d).normal(size=(30, d)).astype(np.float32)
    learner = js.pacbo(p, H, 50, n_chains=C)
    s = learner.init(jax.random.key(0), x[:20])
    m = jax.jit(learner.update).lower(jax.random.key(1), s, x[20]).compile().memory_analysis()
    real = m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
    est = round_bytes(jax.random.key(0), jnp.asarray(x[:20]), learner.params, learner.config)
    assert real <= est <= 1.5 * real, (real, est)


def _stored_bytes(state):
    """Bytes of a real state's arrays (key arrays by their key data)."""
    def raw(a):
        return jax.random.key_data(a) if jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key) else a
    return sum(np.asarray(raw(a)).nbytes for a in jax.tree_util.tree_leaves(state))


def test_a_pacbo_state_the_device_cannot_hold_is_refused(monkeypatch):
    """PACBO's history is sized at init (it needs d): 2·10⁹ rows are refused there, naming the
    capacities, instead of an init that allocates for minutes; the bound is a round's bytes (the
    state in and out, at least twice a real state's bytes, and the temporaries)."""
    from jaxstream.clustering.pacbo import round_bytes
    x = np.random.default_rng(0).normal(size=(30, 2)).astype(np.float32)
    with pytest.raises(ValueError, match=r"PACBO's round \(history_size=2000000000, max_clusters=50, n_chains=1, "
                                         r"d=2: .*\) needs [\d.,]+ GiB, more than this device's memory"):
        js.pacbo(history_size=2_000_000_000).init(jax.random.key(0), x)
    L = js.pacbo(max_clusters=6, history_size=64)
    need = round_bytes(jax.random.key(0), jnp.asarray(x), L.params, L.config)
    assert need > 2 * _stored_bytes(L.init(jax.random.key(0), x))
    monkeypatch.setattr(_checks, "memory_limit", lambda: need)
    L.init(jax.random.key(0), x)
    monkeypatch.setattr(_checks, "memory_limit", lambda: need - 1)
    with pytest.raises(ValueError, match="lower history_size"):
        L.init(jax.random.key(0), x)


def test_a_batch_of_states_the_devices_cannot_hold_is_refused(monkeypatch):
    """`init_streams` adds up the B states before allocating them: a batch one byte over the
    devices' memory is refused with what to do; exactly at it, it is built."""
    L = js.landmark_mds(8)
    B = 4
    keys = jax.random.split(jax.random.key(0), B)
    x = np.random.default_rng(0).normal(size=(B, 10, 3)).astype(np.float32)
    need = _stored_bytes(js.init_streams(L, keys, x, devices=1))
    monkeypatch.setattr(_checks, "memory_limit", lambda: need)
    js.init_streams(L, keys, x, devices=1)
    monkeypatch.setattr(_checks, "memory_limit", lambda: need - 1)
    with pytest.raises(ValueError, match="the states of 4 streams needs .* split the streams into smaller batches"):
        js.init_streams(L, keys, x, devices=1)


def test_slpc_on_one_column_data_has_finite_losses():
    """One-column data (a curve in 1-D is a stretch of the axis): every prequential loss is finite
    (the drift offset's fit had no direction across the line and returned 1e23 or inf)."""
    x = js.datasets.make_cubic_stream(200, seed=0)[:, :1]
    m = js.SLPC(seed=0).fit(x)
    assert np.all(np.isfinite(m.last_losses_[20:])) and np.isfinite(m.cumulative_loss_)


@pytest.mark.parametrize("name", sorted(WRAPPERS))
def test_a_ragged_list_is_the_packages_error(name):
    """A list of rows of different lengths: the package's message (not NumPy's "inhomogeneous
    shape"), from partial_fit and fit, and nothing is learned."""
    m = WRAPPERS[name]()
    ragged = [[1.0, 2.0]] * 30 + [[1.0, 2.0, 3.0]]
    for call in (m.partial_fit, m.fit):
        with pytest.raises(ValueError, match="rectangular numeric array of shape \\(n, d\\); got rows of different"):
            call(ragged)
    assert not hasattr(m, "n_seen_")


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_run_stream_ragged_list_and_masked_array(name):
    """run_stream: a ragged list is the package's error; a masked array's masked entries are NaN
    (an error naming the row, or skipped with nonfinite="skip"), never their fill values."""
    learner = FACTORIES[name]()
    key = jax.random.key(0)
    state = learner.init(key, X[:20])
    with pytest.raises(ValueError, match="rectangular numeric array"):
        js.run_stream(learner, key, [[1.0, 2.0]] * 3 + [[1.0]], state)
    xs = np.ma.masked_array(X[20:40].copy(), mask=np.zeros((20, 2), bool))
    xs.data[5, 1], xs.mask[5, 1] = -999.0, True
    with pytest.raises(ValueError, match="1 row\\(s\\) with NaN or inf \\(first at index 5\\)"):
        js.run_stream(learner, key, xs, state)
    _, losses = js.run_stream(learner, key, xs, state, nonfinite="skip")
    _, clean = js.run_stream(learner, key, np.delete(X[20:40], 5, axis=0), state)
    # the skipped row takes no round: the other rows' losses are those of the stream without it
    np.testing.assert_array_equal(np.delete(np.asarray(losses), 5)[:5], np.asarray(clean)[:5])
    assert float(np.asarray(losses)[5]) == 0.0  # a skipped row's trace entry is zero (run_stream's policy)
    unmasked = np.ma.masked_array(X[20:40], mask=False)
    chex.assert_trees_all_equal(js.run_stream(learner, key, unmasked, state)[1], js.run_stream(learner, key, X[20:40], state)[1])


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_run_stream_chunked_masked_entries_are_nan(name):
    """run_stream_chunked: a masked array's masked entries, whole or as blocks, are NaN (the
    chunk is refused, or the row skipped with nonfinite="skip", as run_stream does), never the
    fill value -999 learned as data (the mask was dropped before)."""
    learner = FACTORIES[name]()
    key = jax.random.key(0)
    state = learner.init(key, X[:20])
    xs = np.ma.masked_array(X[20:44].copy(), mask=np.zeros((24, 2), bool))
    xs.data[13, 0], xs.mask[13, 0] = -999.0, True
    blocks = [xs[:10], xs[10:]]
    for source in (xs, blocks):
        with pytest.raises(ValueError, match="the chunk starting at row 8.*1 row\\(s\\) with NaN or inf"):
            js.run_stream_chunked(learner, key, source, state, chunk_size=8, prefetch=0)
    _, want = js.run_stream(learner, key, xs, state, nonfinite="skip")
    for source in (xs, blocks):
        got, res = js.run_stream_chunked(learner, key, source, state, chunk_size=8, nonfinite="skip",
                                         keep_losses=True, prefetch=0)
        np.testing.assert_allclose(res.losses, np.asarray(want), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", sorted(WRAPPERS))
def test_wrappers_masked_entries_and_bad_seeds(name):
    xs = np.ma.masked_array(X[:40].copy(), mask=np.zeros((40, 2), bool))
    xs.data[25, 0], xs.mask[25, 0] = -999.0, True
    with pytest.raises(ValueError, match="row\\(s\\) with NaN or inf \\(first at index 25\\)"):
        WRAPPERS[name]().fit(xs)
    for seed in (1.5, "0", None, True):
        with pytest.raises(TypeError, match="seed must be an integer"):
            WRAPPERS[name](seed=seed).fit(X[:40])


@pytest.mark.parametrize("name", ["slpc", "pacbo"])
def test_an_unknown_keyword_names_the_factory_and_its_parameters(name):
    with pytest.raises(TypeError, match=f"{name}\\(\\) got unexpected keyword argument\\(s\\) 'foo'; its numeric "
                                        "parameters are .*delta|lambda_scale"):
        getattr(js, name)(foo=1)


@pytest.mark.parametrize("name", sorted(WRAPPERS))
def test_partial_fit_refuses_a_1d_array(name):
    m = WRAPPERS[name]()
    with pytest.raises(ValueError, match=r"X must be 2-D \(n, d\); got a 1-D array of shape \(64,\)"):
        m.partial_fit(RNG.normal(size=64))
    assert not hasattr(m, "n_seen_")
    if name != "landmark_mds":  # the learned case once (a cheap compile) is enough
        return
    m.partial_fit(X[:30])
    with pytest.raises(ValueError, match=r"1-D array of shape \(2,\): pass one point to learn_one"):
        m.partial_fit(X[30])
    assert m.n_seen_ == 30


def test_float32_init_then_float64_stream_learns_in_the_states_dtype():
    """x64 on, float32 init, float64 stream: landmark_mds crashed (a while_loop carry of two dtypes); every
    learner learns each row in its state's dtype, fixed by init (documented in `run_stream`). slpc and
    PACBO already did (their state takes the params' dtype) and are not compiled again here."""
    with jax.enable_x64(True):
        learner = FACTORIES["landmark_mds"]()
        key = jax.random.key(1)
        xs64 = RNG.normal(size=(40, 2))
        state = learner.init(key, xs64[:20].astype(np.float32))
        assert state.points.dtype == np.float32
        st64, l64 = js.run_stream(learner, key, xs64[20:], state)
        st32, l32 = js.run_stream(learner, key, xs64[20:].astype(np.float32), state)
        chex.assert_trees_all_equal(st64, st32)
        np.testing.assert_array_equal(np.asarray(l64), np.asarray(l32))
        assert np.asarray(l64).dtype == np.float32
        s1, info = learner.update(key, state, jnp.asarray(xs64[20]))  # one float64 point
        assert s1.points.dtype == np.float32
        np.testing.assert_array_equal(np.asarray(s1.points), np.asarray(js.run_stream(
            learner, key, xs64[20:21].astype(np.float32), state)[0].points))


def test_a_npy_file_is_not_a_checkpoint(tmp_path):
    learner = FACTORIES["slpc"]()
    path = tmp_path / "data.npy"
    np.save(path, X)
    with pytest.raises(CheckpointError, match=r"is a plain .npy array of shape \(96, 2\), not a jaxstream checkpoint"):
        checkpoint.load(path, learner)
    with pytest.raises(CheckpointError, match="not a jaxstream checkpoint"):
        js.run_stream_chunked(learner, jax.random.key(0), X[20:], learner.init(jax.random.key(0), X[:20]),
                              checkpoint=path, resume=True)
    with pytest.raises(CheckpointError, match="is a directory"):
        checkpoint.load(tmp_path, learner)


def _mean_learner():
    """A tiny learner (running mean) whose state changes with every row."""
    def init(key, x0, params=None):
        return dict(mean=jnp.mean(jnp.asarray(x0), 0), n=jnp.asarray(x0.shape[0], jnp.float32))

    from typing import NamedTuple

    class Info(NamedTuple):
        loss: jax.Array

    def upd(key, s, x):
        n = s["n"] + 1
        return dict(mean=s["mean"] + (x - s["mean"]) / n, n=n), Info(jnp.sum((x - s["mean"]) ** 2))

    return js.StreamLearner(init, upd, lambda s, x: s["mean"], lambda s, x: jnp.sum((x - s["mean"]) ** 2), None,
                            dict(learner="running-mean"))


def test_resume_with_a_shorter_array_is_an_error(tmp_path):
    L = _mean_learner()
    key = jax.random.key(0)
    s0 = L.init(key, X[:4])
    ckpt = tmp_path / "r.ckpt"
    js.run_stream_chunked(L, key, X, s0, chunk_size=16, checkpoint=ckpt)  # learns all 96 rows
    for short in (X[:64], iter([X[:50], X[50:64]])):
        with pytest.raises(ValueError, match="has already learned 96|ended 32 rows before the checkpoint"):
            js.run_stream_chunked(L, key, short, s0, chunk_size=16, checkpoint=ckpt, resume=True)
    np.save(tmp_path / "short.npy", X[:64])
    with pytest.raises(ValueError, match="ended 32 rows before"):
        js.run_stream_chunked(L, key, str(tmp_path / "short.npy"), s0, chunk_size=16, checkpoint=ckpt, resume=True)
    st, res = js.run_stream_chunked(L, key, X, s0, chunk_size=16, checkpoint=ckpt, resume=True)  # same length: done
    assert res.n_points == 96


@pytest.mark.parametrize("keep_losses", [True, False])
def test_an_iterator_that_raises_mid_stream_leaves_a_saved_resumable_state(tmp_path, keep_losses):
    L = _mean_learner()
    key = jax.random.key(0)
    s0 = L.init(key, X[:4])
    ref_state, ref_losses = js.run_stream(L, key, X, s0)
    ckpt = tmp_path / "it.ckpt"

    class SourceDown(Exception):
        pass

    def blocks():
        for i in range(0, 56, 8):  # 56 rows, then the source fails
            yield X[i:i + 8]
        raise SourceDown("database connection lost")

    with pytest.raises(SourceDown) as exc:
        js.run_stream_chunked(L, key, blocks(), s0, chunk_size=16, checkpoint=ckpt, checkpoint_every=2,
                              keep_losses=keep_losses)
    err = exc.value
    # 3 chunks of 16 rows were complete (the 8 rows after them had not made a chunk)
    assert err.jaxstream_result.n_points == 48
    chex.assert_trees_all_equal(err.jaxstream_state, js.run_stream(L, key, X[:48], s0)[0])
    assert any("48 row(s) of the stream were learned" in n and "resume=True" in n for n in err.__notes__)
    if keep_losses:
        np.testing.assert_array_equal(err.jaxstream_result.losses, np.asarray(ref_losses)[:48])
    assert checkpoint.read_manifest(ckpt)["metadata"]["n_done"] == 48  # saved at the error, not at 32
    st, res = js.run_stream_chunked(L, key, iter([X]), s0, chunk_size=16, checkpoint=ckpt, resume=True,
                                    keep_losses=keep_losses)
    chex.assert_trees_all_equal(st, ref_state)
    if keep_losses:
        np.testing.assert_array_equal(res.losses, np.asarray(ref_losses))


def test_a_refused_chunk_keeps_the_state_before_it(tmp_path):
    L = _mean_learner()
    key = jax.random.key(0)
    s0 = L.init(key, X[:4])
    bad = X.copy()
    bad[40] = np.nan
    with pytest.raises(ValueError, match="NaN or inf") as exc:
        js.run_stream_chunked(L, key, bad, s0, chunk_size=16, prefetch=0)
    assert exc.value.jaxstream_result.n_points == 32
    chex.assert_trees_all_equal(exc.value.jaxstream_state, js.run_stream(L, key, X[:32], s0)[0])


def test_wrapper_nan_advice_names_what_wrappers_can_do():
    bad = X.copy()
    bad[3, 1] = np.nan
    for name, make in WRAPPERS.items():
        with pytest.raises(ValueError, match=r"1 row\(s\) with NaN or inf \(first at index 3\); .*drop those "
                                             r"rows first") as exc:
            make().fit(bad)
        assert "nonfinite='skip'" not in str(exc.value).split("(run_stream")[0]  # not offered as a wrapper option
    m = WRAPPERS["slpc"]()
    with pytest.raises(TypeError):
        m.fit(bad, nonfinite="skip")  # indeed no such option


def _model_snapshot(m):
    d = {k: v for k, v in m.__dict__.items() if k != "_learner_obj"}
    return jax.tree_util.tree_map(lambda a: np.asarray(a) if hasattr(a, "shape") else a, d)


@pytest.mark.parametrize("name", ["landmark_mds", "slpc"])  # the base class's logic, and LandmarkMDS's override
def test_partial_fit_interrupted_midway_leaves_the_model_as_it_was(name, monkeypatch):
    monkeypatch.setattr(_wrapper, "CHUNK", 16)  # small whole chunks: cheap compiles
    X2 = RNG.normal(size=(40 + 2 * 16 + 5, 2)).astype(np.float32)
    ref = WRAPPERS[name]().partial_fit(X2[:40]).partial_fit(X2[40:])
    m = WRAPPERS[name]().partial_fit(X2[:40])
    before = _model_snapshot(m)
    calls = []
    real = _wrapper.run_stream

    def interrupted(*a, **k):
        calls.append(1)
        if len(calls) == 2:  # after the first full chunk is learned
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(_wrapper, "run_stream", interrupted)
    with pytest.raises(KeyboardInterrupt):
        m.partial_fit(X2[40:])
    monkeypatch.setattr(_wrapper, "run_stream", real)
    assert len(calls) == 2
    chex.assert_trees_all_equal(_model_snapshot(m), before)
    m.partial_fit(X2[40:])  # going on gives the uninterrupted result
    chex.assert_trees_all_equal(m.state_, ref.state_)
    np.testing.assert_array_equal(m.last_losses_, ref.last_losses_)
    assert m.n_seen_ == ref.n_seen_ and m.cumulative_loss_ == ref.cumulative_loss_


def test_a_summary_that_turns_nan_is_an_error_not_a_result(monkeypatch):
    m = WRAPPERS["landmark_mds"]().partial_fit(X[:30])
    before = _model_snapshot(m)
    real = _wrapper.run_stream

    def poisoned(*a, **k):
        st, info = real(*a, **k)
        return st, info._replace(loss=info.loss.at[3].set(jnp.nan))

    monkeypatch.setattr(_wrapper, "run_stream", poisoned)
    with pytest.raises(FloatingPointError, match=r"became NaN .*row 3 is NaN.*keeps its state from before"):
        m.partial_fit(X[30:60])
    monkeypatch.undo()
    chex.assert_trees_all_equal(_model_snapshot(m), before)


# ---------------------------------------------------------------------------
# Fuzz: hyper-parameters and input magnitudes: a clear error, or finite results
# ---------------------------------------------------------------------------

def _draw_value(draw, rng: _checks.Range):
    """A value inside or outside the range (edges, NaN, inf, negatives, huge)."""
    return draw(st.one_of(
        st.sampled_from([rng.lo, rng.hi if math.isfinite(rng.hi) else 1e6, math.nan, math.inf, -1.0, 0.0, 0.5,
                         1.0, 2.0]),
        st.floats(-10.0, 10.0), st.floats(1e-8, 1e8)))


FUZZ_PARAMS = {  # each learner's numeric parameters (params, not capacities: one compile per learner)
    name: sorted(r for r in ranges) for name, ranges in _checks.PARAM_RANGES.items()}
FUZZ_PARAMS["pacbo"].remove("radius")  # a fixed radius refuses points outside it (a documented error)


@settings(max_examples=int(os.environ.get("JAXSTREAM_FUZZ_EXAMPLES", "1")) * 25, deadline=None,
          derandomize=os.environ.get("JAXSTREAM_FUZZ") != "random", database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_params_and_magnitudes_clear_error_or_finite(data):
    name = data.draw(st.sampled_from(sorted(FACTORIES)))
    n_params = data.draw(st.integers(0, 2))
    names = data.draw(st.lists(st.sampled_from(FUZZ_PARAMS[name]), min_size=n_params, max_size=n_params,
                               unique=True))
    kw = {p: _draw_value(data.draw, _checks.PARAM_RANGES[name][p]) for p in names}
    if "min_support" in kw and math.isfinite(kw["min_support"]):
        kw["min_support"] = int(kw["min_support"]) if data.draw(st.booleans()) else kw["min_support"]
    log_scale = data.draw(st.sampled_from([-40, -30, -20, -17, -15, -8, 0, 8, 15, 17, 20, 30, 40]))
    offset = data.draw(st.sampled_from([0.0, 1.0, 1e6]))
    xs = offset + X[:60].astype(np.float64) * 10.0 ** log_scale  # float64: learned in float32 (x64 off)
    with np.errstate(over="ignore"):  # valid as given and once rounded to the params' float32
        valid_params = all(_checks.PARAM_RANGES[name][p].ok(np.float64(v)) and _checks.PARAM_RANGES[name][p].ok(
            np.float32(v)) for p, v in kw.items())
    try:
        learner = FACTORIES[name](**{k: (int(v) if k == "min_support" and float(v).is_integer() else v)
                                     for k, v in kw.items()})
        key = jax.random.key(0)
        state = learner.init(key, xs[:20])
        state, losses = js.run_stream(learner, key, xs[20:], state)
    except ValueError as e:
        msg = str(e)
        assert not valid_params or any(w in msg for w in ("rescale", "all equal", "beyond", "spans only", "no line is feasible")), msg
        if not valid_params:
            assert any(f"{p} must be" in msg for p in kw), msg
        return
    assert valid_params, kw
    losses = np.asarray(losses, np.float64)
    assert np.isfinite(losses).all() and (losses >= 0).all(), (name, kw, log_scale, losses)
    leaves = jax.tree_util.tree_leaves(state._replace(params=None))
    assert not any(np.isnan(np.asarray(a)).any() for a in leaves if np.asarray(a).dtype.kind == "f"), (name, kw)


def test_kept_losses_of_an_older_checkpoint_beside_it_are_read_or_clearly_refused(tmp_path):
    """Checkpoints written before the losses moved into the file kept them in ``<ckpt>.losses.npy``."""
    L = _mean_learner()
    key = jax.random.key(0)
    s0 = L.init(key, X[:4])
    ref_state, ref_losses = js.run_stream(L, key, X, s0)
    ckpt = tmp_path / "old.ckpt"
    js.run_stream_chunked(L, key, X[:48], s0, chunk_size=16, checkpoint=ckpt, keep_losses=True)
    state, meta, arrays = checkpoint.load_with_arrays(ckpt, L)
    assert meta["n_done"] == 48 and arrays["losses"].shape == (48,)
    checkpoint.save(ckpt, L, state, metadata=meta)  # the old layout: no losses inside
    np.save(f"{ckpt}.losses.npy", arrays["losses"][:32])  # ... and a sidecar that does not match
    with pytest.raises(ValueError, match="holds the state after 48 rows but losses for 32"):
        js.run_stream_chunked(L, key, X, s0, chunk_size=16, checkpoint=ckpt, resume=True, keep_losses=True)
    np.save(f"{ckpt}.losses.npy", arrays["losses"])
    st, res = js.run_stream_chunked(L, key, X, s0, chunk_size=16, checkpoint=ckpt, resume=True, keep_losses=True)
    chex.assert_trees_all_equal(st, ref_state)
    np.testing.assert_array_equal(res.losses, np.asarray(ref_losses))


def test_chunked_reader_thread_keeps_the_callers_float64():
    """`with jax.enable_x64(True):` is thread-local; the reader thread prepares the chunks in the
    caller's precision, so a float64 stream run in chunks equals `run_stream` bit for bit (it was
    cast to float32 in the thread)."""
    xs = RNG.normal(size=(100, 2))
    with jax.enable_x64(True):
        learner = FACTORIES["slpc"]()
        key = jax.random.key(0)
        state = learner.init(key, xs[:20])
        whole, _ = js.run_stream(learner, key, xs[20:], state)
        chunked, _ = js.run_stream_chunked(learner, key, xs[20:], state, chunk_size=32, prefetch=2)
    for a, b in zip(jax.tree.leaves(whole), jax.tree.leaves(chunked)):
        if not jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_slpc_identical_rows_and_an_undefined_score_are_errors():
    """All-equal initial rows are refused as `init` documents (float32 rounding once left a
    spread of 4e-8 and a zero-length curve); R² of fewer than 2 rows, or of rows without spread,
    is an error, not NaN or -inf."""
    same = np.tile(np.array([[0.1257, 3.3]], np.float32), (40, 1))
    with pytest.raises(ValueError, match="initial points are all equal"):
        WRAPPERS["slpc"]().fit(same)
    m = WRAPPERS["slpc"]().fit(X[:40])
    for bad in (X[:0], X[:1], same[:5]):
        with pytest.raises(ValueError, match="score needs at least 2 rows"):
            m.score(bad)
    assert np.isfinite(m.score(X[40:42]))
