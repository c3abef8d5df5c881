"""``python -m speechprep <stage> <job> ...``: see :mod:`speechprep.cli`."""

import sys

from .cli import main

sys.exit(main())
