"""``python -m dense_armor``: the ``dense-armor`` command line."""

import sys

from dense_armor.cli import main

if __name__ == "__main__":
    sys.exit(main())
