"""``python -m runners``: the ``runners`` command where the console script is not on PATH."""

from runners.cli import main

__all__: list[str] = []  # a way in, not an API

if __name__ == "__main__":
    main()
