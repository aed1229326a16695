"""The shape of a PPO run: most wall time goes into collecting rollouts on the CPU (an environment
stepped in numpy, the policy queried without gradients), then a few short optimizer steps over
minibatches of the rollout."""
import sys

import numpy as np
import torch

iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
horizon, minibatches, epochs = 256, 4, 2
torch.set_num_threads(1)                             # one environment, one core: as RL on a CPU runs
torch.manual_seed(0)
rng = np.random.default_rng(0)
policy = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2))
opt = torch.optim.Adam(policy.parameters(), lr=3e-4)
state = rng.standard_normal(8)
for _ in range(iterations):
    obs, acts, rews = [], [], []
    for _t in range(horizon):                        # the rollout: python and numpy, one step at a time
        with torch.no_grad():
            logits = policy(torch.as_tensor(state, dtype=torch.float32))
        a = int(torch.argmax(logits))
        for _ in range(80):                          # the environment's physics
            state = np.tanh(state * 0.9 + rng.standard_normal(8) * 0.1)
        obs.append(state.copy())
        acts.append(a)
        rews.append(float(state[a]))
    obs_t = torch.as_tensor(np.array(obs), dtype=torch.float32)
    act_t = torch.as_tensor(acts)
    adv = torch.as_tensor(rews, dtype=torch.float32)
    for _ in range(epochs):
        for idx in torch.randperm(horizon).chunk(minibatches):
            logp = torch.log_softmax(policy(obs_t[idx]), dim=1)
            loss = -(logp.gather(1, act_t[idx, None]).squeeze(1) * adv[idx]).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
