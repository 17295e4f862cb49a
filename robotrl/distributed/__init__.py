"""Actor/learner split over ZeroMQ: the robot PC runs the actor (env, policy, safety), a GPU box
the learner; transitions stream one way with acknowledgements, weights the other way.

See :mod:`robotrl.distributed.roles` for what an algorithm implements, and
``tests/bandit_demo.py`` for a runnable two-process example. Needs the ``dist`` extra
(pyzmq).
"""

from robotrl.distributed.actor_client import ActorClient, ActorStats, WeightsUpdate
from robotrl.distributed.learner_server import ActorInfo, LearnerServer, LearnerStats
from robotrl.distributed.outbox import Outbox
from robotrl.distributed.roles import Actor, Learner
from robotrl.distributed.transitions import SchemaError, TransitionBatch, TransitionSchema

__all__ = [
    "Actor",
    "ActorClient",
    "ActorInfo",
    "ActorStats",
    "Learner",
    "LearnerServer",
    "LearnerStats",
    "Outbox",
    "SchemaError",
    "TransitionBatch",
    "TransitionSchema",
    "WeightsUpdate",
]
