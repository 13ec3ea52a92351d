"""Backward-compatible alias of `jaxstream.curves` (slpc moved there)."""
from .curves import *  # noqa: F401,F403
from .curves import __all__  # noqa: F401
from .curves.candidates import MOVE_DELETE, MOVE_INSERT, MOVE_KEEP, MOVE_SHIFT  # noqa: F401
