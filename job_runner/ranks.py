"""Multi-node jobs: which rank this runner is, and the files a rank other than 0 writes.

A job of a flavor with ``nodes: N`` runs the same runner command on N nodes (N pods
of an Indexed Job or a JobSet; N processes on one machine). Each learns its rank from
``NBJOBS_NODE_RANK`` (on Kubernetes the pod's completion index, through the downward
API) and the rendezvous from the variables torchrun reads (``MASTER_ADDR``,
``MASTER_PORT``, ``WORLD_SIZE``, ``NODE_RANK``, ``RANK`` and their ``PET_`` twins),
which the backend sets.

Rank 0 is the job: its status file, its log and its OUTPUT are the job's. Every other
rank writes its own files into the job's folder, beside rank 0's, named by
:func:`rank_file` (``log-rank-2.txt``, ``status-rank-2.json``, ``output-rank-2.log``),
never the job's result; the job service serves a rank's log from there.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

#: the variable that tells a runner its rank (0 when unset: a job of one node)
RANK_ENV = "NBJOBS_NODE_RANK"
#: the variable that tells it how many nodes the job has
NODES_ENV = "NBJOBS_NODES"
#: the variables of :func:`rendezvous_env` that hold the rank (the rest are the same on
#: every node)
RANK_VARIABLES = ("RANK", "NODE_RANK", "PET_NODE_RANK", RANK_ENV)


def node_rank(env: Mapping[str, str] | None = None) -> int:
    """This runner's rank from its environment; 0 when not set or not a number >= 0."""
    text = (os.environ if env is None else env).get(RANK_ENV, "0").strip()
    return int(text) if text.isdigit() else 0


def rank_file(path: Path, rank: int) -> Path:
    """Where rank ``rank`` writes the file that rank 0 writes at ``path`` (the same
    folder, the rank in its name: ``log.txt`` -> ``log-rank-2.txt``). Rank 0: ``path``."""
    if rank == 0:
        return path
    return path.with_name(f"{path.stem}-rank-{rank}{path.suffix}")


def rendezvous_env(rank: int, nodes: int, master_addr: str, master_port: int) -> dict[str, str]:
    """The variables one rank of a multi-node job gets: torchrun's (``torchrun
    --nproc-per-node=8 train.py`` needs no more options: it reads ``PET_NNODES``,
    ``PET_NODE_RANK``, ``PET_MASTER_ADDR``, ``PET_MASTER_PORT``) and those a script
    calling ``init_process_group("env://")`` itself reads (one process per node)."""
    values = {
        "MASTER_ADDR": master_addr,
        "MASTER_PORT": str(master_port),
        "NNODES": str(nodes),
        "NODE_RANK": str(rank),
    }
    env = {**values, "WORLD_SIZE": str(nodes), "LOCAL_RANK": "0", NODES_ENV: str(nodes)}
    env.update({f"PET_{name}": value for name, value in values.items()})
    env.update({name: str(rank) for name in RANK_VARIABLES})
    return env
