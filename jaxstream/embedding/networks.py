"""Temporal networks for landmark embedding: tie-decay networks and spectral distances.

A temporal network is given as timed contacts (i, j, t). Its tie-decay
network (W. Ahmad, M. A. Porter, M. Beguerisse-Díaz, 2021) at time τ is the
weighted adjacency matrix

    B_ij(τ) = Σ_{contacts (i, j, t) with t <= τ} exp(−α (τ − t)),

so each contact adds 1 to the tie strength, which then decays at rate α.
Snapshots B(τ_1), B(τ_2), … are compared with the unnormalised-Laplacian
spectral distance

    d(B, B') = || λ(L_B) − λ(L_{B'}) ||_2,   L_B = diag(B 1) − B,

with the eigenvalues sorted in ascending order (as in C. Thongprayoon,
L. Livi, N. Masuda, "Embedding and trajectories of temporal networks",
2023). Because it is the Euclidean distance between sorted spectra, the
cheapest way to stream networks into `jaxstream.landmark_mds` is to stream
their spectra (`laplacian_spectrum`) with the default Euclidean metric; the
same distance as a metric on flattened adjacency matrices is
`spectral_metric`.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

from .._checks import is_concrete

Array = jax.Array

__all__ = ["ContactStream", "tie_decay_networks", "laplacian", "laplacian_spectrum", "spectral_distance",
           "spectral_metric", "make_contact_stream"]


class ContactStream(NamedTuple):
    """Timed contacts of a temporal network, sorted by time.

    Attributes:
      i: (m,) int node indices, one end of each contact.
      j: (m,) int node indices of the other end, j > i.
      t: (m,) float contact times (hours).
      n_nodes: number of nodes.
      groups: (n_nodes,) int group of each node.
    """

    i: np.ndarray
    j: np.ndarray
    t: np.ndarray
    n_nodes: int
    groups: np.ndarray


def tie_decay_networks(i, j, t, n_nodes: int, times, decay) -> Array:
    """Tie-decay adjacency matrices at the given times.

    Args:
      i, j: (m,) integer node indices of the contacts (i != j; each contact
        listed once, in either orientation).
      t: (m,) contact times.
      n_nodes: number of nodes (static).
      times: (T,) observation times τ.
      decay: decay rate α >= 0 (per unit of time).

    Returns:
      (T, n_nodes, n_nodes) symmetric weighted adjacency matrices with zero
      diagonal.
    """
    i = jnp.asarray(i, jnp.int32)
    j = jnp.asarray(j, jnp.int32)
    t = jnp.asarray(t)
    times = jnp.asarray(times, t.dtype)
    if i.shape != j.shape or i.shape != t.shape or i.ndim != 1:
        raise ValueError(f"i, j, t must be 1-D arrays of one length; got {i.shape}, {j.shape}, {t.shape}")
    if is_concrete(i) and is_concrete(j) and bool(jnp.any(i == j)):
        raise ValueError("self-contacts (i == j) are not allowed")
    decay = jnp.asarray(decay, t.dtype)

    def snapshot(tau):
        lag = tau - t
        w = jnp.where(lag >= 0, jnp.exp(-decay * jnp.maximum(lag, 0.0)), 0.0)
        B = jnp.zeros((n_nodes, n_nodes), t.dtype).at[i, j].add(w)
        return B + B.T

    return lax.map(snapshot, times)


def laplacian(A) -> Array:
    """Unnormalised Laplacian ``diag(A 1) − A`` of (..., n, n) adjacency matrices."""
    A = jnp.asarray(A)
    return jnp.sum(A, axis=-1)[..., :, None] * jnp.eye(A.shape[-1], dtype=A.dtype) - A


def laplacian_spectrum(A) -> Array:
    """Eigenvalues (ascending) of the unnormalised Laplacian, shape (..., n)."""
    L = laplacian(A)
    return jnp.linalg.eigvalsh(0.5 * (L + jnp.swapaxes(L, -1, -2)))


def spectral_distance(A, B) -> Array:
    """Laplacian spectral distance ``||λ(L_A) − λ(L_B)||_2`` between (n, n) networks."""
    diff = laplacian_spectrum(A) - laplacian_spectrum(B)
    return jnp.sqrt(jnp.sum(diff * diff, axis=-1))


def spectral_metric(n_nodes: int):
    """The spectral distance as ``metric(a, b)`` on flattened (n_nodes²,) adjacency matrices.

    Usable as ``landmark_mds(metric=spectral_metric(n))``; streaming
    `laplacian_spectrum` vectors with the Euclidean metric gives the same
    distances at a fraction of the cost (one eigendecomposition per network
    instead of two per pair).
    """
    n = int(n_nodes)

    def metric(a, b):
        return spectral_distance(a.reshape(n, n), b.reshape(n, n))

    return metric


def _activity(hour, kind):
    """Contact-rate profile over the day (hours in [0, 24))."""
    day = (hour >= 7.0) & (hour < 21.0)
    if kind == "staff-staff":
        # handovers at shift changes and a midday meeting
        peak = (np.abs(hour - 7.5) < 0.75) | (np.abs(hour - 13.0) < 1.0) | (np.abs(hour - 19.5) < 0.75)
        return np.where(peak, 4.0, np.where(day, 1.0, 0.3))
    if kind == "staff-patient":
        rounds = (hour >= 9.0) & (hour < 11.0)
        return np.where(rounds, 5.0, np.where(day, 1.0, 0.2))
    # patient-patient: daytime only
    return np.where(day, 1.0, 0.02)


def make_contact_stream(n_nodes: int = 20, n_days: float = 3.0, *, n_staff: int = 6, rate: float = 0.4,
                        dt: float = 1.0 / 60.0, discharge_day: int | None = 2, seed=0) -> ContactStream:
    """A synthetic hospital-ward contact stream (stand-in for the paper's data).

    Nodes are staff (group 0, the first ``n_staff``) and patients (group 1).
    Each pair meets as a Bernoulli process on a grid of step `dt` hours with
    rate ``rate · base[g_i, g_j] · profile(hour of day)``: staff meet at
    shift handovers and a midday meeting, staff visit patients mostly during
    the morning round, patients meet each other in the daytime only. From
    `discharge_day` on, half of the patients are replaced by newly admitted
    ones who have no contacts between themselves, a slow structural change on
    top of the daily cycle.

    Args:
      n_nodes: number of nodes.
      n_days: duration in days.
      n_staff: number of staff nodes.
      rate: overall contact rate per pair and hour.
      dt: time step in hours.
      discharge_day: day index at which half the patients change, or None.
      seed: int or `numpy.random.Generator`.

    Returns:
      `ContactStream` with times in hours, sorted.
    """
    if not 1 <= n_staff < n_nodes:
        raise ValueError(f"need 1 <= n_staff < n_nodes; got n_staff={n_staff}, n_nodes={n_nodes}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    groups = np.where(np.arange(n_nodes) < n_staff, 0, 1)
    iu, ju = np.triu_indices(n_nodes, 1)
    gi, gj = groups[iu], groups[ju]
    kind = np.where((gi == 0) & (gj == 0), 0, np.where((gi == 1) & (gj == 1), 2, 1))
    base = np.array([1.0, 0.6, 0.25])[kind]
    patients = np.arange(n_staff, n_nodes)
    new_patients = set(patients[: len(patients) // 2].tolist())
    changed = np.array([(a in new_patients) and (b in new_patients) for a, b in zip(iu, ju)])
    steps = np.arange(int(round(n_days * 24.0 / dt))) * dt
    out_i, out_j, out_t = [], [], []
    names = ("staff-staff", "staff-patient", "patient-patient")
    for t0 in steps:
        hour = t0 % 24.0
        prof = np.empty(len(iu))
        for k, name in enumerate(names):
            prof[kind == k] = _activity(np.array(hour), name)
        p = rate * base * prof * dt
        if discharge_day is not None and t0 >= 24.0 * discharge_day:
            p = np.where(changed, 0.0, p)
        hit = rng.random(len(iu)) < p
        if hit.any():
            out_i.append(iu[hit])
            out_j.append(ju[hit])
            out_t.append(t0 + dt * rng.random(int(hit.sum())))
    i = np.concatenate(out_i) if out_i else np.zeros(0, int)
    j = np.concatenate(out_j) if out_j else np.zeros(0, int)
    t = np.concatenate(out_t) if out_t else np.zeros(0)
    order = np.argsort(t, kind="stable")
    return ContactStream(i[order], j[order], t[order], n_nodes, groups)
