"""Several independent PPO agents run and updated as one (PureJaxRL-style): stacked forward passes as batched
matmuls, one backward pass, per-member losses, advantage normalisation, gradient clipping and Adam state."""
from __future__ import annotations

import torch
from torch import nn

from workflow_rl.rl.ppo import Agent, PPOConfig, Rollout, clipped_losses, logp_entropy, sample_actions


# ------------------------------------------------------------------------------------------------------ networks
class AgentStack(nn.Module):
    """``n`` independent :class:`Agent` members run as one: inputs (n, B, 77) give outputs (n, B, ...).

    Each member is an ordinary ``Agent`` (its ``state_dict`` is a single-workflow checkpoint's), and the forward
    pass stacks their layers into batched matmuls (``baddbmm``), so gradients flow back to each member's own
    parameters.
    """

    def __init__(self, n: int, hidden: tuple[int, ...] = (64, 64)):
        super().__init__()
        self.members = nn.ModuleList(Agent(hidden) for _ in range(n))

    def stacked(self, members: list[int] | None = None) -> dict[str, list[tuple[torch.Tensor, torch.Tensor]]]:
        """Per network ("actor", "critic"): the (weight (n, out, in), bias (n, out)) of each linear layer, over
        all members or the listed ones."""
        agents = list(self.members) if members is None else [self.members[k] for k in members]
        out = {}
        for net in ("actor", "critic"):
            idx = [i for i, m in enumerate(getattr(agents[0], net)) if isinstance(m, nn.Linear)]
            out[net] = [(torch.stack([getattr(a, net)[i].weight for a in agents]),
                         torch.stack([getattr(a, net)[i].bias for a in agents])) for i in idx]
        return out

    def act(self, x: torch.Tensor, generator: torch.Generator | None, params: dict | None = None):
        """(action, log_prob, value), each (n, B), sampling with ``generator``."""
        p = params or self.stacked()
        return (*sample_actions(_mlp(p["actor"], x), generator), _mlp(p["critic"], x).squeeze(-1))

    def value(self, x: torch.Tensor, params: dict | None = None) -> torch.Tensor:
        return _mlp((params or self.stacked())["critic"], x).squeeze(-1)

    def evaluate(self, x: torch.Tensor, action: torch.Tensor, members: list[int] | None = None):
        """(log_prob, entropy, value) of given actions, each (n, B) (or (len(members), B))."""
        p = self.stacked(members)
        return (*logp_entropy(_mlp(p["actor"], x), action), _mlp(p["critic"], x).squeeze(-1))


def _mlp(layers: list[tuple[torch.Tensor, torch.Tensor]], x: torch.Tensor) -> torch.Tensor:
    """Agent's MLP (tanh between linear layers) for every member at once."""
    for j, (w, b) in enumerate(layers):
        x = torch.baddbmm(b.unsqueeze(1), x, w.transpose(1, 2))
        if j < len(layers) - 1:
            x = torch.tanh(x)
    return x


# ----------------------------------------------------------------------------------------------------- update
def _masked_mean(x: torch.Tensor, m: torch.Tensor, cnt: torch.Tensor) -> torch.Tensor:
    return (x * m).sum(1) / cnt.clamp(min=1)


