"""`LandmarkMDS`: the NumPy-in / NumPy-out wrapper around `jaxstream.landmark_mds`."""
from __future__ import annotations

from typing import Optional

import numpy as np
import jax
import jax.numpy as jnp

from .._caches import cached
from .._wrapper import StreamModel
from .coords import embed_points
from .distances import Metric, pairwise_distances
from .learner import check_items, current_embedding, landmark_mds, landmarks
from .lmds import check_eigen
from .stress import normalized_stress
from .types import CASE_ADDED, Config, Embedding, Info

__all__ = ["LandmarkMDS"]

# Points re-embedded per compiled call (`reembed_every`): padded blocks of one size, one compile.
_EMBED_BLOCK = 1024


@cached()
def _compiled(config: Config):
    """Jitted embedding-of-a-state and out-of-sample map of a configuration, shared by every model built
    with it (no retracing per model)."""
    return (jax.jit(lambda s: current_embedding(s, config)),
            jax.jit(lambda s, e, x: embed_points(s, e, x, config)))


def _check_reembed(reembed_every) -> Optional[int]:
    if reembed_every is None:
        return None
    if isinstance(reembed_every, bool) or not isinstance(reembed_every, (int, np.integer)) or reembed_every < 1:
        raise ValueError(f"reembed_every must be a positive int or None; got {reembed_every!r}")
    return int(reembed_every)


