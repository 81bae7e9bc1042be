"""``python -m hipfile``: the ``hipfile`` command (see :mod:`hipfile.cli`)."""

import sys

from hipfile.cli import main

if __name__ == "__main__":
    sys.exit(main())