def stacked_ppo_update(agents: AgentStack, optimizer: torch.optim.Optimizer, batch: Rollout, mask: torch.Tensor,
                       cfg: PPOConfig, generator: torch.Generator, members: list[int] | None = None
                       ) -> list[dict[str, float] | None]:
    """:func:`~workflow_rl.rl.ppo.ppo_update` for several members at once (all, or the listed ones).

    ``batch`` fields are (n_members, N, ...); ``mask`` (n_members, N) marks the rows a member trains on (a member
    whose budget covers fewer envs has rows masked out). Losses are means over each member's own rows of a
    minibatch; gradients are clipped per member; a member with no rows in a minibatch is not stepped (its Adam state
    stays as it was). Returns each member's loss statistics of the last epoch (None for a member with no rows).
    """
    members = list(range(len(agents.members))) if members is None else list(members)
    params = [list(agents.members[k].parameters()) for k in members]
    q, n = mask.shape
    mb = max(1, n // cfg.num_minibatches)
    m_all = mask.float()
    live = mask.any(1).tolist()
    sums = torch.zeros((5, q), device=mask.device)
    steps_last = torch.zeros(q, device=mask.device)
    for epoch in range(cfg.update_epochs):
        perm = torch.randperm(n, generator=generator, device=generator.device).to(mask.device)
        counts = torch.stack([m_all[:, perm[s:s + mb]].sum(1) for s in range(0, n, mb)]).tolist()  # one sync
        for j, start in enumerate(range(0, n, mb)):
            idx = perm[start:start + mb]
            m = m_all[:, idx]
            cnt = m.sum(1)
            newlogp, entropy, newv = agents.evaluate(batch.x[:, idx], batch.actions[:, idx], members)
            adv = batch.advantages[:, idx]
            if cfg.norm_adv:
                mean = _masked_mean(adv, m, cnt).unsqueeze(1)
                var = (((adv - mean) ** 2) * m).sum(1) / (cnt - 1).clamp(min=1)
                adv = (adv - mean) / (var.sqrt().unsqueeze(1) + 1e-8)
            pg_loss, v_loss, ent, logratio, ratio = clipped_losses(
                newlogp, entropy, newv, batch.logprobs[:, idx], adv, batch.returns[:, idx], batch.values[:, idx], cfg,
                lambda x: _masked_mean(x, m, cnt))
            loss = (pg_loss - cfg.ent_coef * ent + cfg.vf_coef * v_loss).sum()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            stepped = [k for k in range(q) if live[k] and counts[j][k] > 0]
            for k in range(q):
                if k not in stepped:
                    for p in params[k]:
                        p.grad = None
            if stepped:
                clip_per_member([params[k] for k in stepped], cfg.max_grad_norm)
            optimizer.step()
            if epoch == cfg.update_epochs - 1:
                with torch.no_grad():
                    used = (cnt > 0).float()
                    sums += used * torch.stack([pg_loss, v_loss, ent, _masked_mean((ratio - 1) - logratio, m, cnt),
                                                _masked_mean(((ratio - 1.0).abs() > cfg.clip_coef).float(), m, cnt)])
                    steps_last += used
    means = (sums / steps_last.clamp(min=1)).T.tolist()
    names = ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac")
    return [dict(zip(names, means[k])) if live[k] else None for k in range(q)]


def clip_per_member(param_lists: list[list[torch.Tensor]], max_norm: float) -> None:
    """``clip_grad_norm_`` applied to each member's parameters on their own, in a few fused calls for all members
    (a loop of clip_grad_norm_ costs 2.5x more on the CPU and many more kernel launches on a GPU)."""
    grads = [p.grad for ps in param_lists for p in ps]
    norms = torch.stack(torch._foreach_norm(grads)).view(len(param_lists), -1).norm(dim=1)
    coef = (max_norm / (norms + 1e-6)).clamp(max=1.0)
    for ps, c in zip(param_lists, coef):
        torch._foreach_mul_([p.grad for p in ps], c)


def member_optimizer_state(optimizer: torch.optim.Optimizer, member: nn.Module) -> dict:
    """One member's Adam state as the ``state_dict`` of an Adam over ``member.parameters()`` alone."""
    group = {k: v for k, v in optimizer.param_groups[0].items() if k != "params"}
    params = list(member.parameters())
    state = {i: {k: v.clone() for k, v in optimizer.state[p].items()} for i, p in enumerate(params)
             if p in optimizer.state}
    return {"state": state, "param_groups": [{**group, "params": list(range(len(params)))}]}


def load_member_optimizer_state(optimizer: torch.optim.Optimizer, member: nn.Module, sd: dict | None) -> None:
    """Give ``member`` the Adam state ``sd`` (a single-agent Adam ``state_dict``), or a fresh one (None)."""
    for i, p in enumerate(member.parameters()):
        optimizer.state.pop(p, None)
        if sd is not None and i in sd["state"]:
            optimizer.state[p] = {k: (v.clone() if k == "step" else v.to(p.device).clone())
                                  for k, v in sd["state"][i].items()}
