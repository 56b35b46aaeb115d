"""A plain PyTorch training loop run as tune trials through tune_trial (tests/python).

A two-layer MLP learns a synthetic two-class problem; the lines marked `# tune` are all that
tune needs. TORCH_LOOP_ADDRESS_SPACE_MIB (set by the test) limits the process's address space
to what it holds after start-up plus that many MiB (RLIMIT_AS), a small machine on which
PyTorch's own CPU allocator fails for a large enough batch x hidden.
"""
import os
import resource

import torch

import tune_trial  # tune

p = tune_trial.params({"lr": 0.05, "hidden": 32, "batch_size": 64, "epochs": 6})  # tune
torch.set_num_threads(1)
torch.manual_seed(0)

limit = os.environ.get("TORCH_LOOP_ADDRESS_SPACE_MIB")
if limit:
    # OpenBLAS maps its work buffer at its first product and, when that mmap fails, retries it
    # forever: map it before the limit, so that the limit falls on PyTorch's tensors.
    torch.randn(64, 64) @ torch.randn(64, 64)
    with open("/proc/self/statm") as f:
        used = int(f.read().split()[0]) * resource.getpagesize()
    cap = used + int(limit) * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

g = torch.Generator().manual_seed(1)
x = torch.randn(2048, 16, generator=g)
y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
train_x, train_y, val_x, val_y = x[:1536], y[:1536], x[1536:], y[1536:]

model = torch.nn.Sequential(torch.nn.Linear(16, p["hidden"]), torch.nn.ReLU(),
                            torch.nn.Linear(p["hidden"], 2))
opt = torch.optim.Adam(model.parameters(), lr=p["lr"])

with tune_trial.memory_guard():  # tune
    for epoch in range(p["epochs"]):
        for i in range(0, len(train_x), p["batch_size"]):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(train_x[i:i + p["batch_size"]]),
                                                     train_y[i:i + p["batch_size"]])
            loss.backward()
            opt.step()
        with torch.no_grad():
            accuracy = (model(val_x).argmax(1) == val_y).float().mean().item()
        print(f"epoch {epoch}: accuracy {accuracy:.4f}")
        tune_trial.report(accuracy, epoch)  # tune
        if tune_trial.should_prune():  # tune
            raise tune_trial.TrialPruned()  # tune
tune_trial.finish(accuracy)  # tune
