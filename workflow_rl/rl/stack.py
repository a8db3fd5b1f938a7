"""Several independent PPO agents held, run and updated as one tensor (PureJaxRL-style).

Why one flat parameter: a batch of Q workflows is Q ordinary ``Agent`` networks, and updating them as Q modules
costs Python and kernel launches per member: that overhead, not arithmetic, bounds batched training. Here every member's weights are one row of a (Q, P) parameter, so a forward pass is a few batched matmuls
(``baddbmm``) over views of that row, the backward pass fills one (Q, P) gradient, clipping is one norm per row and
Adam is a dozen element-wise kernels -- the same number for 1 or 64 members.

Members stay ordinary agents at the edges: ``member_state(k)`` is an ``Agent.state_dict()`` and
``StackedAdam.member_state(k)`` a single-agent ``torch.optim.Adam`` state_dict, so checkpoints, inheritance and
``evaluate`` see nothing of the stacking.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import math

import torch
from torch import nn

from workflow_rl.rl.memory import Memory
from workflow_rl.rl.ppo import STAT_NAMES, Agent, PPOConfig, Rollout, logp_entropy, ppo_step, sample_actions

NETS = ("actor", "critic")

Layers = list[tuple[torch.Tensor, torch.Tensor]]
"""one network's linear layers: (weight (n, out, in), bias (n, out)) each."""


# ------------------------------------------------------------------------------------------------------ networks
class AgentStack(nn.Module):
    """``n`` independent :class:`Agent` members as rows of one (n, P) parameter ``flat``: inputs (n, B, 77) give
    outputs (n, B, ...). Row k laid out as ``Agent.state_dict()`` flattened in its order."""

    def __init__(self, n: int, hidden: tuple[int, ...] = (64, 64), memory: Memory = Memory()):
        super().__init__()
        self.hidden, self.memory = tuple(hidden), memory
        agents = [Agent(self.hidden, self.memory) for _ in range(n)]   # each member initialised as a lone Agent would be
        sd = agents[0].state_dict()
        self.names = list(sd)
        self.shapes = [tuple(v.shape) for v in sd.values()]
        self.sizes = [math.prod(s) for s in self.shapes]
        self.flat = nn.Parameter(torch.stack([_flatten(a.state_dict()) for a in agents]))
        self._linear = {net: sorted({int(k.split(".")[1]) for k in self.names if k.startswith(net + ".")})
                        for net in NETS}

    @property
    def n(self) -> int:
        return self.flat.shape[0]

    def params(self, members: list[int] | torch.Tensor | None = None) -> dict[str, Layers]:
        """Per network, its layers as views of ``flat`` (all members, or copies of the listed members' rows)."""
        flat = self.flat if members is None else self.flat[members]
        parts = {name: p.view(flat.shape[0], *shape)
                 for name, p, shape in zip(self.names, flat.split(self.sizes, 1), self.shapes)}
        return {net: [(parts[f"{net}.{i}.weight"], parts[f"{net}.{i}.bias"]) for i in self._linear[net]]
                for net in NETS}

    def act(self, x: torch.Tensor, generator: torch.Generator | None, params: dict | None = None):
        """(action, log_prob, value), each (n, B), sampling with ``generator``."""
        p = params or self.params()
        return (*sample_actions(self.memory.mask(_mlp(p["actor"], x), x), generator), _mlp(p["critic"], x).squeeze(-1))

    def value(self, x: torch.Tensor, params: dict | None = None) -> torch.Tensor:
        return _mlp((params or self.params())["critic"], x).squeeze(-1)

    def evaluate(self, x: torch.Tensor, action: torch.Tensor, members: list[int] | torch.Tensor | None = None):
        """(log_prob, entropy, value) of given actions, each (n, B) (or (len(members), B))."""
        p = self.params(members)
        return (*logp_entropy(self.memory.mask(_mlp(p["actor"], x), x), action), _mlp(p["critic"], x).squeeze(-1))

    # ---------------------------------------------------------------------------------------------- members
    def member_state(self, k: int) -> dict[str, torch.Tensor]:
        """Member ``k``'s weights as an ``Agent.state_dict()`` (copies)."""
        return _unflatten(self.flat.detach()[k], self.names, self.shapes, self.sizes)

    def load_member(self, k: int, state: dict[str, torch.Tensor]) -> None:
        """Give member ``k`` the weights of an ``Agent.state_dict()`` of the same network size."""
        if list(state) != self.names or any(tuple(state[n].shape) != s for n, s in zip(self.names, self.shapes)):
            raise ValueError(f"weights of another network shape (this batch's hidden layers: {self.hidden}, "
                             f"{self.memory})")
        with torch.no_grad():
            self.flat[k] = _flatten(state).to(self.flat)

    def member(self, k: int) -> Agent:
        """A stand-alone :class:`Agent` holding a copy of member ``k``'s current weights."""
        with torch.random.fork_rng(devices=[]):   # building an Agent draws its init; keep the global stream as is
            agent = Agent(self.hidden, self.memory)
        agent.load_state_dict(self.member_state(k))
        return agent.to(self.flat.device)


