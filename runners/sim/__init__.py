"""The GRPO compute-allocation simulator behind the ``sim`` engine (see docs/sim.md).

* :mod:`runners.sim.world`    -- world files: every constant, validated;
* :mod:`runners.sim.dynamics` -- the learning mechanism (levers -> metrics), pure numpy;
* :mod:`runners.sim.levers`   -- the compiler's lever choice tabulated over rho;
* :mod:`runners.sim.simulate` -- the vectorised API (>= 10,000 runs/s);
* :mod:`runners.sim.truth`    -- noise-free frontiers, rho* and the regime there;
* :mod:`runners.sim.figure`   -- a frontier drawn on matplotlib axes (imported on use);
* :mod:`runners.sim.calibrate` -- a policy's capacities fitted to real runs.
"""

from runners.sim.simulate import simulate, simulate_all
from runners.sim.truth import Frontier, frontier
from runners.sim.world import World, list_worlds, load_world

__all__ = ["Frontier", "World", "frontier", "list_worlds", "load_world", "simulate", "simulate_all"]
