"""tools/same_start.py: PyTorch half of the same-start check (see tools/same_start.lua).

Loads the initial cnn weights and the shuffle orders that tools/same_start.lua saved, trains
torch.nn's cnn from there with the same SGD settings, and prints its test accuracy next to the
per-step losses of both engines.
usage: /usr/bin/python3 tools/same_start.py SEED [DIR=/tmp]  (needs python3-torch and the
       reference's fmnist.py: FMNIST_REF=../shared/reference/torch by default)
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get('FMNIST_REF', os.path.join(here, '../../shared/reference/torch')))
sys.path.insert(0, here)
import fmnist  # noqa: E402
from check_safetensors import read  # noqa: E402

seed = int(sys.argv[1])
out = sys.argv[2] if len(sys.argv) > 2 else '/tmp'
torch.set_num_threads(1)
(xtr, ytr), (xte, yte) = fmnist.load_all()
xtr, ytr, xte, yte = map(torch.from_numpy, (xtr, ytr, xte, yte))
model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
    nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
init = read(f'{out}/init{seed}.safetensors')
sd = {k: torch.from_numpy(v[1].copy()) for k, v in init[0].items()}
model.load_state_dict(sd)
pr = {k: v[1] for k, v in read(f'{out}/perms{seed}.safetensors')[0].items()}
opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
losses = []
e = 0
while f'perm{e}' in pr:
    idx = torch.from_numpy(np.array(pr[f'perm{e}']))
    for i in range(0, idx.numel(), 64):
        b = idx[i:i+64]
        loss = F.cross_entropy(model(xtr.index_select(0, b)), ytr.index_select(0, b))
        opt.zero_grad(); loss.backward(); opt.step(); losses.append(loss.item())
    e += 1
ours = np.array(pr['losses'])
L = np.array(losses)
model.eval()
with torch.no_grad():
    acc = sum((model(xte[i:i+1000]).argmax(1) == yte[i:i+1000]).sum().item() for i in range(0, 10000, 1000)) / 10000
print(f'torch-same-init seed {seed} acc {acc:.4f} last50 {L[-50:].mean():.4f}')
for s in [0, 1, 10, 100, 300, 1000, 1875, len(L)-1]:
    if s < len(L): print(s, ours[s], L[s], abs(ours[s]-L[s]))
