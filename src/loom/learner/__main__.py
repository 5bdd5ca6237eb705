"""`python -m loom.learner SPEC_FILE`, token on standard input."""

import sys

from loom.learner.wrapper import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
