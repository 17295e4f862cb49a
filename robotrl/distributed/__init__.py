"""Actor/learner split on Ray: the robot PC runs the actor (env, policy, safety), a GPU box the
learner (a restartable Ray actor); transitions stream one way with acknowledgements, weights
the other way through Ray's object store.

See :mod:`robotrl.distributed.roles` for what an algorithm implements and
:mod:`robotrl.distributed.cluster` for joining a cluster. Needs the ``dist`` extra (ray).
"""

from robotrl.distributed.actor_client import ActorClient, ActorStats, WeightsUpdate
from robotrl.distributed.learner_records import ActorInfo, LearnerStats
from robotrl.distributed.learner_service import LearnerService, serve_learner
from robotrl.distributed.outbox import Outbox
from robotrl.distributed.roles import Actor, Learner
from robotrl.distributed.transitions import SchemaError, TransitionBatch, TransitionSchema

__all__ = [
    "Actor",
    "ActorClient",
    "ActorInfo",
    "ActorStats",
    "Learner",
    "LearnerService",
    "LearnerStats",
    "Outbox",
    "SchemaError",
    "TransitionBatch",
    "TransitionSchema",
    "WeightsUpdate",
    "serve_learner",
]
