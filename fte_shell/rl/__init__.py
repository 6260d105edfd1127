"""fte-shell as a reinforcement-learning environment (docs/rl.md): three ways in.

- :class:`EpisodePool` (:mod:`.pool`): async reset/step/finish with warm boxes and rewards, for any
  trainer's own rollout loop;
- ``fte_shell.rl.verifiers``: a verifiers (v1) taskset with the profile's tools over MCP
  (``pip install 'fte-shell[rl]'``);
- ``fte_shell.rl.openenv``: an OpenEnv ``Environment`` served by openenv's ``create_app``.

The heavy libraries (verifiers, openenv-core) are imported only by their own modules.
"""

from .config import PoolConfig
from .grading import Grader
from .pool import EpisodeOver, EpisodePool, PoolEpisode

__all__ = ["EpisodeOver", "EpisodePool", "Grader", "PoolConfig", "PoolEpisode"]
