"""Loaders for the paper's real-data formats, on the shipped generated fixtures."""
import math

import numpy as np
import pytest
import jax

import jaxstream
from jaxstream import embedding as LM
from jaxstream.embedding import datasets as ED


def test_load_contacts_fixture():
    c = ED.load_contacts(ED.fixture_path("contacts"))
    raw = np.loadtxt(ED.fixture_path("contacts"), dtype=str)
    assert len(c.t) == len(raw) and c.n_nodes == len(np.unique(raw[:, 1:3].astype(int)))
    assert np.all(np.diff(c.t) >= 0) and np.all(c.t % 20 == 0)  # 20-second bins
    np.testing.assert_array_equal(c.ids[c.i], raw[:, 1].astype(int)[np.argsort(raw[:, 0].astype(int), kind="stable")])
    assert set(c.status) == {"NUR", "MED", "PAT"} and np.all(c.i != c.j)


def test_load_contacts_rejects_bad_lines(tmp_path):
    p = tmp_path / "c.dat"
    p.write_text("20 1 2 NUR PAT\n40 1 2\n")
    with pytest.raises(ValueError, match="5 fields"):
        ED.load_contacts(p)
    p.write_text("20 1 2 NUR PAT\n40 1 3 MED PAT\n")
    with pytest.raises(ValueError, match="two statuses"):
        ED.load_contacts(p)
    p.write_text("20 1 1 NUR NUR\n")
    with pytest.raises(ValueError, match="self-contact"):
        ED.load_contacts(p)


def test_tie_decay_spectra_vs_loop():
    c = ED.load_contacts(ED.fixture_path("contacts"))
    k = 120  # the first 120 contacts
    c = c._replace(t=c.t[:k], i=c.i[:k], j=c.j[:k])
    decay = 1.0 / 3600.0
    times, S = ED.tie_decay_spectra(c, decay)
    assert len(times) == len(np.unique(c.t))
    for s in (0, len(times) // 2, len(times) - 1):  # rebuild the snapshot from scratch
        B = np.zeros((c.n_nodes, c.n_nodes))
        for t, a, b in zip(c.t, c.i, c.j):
            if t <= times[s]:
                w = math.exp(-decay * (times[s] - t))
                B[a, b] += w
                B[b, a] += w
        L = np.diag(B.sum(1)) - B
        ref = np.linalg.eigvalsh(L)
        # float32 eigenvalues: a backward-stable solver is off by O(n·eps·‖L‖) (an H100's cuSOLVER by
        # 1.9e-5 at ‖L‖ = 9.2, where a CPU's LAPACK stays under 1e-5)
        tol = 4 * c.n_nodes * np.finfo(np.float32).eps * max(1.0, np.abs(ref).max())
        np.testing.assert_allclose(S[s], ref, atol=tol)


def test_contacts_fixture_end_to_end():
    """Snapshots at event times -> spectra -> n_L = 20 with a buffer holding every snapshot."""
    c = ED.load_contacts(ED.fixture_path("contacts"))
    times, S = ED.tie_decay_spectra(c, 1.0 / 3600.0)
    S = S[:200].astype(np.float32)
    lrn = LM.landmark_mds(20, n_components=2, buffer_size=len(S), align=True)
    s, info = jaxstream.run_stream(lrn, jax.random.key(0), S[1:], lrn.init(jax.random.key(0), S[:1]), trace="info")
    assert int(np.asarray(info.evicted).max()) == -1  # nothing evicted: the graph holds every snapshot
    assert int(info.n_landmarks[-1]) == 20 and np.all(np.isfinite(np.asarray(info.y)))


def test_load_prices_and_scale(tmp_path):
    t = ED.load_prices(ED.fixture_path("prices"))
    assert t.prices.shape == (len(t.dates), 5) and list(t.tickers) == ["T1", "T2", "T3", "T4", "T5"]
    assert np.all(np.diff(t.dates) > np.timedelta64(0, "D"))
    V = ED.minmax_scale(t.prices)
    np.testing.assert_allclose(V.min(0), 0.0)
    np.testing.assert_allclose(V.max(0), 1.0)
    np.testing.assert_allclose(V[:, 1], (t.prices[:, 1] - t.prices[:, 1].min()) / np.ptp(t.prices[:, 1]))
    p = tmp_path / "p.csv"
    p.write_text("Date,A,B\n2020-01-02,1.0,2.0\n2020-01-03,,2.5\n2020-01-06,1.5,3.0\n")
    t2 = ED.load_prices(p)
    assert len(t2.dates) == 2 and t2.prices[1, 0] == 1.5  # the incomplete day is dropped
    with pytest.raises(ValueError, match="unknown tickers"):
        ED.load_prices(p, tickers=["C"])
    p.write_text("Day,A\n2020-01-02,1.0\n")
    with pytest.raises(ValueError, match="Date"):
        ED.load_prices(p)
