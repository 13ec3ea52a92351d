"""Save a learner's state to a file and load it back (checkpoint and resume).

    >>> import os, tempfile, jax
    >>> import jaxstream as js
    >>> from jaxstream import checkpoint, datasets
    >>> learner = js.landmark_mds(8, n_components=2, buffer_size=24)
    >>> state = learner.init(jax.random.key(0), datasets.make_cubic_stream(20, seed=0))
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = os.path.join(tmp, "run.ckpt")
    ...     checkpoint.save(path, learner, state, metadata={"n_done": 20})
    ...     state, meta = checkpoint.load(path, learner)
    >>> meta
    {'n_done': 20}

A checkpoint is one NumPy ``.npz`` file: the state's leaves (``leaf_00000``,
..., exact dtypes and shapes), the caller's extra arrays (``array_<name>``)
and ``__manifest__``, a JSON document of the format and package versions,
``learner.config``, the pytree structure, the caller's metadata and a
checksum of every array (an array edited or damaged after the save is
refused on load). It is
read with ``allow_pickle=False`` and imports no module outside ``jaxstream``.
`save` writes a temporary file beside `path`, fsyncs it and renames it over
`path`, so a kill leaves the old checkpoint or the new one, never a mix;
`lock` gives a path one writer at a time.

`load` raises `CheckpointError` (a `ValueError`) for another format version
or ``major.minor`` package version, another configuration (keys and state
fields added since are filled in: `ADDED_CONFIG_KEYS`, `ADDED_STATE_FIELDS`),
64-bit arrays while ``jax_enable_x64`` is off, or a corrupt file. A learner
whose ``config`` is None is refused unless ``allow_missing_config=True`` is
passed to both `save` and `load`; then only structure, shapes and dtypes are
checked.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import zipfile
from typing import Any, Optional

import numpy as np
import jax
import jax.numpy as jnp

from ._ckpt_lock import CheckpointBusy, _remove_temporaries, lock, remove_stale_temporaries  # noqa: F401
from ._ckpt_tree import ADDED_STATE_FIELDS, CheckpointError, _decode_tree, _encode_tree  # noqa: F401

#: The version of the file format written; `load` refuses a file of another version.
FORMAT_VERSION = 1
_MANIFEST = "__manifest__"
_ARRAY_PREFIX = "array_"
_MAGIC = "jaxstream-checkpoint"

__all__ = ["save", "load", "load_with_arrays", "read_manifest", "remove_stale_temporaries", "lock",
           "CheckpointError", "CheckpointBusy", "FORMAT_VERSION"]


def _package_version() -> str:
    from . import __version__
    return __version__


# Configuration keys a learner gained after checkpoints of it were written,
# with the value that reproduces the behaviour before the key existed: a saved
# configuration without the key is read as holding that value. (A key that
# changes the state layout, such as slpc's ``state_layout``, is not listed:
# those checkpoints are refused.)
ADDED_CONFIG_KEYS = {
    "landmark_mds": {"weighted": False},
    # slpc before global_moves scored every deletion and reversal each round, and before the drift
    # offset (2026-11-29) measured its prequential loss on a drifting stream against the line itself.
    "slpc": {"global_moves": None, "drift_offset": False},
    # pacbo before the split guard (2026-11-29) priced centres with the k̂ + 1 row's noise level only,
    # and before tracking (0.4.3) a moving cluster kept only its m newest points.
    "pacbo": {"split_guard": False, "tracking": False},
}


def _with_added_keys(saved: dict) -> dict:
    added = ADDED_CONFIG_KEYS.get(saved.get("learner"), {})
    return {**added, **saved}


def _normalise_config(config, where: str):
    """Round-trips the config through JSON (tuples become lists) so that a
    saved and a live configuration compare equal when they are equal."""
    if config is None:
        return None
    from ._core import config_record
    config = config_record(config)
    if not isinstance(config, dict):
        raise CheckpointError(f"{where}: learner.config must be a dict of plain Python values; "
                              f"got {type(config).__name__}")

    def default(obj):
        if isinstance(obj, (np.integer, np.floating, np.bool_)):
            return obj.item()
        raise CheckpointError(
            f"{where}: learner.config holds a {type(obj).__name__} ({obj!r:.60}), which a checkpoint "
            "cannot record; a factory's config must hold plain values (int, float, str, bool, None, "
            "tuples/lists/dicts of them)")

    return json.loads(json.dumps(config, default=default, sort_keys=True))


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def save(path, learner, state, *, metadata: Optional[dict] = None, arrays: Optional[dict] = None,
         allow_missing_config: bool = False) -> None:
    """Write `state` (and `learner.config`) to `path` atomically.

    Args:
      path: file to write (any name; ``.ckpt`` or ``.npz`` are customary).
        An existing file is replaced only once the new one is complete.
      learner: the `StreamLearner` the state belongs to; its ``config`` is
        recorded and checked by `load`.
      state: the learner's state (any pytree of NamedTuples, tuples, lists,
        dicts and arrays; batched states from `init_streams` too). Its
        numeric params (``state.params``) are saved with it.
      metadata: optional JSON-serialisable dict returned by `load` (e.g. the
        number of points done, the stream's offset).
      arrays: optional dict of extra arrays (name: a string of letters,
        digits and ``_``; value: a numeric NumPy-convertible array), written
        into the same file, so they are committed together with the state
        (`load_with_arrays` returns them), e.g. the per-point losses so far.
      allow_missing_config: save a learner whose ``config`` is None (nothing
        about its static configuration can then be verified on load).

    Raises:
      CheckpointError: the learner has no configuration, the configuration or
        metadata is not JSON-serialisable, the state holds unsupported
        objects, or an extra array has a bad name or is not numeric.
    """
    config = getattr(learner, "config", None)
    if config is None and not allow_missing_config:
        raise CheckpointError(
            "learner.config is None, so a checkpoint could not verify the configuration it is loaded "
            "into; build the learner with a jaxstream factory (which records its configuration), set "
            "learner._replace(config={...}), or pass allow_missing_config=True")
    config = _normalise_config(config, "save")
    try:
        meta = json.loads(json.dumps({} if metadata is None else metadata))
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"metadata must be JSON-serialisable: {e}") from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"metadata must be a dict; got {type(metadata).__name__}")

    extra = _check_arrays(arrays)
    leaves: list = []
    specs: list = []
    tree = _encode_tree(state, leaves, specs)
    manifest = {
        "magic": _MAGIC,
        "format_version": FORMAT_VERSION,
        "jaxstream_version": _package_version(),
        "config": config,
        "tree": tree,
        "treedef": str(jax.tree_util.tree_structure(state)),
        "leaves": specs,
        "metadata": meta,
        "arrays": {k: {"shape": list(a.shape), "dtype": a.dtype.name} for k, a in extra.items()},
    }
    arrays = {f"leaf_{i:05d}": a for i, a in enumerate(leaves)}
    arrays.update({_ARRAY_PREFIX + k: a for k, a in extra.items()})
    manifest["digests"] = {name: _digest(a) for name, a in arrays.items()}
    arrays[_MANIFEST] = np.frombuffer(json.dumps(manifest).encode("utf-8"), np.uint8)

    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600 files; a checkpoint is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(directory)


def _digest(arr) -> str:
    """BLAKE2b of an array's dtype, shape and bytes (the manifest records one per array)."""
    arr = np.ascontiguousarray(arr)
    h = hashlib.blake2b(f"{arr.dtype.str}{arr.shape}".encode(), digest_size=16)
    h.update(arr.tobytes())
    return h.hexdigest()


def _read(path, data, manifest, name, what):
    """Array ``name`` of the archive, checked against the digest the manifest records (checkpoints
    of 0.4.6 and earlier record none: unchecked)."""
    try:
        arr = data[name]
    except (KeyError, zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
        raise CheckpointError(f"{path}: {what} is missing or corrupt ({e})") from None
    digests = manifest.get("digests")
    if isinstance(digests, dict) and name in digests and digests[name] != _digest(arr):
        raise CheckpointError(f"{path}: {what} differs from what was saved (its checksum does not match the "
                              "manifest's): the file was edited or damaged after it was written")
    return arr


def _check_arrays(arrays) -> dict:
    if arrays is None:
        return {}
    if not isinstance(arrays, dict):
        raise CheckpointError(f"arrays must be a dict of name: array; got {type(arrays).__name__}")
    out = {}
    for name, value in arrays.items():
        if not (isinstance(name, str) and name and name.replace("_", "a").isalnum() and name.isascii()):
            raise CheckpointError(f"extra array names must be non-empty strings of ASCII letters, digits and "
                                  f"'_'; got {name!r}")
        arr = np.asarray(value)
        if arr.dtype.kind not in "biufc":
            raise CheckpointError(f"extra array {name!r} has dtype {arr.dtype}; only numeric arrays are saved")
        out[name] = arr
    return out


def _open(path):
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no checkpoint at {path}")
    if os.path.isdir(path):
        raise CheckpointError(f"{path} is a directory, not a jaxstream checkpoint")
    try:
        data = np.load(path, allow_pickle=False)
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
        raise CheckpointError(f"{path} is not a readable jaxstream checkpoint ({e})") from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        what = f"a plain .npy array of shape {data.shape}" if isinstance(data, np.ndarray) else "not an archive"
        raise CheckpointError(f"{path} is {what}, not a jaxstream checkpoint: pass the file written by "
                              "jaxstream.checkpoint.save (or by run_stream_chunked(checkpoint=...))")
    try:
        names = set(data.files)
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
        data.close()
        raise CheckpointError(f"{path} is not a readable jaxstream checkpoint ({e})") from None
    if _MANIFEST not in names:
        data.close()
        raise CheckpointError(f"{path} is not a jaxstream checkpoint (no manifest)")
    try:
        manifest = json.loads(bytes(data[_MANIFEST]).decode("utf-8"))
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, UnicodeDecodeError) as e:
        data.close()
        raise CheckpointError(f"{path}: the checkpoint's manifest is corrupt ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("magic") != _MAGIC:
        data.close()
        raise CheckpointError(f"{path} is not a jaxstream checkpoint")
    return data, manifest


def read_manifest(path) -> dict:
    """The JSON manifest of a checkpoint (versions, config, shapes, metadata)
    without loading its arrays or checking it against a learner."""
    data, manifest = _open(path)
    data.close()
    return manifest


def _minor(version: str):
    return tuple(version.split(".")[:2])


def load(path, learner, *, allow_missing_config: bool = False) -> tuple[Any, dict]:
    """Read a checkpoint written by `save` for `learner`.

    Args:
      path: the checkpoint file.
      learner: the `StreamLearner` to resume; its ``config`` must equal the
        saved one.
      allow_missing_config: accept a checkpoint (and learner) without a
        configuration; see the module docstring.

    Returns:
      ``(state, metadata)``: the state with the exact dtypes, shapes and bits
      it was saved with (JAX arrays on the default device; typed PRNG keys
      restored as typed keys), and the metadata dict given to `save`.

    Raises:
      FileNotFoundError: no file at `path`.
      CheckpointError: the file is corrupt or not a checkpoint, its format or
        jaxstream version is incompatible, its configuration differs from
        ``learner.config``, or it holds 64-bit arrays while
        ``jax_enable_x64`` is off.
    """
    state, meta, _ = load_with_arrays(path, learner, allow_missing_config=allow_missing_config)
    return state, meta


def load_with_arrays(path, learner, *, allow_missing_config: bool = False) -> tuple[Any, dict, dict]:
    """`load`, plus the extra arrays saved with the state (`save`'s ``arrays``).

    The state, the metadata and the arrays come from one file, read once, so
    they always belong to the same save.

    Returns:
      ``(state, metadata, arrays)``; ``arrays`` maps each saved name to a
      NumPy array (empty for a checkpoint saved without any).

    Raises:
      FileNotFoundError, CheckpointError: as `load`.
    """
    data, manifest = _open(path)
    with data:
        fmt = manifest.get("format_version")
        if fmt != FORMAT_VERSION:
            raise CheckpointError(f"{path}: checkpoint format version {fmt} cannot be read by this "
                                  f"jaxstream (format version {FORMAT_VERSION})")
        saved_version = str(manifest.get("jaxstream_version"))
        if _minor(saved_version) != _minor(_package_version()):
            raise CheckpointError(f"{path} was written by jaxstream {saved_version}; this is jaxstream "
                                  f"{_package_version()} (state layouts may differ between minor versions)")
        live = _normalise_config(getattr(learner, "config", None), "load")
        saved = manifest.get("config")
        if isinstance(saved, dict):
            saved = _with_added_keys(saved)
        if live is None or saved is None:
            if not allow_missing_config:
                which = "the learner" if live is None else "the checkpoint"
                raise CheckpointError(f"{path}: {which} has no configuration to verify; pass "
                                      "allow_missing_config=True to load it anyway")
            if (live is None) != (saved is None):
                raise CheckpointError(f"{path}: one of the checkpoint and the learner has a "
                                      "configuration and the other has none")
        elif live != saved:
            diff = sorted(k for k in set(live) | set(saved) if live.get(k, "<absent>") != saved.get(k, "<absent>"))
            details = ", ".join(f"{k}: saved {saved.get(k, '<absent>')!r} vs learner {live.get(k, '<absent>')!r}"
                                for k in diff)
            if saved.get("learner") == "pacbo" and "tracking" in diff and saved.get("tracking") is False:
                details += ("; PACBO's default became tracking=True in 0.4.5: build the learner with "
                            "tracking=False to resume a checkpoint written under the old default")
            raise CheckpointError(f"{path} was saved under another learner configuration ({details})")

        with _manifest_errors(path):
            state = _decode_state(path, data, manifest)
        extra = {}
        for name, spec in (manifest.get("arrays") or {}).items():
            arr = _read(path, data, manifest, _ARRAY_PREFIX + name, f"extra array {name!r}")
            if arr.dtype.name != spec.get("dtype") or list(arr.shape) != spec.get("shape"):
                raise CheckpointError(f"{path}: extra array {name!r} has {arr.dtype}{list(arr.shape)}, the manifest "
                                      f"says {spec.get('dtype')}{spec.get('shape')}")
            extra[name] = arr
    return state, manifest.get("metadata", {}), extra


@contextlib.contextmanager
def _manifest_errors(path):
    """A manifest edited by hand (a key missing, a list cut short, a wrong type) is a CheckpointError."""
    try:
        yield
    except (KeyError, IndexError, TypeError, AttributeError) as e:
        raise CheckpointError(f"{path}: the checkpoint's manifest is corrupt ({type(e).__name__}: {e})") from None


def _decode_state(path, data, manifest):
    """The state from the manifest's leaves and tree (the checks of `load_with_arrays`)."""
    x64 = jax.config.jax_enable_x64
    leaves = []
    for i, spec in enumerate(manifest["leaves"]):
        arr = _read(path, data, manifest, f"leaf_{i:05d}", f"array {i}")
        if spec["kind"] == "python":
            leaves.append({"bool": bool, "int": int, "float": float}[spec["type"]](arr.item()))
            continue
        if arr.dtype.name != spec["dtype"]:
            raise CheckpointError(f"{path}: array {i} has dtype {arr.dtype}, manifest says {spec['dtype']}")
        if spec["kind"] == "key":
            try:
                leaves.append(jax.random.wrap_key_data(jnp.asarray(arr), impl=spec["impl"]))
            except (ValueError, TypeError, KeyError) as e:  # an unknown implementation, or data of its wrong shape
                raise CheckpointError(f"{path}: array {i} is a PRNG key of implementation {spec.get('impl')!r} "
                                      f"that this JAX cannot rebuild ({e})") from None
            continue
        if list(arr.shape) != spec["shape"]:
            raise CheckpointError(f"{path}: array {i} has shape {arr.shape}, manifest says {spec['shape']}")
        if arr.dtype.itemsize == 8 and arr.dtype.kind in "iuf" and not x64:
            raise CheckpointError(
                f"{path} holds {arr.dtype} arrays (saved with jax_enable_x64); enable it "
                "(jax.config.update('jax_enable_x64', True) or `with jax.enable_x64(True):`) to load "
                "them without truncation")
        if arr.dtype.kind == "c" and arr.dtype.itemsize == 16 and not x64:
            raise CheckpointError(f"{path} holds complex128 arrays; enable jax_enable_x64 to load them")
        out = jnp.asarray(arr, dtype=arr.dtype)
        leaves.append(_as_weak(out) if spec.get("weak_type") else out)
    filled = []
    state = _decode_tree(manifest["tree"], leaves, filled)
    treedef = str(jax.tree_util.tree_structure(state))
    # A state with fields filled in has a new structure; its other fields were checked by name.
    if not filled and treedef != manifest.get("treedef"):
        raise CheckpointError(f"{path}: the restored state's structure {treedef} differs from the "
                              f"saved one {manifest.get('treedef')}")
    return state


def _as_weak(x):
    """Restore JAX's weak_type flag (an array derived from a Python scalar), so
    that a resumed state has the same avals as the saved one and reuses the
    same compiled code (no public API sets the flag)."""
    from jax._src.lax import lax as _lax
    return _lax._convert_element_type(x, x.dtype, weak_type=True)
