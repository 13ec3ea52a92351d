"""Tie-decay networks, Laplacian spectral distance and the synthetic contact stream."""
import math

import numpy as np
import pytest
import jax
import jax.numpy as jnp
from jax import enable_x64

import jaxstream
from jaxstream import embedding as LM

from jaxstream.embedding import networks as NW


def ref_tie_decay(i, j, t, n, times, decay):
    out = np.zeros((len(times), n, n))
    for k, tau in enumerate(times):
        for a, b, s in zip(i, j, t):
            if s <= tau:
                w = math.exp(-decay * (tau - s))
                out[k, a, b] += w
                out[k, b, a] += w
    return out


def test_tie_decay_vs_loop():
    rng = np.random.default_rng(0)
    n, m = 6, 40
    i = rng.integers(0, n, m)
    j = (i + rng.integers(1, n, m)) % n
    t = np.sort(rng.uniform(0, 10, m))
    times = np.array([0.0, 2.5, 5.0, 7.5, 10.0, 12.0])
    with enable_x64():
        B = np.asarray(NW.tie_decay_networks(i, j, t, n, times, decay=0.3))
    np.testing.assert_allclose(B, ref_tie_decay(i, j, t, n, times, 0.3), atol=1e-12)
    assert np.allclose(B, np.swapaxes(B, 1, 2)) and np.all(np.diagonal(B, axis1=1, axis2=2) == 0)
    with pytest.raises(ValueError, match="self-contacts"):
        NW.tie_decay_networks([0, 1], [0, 2], [0.0, 1.0], 3, [1.0], 0.1)


def test_laplacian_spectrum_and_distance():
    rng = np.random.default_rng(1)
    A = rng.uniform(0, 1, (7, 7))
    A = np.triu(A, 1)
    A = A + A.T
    with enable_x64():
        L = np.asarray(NW.laplacian(A))
        np.testing.assert_allclose(L, np.diag(A.sum(1)) - A)
        lam = np.asarray(NW.laplacian_spectrum(A))
        np.testing.assert_allclose(lam, np.linalg.eigvalsh(np.diag(A.sum(1)) - A), atol=1e-12)
        assert abs(lam[0]) < 1e-12  # connected: one zero eigenvalue
        perm = rng.permutation(7)
        assert float(NW.spectral_distance(A, A[perm][:, perm])) < 1e-10  # relabelling-invariant
        Bm = A * (rng.uniform(0, 1, (7, 7)) > 0.5)
        Bm = np.triu(Bm, 1) + np.triu(Bm, 1).T
        d = float(NW.spectral_distance(A, Bm))
        ref = np.linalg.norm(np.linalg.eigvalsh(np.diag(A.sum(1)) - A) - np.linalg.eigvalsh(np.diag(Bm.sum(1)) - Bm))
        assert d == pytest.approx(ref, rel=1e-10)
        assert float(NW.spectral_distance(Bm, A)) == pytest.approx(d, rel=1e-12)
        metric = NW.spectral_metric(7)
        assert float(metric(jnp.asarray(A.ravel()), jnp.asarray(Bm.ravel()))) == pytest.approx(d, rel=1e-10)


def test_contact_stream():
    c = NW.make_contact_stream(12, 3.0, n_staff=4, seed=3)
    c2 = NW.make_contact_stream(12, 3.0, n_staff=4, seed=3)
    np.testing.assert_array_equal(c.t, c2.t)
    assert len(c.t) > 500
    assert np.all(np.diff(c.t) >= 0) and np.all(c.i < c.j)
    assert c.t.min() >= 0 and c.t.max() < 72.0
    hour = c.t % 24
    day = ((hour >= 7) & (hour < 21)).sum() / 14.0
    night = (~((hour >= 7) & (hour < 21))).sum() / 10.0
    assert day > 3 * night  # daily cycle
    new = set(range(4, 4 + 4))  # half of the 8 patients are replaced on day 2
    late = c.t >= 48.0
    assert not any((a in new and b in new) for a, b in zip(c.i[late], c.j[late]))
    assert any((a in new and b in new) for a, b in zip(c.i[~late], c.j[~late]))
    assert set(c.groups.tolist()) == {0, 1} and (c.groups == 0).sum() == 4
    with pytest.raises(ValueError):
        NW.make_contact_stream(5, n_staff=5)


def test_spectral_metric_in_learner_equals_euclidean_on_spectra():
    c = NW.make_contact_stream(6, 1.0, n_staff=2, seed=4)
    times = np.arange(1.0, 24.0, 1.0)
    with enable_x64():
        B = np.asarray(NW.tie_decay_networks(c.i, c.j, c.t, 6, times, decay=0.5))
        spec = np.asarray(NW.laplacian_spectrum(B))
        flat = B.reshape(len(times), -1)
        a = LM.landmark_mds(4, n_components=2, buffer_size=30, metric=NW.spectral_metric(6))
        b = LM.landmark_mds(4, n_components=2, buffer_size=30)
        sa = a.init(jax.random.key(0), flat)
        sb = b.init(jax.random.key(0), spec)
        la = np.asarray(sa.arrival)[np.asarray(sa.is_landmark)]
        lb = np.asarray(sb.arrival)[np.asarray(sb.is_landmark)]
        assert sorted(la.tolist()) == sorted(lb.tolist())
        np.testing.assert_allclose(float(sa.eps), float(sb.eps), rtol=1e-9)
