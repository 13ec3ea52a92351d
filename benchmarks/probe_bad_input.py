"""Feed jaxstream bad inputs as a user would and classify what happens.

Entry points: each learner's ``init``, ``run_stream`` (also ``nonfinite="skip"``) and
``run_stream_chunked``; the wrappers' ``fit``, ``partial_fit`` and ``predict``/``transform``/
``score`` after a valid fit; factory and constructor arguments; ``checkpoint.load`` of
corrupted or edited files; and the command line (``python -m jaxstream CMD --csv FILE``).
Each outcome gets a class:

  a  clear error: ValueError/TypeError/a jaxstream exception raised by the package itself
  b  documented policy: no exception, finite results, and what was done is said (or the input is fine)
  c  unclear error: another type, or a raw NumPy/JAX/Python message from outside the package's checks
  d  silent wrong: no exception but non-finite results, rows lost or bad input taken without a word
  e  command line: anything but exit status 2 with one error line on stderr

One line per case (entry point, input, class, message), then the counts and the c/d/e cases again.
Deterministic; small capacities and 56-row streams keep it to a few minutes on 2 CPU cores.

    python benchmarks/probe_bad_input.py [--no-cli]
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import traceback
import warnings
from collections import Counter
from typing import Callable, NamedTuple

import numpy as np
import jax
import jax.numpy as jnp

import jaxstream as js
from jaxstream import checkpoint

jax.config.update("jax_traceback_filtering", "off")  # so an error's last frame is where it was raised

N, D = 56, 2  # wrapper batches of 56 rows all pad to 64 (one compiled program per learner)
KEY = jax.random.key(1)
X = np.random.default_rng(0).normal(size=(N, D)).astype(np.float32)
PKG = os.path.dirname(js.__file__)
TMP = tempfile.mkdtemp(prefix="probe_bad_input_")
RAW = ("inhomogeneous", "incompatible shapes", "tracerbool", "could not convert", "setting an array element",
       "resource_exhausted", "out of memory", "unexpected keyword", "has no attribute", "not a valid jax type",
       "index", "unsupported operand", "unhashable", "cannot reshape", "operands could not")

LEARNERS = {  # name: (factory, wrapper class, capacities, prediction methods)
    "slpc": (js.slpc, js.SLPC, dict(max_segments=6, history_size=32), ("predict", "transform", "score")),
    "pacbo": (js.pacbo, js.PACBO, dict(max_clusters=6, history_size=32, n_steps=20),
              ("predict", "transform", "score")),
    "lmds": (js.landmark_mds, js.LandmarkMDS, dict(max_landmarks=6), ("transform", "score")),
}


class Kind(NamedTuple):
    name: str
    make: Callable
    bad: bool = True  # a wrong input: taking it without an error or a word is "silent wrong"
    where: str = "all"  # "all", "fitted" (needs a learner state: d is fixed), "start" (init / fit only)
    x64: bool = False
    note: str = ""  # what taking it means


CAST = "documented (check_points): integers, booleans and float16 learn in JAX's default float"
#: (entry, kind) where a docstring promises an error, so that taking the input is "silent wrong"
DOCUMENTED_RAISES = {("slpc.init", "identical_rows"), ("SLPC.fit", "identical_rows")}  # curves.learner.init


def _set(x, idx, v):
    x = x.copy()
    x[idx] = v
    return x


def _bytes(save, *args, **kw) -> bytes:
    """What ``save(file, *args, **kw)`` (np.save, np.savez) writes, as bytes."""
    buf = io.BytesIO()
    save(buf, *args, **kw)
    return buf.getvalue()


KINDS = [
    Kind("nan_one_row", lambda x: _set(x, (3, 0), np.nan)),
    Kind("nan_all_rows", lambda x: np.full_like(x, np.nan)),
    Kind("+inf_one_row", lambda x: _set(x, (3, 1), np.inf)),
    Kind("-inf_one_row", lambda x: _set(x, (3, 0), -np.inf)),
    Kind("+inf_all_rows", lambda x: np.full_like(x, np.inf)),
    Kind("empty_0_rows", lambda x: x[:0], bad=False, note="nothing to learn, state unchanged"),
    Kind("single_row", lambda x: x[:1], bad=False, note="one point learned"),
    Kind("wrong_dim_d3", lambda x: np.concatenate([x, x[:, :1]], 1), where="fitted"),
    Kind("zero_columns", lambda x: x[:, :0]),
    Kind("1d_array", lambda x: x[:, 0]),
    Kind("3d_array", lambda x: x[:, :, None]),
    Kind("ragged_list", lambda x: [r[:1] if i == 2 else r for i, r in enumerate(x.tolist())]),
    Kind("strings", lambda x: x.astype(str)),
    Kind("object_dtype", lambda x: x.astype(object)),
    Kind("complex64", lambda x: x.astype(np.complex64) + 0.5j),
    Kind("int64", lambda x: np.round(x * 10).astype(np.int64), bad=False, note=CAST),
    Kind("bool", lambda x: x > 0, bad=False, note=CAST),
    Kind("float16", lambda x: x.astype(np.float16), bad=False, note=CAST),
    Kind("huge_1e30", lambda x: x.astype(np.float64) * 1e30),
    Kind("huge_1e300", lambda x: x.astype(np.float64) * 1e300),
    Kind("huge_1e300_x64", lambda x: x.astype(np.float64) * 1e300, x64=True),
    Kind("tiny_1e-30", lambda x: x.astype(np.float64) * 1e-30),
    Kind("identical_rows", lambda x: np.tile(x[:1], (len(x), 1)), bad=False, note="valid, if degenerate"),
    Kind("fewer_than_t0_5_rows", lambda x: x[:5], bad=False, where="start", note="enough to start"),
    Kind("list_of_tuples", lambda x: [tuple(r) for r in x.tolist()], bad=False, note="array-like, as documented"),
    Kind("none_entry", lambda x: [(None, r[1]) if i == 3 else tuple(r) for i, r in enumerate(x.tolist())]),
    Kind("masked_entry_fill_-999", lambda x: np.ma.masked_array(_set(x, (3, 0), -999.0),
                                                                 mask=np.arange(x.size).reshape(x.shape) == 6),
         note=" (the mask is dropped: the fill value -999 is learned as data)"),
]
NONFINITE = [k for k in KINDS if "nan" in k.name or "inf" in k.name]

RESULTS: list = []


def record(entry: str, kind: str, cls: str, msg: str) -> None:
    msg = " ".join(str(msg).replace(TMP, "<tmp>").split())
    RESULTS.append((entry, kind, cls, msg))
    print(f"{entry:<30} {kind:<24} {cls}  {msg[:100]}", flush=True)


def is_clear(e: BaseException) -> bool:
    """Raised on purpose by the package (a ``raise`` line in jaxstream/), of a documented type, and
    not a raw library message passed through."""
    tb = traceback.extract_tb(e.__traceback__)
    if isinstance(e, TypeError) and tb and tb[-1].filename == __file__:
        return True  # Python's own error binding the arguments of the public function called here
    own_raise = bool(tb) and tb[-1].filename.startswith(PKG) and (tb[-1].line or "").lstrip().startswith("raise")
    own_type = isinstance(e, (ValueError, TypeError, FloatingPointError, OSError)) or \
        type(e).__module__.startswith("jaxstream")
    return own_raise and own_type and not str(e).lower().startswith(RAW)


def leaves(tree, skip=()):
    """(path, float array) of a pytree's floating leaves, PRNG keys and `skip` paths left out."""
    named = [(jax.tree_util.keystr(p), x) for p, x in jax.tree_util.tree_leaves_with_path(tree)]
    return [(name, np.asarray(x)) for name, x in named
            if name not in skip and jnp.issubdtype(getattr(x, "dtype", np.asarray(x).dtype), jnp.floating)]


