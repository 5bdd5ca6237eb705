"""`python -m loom` is the `loom` command."""

from loom.cli.main import main

main()
