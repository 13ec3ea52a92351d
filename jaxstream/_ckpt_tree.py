"""The pytree codec of `jaxstream.checkpoint`: a state's containers as JSON, its leaves as arrays.

Also the errors and the table of state fields added since older checkpoints,
which `jaxstream.checkpoint` re-exports.
"""
from __future__ import annotations

import importlib
import sys
from typing import Optional

import numpy as np
import jax
import jax.numpy as jnp


class CheckpointError(ValueError):
    """A checkpoint cannot be written or does not match the learner."""

    __module__ = "jaxstream.checkpoint"


# State fields a learner gained after checkpoints of it were written (keyed by the manifest's
# "module:qualname"), each with how to build it from the fields the checkpoint has, reproducing the
# state before the field existed.
ADDED_STATE_FIELDS = {
    # PACBO's point velocities (tracking, 0.4.3): an older checkpoint's points stand still.
    "jaxstream.clustering.types:State": {"history_velocity": lambda got: jnp.zeros_like(got["history"])},
}


def _is_key_array(x) -> bool:
    return isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key)


def _encode_tree(node, leaves: list, specs: list):
    """JSON description of the pytree's containers; leaves appended in order."""
    if node is None:
        return {"t": "none"}
    if isinstance(node, tuple) and hasattr(type(node), "_fields"):
        cls = type(node)
        return {"t": "namedtuple", "cls": f"{cls.__module__}:{cls.__qualname__}",
                "fields": list(cls._fields),
                "c": [_encode_tree(v, leaves, specs) for v in node]}
    if isinstance(node, tuple):
        return {"t": "tuple", "c": [_encode_tree(v, leaves, specs) for v in node]}
    if isinstance(node, list):
        return {"t": "list", "c": [_encode_tree(v, leaves, specs) for v in node]}
    if isinstance(node, dict):
        keys = sorted(node)
        if not all(isinstance(k, str) for k in keys):
            raise CheckpointError("state dicts must have string keys to be checkpointed")
        return {"t": "dict", "k": keys, "c": [_encode_tree(node[k], leaves, specs) for k in keys]}
    if isinstance(node, (bool, int, float)) and not isinstance(node, np.generic):
        specs.append({"kind": "python", "type": type(node).__name__})
        leaves.append(np.asarray(node))
        return {"t": "leaf", "i": len(leaves) - 1}
    if isinstance(node, (jax.Array, np.ndarray, np.generic)):
        if _is_key_array(node):
            data = np.asarray(jax.random.key_data(node))
            specs.append({"kind": "key", "impl": str(jax.random.key_impl(node)),
                          "shape": list(node.shape), "dtype": data.dtype.name})
            leaves.append(data)
        else:
            arr = np.asarray(node)
            if arr.dtype.kind not in "biufc":
                raise CheckpointError(f"cannot checkpoint an array of dtype {arr.dtype}")
            specs.append({"kind": "array", "shape": list(arr.shape), "dtype": arr.dtype.name,
                          "weak_type": bool(getattr(node, "weak_type", False))})
            leaves.append(arr)
        return {"t": "leaf", "i": len(leaves) - 1}
    raise CheckpointError(f"cannot checkpoint a state node of type {type(node).__module__}."
                          f"{type(node).__qualname__} (supported: NamedTuple, tuple, list, dict, None, "
                          "arrays, Python scalars)")


def _resolve_class(name: str):
    module_name, _, qualname = name.partition(":")
    module = sys.modules.get(module_name)
    if module is None and (module_name == "jaxstream" or module_name.startswith("jaxstream.")):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            module = None
    if module is None:
        raise CheckpointError(f"the checkpoint's state type {name} is not available in this version "
                              "of the code (module not imported)")
    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise CheckpointError(f"the checkpoint's state type {name} does not exist in this version "
                                  "of the code")
    if not (isinstance(obj, type) and issubclass(obj, tuple) and hasattr(obj, "_fields")):
        raise CheckpointError(f"the checkpoint's state type {name} is not a NamedTuple here")
    return obj


def _decode_tree(desc, leaves: list, filled: Optional[list] = None):
    """The pytree a manifest describes; fields filled in from `ADDED_STATE_FIELDS` are appended to `filled`."""
    t = desc.get("t")
    if t == "none":
        return None
    if t == "leaf":
        return leaves[desc["i"]]
    children = [_decode_tree(c, leaves, filled) for c in desc["c"]]
    if t == "tuple":
        return tuple(children)
    if t == "list":
        return children
    if t == "dict":
        return dict(zip(desc["k"], children))
    if t == "namedtuple":
        cls = _resolve_class(desc["cls"])
        saved, fields = list(desc["fields"]), list(cls._fields)
        added = ADDED_STATE_FIELDS.get(desc["cls"], {})
        if saved != fields and set(saved) <= set(fields) and set(fields) - set(saved) <= set(added):
            got = dict(zip(saved, children))
            if filled is not None:
                filled.extend(f"{desc['cls']}.{k}" for k in fields if k not in got)
            return cls(**{k: got[k] if k in got else added[k](got) for k in fields})
        if fields != saved:
            raise CheckpointError(f"the checkpoint's {desc['cls']} has fields {desc['fields']}, but this "
                                  f"version's has {list(cls._fields)}")
        return cls(*children)
    raise CheckpointError(f"unknown node type {t!r} in the checkpoint manifest")
