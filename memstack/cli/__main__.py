"""``python -m memstack.cli`` runs the command line, as ``python -m memstack`` and ``memstack`` do."""

import sys

from . import main

sys.exit(main())
