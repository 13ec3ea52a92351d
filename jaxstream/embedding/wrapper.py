"""Stateful NumPy-in / NumPy-out wrapper around `landmark_mds`."""
from __future__ import annotations

import functools
from typing import Optional

import numpy as np
import jax
import jax.numpy as jnp

from .._checks import check_points
from .._core import run_stream
from .distances import Metric
from .lmds import check_eigen
from .online import (CASE_ADDED, Embedding, Info, State, _Cfg, _check_items, _embed_points, _first_state,
                     _fresh_embedding, _kernels, _make_cfg, landmark_mds, landmarks)

__all__ = ["LandmarkMDS"]


@functools.lru_cache(maxsize=64)
def _compiled(cfg: _Cfg):
    """Jitted single update, embedding and transform of a configuration, shared by every model built with
    it (no retracing per model)."""
    return (jax.jit(_kernels(cfg)[0]), jax.jit(lambda s: s.embedding if cfg.track else _fresh_embedding(s, cfg)),
            jax.jit(lambda s, e, x: _embed_points(s, e, x, cfg)))


class LandmarkMDS:
    """NumPy-in / NumPy-out online landmark MDS (keeps the key and state).

    Example::

        model = LandmarkMDS(max_landmarks=100, n_components=2)
        model.partial_fit(X)          # learn a stream (or model.learn_one(x))
        Y = model.transform(X)        # embed points under the current landmarks

    Held coordinates (``reembed_every=K``): an online user holds each point's
    coordinates from its arrival (`Info.y`), placed by the landmarks of that
    moment; early points were placed before the landmarks saw the rest of
    the data. With ``reembed_every=K`` the model keeps every point it has
    seen (host memory n·p) and, after each arrival whose index t (0-based)
    is a multiple of K, re-embeds all points seen so far (0..t) with the
    current landmarks; `held_` returns the coordinates the user holds: the
    last re-embedding for points up to it, the at-arrival coordinates for
    later ones. Each re-embedding costs O(t·n_L) (one landmark-MDS transform
    of every point seen), i.e. O(n·n_L/K) per arrival on average; measured in
    ``benchmarks/bench_landmarks.py --only arrival``. Without ``align=True``
    consecutive re-embeddings may differ by a reflection (each point's held
    coordinates come from one embedding; compare within one block).

    Args: as `landmark_mds`, plus ``seed`` for the PRNG key and
      ``reembed_every`` (positive int or None, the default: no re-embedding,
      nothing kept; turns ``embed_arrivals`` on).
    """

    def __init__(self, max_landmarks: int = 100, *, n_components: int = 2, buffer_size: Optional[int] = None,
                 metric: Metric = None, distances=None, align: bool = False,
                 cache_distances: Optional[bool] = None, eps0: float = 0.0, embed_arrivals: bool = False,
                 min_support: int = 0, density_shift: float = 0.0, weighted: bool = False, seed: int = 0,
                 reembed_every: Optional[int] = None):
        if reembed_every is not None:
            if isinstance(reembed_every, bool) or not isinstance(reembed_every, (int, np.integer)) \
                    or reembed_every < 1:
                raise ValueError(f"reembed_every must be a positive int or None; got {reembed_every!r}")
            embed_arrivals = True  # the held coordinates of points after the last re-embedding are Info.y
        self.reembed_every = None if reembed_every is None else int(reembed_every)
        self._seen: list = []  # chunks of the points seen (only with reembed_every)
        self._held: list = []  # chunks of the coordinates held for them
        self.learner = landmark_mds(max_landmarks, n_components=n_components, buffer_size=buffer_size,
                                    metric=metric, distances=distances, align=align,
                                    cache_distances=cache_distances, eps0=eps0, embed_arrivals=embed_arrivals,
                                    min_support=min_support, density_shift=density_shift, weighted=weighted)
        self._cfg = _make_cfg(max_landmarks, buffer_size, n_components, align, metric, cache_distances,
                              embed_arrivals, weighted)
        self.n_components = n_components
        self._key = jax.random.key(seed)
        self.state: Optional[State] = None
        self.chunk_size = 256
        self._update, self._embedding, self._embed = _compiled(self._cfg)

    def _run(self, k, xs, s, off):
        # run_stream's own compiled driver (shared by every model and caller with this configuration;
        # concrete, checked rows take its unmasked path)
        return run_stream(self.learner, k, xs, s, trace="info", step_offset=off)

    def _run_masked(self, k, xs, s, off, mask):
        return run_stream(self.learner, k, xs, s, mask=mask, trace="info", step_offset=off)

    def _prep(self, X, name):
        X = np.asarray(check_points(np.atleast_2d(np.asarray(X, dtype=float)), name,
                                    dim=None if self.state is None else self.state.points.shape[1]))
        _check_items(X, self._cfg, self.learner.params if self.state is None else self.state.params, name)
        return X

    def reset(self) -> "LandmarkMDS":
        self.state = None
        self._seen, self._held = [], []
        return self

    def learn_one(self, x) -> Info:
        """Learn one point (p,); returns its `Info` (NumPy scalars)."""
        if np.ndim(x) != 1:
            raise ValueError(f"learn_one takes one point of shape (p,); got shape {np.shape(x)}")
        return jax.tree_util.tree_map(lambda a: np.asarray(a)[0], self.learn_many(np.asarray(x, float)[None]))

    def learn_many(self, X) -> Info:
        """Learn points (n, p) in order; returns the per-point `Info` (NumPy arrays).

        Whole chunks of `chunk_size` points go through one compiled
        `run_stream`; the rest (r points) through one masked `run_stream`
        padded to a power of two in [8, chunk_size] (a single point: the
        compiled single-point update), so only a few sizes ever compile. With ``reembed_every=K`` the
        points are learned in segments that end at the arrivals where the
        held coordinates are re-embedded.
        """
        X = self._prep(X, "X")
        if X.shape[0] == 0:
            raise ValueError("X is empty")
        K = self.reembed_every
        if K is None:
            return self._learn(X)
        infos = []
        while X.shape[0]:
            t0 = self.n_seen_
            seg = X[:(-t0) % K + 1]  # up to and including the next arrival t with t % K == 0
            X = X[seg.shape[0]:]
            info = self._learn(seg)
            infos.append(info)
            self._seen.append(seg)
            self._held.append(np.asarray(info.y))
            if (self.n_seen_ - 1) % K == 0:  # the segment ended at such an arrival: re-embed all points
                self._held = [self._embed_all(np.concatenate(self._seen))]
                self._seen = [np.concatenate(self._seen)]
        return jax.tree_util.tree_map(lambda *a: np.concatenate(a), *infos)

    def _embed_all(self, X) -> np.ndarray:
        """Coordinates of X (n, p) under the current embedding, in padded blocks of a fixed size (one compile)."""
        emb = self.embedding_
        B = 1024
        dtype = self.state.points.dtype
        out = []
        for i in range(0, X.shape[0], B):
            blk = X[i:i + B]
            pad = np.zeros((B, X.shape[1]), dtype)
            pad[:blk.shape[0]] = blk
            out.append(np.asarray(self._embed(self.state, emb, jnp.asarray(pad)))[:blk.shape[0]])
        return np.concatenate(out)

    @property
    def held_(self) -> np.ndarray:
        """(n_seen, k) the coordinates a user holds for every point seen (needs ``reembed_every``)."""
        if self.reembed_every is None:
            raise ValueError("held_ needs reembed_every=K (the model keeps no points otherwise)")
        self._require()
        return np.concatenate(self._held)

    def _learn(self, X) -> Info:
        if self.state is None:
            dtype = (jnp.asarray(self.learner.params.distances).dtype if self._cfg.dist.precomputed
                     else jnp.asarray(X).dtype)
            self.state = _first_state(self._cfg, jnp.asarray(X[0]), dtype, self.learner.params)
            first = Info(loss=np.asarray(np.inf, dtype), case=np.int32(CASE_ADDED), replaced=np.bool_(False),
                         eps=np.asarray(self.state.eps), added=np.int32(0), removed=np.int32(-1),
                         evicted=np.int32(-1), n_landmarks=np.int32(1), full_degrees=np.bool_(False),
                         y=np.zeros(self.n_components, dtype) if self._cfg.track else None)
            infos = [jax.tree_util.tree_map(lambda a: np.asarray(a)[None], first)]
            X = X[1:]
        else:
            infos = []
        C = self.chunk_size
        n_full = (X.shape[0] // C) * C
        for i in range(0, n_full, C):
            self.state, info = self._run(self._key, X[i:i + C], self.state, int(self.state.n_seen))
            infos.append(jax.tree_util.tree_map(np.asarray, info))
        r = X.shape[0] - n_full
        if r == 1:
            t = int(self.state.n_seen)
            self.state, info = self._update(jax.random.fold_in(self._key, t), self.state, X[n_full])
            infos.append(jax.tree_util.tree_map(lambda a: np.asarray(a)[None], info))
        elif r > 1:
            # one masked run over the rest padded to a power of two (at least 8, at most C): a few compiled
            # sizes instead of r dispatched single steps
            P = min(C, max(8, 1 << (r - 1).bit_length()))
            pad = np.zeros((P,) + X.shape[1:], X.dtype)
            pad[:r] = X[n_full:]
            self.state, info = self._run_masked(self._key, pad, self.state, int(self.state.n_seen),
                                                np.arange(P) < r)
            infos.append(jax.tree_util.tree_map(lambda a: np.asarray(a)[:r], info))
        return jax.tree_util.tree_map(lambda *a: np.concatenate(a), *infos)

    def partial_fit(self, X) -> "LandmarkMDS":
        self.learn_many(X)
        return self

    def fit(self, X) -> "LandmarkMDS":
        """Forget everything and learn X as a stream."""
        return self.reset().partial_fit(X)

    def _require(self):
        if self.state is None:
            raise ValueError("the model has not seen any point yet; call learn_one / partial_fit first")

    @property
    def embedding_(self) -> Embedding:
        self._require()
        return self._embedding(self.state)

    def transform(self, X) -> np.ndarray:
        """Embed points (n, p) -> (n, k). Raises if fewer than k eigenvalues are positive."""
        self._require()
        X = self._prep(X, "X")
        emb = self.embedding_
        check_eigen(emb.n_positive, self.n_components)
        return np.asarray(self._embed(self.state, emb, jnp.asarray(X, self.state.points.dtype)))

    def fit_transform(self, X) -> np.ndarray:
        return self.fit(X).transform(X)

    @property
    def landmarks_(self) -> np.ndarray:
        """(n_L, p) landmark points, by arrival."""
        self._require()
        return landmarks(self.state)[0]

    @property
    def landmark_indices_(self) -> np.ndarray:
        """(n_L,) arrival indices of the landmarks (0-based positions in the stream)."""
        self._require()
        return landmarks(self.state)[1]

    @property
    def landmark_coords_(self) -> np.ndarray:
        """(n_L, k) MDS coordinates of the landmarks, in the order of `landmark_indices_`."""
        emb = self.embedding_
        check_eigen(emb.n_positive, self.n_components)
        ids = np.asarray(emb.ids)
        mask = np.asarray(emb.mask)
        order = np.argsort(np.where(mask, ids, np.iinfo(np.int32).max), kind="stable")[: mask.sum()]
        return np.asarray(emb.coords)[order]

    @property
    def eps_(self) -> float:
        self._require()
        return float(self.state.eps)

    @property
    def n_seen_(self) -> int:
        return 0 if self.state is None else int(self.state.n_seen)
