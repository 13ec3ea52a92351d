"""Streams for the embedding family: synthetic benchmarks and loaders for the paper's real data.

Synthetic (NumPy, seeded): `make_swiss_roll`, `make_uneven_clusters`;
the S-curve is `jaxstream.datasets.make_s_curve`.

Real data (files the user downloads; nothing is fetched here):

- SocioPatterns contact lists, lines ``t i j Si Sj`` (t in seconds, 20-second
  bins; i, j node ids; Si, Sj their statuses), e.g. the hospital-ward data
  of Vanhems et al. (2013) at http://www.sociopatterns.org/datasets/ (licence
  CC BY-NC-SA: it cannot ship in this Apache-2.0 package). `load_contacts`
  reads them; `tie_decay_spectra` turns them into tie-decay networks at the
  event times and their Laplacian spectra, the points the paper embeds
  (n_L = 20, a buffer holding every snapshot).
- Daily closing prices of several tickers as a CSV with a ``Date`` column and
  one column per ticker (e.g. exported from a market-data provider such as
  Yahoo Finance or Stooq); `load_prices` reads them and `minmax_scale`
  scales each ticker to [0, 1], giving one vector per day (n_L = 10, a
  buffer at least the number of days).

Small generated fixtures in both formats ship in ``jaxstream/embedding/data/``
(`fixture_path`), written by ``jaxstream/embedding/data/generate.py``.
"""
from __future__ import annotations

import csv
import os
from typing import NamedTuple, Optional

import numpy as np

from .networks import laplacian_spectrum

__all__ = ["make_swiss_roll", "make_uneven_clusters", "Contacts", "load_contacts", "tie_decay_spectra",
           "PriceTable", "load_prices", "minmax_scale", "fixture_path"]

_DATA = os.path.join(os.path.dirname(__file__), "data")


def fixture_path(name: str) -> str:
    """Path of a shipped fixture: ``"contacts"`` (SocioPatterns format) or ``"prices"`` (CSV)."""
    files = {"contacts": "contacts_fixture.dat", "prices": "prices_fixture.csv"}
    if name not in files:
        raise ValueError(f"unknown fixture {name!r}; choose from {sorted(files)}")
    return os.path.join(_DATA, files[name])


def _rng(seed):
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def make_swiss_roll(n: int = 1200, *, noise: float = 0.0, seed=0, sort_by_t: bool = True):
    """Swiss roll as scikit-learn draws it (t = 1.5π(1 + 2u), height 21v), NumPy only.

    Returns:
      ``(X (n, 3), t (n,))``, ordered by t when `sort_by_t` (a stream that
      keeps reaching new regions).
    """
    rng = _rng(seed)
    t = 1.5 * np.pi * (1.0 + 2.0 * rng.uniform(size=n))
    h = 21.0 * rng.uniform(size=n)
    X = np.stack([t * np.cos(t), h, t * np.sin(t)], axis=1) + noise * rng.standard_normal((n, 3))
    if sort_by_t:
        order = np.argsort(t, kind="stable")
        X, t = X[order], t[order]
    return X, t


def make_uneven_clusters(n: int = 1000, *, weights=(0.80, 0.10, 0.05, 0.03, 0.01, 0.01), dim: int = 3,
                         spread: float = 6.0, seed=0):
    """Gaussian clusters of very uneven sizes (unit sd, centres uniform in a cube of side 2·spread), in random order.

    Returns:
      ``(X (n, dim), labels (n,))``.
    """
    rng = _rng(seed)
    w = np.asarray(weights, float)
    w = w / w.sum()
    centres = rng.uniform(-spread, spread, (len(w), dim))
    labels = rng.choice(len(w), size=n, p=w)
    return centres[labels] + rng.standard_normal((n, dim)), labels


class Contacts(NamedTuple):
    """A contact list.

    Attributes:
      t: (m,) contact times in seconds, sorted.
      i: (m,) node indices 0..n_nodes-1, one end of each contact.
      j: (m,) the other end.
      n_nodes: number of distinct nodes.
      ids: (n_nodes,) the file's node ids, in index order.
      status: (n_nodes,) each node's status string (e.g. ``"NUR"``, ``"PAT"``).
    """

    t: np.ndarray
    i: np.ndarray
    j: np.ndarray
    n_nodes: int
    ids: np.ndarray
    status: np.ndarray


