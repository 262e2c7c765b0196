"""``python -m mmdkit`` = the ``mmdkit`` command."""
from mmdkit.cli import main

main()
