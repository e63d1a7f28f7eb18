"""One DistributedDataParallel training step with PyTorch's gloo backend, for
``mlfabric launch --torch``: every rank builds the same model, takes a step on its own batch,
and checks that the gradients DDP averaged over the fabric are the mean of every rank's
(computed locally from the seeds), and that the parameters stay identical across ranks.
Prints one JSON line per rank."""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")  # MASTER_ADDR/PORT, RANK, WORLD_SIZE from the launcher
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 4)
    ddp = torch.nn.parallel.DistributedDataParallel(model)

    def batch(r: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(100 + r)
        return torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)

    x, y = batch(rank)
    torch.nn.functional.mse_loss(ddp(x), y).backward()
    # the mean over ranks of each rank's own gradient, computed here without the network, on
    # the same (not yet stepped) parameters
    ref = torch.nn.Linear(16, 4)
    expected = torch.zeros_like(model.weight)
    for r in range(world):
        ref.load_state_dict({k: v.detach().clone() for k, v in model.state_dict().items()})
        ref.zero_grad()
        xr, yr = batch(r)
        torch.nn.functional.mse_loss(ref(xr), yr).backward()
        grad = ref.weight.grad
        assert grad is not None
        expected += grad / world
    averaged = model.weight.grad
    ok = averaged is not None and bool(torch.allclose(averaged, expected, atol=1e-6))
    torch.optim.SGD(ddp.parameters(), lr=0.1).step()
    digest = float(model.weight.detach().sum())
    digests = [0.0] * world
    dist.all_gather_object(digests, digest)
    same = len(set(digests)) == 1
    print(json.dumps({"rank": rank, "world": world, "grad_is_mean": ok, "params_identical": same,
                      "nic": os.environ.get("GLOO_SOCKET_IFNAME", "")}), flush=True)
    # every rank past its last collective before any tears down: a rank whose gloo threads
    # were still talking to a peer that had exited aborted ("terminate called without an
    # active exception", 1 run in 10); then the reducer before the group it uses
    dist.barrier()
    del ddp
    dist.destroy_process_group()
    return 0 if ok and same else 1


if __name__ == "__main__":
    sys.exit(main())
