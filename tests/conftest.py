"""Suite-wide settings.

scripts/test.sh runs the suite on two pytest-xdist workers (CI has two cores). Each worker
then computes on one thread, so two workers, and the processes their tests start, do not
oversubscribe the cores; set before any test imports torch."""

from __future__ import annotations

import os

if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")
