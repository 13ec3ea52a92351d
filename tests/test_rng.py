"""The shared counter-mode generator (`jaxstream._rng`): the hash against
published vectors and JAX's own, its uniforms and Box–Muller normals against
their distributions, derived streams against each other."""
import numpy as np
import jax
import jax.numpy as jnp
import pytest
from scipy import stats

from jaxstream import _rng


def test_threefry_known_answers_and_jax():
    """Threefry-2x32-20 known-answer vectors (Salmon et al. 2011, Random123),
    and equality with `jax.extend.random.threefry_2x32` on many counters."""
    from jax.extend.random import threefry_2x32 as jax_threefry

    u32 = lambda v: jnp.asarray(v, jnp.uint32)  # noqa: E731
    kat = [((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
           ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
           ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0))]
    for (k0, k1), (x0, x1), want in kat:
        assert tuple(int(g) for g in _rng.threefry2x32(u32(k0), u32(k1), u32(x0), u32(x1))) == want
    kd = np.asarray(jax.random.key_data(jax.random.key(7)), np.uint32)
    x = np.arange(2 * 1000, dtype=np.uint32) * np.uint32(2654435761)
    ref = np.asarray(jax_threefry(kd, x))
    b0, b1 = _rng.threefry2x32(u32(kd[0]), u32(kd[1]), u32(x[:1000]), u32(x[1000:]))
    np.testing.assert_array_equal(np.concatenate([b0, b1]), ref)


def test_key_words_of_typed_and_raw_keys():
    key = jax.random.key(3)
    raw = jax.random.key_data(key)
    assert [int(w) for w in _rng.key_words(key)] == [int(w) for w in _rng.key_words(raw)]
    assert [int(w) for w in _rng.key_words(key)] != [int(w) for w in _rng.key_words(jax.random.key(4))]


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_uniforms_and_normals_have_their_distributions(dtype):
    """10⁵ uniforms in (0, 1) are U(0, 1) and 10⁵ Box–Muller normals are N(0, 1)
    (KS), drawn from 50 derived streams through `start` offsets as the PACBO
    chain draws them; power: u^1.05, 1.05·z and z + 0.03 are rejected."""
    words = _rng.key_words(jax.random.key(2026))
    with jax.enable_x64(dtype == jnp.float64):
        draw = jax.jit(lambda j, start: (_rng.uniforms(_rng.derive(words, j), (1000,), dtype, start),
                                         _rng.normals(_rng.derive(words, j), (1000,), dtype, start)))
        out = [draw(j, s) for j in range(50) for s in (0, 500)]
        assert out[0][0].dtype == dtype and out[0][1].dtype == dtype
    u = np.concatenate([np.asarray(a, np.float64) for a, _ in out])
    z = np.concatenate([np.asarray(b, np.float64) for _, b in out])
    assert 0 < u.min() and u.max() < 1 and np.isfinite(z).all()
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    assert stats.kstest(z, "norm").pvalue > 1e-3
    assert stats.kstest(u ** 1.05, "uniform").pvalue < 1e-6
    assert stats.kstest(1.05 * z, "norm").pvalue < 1e-6
    assert stats.kstest(z + 0.03, "norm").pvalue < 1e-6