def load_contacts(path) -> Contacts:
    """Read a SocioPatterns contact list (``t i j Si Sj`` per line, whitespace separated).

    Raises:
      ValueError: on a line with another number of fields, a non-integer
        time or id, a self-contact, or a node with two statuses.
    """
    rows = []
    with open(path) as f:
        for k, line in enumerate(f, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 5:
                raise ValueError(f"{path}:{k}: expected 't i j Si Sj' (5 fields); got {len(parts)}")
            try:
                rows.append((int(parts[0]), int(parts[1]), int(parts[2]), parts[3], parts[4]))
            except ValueError:
                raise ValueError(f"{path}:{k}: t, i, j must be integers; got {line.strip()!r}") from None
    if not rows:
        raise ValueError(f"{path}: no contacts")
    t = np.array([r[0] for r in rows], np.int64)
    a = np.array([r[1] for r in rows], np.int64)
    b = np.array([r[2] for r in rows], np.int64)
    if np.any(a == b):
        raise ValueError(f"{path}: self-contact at line {int(np.flatnonzero(a == b)[0]) + 1}")
    ids = np.unique(np.concatenate([a, b]))
    status = {}
    for _, u, v, su, sv in rows:
        for node, st in ((u, su), (v, sv)):
            if status.setdefault(node, st) != st:
                raise ValueError(f"{path}: node {node} has two statuses ({status[node]!r}, {st!r})")
    order = np.argsort(t, kind="stable")
    return Contacts(t[order].astype(np.float64), np.searchsorted(ids, a[order]), np.searchsorted(ids, b[order]),
                    len(ids), ids, np.array([status[int(u)] for u in ids]))


def tie_decay_spectra(contacts: Contacts, decay: float, *, times=None):
    """Tie-decay networks at the event times and their Laplacian spectra.

    B(τ) = Σ_{contacts (i, j, t), t <= τ} exp(−decay·(τ − t)) (per second),
    updated event by event on the host (O(n²) per distinct time):
    B(τ_k) = e^{−decay·(τ_k − τ_{k−1})} B(τ_{k−1}) + the contacts at τ_k.

    Args:
      contacts: from `load_contacts`.
      decay: decay rate per second (e.g. 1/3600 for a one-hour memory).
      times: snapshot times; default the distinct contact times.

    Returns:
      ``(times (T,), spectra (T, n_nodes))``: ascending Laplacian
      eigenvalues of each snapshot (stream them with the Euclidean metric:
      that is the Laplacian spectral distance).
    """
    t = np.asarray(contacts.t, np.float64)
    times = np.unique(t) if times is None else np.asarray(times, np.float64)
    if np.any(np.diff(times) < 0):
        raise ValueError("times must be non-decreasing")
    n = contacts.n_nodes
    B = np.zeros((n, n))
    prev = times[0] if len(times) else 0.0
    out = np.empty((len(times), n))
    k = 0
    for s, tau in enumerate(times):
        B *= np.exp(-decay * (tau - prev))
        prev = tau
        k1 = np.searchsorted(t, tau, side="right")
        if k1 > k:
            w = np.exp(-decay * (tau - t[k:k1]))
            np.add.at(B, (contacts.i[k:k1], contacts.j[k:k1]), w)
            np.add.at(B, (contacts.j[k:k1], contacts.i[k:k1]), w)
            k = k1
        out[s] = np.asarray(laplacian_spectrum(B))
    return times, out


class PriceTable(NamedTuple):
    """Daily closing prices.

    Attributes:
      dates: (n,) ``datetime64[D]``, increasing.
      tickers: (p,) ticker names.
      prices: (n, p) closing prices.
    """

    dates: np.ndarray
    tickers: np.ndarray
    prices: np.ndarray


def load_prices(path, tickers: Optional[list] = None) -> PriceTable:
    """Read a CSV with a ``Date`` column (YYYY-MM-DD) and one closing-price column per ticker.

    Rows with a missing or non-positive price in a selected ticker are
    dropped (markets closed, listing gaps), and the number dropped is kept
    visible: the returned table only has complete days.

    Raises:
      ValueError: no ``Date`` column, unknown tickers, dates not increasing,
        or no complete day.
    """
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        rows = [r for r in reader if r]
    cols = [h.strip() for h in header]
    if "Date" not in cols:
        raise ValueError(f"{path}: needs a 'Date' column; got columns {cols}")
    di = cols.index("Date")
    names = [c for c in cols if c != "Date"] if tickers is None else list(tickers)
    missing = [c for c in names if c not in cols]
    if missing:
        raise ValueError(f"{path}: unknown tickers {missing}")
    idx = [cols.index(c) for c in names]
    dates, vals = [], []
    for r in rows:
        try:
            v = [float(r[c]) for c in idx]
        except (ValueError, IndexError):
            continue
        if all(np.isfinite(v)) and min(v) > 0:
            dates.append(np.datetime64(r[di].strip(), "D"))
            vals.append(v)
    if not vals:
        raise ValueError(f"{path}: no day with a price for every ticker")
    dates = np.array(dates)
    if np.any(np.diff(dates) <= np.timedelta64(0, "D")):
        raise ValueError(f"{path}: dates must be strictly increasing")
    return PriceTable(dates, np.array(names), np.array(vals))


def minmax_scale(prices) -> np.ndarray:
    """Scale each column to [0, 1] by its minimum and maximum over the table (constant columns give 0)."""
    P = np.asarray(prices, np.float64)
    lo, hi = P.min(0), P.max(0)
    return (P - lo) / np.where(hi > lo, hi - lo, 1.0)
