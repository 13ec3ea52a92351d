"""``--save-state``: the learned state of a command's run as a checkpoint."""
from __future__ import annotations


def _save_state(args, model, state, name, names):
    """--save-state: the learned state as a checkpoint (see `jaxstream.checkpoint`)."""
    if not args.save_state:
        return
    from .. import checkpoint
    from .._core import config_record
    options = {k: v for k, v in vars(args).items()
               if k not in ("save_state", "out", "csv", "columns") and isinstance(v, (int, float, str, bool))}
    checkpoint.save(args.save_state, model.learner, state,
                    metadata=dict(command=args.command, data=name, columns=list(names), options=options))
    print(f"state: {args.save_state} (jaxstream.checkpoint.load(path, learner) with a learner of "
          f"the same configuration: {config_record(model.learner.config)})")
