"""Two learners meet through the variables a PyTorchJob's operator sets, and sum their ranks."""

import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, size = dist.get_rank(), dist.get_world_size()
total = torch.tensor([float(rank + 1)])
dist.all_reduce(total)
print(f"RESULT rank={rank} world={size} sum={total.item():g} master={os.environ['MASTER_ADDR']}")
dist.destroy_process_group()
