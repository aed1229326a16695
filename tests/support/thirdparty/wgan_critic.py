"""A WGAN: the critic (the first optimizer used) steps n_critic = 5 times for each generator step,
its weights clipped by hand after each."""
import torch

torch.manual_seed(0)
G = torch.nn.Sequential(torch.nn.Linear(16, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64))
D = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.LeakyReLU(0.2), torch.nn.Linear(128, 1))
od = torch.optim.RMSprop(D.parameters(), lr=5e-5)
og = torch.optim.RMSprop(G.parameters(), lr=5e-5)
n_critic = 5
it = 0
while True:
    for _ in range(n_critic):
        real = torch.randn(64, 64)
        fake = G(torch.randn(64, 16)).detach()
        od.zero_grad()
        loss_d = D(fake).mean() - D(real).mean()
        loss_d.backward()
        od.step()
        for p in D.parameters():
            p.data.clamp_(-0.01, 0.01)
    og.zero_grad()
    loss_g = -D(G(torch.randn(64, 16))).mean()
    loss_g.backward()
    og.step()
    it += 1
    if it % 100 == 0:
        print(it, loss_d.item(), loss_g.item(), flush=True)