def test_counters_and_streams_are_independent():
    """`start` continues the same counter sequence; the two normals of one hash,
    adjacent draws and the same counters under two derived streams are
    uncorrelated and jointly uniform (chi-square on a 10×10 grid of their CDFs)."""
    words = _rng.key_words(jax.random.key(11))
    n = 40_000
    u = np.asarray(_rng.uniforms(words, (n,), jnp.float32), np.float64)
    np.testing.assert_array_equal(np.asarray(_rng.uniforms(words, (n // 2,), jnp.float32, start=n // 4)),
                                  u[n // 2:])
    z = np.asarray(_rng.normals(words, (n,), jnp.float32), np.float64)
    v = np.asarray(_rng.uniforms(_rng.derive(words, 1), (n,), jnp.float32), np.float64)
    w = np.asarray(_rng.uniforms(_rng.derive(words, 2), (n,), jnp.float32), np.float64)

    def chi2_p(a, b, bins=10):
        counts = np.histogram2d(a, b, bins=bins, range=[[0, 1], [0, 1]])[0].ravel()
        e = len(a) / bins ** 2
        return stats.chi2.sf(((counts - e) ** 2 / e).sum(), bins ** 2 - 1)

    pz = stats.norm.cdf(z)
    pairs = [(pz[0::2], pz[1::2]), (u[:-1], u[1:]), (v, w), (u, v)]
    for a, b in pairs:
        assert chi2_p(a, b) > 1e-3
        assert abs(np.corrcoef(a, b)[0, 1]) < 4 / np.sqrt(len(a))
    assert chi2_p(v, (v + 0.2 * w) % 1.0) < 1e-6  # power: a dependent pair


def _pairs_chi2_pvalue(a, b, bins=10):
    """Chi-square test of independence and uniformity of pairs (a, b) in [0, 1)²."""
    counts = np.histogram2d(a, b, bins=bins, range=[[0, 1], [0, 1]])[0].ravel()
    expected = len(a) / bins ** 2
    return stats.chi2.sf(((counts - expected) ** 2 / expected).sum(), bins ** 2 - 1)


def test_uniforms_are_the_top_bits_of_jax_threefry():
    """`uniforms` element f is word f % 2 of JAX's own threefry_2x32 hash of
    counter (f // 2, 0), top 24 bits centred in their cell (exact in float64,
    rounded to nearest in float32), and the same for raw uint32 keys."""
    from jax.extend.random import threefry_2x32 as jax_threefry

    for seed in (0, 1, 12345):
        kd = np.asarray(jax.random.key_data(jax.random.key(seed)), np.uint32)
        m = 37
        ref = np.asarray(jax_threefry(kd, np.concatenate([np.arange(m, dtype=np.uint32), np.zeros(m, np.uint32)])))
        top = np.stack([ref[:m], ref[m:]], 1).ravel() >> 8
        want = ((top + 0.5) * 2.0 ** -24).astype(np.float32)  # to nearest float32
        f = jax.jit(lambda k: _rng.uniforms(_rng.key_words(k), (2 * m,), jnp.float32))
        np.testing.assert_array_equal(f(jax.random.key(seed)), want)
        np.testing.assert_array_equal(f(jnp.asarray(kd)), want)
        with jax.enable_x64(True):
            u64 = jax.jit(lambda k: _rng.uniforms(_rng.key_words(k), (2 * m,), jnp.float64))(jax.random.key(seed))
            assert u64.dtype == jnp.float64
            np.testing.assert_array_equal(np.asarray(u64), (top + 0.5) * 2.0 ** -24)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_round_draws_are_uniform_and_independent(dtype):
    """Uniforms as slpc's round draws them (one key per round, 256 counters
    each): 400 keys × 256 draws are U(0, 1) and their −log are Exp(1) (KS);
    adjacent draws (the two words of one hash), draws c and c + 128 and the
    same counter under two keys are independent (chi-square on a 10×10
    grid). Power: u^1.05, a shift of 0.01 and a dependent pair are rejected."""
    n_keys, n = 400, 256
    keys = jax.random.split(jax.random.key(2026), n_keys)
    with jax.enable_x64(dtype == jnp.float64):
        u = np.asarray(jax.jit(jax.vmap(lambda k: _rng.uniforms(_rng.key_words(k), (n,), dtype)))(keys), np.float64)
    assert 0 < u.min() and u.max() < 1
    flat = u.ravel()
    assert stats.kstest(flat, "uniform").pvalue > 1e-3
    assert stats.kstest(-np.log(flat), "expon").pvalue > 1e-3
    assert stats.kstest(flat ** 1.05, "uniform").pvalue < 1e-6
    assert stats.kstest(np.minimum(flat + 0.01, 1.0), "uniform").pvalue < 1e-6
    assert stats.kstest(-1.05 * np.log(flat), "expon").pvalue < 1e-6
    pairs = [(u[:, :-1:2].ravel(), u[:, 1::2].ravel()),  # the two words of one hash
             (u[:, :128].ravel(), u[:, 128:].ravel()),  # counters c and c + 64
             (u[:-1:2].ravel(), u[1::2].ravel())]  # same counters, two keys
    for a, b in pairs:
        assert _pairs_chi2_pvalue(a, b) > 1e-3
        assert abs(np.corrcoef(a, b)[0, 1]) < 4 / np.sqrt(len(a))
    a, b = pairs[0]
    assert _pairs_chi2_pvalue(a, (a + 0.2 * b) % 1.0) < 1e-6  # power: a dependent pair
