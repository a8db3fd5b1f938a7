"""A CAGE2 blue agent written as a submission would be (CybORG's agent interface, no workflow-rl import): restore
the first host the observation shows as User or Privileged, User0 aside (red's foothold there cannot be removed),
else sleep. The same rule as workflow-rl's
``restore_compromised`` baseline, written independently, so an evaluation of it must equal the baseline's."""
import numpy as np

from restorer_actions import RESTORE, SLEEP, USER0   # a sibling file: a submission's own imports resolve


class Restorer:
    def __init__(self, hosts: int = 13):
        self.hosts = hosts
        self.episodes = 0
        self.steps = 0

    def get_action(self, observation, action_space):
        assert action_space == 145, action_space
        bits = np.asarray(observation).reshape(self.hosts, 4)
        self.steps += 1
        flagged = [h for h in np.flatnonzero(bits[:, 3] > 0.5) if h != USER0]   # User (01) or Privileged (11)
        return int(RESTORE + flagged[0]) if len(flagged) else SLEEP

    def end_episode(self):
        self.episodes += 1
        self.steps = 0


class NoAction:
    """Not an agent: no get_action."""


class Broken:
    def __init__(self, fail: bool = True):
        if fail:
            raise RuntimeError("cannot start")

    def get_action(self, observation, action_space):
        return 999