class LandmarkMDS(StreamModel):
    """Online landmark replacement with landmark MDS, NumPy in / NumPy out.

    See `jaxstream.StreamModel` for the conventions (``fit`` / ``partial_fit``
    / ``learn_one`` return self; ``state_``, ``n_seen_``,
    ``cumulative_loss_``, ``last_losses_``, ``last_info_``). The first point
    becomes the first landmark: its prequential loss in ``last_losses_`` is
    NaN (there was no landmark to score it); ``last_info_`` holds one `Info`
    row per point of the last call, the first point's included (its
    ``loss`` is inf, its case 2, "added", as the `Info` docstring says).

    Example:
      >>> from jaxstream.datasets import make_s_curve
      >>> X, _ = make_s_curve(200, random_state=0, sort_by_t=True)  # (200, 3), streamed along the curve
      >>> model = LandmarkMDS(10, n_components=2).fit(X)  # learn a stream (or learn_one(x), partial_fit(X))
      >>> model.transform(X).shape                        # embedded under the current landmarks
      (200, 2)
      >>> model.landmarks_.shape, model.landmark_indices_.shape
      ((10, 3), (10,))
      >>> 0.0 < model.score(X) <= 1.0                     # 1 − normalised stress
      True

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

    Args: the arguments of `jaxstream.landmark_mds`, ``seed`` for the PRNG
      key, and ``reembed_every`` (positive int or None, the default: no
      re-embedding, nothing kept; turns ``embed_arrivals`` on). Arguments are
      only stored here and checked when the model first learns.
    """

    # Wide signature: scikit-learn's rule: every hyper-parameter is an explicit __init__ argument.
    def __init__(self, max_landmarks: int = 100, *, n_components: int = 2, buffer_size: Optional[int] = None,
                 metric: Metric = None, distances=None, align: bool = False,
                 cache_distances: Optional[bool] = None, eps0: float = 0.0, embed_arrivals: bool = False,
                 min_support: int = 0, density_shift: float = 0.0, weighted: bool = False, seed: int = 0,
                 reembed_every: Optional[int] = None):
        self.max_landmarks = max_landmarks
        self.n_components = n_components
        self.buffer_size = buffer_size
        self.metric = metric
        self.distances = distances
        self.align = align
        self.cache_distances = cache_distances
        self.eps0 = eps0
        self.embed_arrivals = embed_arrivals
        self.min_support = min_support
        self.density_shift = density_shift
        self.weighted = weighted
        self.seed = seed
        self.reembed_every = reembed_every

    # --- StreamModel hooks ------------------------------------------------

    def _build(self):
        reembed = _check_reembed(self.reembed_every)
        return landmark_mds(self.max_landmarks, n_components=self.n_components, buffer_size=self.buffer_size,
                            metric=self.metric, distances=self.distances, align=self.align,
                            cache_distances=self.cache_distances, eps0=self.eps0,
                            # the held coordinates of points after the last re-embedding are Info.y
                            embed_arrivals=self.embed_arrivals or reembed is not None,
                            min_support=self.min_support, density_shift=self.density_shift,
                            weighted=self.weighted)

    def _forget(self) -> None:
        super()._forget()
        self._seen: list = []  # chunks of the points seen (only with reembed_every)
        self._held: list = []  # chunks of the coordinates held for them
        self._first_info = None

    def _check_rows(self, X) -> None:
        state = getattr(self, "state_", None)
        check_items(X, self.learner.config, self.learner.params if state is None else state.params, "X")

    def _init_state(self, key, X):
        state = self.learner.init(key, X[:1])
        dtype = state.points.dtype
        self._first_info = Info(
            loss=np.asarray(np.inf, dtype), case=np.int32(CASE_ADDED), replaced=np.bool_(False),
            eps=np.asarray(state.eps), added=np.int32(0), removed=np.int32(-1), evicted=np.int32(-1),
            n_landmarks=np.int32(1), full_degrees=np.bool_(False),
            y=np.zeros(self.n_components, dtype) if self.learner.config.track else None)
        if self.reembed_every is not None:  # arrival 0 is a multiple of K: held as re-embedded
            self._seen = [X[:1]]
            self._held = [self._embed_all(state, X[:1])]
        return state, 1

    def partial_fit(self, X, y=None) -> "LandmarkMDS":
        """Learn the rows of X (n, p) in order (indices (n, 1) for ``metric="precomputed"``). Returns self.

        ``last_info_`` holds their `Info` (one row per point, NumPy arrays),
        ``last_losses_`` their prequential losses.
        """
        return super().partial_fit(X, y)

    def _partial_fit(self, X) -> "LandmarkMDS":
        # Under partial_fit and fit (which forgets first): the call whose first point built the state
        # prepends that point's Info, so last_info_ has one row per point.
        first = getattr(self, "state_", None) is None
        super()._partial_fit(X)
        if first and getattr(self, "state_", None) is not None:
            head = jax.tree_util.tree_map(lambda a: np.asarray(a)[None], self._first_info)
            rest = self.last_info_
            self.last_info_ = head if rest is None else jax.tree_util.tree_map(
                lambda a, b: np.concatenate([a, b]), head, rest)
        return self

    def _run(self, X):
        """Learn X; with ``reembed_every=K`` in segments that end at the arrivals t with t % K == 0, after
        each of which every point seen is re-embedded."""
        K = self.reembed_every
        if K is None:
            return super()._run(X)
        infos = []
        while X.shape[0]:
            t0 = self._rounds + self._n_init()  # arrival index of X[0]
            seg, X = X[:(-t0) % K + 1], X[(-t0) % K + 1:]  # up to and including the next t with t % K == 0
            self.state_, info = super()._run(seg)
            infos.append(info)
            self._seen.append(seg)
            self._held.append(np.asarray(info.y))
            if (t0 + seg.shape[0] - 1) % K == 0:  # the segment ended at such an arrival: re-embed all points
                self._seen = [np.concatenate(self._seen)]
                self._held = [self._embed_all(self.state_, self._seen[0])]
        return self.state_, jax.tree_util.tree_map(lambda *a: np.concatenate(a), *infos)

    def _embed_all(self, state, X) -> np.ndarray:
        """Coordinates of X (n, p) under `state`'s embedding, in padded blocks of one size (one compile)."""
        embed_state, embed = _compiled(self.learner.config)
        emb = embed_state(state)
        dtype = state.points.dtype
        out = []
        for i in range(0, X.shape[0], _EMBED_BLOCK):
            blk = X[i:i + _EMBED_BLOCK]
            pad = np.zeros((_EMBED_BLOCK, X.shape[1]), dtype)
            pad[:blk.shape[0]] = blk
            out.append(np.asarray(embed(state, emb, jnp.asarray(pad)))[:blk.shape[0]])
        return np.concatenate(out)

    # --- embedding --------------------------------------------------------

    def transform(self, X) -> np.ndarray:
        """(n, k) coordinates of the rows of X (n, p) under the current landmarks.

        With ``align=True`` the tracked, aligned embedding is used (consecutive
        calls do not flip); otherwise the landmark MDS is computed afresh.

        Raises:
          ValueError: fewer than k eigenvalues of the landmarks' MDS are
            positive (`check_eigen`), or bad input.
        """
        X = self._points(X)
        state = self.state_
        check_items(X, self.learner.config, state.params, "X")
        emb = self.embedding_
        check_eigen(emb.n_positive, self.n_components)
        return np.asarray(_compiled(self.learner.config)[1](state, emb, jnp.asarray(X, state.points.dtype)))

    def predict(self, X) -> np.ndarray:
        """The same as `transform` (an embedding is this learner's prediction, as `StreamLearner.predict`)."""
        return self.transform(X)

    def fit_transform(self, X, y=None) -> np.ndarray:
        """`fit` then `transform` of the same X."""
        return self.fit(X, y).transform(X)

    def score(self, X, y=None) -> float:
        """1 − σ, σ the normalised stress of X's embedding against X's pairwise distances.

        σ = sqrt(Σ_{i<j} (d_ij − ‖y_i − y_j‖)² / Σ_{i<j} d_ij²) over the rows of
        X (n, p), with d the learner's metric (the precomputed matrix's
        entries for ``metric="precomputed"``) and y = ``transform(X)``. 1 is a
        perfect embedding; it can be negative. Costs O(n²) memory.
        """
        del y
        Y = self.transform(X)
        X = self._as_rows(X)
        if self.learner.config.dist.precomputed:
            idx = X[:, 0].astype(np.int64)
            D = np.asarray(self.state_.params.distances)[np.ix_(idx, idx)]
        else:
            D = np.asarray(pairwise_distances(X, metric=self.metric))
        return float(1.0 - normalized_stress(D, Y))

    # --- the learned summary ----------------------------------------------

    @property
    def embedding_(self) -> Embedding:
        """The `Embedding` of the current landmarks (the tracked one when the learner keeps it)."""
        return _compiled(self.learner.config)[0](self._require())

    @property
    def landmarks_(self) -> np.ndarray:
        """(n_L, p) landmark points, by arrival."""
        return landmarks(self._require())[0]

    @property
    def landmark_indices_(self) -> np.ndarray:
        """(n_L,) arrival indices of the landmarks (0-based positions in the stream)."""
        return landmarks(self._require())[1]

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
        """The current threshold ε."""
        return float(self._require().eps)

    @property
    def held_(self) -> np.ndarray:
        """(n_seen, k) the coordinates a user holds for every point seen (needs ``reembed_every``)."""
        if self.reembed_every is None:
            raise ValueError("held_ needs reembed_every=K (the model keeps no points otherwise)")
        self._require()
        return np.concatenate(self._held)
