"""``python -m dense_armor``: the ``dense-armor`` command line."""

import sys

from dense_armor.cli import console

if __name__ == "__main__":
    sys.exit(console())