def _flatten(state: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([v.detach().reshape(-1).float() for v in state.values()])


def _unflatten(row: torch.Tensor, names: list[str], shapes: list[tuple], sizes: list[int]) -> dict[str, torch.Tensor]:
    return {n: p.reshape(s).clone() for n, p, s in zip(names, row.split(sizes), shapes)}


def _mlp(layers: Layers, x: torch.Tensor) -> torch.Tensor:
    """Agent's MLP (tanh between linear layers) for every member at once."""
    for j, (w, b) in enumerate(layers):
        x = torch.baddbmm(b.unsqueeze(1), x, w.transpose(1, 2))
        if j < len(layers) - 1:
            x = torch.tanh(x)
    return x


# ---------------------------------------------------------------------------------------------------- optimiser
class StackedAdam:
    """``torch.optim.Adam`` (same formula, eps 1e-5) over an :class:`AgentStack`'s (n, P) parameter, with a step
    count per member.

    Why not torch's Adam: it keeps one step count per parameter tensor, and its bias correction depends on it, while
    each member here is its own run -- a new workflow entering a slot starts from step 0 while its neighbours are at
    step 5,000. ``step(stepped)`` moves only the members marked in ``stepped`` (moments, count and weights), so a
    member with no rows in a minibatch is left exactly as it was.
    """

    def __init__(self, param: torch.Tensor, lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-5):
        self.param, self.betas, self.eps = param, betas, eps
        # one per member (each run anneals on its own schedule); a tensor, so a captured step reads a new value;
        # float64 keeps the value exact for the checkpoint, the step uses it in float32 as torch's Adam does
        self._lr = torch.full((param.shape[0],), float(lr), dtype=torch.float64, device=param.device)
        self.exp_avg = torch.zeros_like(param, memory_format=torch.contiguous_format)
        self.exp_avg_sq = torch.zeros_like(self.exp_avg)
        self.steps = torch.zeros(param.shape[0], device=param.device)

    def lr(self, k: int) -> float:
        """Member ``k``'s step size."""
        return float(self._lr[k])

    def set_lr(self, rates: dict[int, float]) -> None:
        """Give the members named in ``rates`` their step sizes (the others keep theirs)."""
        if rates:
            self._lr[list(rates)] = torch.tensor(list(rates.values()), dtype=torch.float64, device=self._lr.device)

    def zero_grad(self) -> None:
        self.param.grad = None

    @torch.no_grad()
    def step(self, stepped: torch.Tensor) -> None:
        """One Adam step of the members with ``stepped[k]`` (a (n,) bool tensor; no host synchronisation)."""
        b1, b2 = self.betas
        g, m = self.param.grad, stepped.unsqueeze(1)
        self.steps += stepped
        t = self.steps.clamp(min=1).unsqueeze(1)
        torch.where(m, self.exp_avg.lerp(g, 1 - b1), self.exp_avg, out=self.exp_avg)
        torch.where(m, self.exp_avg_sq * b2 + (1 - b2) * g * g, self.exp_avg_sq, out=self.exp_avg_sq)
        denom = (self.exp_avg_sq.sqrt() / (1 - b2 ** t).sqrt()).add_(self.eps)
        step_size = self._lr.to(torch.float32).unsqueeze(1) / (1 - b1 ** t)
        self.param.sub_(torch.where(m, step_size * self.exp_avg / denom, 0.0))

    # ------------------------------------------------------------------------------------------- per member
    def member_state(self, stack: AgentStack, k: int) -> dict:
        """Member ``k``'s Adam state as the ``state_dict`` of a ``torch.optim.Adam`` over ``Agent.parameters()``
        (the checkpoint format): empty before its first step."""
        state = {}
        if float(self.steps[k]) > 0:
            step = torch.tensor(float(self.steps[k]))
            avg = _unflatten(self.exp_avg[k], stack.names, stack.shapes, stack.sizes).values()
            sq = _unflatten(self.exp_avg_sq[k], stack.names, stack.shapes, stack.sizes).values()
            state = {i: {"step": step.clone(), "exp_avg": a, "exp_avg_sq": s} for i, (a, s) in enumerate(zip(avg, sq))}
        return {"state": state, "param_groups": [{**self._group(k), "params": list(range(len(stack.names)))}]}

    def load_member_state(self, stack: AgentStack, k: int, sd: dict | None) -> None:
        """Give member ``k`` the Adam state of a single-agent ``state_dict`` (a checkpoint's), or a fresh one."""
        self.exp_avg[k] = 0
        self.exp_avg_sq[k] = 0
        self.steps[k] = 0
        state = (sd or {}).get("state") or {}
        if not state:
            return
        if sorted(state) != list(range(len(stack.names))):
            raise ValueError("optimizer state of another network shape")
        self.exp_avg[k] = torch.cat([state[i]["exp_avg"].reshape(-1) for i in range(len(stack.names))]).to(self.param)
        self.exp_avg_sq[k] = torch.cat([state[i]["exp_avg_sq"].reshape(-1)
                                        for i in range(len(stack.names))]).to(self.param)
        self.steps[k] = float(state[0]["step"])

    def _group(self, k: int) -> dict:
        """The hyperparameters a single-agent ``torch.optim.Adam`` with member ``k``'s settings lists (checkpoint
        format): its constructor's defaults, read from its signature rather than by building one, since the first
        ``torch.optim.Adam`` of a process imports torch's compiler (~1-1.5 s at every run's first checkpoint)."""
        return {**_adam_defaults(), "lr": self.lr(k), "betas": self.betas, "eps": self.eps, "foreach": True}


@functools.cache
def _adam_defaults() -> dict:
    """``torch.optim.Adam``'s hyperparameters and their defaults: what its param groups hold besides the params."""
    sig = inspect.signature(torch.optim.Adam.__init__)
    return {k: p.default for k, p in sig.parameters.items() if k not in ("self", "params")}


# ----------------------------------------------------------------------------------------------------- update
def stacked_ppo_update(agents: AgentStack, optimizer: StackedAdam, batch: Rollout, mask: torch.Tensor,
                       cfg: PPOConfig, generator: torch.Generator, members: list[int] | None = None
                       ) -> list[dict[str, float] | None]:
    """One PPO update of several members at once (all, or the listed ones), eagerly: see :class:`StackedUpdate`,
    which the trainer keeps (and which replays CUDA graphs on a GPU)."""
    return StackedUpdate(agents, optimizer, cfg, graphs=False).run(batch, mask, generator, members)


class StackedUpdate:
    """PPO epochs over minibatches for every member at once; each minibatch is :func:`~workflow_rl.rl.ppo.ppo_step`
    (the loss, clipping and Adam step; ``rl.ppo.ppo_update`` is this update for one network).

    ``batch`` fields are (n, N, ...) for all n members of the stack; ``mask`` (n, N) marks the rows a member trains
    on (a member whose budget covers fewer envs has rows masked out, an empty slot has none); ``members`` may list
    the members that have rows at all, so that the eager path skips the others. Losses are means over each
    member's own rows of a minibatch; gradients are clipped per member; a member with no rows in a minibatch is not
    stepped (its weights and Adam state stay as they were). Nothing waits for the device until the statistics at the
    end.

    Why CUDA graphs (``graphs=True``, CUDA only): one minibatch step is about a hundred small kernels whatever the
    number of members, and on an H100 launching them from Python cost ~4.7 ms per minibatch (151 ms per update at 1
    and at 64 workflows), not arithmetic. The step reads only fixed buffers (the rollout copied in once per update,
    the minibatch's row indices), so it is captured once per shape and replayed: the same kernels, one launch. With
    graphs every member is updated in place (an empty slot simply has no rows), so shapes never change between
    updates of one batch.
    """

    def __init__(self, agents: AgentStack, optimizer: StackedAdam, cfg: PPOConfig, graphs: bool = False):
        self.agents, self.opt, self.cfg = agents, optimizer, cfg
        self.graphs = graphs and agents.flat.is_cuda
        self._graph: dict[tuple, tuple] = {}    # (rollout rows, minibatch rows) -> (graph, its row-index buffer)
        self._static: dict[int, dict] = {}      # rollout rows -> the buffers the graphs of that size read

    def run(self, batch: Rollout, mask: torch.Tensor, generator: torch.Generator,
            members: list[int] | None = None) -> list[dict[str, float] | None]:
        """Train on ``batch``/``mask`` of every member, of which only the listed ones (default: all) have rows;
        returns their loss statistics of the last epoch (None for a member with no rows)."""
        if members is not None and list(members) == list(range(self.agents.n)):
            members = None
        if members is not None and not self.graphs:   # eager: the others cost nothing
            batch = Rollout(*(getattr(batch, f)[members] for f in _FIELDS))
            mask = mask[members]
        q, n = mask.shape
        mb = max(1, n // self.cfg.num_minibatches)
        buf = self._buffers(batch, mask, None if self.graphs else members)
        for epoch in range(self.cfg.update_epochs):
            perm = torch.randperm(n, generator=generator, device=generator.device).to(mask.device)
            buf["record"].fill_(float(epoch == self.cfg.update_epochs - 1))
            for start in range(0, n, mb):
                idx = perm[start:start + mb]
                if self.graphs:
                    graph, static_idx = self._graph.get((n, idx.shape[0])) or self._capture(buf, idx)
                    static_idx.copy_(idx)
                    graph.replay()
                else:
                    self._step(buf, idx)
        means = (buf["sums"] / buf["steps_last"].clamp(min=1)).T.tolist()
        live = mask.any(1).tolist()
        stats = [dict(zip(STAT_NAMES, means[k])) if live[k] else None for k in range(q)]
        return [stats[k] for k in members] if members is not None and self.graphs else stats

    def _buffers(self, batch: Rollout, mask: torch.Tensor, members: list[int] | None) -> dict:
        """What a minibatch step reads: the rollout itself (eager), or fixed copies of it, one set per rollout size,
        that the captured graphs read (graphs)."""
        dev = mask.device
        new = {**{f: getattr(batch, f) for f in _FIELDS}, "mask": mask.float(),
               "sums": torch.zeros((5, mask.shape[0]), device=dev),
               "steps_last": torch.zeros(mask.shape[0], device=dev),
               "record": torch.zeros((), device=dev)}
        if not self.graphs:
            return {**new, "rows": None if members is None else torch.as_tensor(members, device=dev)}
        static = self._static.setdefault(mask.shape[1], {**{k: v.clone() for k, v in new.items()}, "rows": None})
        for k, v in new.items():
            static[k].copy_(v)
        return static

    def _step(self, buf: dict, idx: torch.Tensor) -> None:
        """One minibatch (``rl.ppo.ppo_step``: forward, loss, backward, per-member clip and Adam step) on the rows
        ``idx`` of every member, and its statistics added up in the last epoch."""
        mb = Rollout(*(buf[f][:, idx] for f in _FIELDS))
        stats, cnt = ppo_step(self.agents, self.opt, mb, buf["mask"][:, idx], self.cfg, buf["rows"])
        with torch.no_grad():
            used = (cnt > 0).float() * buf["record"]
            buf["sums"] += used * stats
            buf["steps_last"] += used

    def _capture(self, buf: dict, idx: torch.Tensor) -> tuple:
        """Capture one minibatch step as a CUDA graph. Warm-up steps (needed before a capture) train for real, so
        the weights and Adam state are put back afterwards; capturing itself runs nothing."""
        trained = (self.agents.flat.data, self.opt.exp_avg, self.opt.exp_avg_sq, self.opt.steps, buf["sums"],
                   buf["steps_last"])
        keep = [t.clone() for t in trained]
        static_idx = idx.clone()
        side = torch.cuda.Stream(device=idx.device)
        side.wait_stream(torch.cuda.current_stream(idx.device))
        with torch.cuda.stream(side):
            for _ in range(2):
                self._step(buf, static_idx)
        torch.cuda.current_stream(idx.device).wait_stream(side)
        # the step drops the gradient first: the captured backward allocates the one it rewrites on every replay
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._step(buf, static_idx)
        with torch.no_grad():
            for t, k in zip(trained, keep):
                t.copy_(k)
        self._graph[(buf["mask"].shape[1], idx.shape[0])] = (graph, static_idx)
        return graph, static_idx


_FIELDS = tuple(f.name for f in dataclasses.fields(Rollout))


def ppo_update(agent: Agent, optimizer: torch.optim.Adam, batch: Rollout, cfg: PPOConfig,
               generator: torch.Generator) -> dict[str, float] | None:
    """PPO epochs over minibatches of one network's rollout (fields (N, ...)); returns the loss statistics of the
    last epoch (None for an empty rollout).

    Why a stack of one: so that a lone network trains by the very code batches train by (:func:`ppo_step` under
    ``rl.stack.StackedUpdate``), not by a look-alike. ``agent``'s weights and ``optimizer``'s Adam state (a plain
    ``torch.optim.Adam`` over ``agent.parameters()``, its moments and step count) go into a one-member stack and
    come back updated in place; its param groups (learning rate, betas, eps) are read, not changed."""

    group = optimizer.param_groups[0]
    if (len(optimizer.param_groups) != 1 or group["weight_decay"] or group.get("amsgrad") or group.get("maximize")
            or list(group["params"]) != list(agent.parameters())):
        raise ValueError("ppo_update trains with plain Adam over agent.parameters() in one param group")
    with torch.random.fork_rng(devices=[]):   # building a stack draws an init; keep the global stream as is
        stack = AgentStack(1, agent.hidden, agent.memory)
    stack = stack.to(agent.device)
    stack.load_member(0, agent.state_dict())
    opt = StackedAdam(stack.flat, float(group["lr"]), tuple(group["betas"]), float(group["eps"]))
    opt.load_member_state(stack, 0, optimizer.state_dict())
    one = Rollout(*(getattr(batch, f.name).unsqueeze(0) for f in dataclasses.fields(Rollout)))
    mask = torch.ones(batch.actions.shape, dtype=torch.bool, device=batch.actions.device).unsqueeze(0)
    stats = StackedUpdate(stack, opt, cfg).run(one, mask, generator)[0]
    with torch.no_grad():
        agent.load_state_dict(stack.member_state(0))
    state = opt.member_state(stack, 0)
    optimizer.load_state_dict({**state, "param_groups": optimizer.state_dict()["param_groups"]})
    return stats
