"""``python -m runners``: the ``runners`` command where the console script is not on PATH."""

from runners.cli import main

if __name__ == "__main__":
    main()
