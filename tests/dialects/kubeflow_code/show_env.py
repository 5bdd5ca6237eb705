"""Print what an operator gives this learner, as one JSON line."""

import json
import os
import sys

NAMES = (
    "TF_CONFIG",
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "RANK",
    "PET_NNODES",
    "PET_NODE_RANK",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
    "PET_NPROC_PER_NODE",
    "COORDINATOR_ADDRESS",
    "COORDINATOR_PORT",
    "NUM_PROCESSES",
    "PROCESS_ID",
    "PADDLE_MASTER",
    "PADDLE_NNODES",
    "PADDLE_JOB_ID",
    "WORKER_ADDRS",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "JAX_PROCESS_ID",
    "DMLC_TASK_ID",
    "ROLE",
    "LEARNER_ID",
)
found = {name: os.environ[name] for name in NAMES if name in os.environ}
found["argv"] = sys.argv[1:]
print("ENV " + json.dumps(found, sort_keys=True))
