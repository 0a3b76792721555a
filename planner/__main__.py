"""``python -m planner``: the ``planner`` command where the console script is not on PATH
(a venv not activated, a notebook's ``!python -m planner ...``)."""

from planner.cli import main

if __name__ == "__main__":
    main()
