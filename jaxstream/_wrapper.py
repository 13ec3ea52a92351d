"""`StreamModel`: the base of the NumPy-in / NumPy-out wrappers (`SLPC`, `PACBO`, `LandmarkMDS`).

One convention for the three models, taken from the two ecosystems users
come from:

* scikit-learn: ``fit(X)`` (forget, then learn X as a stream),
  ``partial_fit(X)`` (go on learning), both returning ``self``;
  ``predict`` / ``transform`` / ``score``; ``get_params`` / ``set_params``
  read the constructor's arguments, so `sklearn.base.clone` works; what is
  learned lives in attributes with a trailing underscore (``state_``,
  ``n_seen_``, ``cumulative_loss_``, ``last_losses_``, ``last_info_``,
  ``n_features_in_``), which do not exist before the first fit.
* River: ``learn_one(x)`` (returns ``self``), ``predict_one(x)`` and
  ``transform_one(x)`` for one point of shape (d,).

The prequential losses of the points of the last call are in
``last_losses_`` (NaN for the points a model used to build its first
summary, which had nothing to score them), their sum over the whole stream
in ``cumulative_loss_``. Round t of a model uses the key
``fold_in(key, t)``, as `jaxstream.run_stream` does, so learning point by
point, in batches of any size, or in one call gives the same result.
Batches go through a few compiled programs: whole chunks of ``CHUNK`` rows,
and the rest padded (and masked) to a power of two of at least 8 rows.
"""
from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import jax

from ._caches import cached
from ._checks import check_points, host_array, refuse_sparse
from ._core import StreamLearner, run_stream

__all__ = ["StreamModel"]

CHUNK = 1024
MIN_PAD = 8
_NONFINITE_HINT = ("the models learn finite points only: drop those rows first, e.g. "
                   "X[np.isfinite(X).all(axis=1)] (run_stream(..., nonfinite='skip') masks them in the functional API)")


class NotFittedError(RuntimeError, ValueError, AttributeError):
    """A model asked for its summary before it has one (scikit-learn's convention: a ValueError
    and an AttributeError, so ``hasattr(model, "vertices_")`` is False until it is fitted)."""


