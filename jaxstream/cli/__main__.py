"""``python -m jaxstream.cli``: the ``jaxstream`` command."""
import sys

from . import main

sys.exit(main())
