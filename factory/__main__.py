"""`python -m factory` is the `agent-factory` command."""

from factory.cli import main

main()