SENTINELS: set = set()  # state leaves that hold NaN/inf on valid data too (buffers' sentinels, "automatic")


def nonfinite(values) -> str:
    bad = [name or "output" for v in values for name, a in leaves(v, SENTINELS) if not np.isfinite(a).all()]
    return ", ".join(sorted(set(bad))[:4])


def attempt(entry: str, kind: str, fn: Callable, *, bad: bool = True, x64: bool = False, note: str = "") -> None:
    """Run ``fn()`` (returns a dict: values to check, rows lost, a report) and record its class."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with jax.enable_x64(True) if x64 else contextlib.nullcontext():
                out = fn()
        except Exception as e:  # noqa: BLE001 - classifying every failure is the point
            return record(entry, kind, "a" if is_clear(e) else "c", f"{type(e).__name__}: {e}")
    report = out.get("report") or "; ".join(  # the package's warnings, not NumPy's arithmetic ones
        str(w.message) for w in caught if not issubclass(w.category, (RuntimeWarning, DeprecationWarning)))
    where, lost = nonfinite(out.get("values", [])), out.get("lost", 0)
    wrong = (f"no error, non-finite output in {where}" if where else
             f"{lost} row(s) not learned and not reported" if lost > 0 and not report else
             "no error, though the docstring promises a ValueError" if (entry, kind) in DOCUMENTED_RAISES else
             out.get("wrong") or ("bad input taken without an error or a warning" + note if bad and not report else ""))
    accepted = "accepted: finite results" + (f"; {note}" if note else "")
    record(entry, kind, "d" if wrong else "b", wrong or report or accepted)


def attempt_kind(entry: str, k: Kind, fn: Callable) -> None:
    attempt(entry, k.name, fn, bad=k.bad, x64=k.x64, note=k.note)


# --- the functional API -----------------------------------------------------------------------

def probe_learner(name: str) -> None:
    factory, _, caps, _ = LEARNERS[name]
    learner = factory(**caps)
    state0 = learner.init(jax.random.key(0), X[:20])
    state1, _ = js.run_stream(learner, KEY, X, state0)
    SENTINELS.update(p for s in (state0, state1) for p, a in leaves(s) if not np.isfinite(a).all())

    def run(data, **kw):
        state, losses = js.run_stream(learner, KEY, data, state0, **kw)
        skipped = int((~np.isfinite(np.asarray(data, np.float64)).all(axis=1)).sum()) if kw else 0
        return dict(values=[state, losses],
                    report=f"nonfinite='skip': {skipped} row(s) skipped, their losses 0 (documented)" if kw else "")

    def chunked(data, **kw):
        state, res = js.run_stream_chunked(learner, KEY, data, state0, chunk_size=N, **kw)
        lost = len(data) - res.n_points
        return dict(values=[state, res.cumulative_loss], lost=lost,
                    report=f"ChunkedResult.n_points={res.n_points} of {len(data)} (documented)" if kw else "")

    for k in KINDS:
        if k.where != "fitted":
            attempt_kind(f"{name}.init", k, lambda: dict(values=[learner.init(KEY, k.make(X[:20]))]))
        if k.where != "start":
            attempt_kind(f"{name} run_stream", k, lambda: run(k.make(X)))
            attempt_kind(f"{name} run_stream_chunked", k, lambda: chunked(k.make(X)))
    for k in NONFINITE:
        attempt(f"{name} run_stream skip", k.name, lambda: run(k.make(X), nonfinite="skip"))
        attempt(f"{name} chunked skip", k.name, lambda: chunked(k.make(X), nonfinite="skip"))
    if name == "lmds":  # cheap to compile in float64: does a float64 chunked run equal run_stream?
        attempt(f"{name} run_stream_chunked", "float64_data_in_enable_x64", chunked_equals_run_stream, x64=True,
                bad=False, note="equals run_stream, as documented")


def chunked_equals_run_stream():
    """run_stream_chunked (default prefetch) vs run_stream on float64 data inside ``jax.enable_x64(True)``."""
    learner = js.landmark_mds(**LEARNERS["lmds"][2])
    xs = X.astype(np.float64) + 1e-9  # needs float64 to be told from X
    state = learner.init(jax.random.key(0), xs[:20])
    direct, losses = js.run_stream(learner, KEY, xs, state)
    chunked, res = js.run_stream_chunked(learner, KEY, xs, state, chunk_size=N)
    gap = float(np.max(np.abs(np.asarray(direct.points) - np.asarray(chunked.points))))
    loss_gap = abs(res.cumulative_loss - float(np.sum(losses, dtype=np.float64)))
    wrong = (f"no error, but its state differs from run_stream's by up to {gap:.2g} and its cumulative loss by "
             f"{loss_gap:.2g} (documented: equal bit for bit)") if gap else ""
    return dict(values=[chunked, res.cumulative_loss], wrong=wrong)


# --- the wrappers -----------------------------------------------------------------------------

def probe_wrapper(name: str) -> None:
    _, cls, caps, methods = LEARNERS[name]
    fitted = cls(**caps).fit(X)

    def fit(data):
        model = cls(**caps).fit(data)
        state = getattr(model, "state_", None)
        return dict(values=[state, model.cumulative_loss_], lost=len(data) - model.n_seen_,
                    report="" if state is not None else f"buffered: no summary yet ({model.n_seen_} row(s) held)")

    def partial_fit(data):
        model = copy.deepcopy(fitted)
        model.partial_fit(data)
        return dict(values=[model.state_, model.last_losses_], lost=fitted.n_seen_ + len(data) - model.n_seen_)

    def method(m, data):
        return dict(values=[np.asarray(getattr(fitted, m)(data), np.float64)])

    for k in KINDS:
        if k.where != "fitted":
            attempt_kind(f"{cls.__name__}.fit", k, lambda: fit(k.make(X)))
        if k.where == "start":
            continue
        attempt_kind(f"{cls.__name__}.partial_fit", k, lambda: partial_fit(k.make(X)))
        for m in methods:
            attempt_kind(f"{cls.__name__}.{m}", k, lambda: method(m, k.make(X)))


# --- factory and constructor arguments ----------------------------------------------------------

NAN, INF = float("nan"), float("inf")
FACTORY_CASES = {
    "slpc": [dict(max_segments=0), dict(max_segments=-3), dict(max_segments=2.5), dict(max_segments="6"),
             dict(max_segments=10 ** 12), dict(history_size=0), dict(t0=0), dict(t0=1), dict(t0=64),
             dict(window=0), dict(foo=1), dict(delta=NAN), dict(delta=-1.0), dict(delta="0.1"),
             dict(h_scale=INF), dict(epsilon=2.0), dict(memory=0.5), dict(z_scale=NAN), dict(init="bogus"),
             dict(penalty="bogus"), dict(end_lead=NAN), dict(end_lead=-1.0), dict(global_moves=-1)],
    "pacbo": [dict(max_clusters=0), dict(max_clusters=-1), dict(max_clusters=2.5), dict(max_clusters=10 ** 12),
              dict(n_steps=0), dict(n_chains=0), dict(history_size=0), dict(foo=1), dict(radius=-1.0),
              dict(radius=INF), dict(lambda_scale=NAN), dict(lambda_power=INF), dict(noise_scale=-1.0),
              dict(stay_prob=2.0), dict(preset="bogus"), dict(history_policy="bogus"), dict(df=0),
              dict(drift_level=1.0), dict(provisional_size=-1)],
    "lmds": [dict(max_landmarks=0), dict(max_landmarks=-1), dict(max_landmarks=2.5), dict(max_landmarks=10 ** 12),
             dict(n_components=0), dict(n_components=6), dict(buffer_size=2), dict(eps0=-1.0), dict(eps0=NAN),
             dict(eps0=INF), dict(min_support=1.5), dict(density_shift=2.0), dict(metric="bogus"), dict(foo=1),
             dict(metric="precomputed")],
}
#: documented values next to the bad ones (NaN: automatic; inf: never forget; a NumPy int capacity)
FACTORY_VALID = [("slpc", dict(memory=INF)), ("pacbo", dict(radius=NAN)), ("pacbo", dict(max_clusters=np.int64(6)))]
CONSTRUCTOR_CASES = [("slpc", dict(max_segments=0)), ("slpc", dict(delta=NAN)), ("slpc", dict(seed=1.5)),
                     ("slpc", dict(t0=1)), ("pacbo", dict(max_clusters=-1)), ("pacbo", dict(radius=0.0)),
                     ("pacbo", dict(lambda_scale=INF)), ("pacbo", dict(seed="0")),
                     ("lmds", dict(max_landmarks=2.5)), ("lmds", dict(eps0=-1.0)), ("lmds", dict(reembed_every=0)),
                     ("lmds", dict(n_components=0)), ("lmds", dict(seed=None))]


def _label(kw: dict) -> str:
    return ",".join(f"{k}={v!r}" for k, v in kw.items())


def probe_arguments() -> None:
    def build_and_run(name, kw):
        factory, _, caps, _ = LEARNERS[name]
        learner = factory(**{**caps, **kw})
        state = learner.init(jax.random.key(0), X[:20])
        state, losses = js.run_stream(learner, KEY, X, state)
        return dict(values=[state, losses])

    cases = [(name, kw, True) for name, kws in FACTORY_CASES.items() for kw in kws]
    for name, kw, bad in cases + [(name, kw, False) for name, kw in FACTORY_VALID]:
        attempt(f"{name}() factory", _label(kw), lambda: build_and_run(name, kw), bad=bad,
                note="" if bad else "documented value")
    for name, kw in CONSTRUCTOR_CASES:
        _, cls, caps, _ = LEARNERS[name]

        def fit(kw):
            model = cls(**{**caps, **kw}).fit(X)
            return dict(values=[model.state_, model.cumulative_loss_])

        attempt(f"{cls.__name__}(...).fit", _label(kw), lambda: fit(kw))


# --- checkpoint.load ---------------------------------------------------------------------------

def _npz(arrays: dict, manifest=None) -> bytes:
    if manifest is not None:
        arrays = {**arrays, "__manifest__": np.frombuffer(json.dumps(manifest).encode(), np.uint8)}
    return _bytes(np.savez, **arrays)


def probe_checkpoints() -> None:
    learner = js.landmark_mds(**LEARNERS["lmds"][2])
    state, _ = js.run_stream(learner, KEY, X, learner.init(jax.random.key(0), X[:20]))
    good = os.path.join(TMP, "good.ckpt")
    checkpoint.save(good, learner, state, metadata={"n_done": N})
    with open(good, "rb") as f:
        raw = f.read()
    with np.load(good, allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files}
    man = json.loads(bytes(arrays.pop("__manifest__")).decode())
    first = next(i for i, s in enumerate(man["leaves"]) if s.get("dtype") == "float32" and s["shape"])
    leaf, mid = f"leaf_{first:05d}", len(raw) // 3

    def edit(**change):
        return _npz(arrays, {**man, **{k: v(man) if callable(v) else v for k, v in change.items()}})

    def drop(key):
        return _npz(arrays, {k: v for k, v in man.items() if k != key})

    cases = {
        "zero_bytes": b"", "truncated_half": raw[:len(raw) // 2],
        "one_byte_flipped": raw[:mid] + bytes([raw[mid] ^ 0xFF]) + raw[mid + 1:],
        "random_bytes": np.random.default_rng(1).bytes(4096), "text_file": b"n_done,56\n",
        "plain_npy": _bytes(np.save, X), "npz_without_manifest": _npz(arrays),
        "manifest_bad_json": _npz({**arrays, "__manifest__": np.frombuffer(b"{not json", np.uint8)}),
        "manifest_wrong_magic": edit(magic="other"), "format_version_99": edit(format_version=99),
        "jaxstream_version_0.1": edit(jaxstream_version="0.1.0"),
        "config_edited": edit(config=lambda m: {**m["config"], "max_landmarks": 7}), "config_null": edit(config=None),
        "manifest_no_leaves": drop("leaves"), "manifest_no_tree": drop("tree"),
        "manifest_leaves_short": edit(leaves=lambda m: m["leaves"][:-1]),
        "tree_unknown_class": edit(tree=lambda m: {**m["tree"], "cls": "x.Nope"}),
        "leaf_missing": _npz({k: v for k, v in arrays.items() if k != leaf}, man),
        "leaf_wrong_shape": _npz({**arrays, leaf: arrays[leaf][:1]}, man),
        "leaf_wrong_dtype": _npz({**arrays, leaf: arrays[leaf].astype(np.int32)}, man),
        "leaf_float64_both": _npz({**arrays, leaf: arrays[leaf].astype(np.float64)},
                                  {**man, "leaves": [dict(sp, dtype="float64") if i == first else sp
                                                     for i, sp in enumerate(man["leaves"])]}),
        "leaf_values_nan": _npz({**arrays, leaf: np.full_like(arrays[leaf], np.nan)}, man),
    }
    load = lambda path, lrn=learner: dict(values=list(checkpoint.load(path, lrn)))  # noqa: E731
    for kind, content in cases.items():
        path = os.path.join(TMP, f"{kind}.ckpt")
        with open(path, "wb") as f:
            f.write(content)
        attempt("checkpoint.load", kind, lambda: load(path))
    attempt("checkpoint.load", "into_another_learner", lambda: load(good, js.pacbo(**LEARNERS["pacbo"][2])))
    attempt("checkpoint.load", "directory", lambda: load(TMP))
    attempt("checkpoint.load", "missing_path", lambda: load(os.path.join(TMP, "no.ckpt")))


# --- the command line --------------------------------------------------------------------------

CLI_OPTS = {"curve": ["--max-segments", "6", "--history-size", "32"],
            "cluster": ["--max-clusters", "6", "--history-size", "32", "--n-steps", "20"],
            "embed": ["--max-landmarks", "6", "--buffer-size", "64"]}


def _csv(rows, header="x,y") -> bytes:
    return ("\n".join([header] + [",".join(map(str, r)) for r in rows]) + "\n").encode()


def _cli_files() -> dict:
    """name: (file content, or None for no file, or a directory's path; extra options; commands)."""
    rows = X[:40].astype(np.float64).round(4).tolist()
    put = lambda i, v, r=rows: [v if j == i else x for j, x in enumerate(r)]  # noqa: E731
    big = np.array(rows) * 1e300
    every = {  # the learners' checks: every command
        "nan_cell": _csv(put(5, [1.0, "nan"])), "empty_cell": _csv(put(5, [1.0, ""])),
        "inf_cell": _csv(put(5, ["-inf", 1.0])), "all_nan_drop": (_csv([[np.nan, 1.0]] * 40), "--drop-nonfinite"),
        "some_nan_drop": (_csv(put(9, [2.0, "inf"], put(3, [np.nan, 1.0]))), "--drop-nonfinite"),
        "single_row": _csv(rows[:1]), "huge_1e30": _csv((np.array(rows) * 1e30).tolist()),
        "huge_1e300": _csv(big.tolist()), "huge_1e300_float64": (_csv(big.tolist()), "--float64"),
        "tiny_1e-30": _csv((np.array(rows) * 1e-30).tolist()), "identical_rows": _csv([rows[0]] * 40),
        "one_column": _csv([r[:1] for r in rows], "x"),
    }
    reader = {  # the reader's checks: one command
        "empty_file": b"", "header_only": b"x,y\n", "text_cell": _csv(put(7, [1.0, "abc"])),
        "extra_cell_row": _csv(put(7, [1.0, 2.0, 3.0])), "short_row": _csv(put(7, [1.0])),
        "semicolon_delimited": _csv([[f"{a};{b}"] for a, b in rows], "x;y"),
        "complex_cells": _csv([[f"{a}+1j", b] for a, b in rows]), "latin1_bytes": b"x,y\n\xe9\xff,1\n",
        "npz_archive": _bytes(np.savez, a=X), "npy_3d": _bytes(np.save, X[:, :, None]),
        "npy_strings": _bytes(np.save, X.astype(str)), "npy_complex": _bytes(np.save, X.astype(np.complex64)),
        "npy_object": _bytes(np.save, X.astype(object), allow_pickle=True), "npy_empty": _bytes(np.save, X[:0]),
        "missing_file": None, "directory": TMP,
    }
    out = {k: (*(v if isinstance(v, tuple) else (v, None)), ("curve", "cluster", "embed")) for k, v in every.items()}
    out.update({k: (v, None, ("curve",)) for k, v in reader.items()})
    return out


def probe_cli() -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAXSTREAM_DEBUG"}
    env["JAXSTREAM_COMPILATION_CACHE"] = os.path.join(TMP, "xla")  # shared by the runs, not the user's
    for name, (content, opt, commands) in _cli_files().items():
        path = content if name == "directory" else os.path.join(TMP, name + ".data")
        if isinstance(content, bytes):
            with open(path, "wb") as f:
                f.write(content)
        for cmd in commands:
            argv = [sys.executable, "-m", "jaxstream", cmd, "--csv", path, "--out", "", *CLI_OPTS[cmd]]
            p = subprocess.run(argv + ([opt] if opt else []), cwd=os.path.dirname(PKG), env=env,
                               capture_output=True, text=True, timeout=300)
            lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
            entry = f"cli {cmd}"
            if p.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"jaxstream {cmd}: error:"):
                msg = lines[0].split("error:", 1)[1].strip()
                record(entry, name, "c" if msg.lower().startswith(RAW) else "a", msg)
            elif p.returncode == 0:  # bad unless it says what it dropped; never nan/inf in its figures
                shown = re.search(r"\b(nan|inf)\b", p.stdout.lower())
                said = next((ln for ln in lines if "dropped" in ln or "left out" in ln), "")
                ok = not shown and (said or name in ("identical_rows", "one_column"))
                first = p.stdout.splitlines()[0] if p.stdout.strip() else ""
                record(entry, name, "b" if ok else "d", f"exit 0; {'nan/inf in its figures; ' if shown else ''}"
                                                        f"{said or first}")
            else:
                record(entry, name, "e", f"exit {p.returncode}, {len(lines)} stderr line(s): " + " | ".join(lines[-3:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-cli", action="store_true", help="skip the command-line cases (subprocesses)")
    args = parser.parse_args()
    for name in LEARNERS:
        probe_learner(name)
        probe_wrapper(name)
    probe_arguments()
    probe_checkpoints()
    if not args.no_cli:
        probe_cli()
    shutil.rmtree(TMP, ignore_errors=True)
    counts = Counter(r[2] for r in RESULTS)
    names = dict(a="clear error", b="documented policy", c="unclear error", d="silent wrong", e="CLI traceback")
    print(f"\n{len(RESULTS)} cases: " + ", ".join(f"({c}) {names[c]} {counts.get(c, 0)}" for c in "abcde"))
    print("\ncases classed c, d or e:")
    for entry, kind, cls, msg in RESULTS:
        if cls in "cde":
            print(f"{cls}  {entry:<30} {kind:<24} {msg[:160]}")


if __name__ == "__main__":
    main()
