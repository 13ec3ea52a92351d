"""Writes the small fixtures shipped in this folder (run from the repository root):

    python jaxstream/embedding/data/generate.py

- contacts_fixture.dat: a SocioPatterns-format contact list (``t i j Si Sj``,
  t in seconds on 20-second bins) made by `jaxstream.embedding.networks.make_contact_stream`
  (20 nodes: 6 staff "NUR"/"MED", 14 patients "PAT", 2 days), node ids as
  sparse integers as in the real files.
- prices_fixture.csv: daily closing prices of 5 made-up tickers on business
  days 2013-01-01 .. 2016-12-30 (correlated geometric Brownian motions, a
  regime change in 2015), in the ``Date,T1,...`` layout `load_prices` reads.

They are synthetic: the real data are not redistributable here (see
`jaxstream.embedding.datasets`).
"""
import os

import numpy as np

from jaxstream.embedding.networks import make_contact_stream

HERE = os.path.dirname(os.path.abspath(__file__))


def contacts(path):
    c = make_contact_stream(20, 2.0, n_staff=6, rate=0.25, seed=7)
    ids = np.sort(np.random.default_rng(7).choice(np.arange(1000, 1800), 20, replace=False))
    status = np.array(["NUR", "NUR", "NUR", "NUR", "MED", "MED"] + ["PAT"] * 14)
    sec = (np.floor(c.t * 3600.0 / 20.0) * 20.0).astype(np.int64)  # 20-second bins from midnight of day 1
    with open(path, "w") as f:
        for t, a, b in zip(sec, c.i, c.j):
            f.write(f"{t}\t{ids[a]}\t{ids[b]}\t{status[a]}\t{status[b]}\n")


def prices(path):
    rng = np.random.default_rng(11)
    days = np.arange(np.datetime64("2013-01-01"), np.datetime64("2016-12-31"))
    days = days[np.is_busday(days)]
    n, p = len(days), 5
    C = 0.5 * np.ones((p, p)) + 0.5 * np.eye(p)
    Lc = np.linalg.cholesky(C)
    drift = np.where(days[:, None] < np.datetime64("2015-01-01"), 0.0004, -0.0002) * np.array([1, 1.5, 0.5, 2, 1])
    ret = drift + 0.012 * (rng.standard_normal((n, p)) @ Lc.T)
    P = 50.0 * np.exp(np.cumsum(ret, axis=0)) * np.array([1.0, 2.0, 0.5, 3.0, 1.2])
    with open(path, "w") as f:
        f.write("Date," + ",".join(f"T{k + 1}" for k in range(p)) + "\n")
        for d, row in zip(days, P):
            f.write(f"{d}," + ",".join(f"{v:.2f}" for v in row) + "\n")


if __name__ == "__main__":
    contacts(os.path.join(HERE, "contacts_fixture.dat"))
    prices(os.path.join(HERE, "prices_fixture.csv"))