class StreamModel:
    """Base class of the NumPy wrappers; subclasses define the constructor and a few hooks.

    A subclass's ``__init__`` only stores its arguments, under their own
    names (scikit-learn's rule), and implements `_build` (the learner),
    `_init_state` (the first summary from the first rows) and the
    prediction methods.
    """

    # --- scikit-learn parameter plumbing ---------------------------------

    @classmethod
    def _param_names(cls) -> list:
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values()
                if p.name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]

    def get_params(self, deep: bool = True) -> dict:
        """The constructor's arguments (scikit-learn's ``get_params``)."""
        del deep  # no nested estimators
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params) -> "StreamModel":
        """Set constructor arguments; the learned state is discarded (scikit-learn's ``set_params``)."""
        names = set(self._param_names())
        for name, value in params.items():
            if name not in names:
                raise ValueError(f"{type(self).__name__} has no parameter {name!r}; valid: {sorted(names)}")
            setattr(self, name, value)
        self._forget()
        return self

    _estimator_type = None  # scikit-learn's role: "clusterer" for PACBO

    def __sklearn_tags__(self):
        """scikit-learn's estimator tags (scikit-learn calls this, so it is installed when it runs;
        jaxstream itself never imports it): unsupervised, float input, allows NaN never."""
        from sklearn.utils import InputTags, Tags, TargetTags, TransformerTags
        return Tags(estimator_type=self._estimator_type, target_tags=TargetTags(required=False),
                    transformer_tags=TransformerTags(preserves_dtype=["float32"]) if hasattr(self, "transform")
                    else None,
                    input_tags=InputTags(two_d_array=True, allow_nan=False))

    def __getstate__(self) -> dict:
        # the learner holds jitted closures; it is rebuilt (from the factory cache) on first use
        return {k: v for k, v in self.__dict__.items() if k != "_learner_obj"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._learner_obj = None

    def __repr__(self) -> str:
        sig = inspect.signature(type(self).__init__)
        args = [f"{k}={v!r}" for k, v in self.get_params().items() if not _equal(sig.parameters[k].default, v)]
        return f"{type(self).__name__}({', '.join(args)})"

    # --- hooks ------------------------------------------------------------

    def _build(self) -> StreamLearner:  # pragma: no cover - abstract
        raise NotImplementedError

    def _init_state(self, key, X) -> tuple[Any, int]:  # pragma: no cover - abstract
        """``(state, n_used)``: the first summary from the first rows of X, and how many it used
        (``state`` None while more rows are needed)."""
        raise NotImplementedError

    def _check_rows(self, X) -> None:
        """Extra checks of a batch before anything of it is learned (e.g. a fixed radius)."""

    # --- learning ---------------------------------------------------------

    @property
    def learner(self) -> StreamLearner:
        """The functional learner this model runs (built from the parameters on first use)."""
        if getattr(self, "_learner_obj", None) is None:
            self._learner_obj = self._build()
        return self._learner_obj

    def _forget(self) -> None:
        self._learner_obj = None
        for name in ("state_", "n_seen_", "cumulative_loss_", "last_losses_", "last_info_", "n_features_in_"):
            self.__dict__.pop(name, None)
        self._pending = []
        self._rounds = 0
        self._init_rows = 0

    def reset(self) -> "StreamModel":
        """Forget everything learned (the parameters stay)."""
        self._forget()
        return self

    def _seed(self) -> int:
        seed = self.seed
        if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
            raise TypeError(f"{type(self).__name__}: seed must be an integer; got {seed!r}")
        return int(seed)

    def _key(self):
        return jax.random.key(self._seed())

    def _as_rows(self, X, name: str = "X") -> np.ndarray:
        refuse_sparse(X, name)
        X = host_array(X, name)
        if X.ndim == 1:
            raise ValueError(f"{name} must be 2-D (n, d); got a 1-D array of shape {X.shape}: pass one point "
                             "to learn_one, or Reshape your data to (1, d) for one point or (n, 1) for one feature")
        dim = getattr(self, "n_features_in_", None)
        X = np.asarray(check_points(X, name, dim=dim, nonfinite_hint=_NONFINITE_HINT))
        return X

    def fit(self, X, y=None) -> "StreamModel":
        """Forget everything, then learn the rows of X (n, d) in order as a stream. Returns self.

        All or nothing: if it raises, the model keeps what it had learned before."""
        del y
        return self._all_or_nothing(lambda: (self._forget(), self._partial_fit(X))[1])

    def partial_fit(self, X, y=None) -> "StreamModel":
        """Learn the rows of X (n, d) in order, after what was learned before. Returns self.

        Their prequential losses are in ``last_losses_`` and the round's
        diagnostics in ``last_info_``. All or nothing: if the call raises
        (bad input, a summary that became NaN, Ctrl-C), the model is left
        exactly as it was before it.

        Raises:
          ValueError: X is not (n, d) with the model's d, is empty, or has
            NaN/inf or out-of-range values (`jaxstream._checks.check_points`).
          FloatingPointError: the summary became NaN while learning X.
        """
        del y
        return self._all_or_nothing(lambda: self._partial_fit(X))

    def _all_or_nothing(self, learn):
        """Run ``learn()``; if it raises (Ctrl-C included), put every attribute back as it was."""
        saved = {k: (list(v) if isinstance(v, list) else v) for k, v in self.__dict__.items()}
        try:
            return learn()
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(saved)
            raise

    def _partial_fit(self, X) -> "StreamModel":
        X = self._as_rows(X)
        if X.shape[0] == 0:
            raise ValueError("X has no rows: nothing to learn")
        self._check_rows(X)
        if not hasattr(self, "_pending"):
            self._forget()
        losses, infos = [], []
        if getattr(self, "state_", None) is None:
            self._pending.append(X)
            buf = np.concatenate(self._pending)
            state, used = self._init_state(self._key(), buf)
            if state is None:
                self.n_features_in_ = X.shape[1]
                self.last_losses_ = np.full(X.shape[0], np.nan)
                self.last_info_ = None
                self.n_seen_ = buf.shape[0]
                self.cumulative_loss_ = 0.0
                return self
            self._pending = []
            self.state_ = state
            self._init_rows = used
            self.n_features_in_ = X.shape[1]
            self.cumulative_loss_ = 0.0
            n_new = X.shape[0] - (buf.shape[0] - used)  # rows of this X that went into the init
            losses.append(np.full(max(n_new, 0), np.nan))
            X = buf[used:]
        if X.shape[0]:
            state, info = self._run(X)
            batch = np.asarray(info.loss, np.float64)
            if np.isnan(batch).any():  # the summary went NaN: keep the last good one, say so
                i = int(np.flatnonzero(np.isnan(batch))[0])
                raise FloatingPointError(
                    f"{type(self).__name__}: the summary became NaN while learning this batch (the loss of its "
                    f"row {i} is NaN); the model keeps its state from before the batch. Rescale the data "
                    "(values near 1) or compute in float64 (jax_enable_x64), and please report it with the data")
            self.state_ = state
            infos.append(info)
            losses.append(batch)
            self.cumulative_loss_ += float(np.sum(info.loss, dtype=np.float64))
        self.last_losses_ = np.concatenate(losses) if losses else np.zeros(0)
        self.last_info_ = infos[0] if infos else None
        self.n_seen_ = self._rounds + self._n_init()
        return self

    def _n_init(self) -> int:
        return getattr(self, "_init_rows", 0)

    def _run(self, X):
        """Learn X (n, d) with the learner's compiled scans; returns ``(state, info)`` (NumPy info).

        The round counter moves only once the whole batch is learned, so an
        interrupt (Ctrl-C) inside leaves the model as it was before the call.
        """
        key, state, infos = self._key(), self.state_, []
        n = X.shape[0]
        rounds = self._rounds
        if n == 1:  # one point (learn_one): the jitted update itself, with run_stream's round key
            state, info = _jitted(self.learner.update)(jax.random.fold_in(key, rounds), state, X[0])
            info = jax.tree_util.tree_map(lambda a: np.asarray(a)[None], info)
            self._rounds = rounds + 1
            return state, info
        full = n - n % CHUNK
        for i in range(0, full, CHUNK):
            state, info = run_stream(self.learner, key, X[i:i + CHUNK], state, trace="info", step_offset=rounds)
            rounds += CHUNK
            infos.append(jax.tree_util.tree_map(np.asarray, info))
        r = n - full
        if r:
            size = max(MIN_PAD, 1 << (r - 1).bit_length())
            pad = np.zeros((size, X.shape[1]), X.dtype)
            pad[:r] = X[full:]
            state, info = run_stream(self.learner, key, pad, state, mask=np.arange(size) < r, trace="info",
                                     step_offset=rounds)
            rounds += r  # masked padding takes no round keys
            infos.append(jax.tree_util.tree_map(lambda a: np.asarray(a)[:r], info))
        info = jax.tree_util.tree_map(lambda *a: np.concatenate(a), *infos)
        self._rounds = rounds
        return state, info

    def learn_one(self, x) -> "StreamModel":
        """Learn one point x (d,) (River's ``learn_one``). Returns self; its loss is ``last_losses_[0]``."""
        x = np.asarray(x)
        if x.ndim != 1:
            raise ValueError(f"learn_one takes one point of shape (d,); got shape {x.shape} (use partial_fit "
                             "for a batch)")
        return self.partial_fit(x[None])

    def fit_transform(self, X, y=None) -> np.ndarray:
        """`fit` on X (n, d), then `transform` of X (scikit-learn's ``fit_transform``)."""
        return self.fit(X, y).transform(X)

    def predict_one(self, x):
        """`predict` of one point x (d,)."""
        return self._one(self.predict, x)

    def transform_one(self, x):
        """`transform` of one point x (d,)."""
        return self._one(self.transform, x)

    @staticmethod
    def _one(fn, x):
        x = np.asarray(x)
        if x.ndim != 1:
            raise ValueError(f"expected one point of shape (d,); got shape {x.shape}")
        return fn(x[None])[0]

    def _require(self):
        if getattr(self, "state_", None) is None:
            need = ""
            if getattr(self, "_pending", None):
                need = f" (it has {sum(len(p) for p in self._pending)} point(s) and needs more to start)"
            raise NotFittedError(f"{type(self).__name__} has no summary yet{need}: call fit / partial_fit / "
                                 "learn_one first")
        return self.state_

    def _points(self, X, name: str = "X") -> np.ndarray:
        self._require()
        return self._as_rows(X, name)


@cached(4)
def _jitted(update):
    return jax.jit(update)


def _equal(a, b) -> bool:
    if a is b:
        return True
    try:
        return type(a) is type(b) and bool(a == b)
    except (TypeError, ValueError):  # arrays and the like
        return False
