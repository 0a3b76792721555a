"""``python -m planner``: the ``planner`` command where the console script is not on PATH
(a venv not activated, a notebook's ``!python -m planner ...``)."""

from planner.cli import main

__all__: list[str] = []  # a way in, not an API

if __name__ == "__main__":
    main()
