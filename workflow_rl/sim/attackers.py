"""The attackers (red agents) the engines play: one registry, the one place an attacker is declared.

An attacker is its rules -- a function ``choose(s, i) -> (red action kind, target)`` written like the functions of
:mod:`workflow_rl.sim.rules` (it reads and writes env ``i`` of the batched state ``s``, may call any rule function,
``T`` for :mod:`workflow_rl.sim.tables` and ``np``) -- and one :class:`Attacker` entry passed to :func:`register`.
Everything else is derived from this registry: the engine's kind numbers and their count (the CPU and CUDA kernels'
dispatch, the mixture odds' width, the state check's bound), the names, aliases and mixtures ``--red-agent``
accepts (:mod:`workflow_rl.envs.names`), the CybORG class real CybORG plays for it (:mod:`workflow_rl.envs.cyborg`),
the planner's belief over red (:mod:`workflow_rl.rl.planning.belief`) and the evaluation defaults.

Why a generated dispatch: numba compiles the rules for each target (``rules.compile_rules``) and cannot call a
function chosen from a list at run time, so :func:`rule_namespace` writes the ``if kind == k: return choose_k(s, i)``
chain for the attackers registered now and the kernels are compiled for it (``sim.native.kernels``). Numba's disk
cache is keyed on the file a launcher is written in (sim/rules.py), which knows nothing of an attacker written in
another file, so :func:`fingerprint` (a hash of those attackers' code) goes into the launchers' cached names: a
change to such an attacker compiles anew instead of loading a stale kernel. CAGE2's attackers' rules are in
sim/rules.py itself, whose changes numba's cache sees; the attacker family's (:mod:`workflow_rl.sim.family`, built in
too, so ``--red-agent DelayedB_line`` needs no import) are in sim/family.py, so the fingerprint always holds them.
"""
from __future__ import annotations

import dataclasses
import hashlib
import types
from dataclasses import dataclass
from typing import Callable

from workflow_rl.sim import rules
from workflow_rl.sim import tables as T

RESERVED = ("mix", "family", "training", "held_out")
"""Names no attacker may take: ``mix`` asks for the default mixture (``envs.names.MIX``), ``family`` for the
attacker family's (``envs.names.FAMILY``), ``training`` and ``held_out`` for the two sides of the held-out protocol
(:data:`HELD_OUT`)."""


@dataclass(frozen=True)
class Attacker:
    """One red agent. ``choose`` is None for an attacker that sleeps every step."""

    name: str
    """its canonical name, as configs, checkpoints and tables store it (CybORG's class name where it has one)"""
    choose: Callable | None
    """the rules: ``choose(s, i) -> (kind, target)``, a red action kind of ``sim.tables`` (``R_DRS``: target a
    subnet; ``R_SLEEP``: target -1) chosen from env ``i``'s state before blue acts"""
    aliases: tuple[str, ...] = ()
    """other spellings ``--red-agent`` accepts (any case), e.g. ``b_line``"""
    cyborg_class: str | None = None
    """the CybORG red agent class that plays it on real CybORG: a class name in ``CybORG.Agents`` or
    ``module:Class``; None: the native engine only"""
    helpers: tuple[Callable, ...] = ()
    """the plain functions of its own module its rules call (compiled with them)"""
    cage2: bool = False
    """one of the red agents CAGE2's evaluation plays (B_line, Meander, Sleep): the default evaluation cells; those
    that attack are the default mixture (``--red-agent mix``) and the default cells of the two-attacker reports"""
    short: str = ""
    """its name in a table's column (default: ``name``)"""
    inline: bool = True
    """its rules are inlined into the CPU kernel (CAGE2's attackers); False: compiled as a function the kernel calls,
    for a large attacker: every inlined rule is compiled again into each CPU launcher, and the six of the family
    (sim/family.py) inlined cost 2 minutes of compilation more (measured on the 2-core box: 190 s of CPU against
    60 s for CAGE2's three alone; called, 88 s). The CUDA kernel inlines every attacker (``sim.cuda.kernel``)."""
    kind: int = -1
    """the engine's number for it (``SimState.red_kind``): given by :func:`register`"""

    @property
    def label(self) -> str:
        return self.short or self.name


_REGISTRY: list[Attacker] = []   # in listing order (names, mixtures); kinds are their own numbers


def _check(a: Attacker) -> None:
    if not isinstance(a.name, str) or not a.name.isidentifier():
        raise ValueError(f"an attacker's name must be an identifier (it is written in configs and NAME:W "
                         f"mixtures), got {a.name!r}")
    spelled = [a.name.lower(), *(s.lower() for s in a.aliases)]
    taken = {s for b in _REGISTRY for s in (b.name.lower(), *(x.lower() for x in b.aliases))}
    clash = sorted((set(spelled) & taken) | (set(spelled) & set(RESERVED)))
    if clash:
        raise ValueError(f"attacker {a.name!r}: the name {clash[0]!r} is taken: choose another")
    for what, f in (("choose", a.choose), *(("helper", h) for h in a.helpers)):
        if f is not None and not isinstance(f, types.FunctionType):
            raise ValueError(f"attacker {a.name!r}: its {what} must be a plain Python function (the engines compile "
                             f"it for each target), got {type(f).__name__}")


def register(attacker: Attacker, kind: int | None = None) -> Attacker:
    """Add ``attacker`` to the registry and return it with its kind (the next free number unless ``kind``);
    a ValueError for a name, alias or kind already taken. Kernels compiled before see it at their next build
    (``sim.native.kernels`` compiles for the registry of the moment)."""
    _check(attacker)
    used = {b.kind for b in _REGISTRY}
    k = max(used, default=-1) + 1 if kind is None else kind
    if k in used:
        raise ValueError(f"attacker {attacker.name!r}: kind {k} is taken")
    entry = dataclasses.replace(attacker, kind=k)
    _REGISTRY.append(entry)
    _changed()
    return entry


def unregister(name: str) -> None:
    """Remove a registered attacker (a test's toy attacker); the built-in ones stay."""
    a = get(name)
    if a.kind in _BUILT_IN_KINDS:
        raise ValueError(f"{name!r} is built in and cannot be removed")
    _REGISTRY.remove(a)
    _changed()


_VERSION = {"n": 0, "fingerprint": None}   # bumped by every change of the registry; the fingerprint of the moment


def _changed() -> None:
    _VERSION["n"] += 1
    _VERSION["fingerprint"] = None


def version() -> int:
    """A number that changes whenever the registry does (cheap: the kernels' cache key, read at every step)."""
    return _VERSION["n"]


def attackers() -> tuple[Attacker, ...]:
    """Every registered attacker, in listing order (built-in: B_line, Meander, Sleep, the family of
    :mod:`workflow_rl.sim.family`; then by registration)."""
    return tuple(_REGISTRY)


def names() -> tuple[str, ...]:
    return tuple(a.name for a in _REGISTRY)


def get(name: str) -> Attacker:
    """The attacker of canonical name ``name``; a KeyError naming the registered ones otherwise."""
    for a in _REGISTRY:
        if a.name == name:
            return a
    raise KeyError(f"no attacker {name!r}: registered are {', '.join(names())}")


def kind_of(name: str) -> int:
    return get(name).kind


def n_kinds() -> int:
    """How many kinds the engine dispatches over: one more than the largest kind."""
    return max(a.kind for a in _REGISTRY) + 1


def _in_kind_order() -> list[Attacker]:
    return sorted(_REGISTRY, key=lambda a: a.kind)


def kind_names() -> tuple[str, ...]:
    """The attackers' names in the order of their kinds (the columns of mixture weights)."""
    return tuple(a.name for a in _in_kind_order())


def _foreign(a: Attacker) -> tuple[Callable, ...]:
    """Its functions written outside sim/rules.py (whose changes numba's cache does not see)."""
    return tuple(f for f in (a.choose, *a.helpers) if f is not None and f.__globals__ is not rules.__dict__)


def _code_digest(code: types.CodeType, h) -> None:
    h.update(code.co_code)
    h.update(repr(code.co_names).encode())
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _code_digest(c, h)
        else:
            h.update(repr(c).encode())


def fingerprint() -> str:
    """A short hash of the registry's kinds, names and the code of the attackers written outside sim/rules.py
    (the family's, and any registered): the suffix of the cached launchers' names."""
    if _VERSION["fingerprint"] is None:
        _VERSION["fingerprint"] = _fingerprint()
    return _VERSION["fingerprint"]


def _fingerprint() -> str:
    h = hashlib.sha256()
    for a in _in_kind_order():
        h.update(f"{a.kind}:{a.name};".encode())
    for f in (f for a in _REGISTRY for f in _foreign(a)):
        _code_digest(f.__code__, h)
    return h.hexdigest()[:16]


def _dispatch_source() -> str:
    """The source of ``_red_choose(s, i, rk)``, red's action of env ``i`` whose attacker is of kind ``rk``, for
    the registry of the moment (a kind without rules sleeps)."""
    choose = ["def _red_choose(s, i, rk):"]
    for a in _in_kind_order():
        if a.choose is not None:
            choose += [f"    if rk == {a.kind}:", f"        return _choose_{a.kind}(s, i)"]
    choose.append(f"    return {T.R_SLEEP}, -1")
    return "\n".join(choose) + "\n"


def rule_namespace(jit: Callable, namespace: dict, call_jit: Callable | None = None) -> dict:
    """Add the registry's rules, compiled with ``jit``, to ``namespace`` (a ``rules.compile_rules`` namespace):
    each attacker's ``choose`` as ``_choose_K`` (an attacker of another module keeps its module's globals beneath
    the rules', its helpers compiled there too), the generated ``_red_choose`` dispatch and ``_N_RED``, the number
    of kinds. The ``choose`` of an attacker that is not ``inline`` is compiled with ``call_jit`` (the target's jit
    of a function called, not inlined; default ``jit``). Returns ``namespace``."""
    namespace["_N_RED"] = n_kinds()
    for a in _REGISTRY:
        scopes: dict[int, dict] = {}

        def scope(f):
            if f.__globals__ is rules.__dict__:
                return namespace
            return scopes.setdefault(id(f.__globals__), {**f.__globals__, **namespace})

        for h in a.helpers:
            g = scope(h)
            g[h.__name__] = jit(types.FunctionType(h.__code__, g, h.__name__, h.__defaults__))
        if a.choose is not None:
            f = a.choose
            compile_ = jit if a.inline or call_jit is None else call_jit
            namespace[f"_choose_{a.kind}"] = compile_(types.FunctionType(f.__code__, scope(f), f.__name__,
                                                                         f.__defaults__))
    code = compile(_dispatch_source(), f"<workflow_rl attackers {fingerprint()}>", "exec")
    scratch: dict = {}
    exec(code, namespace, scratch)   # noqa: S102 - our own generated source, from the registry
    for name, f in scratch.items():
        namespace[name] = jit(types.FunctionType(f.__code__, namespace, name))
    return namespace


# ------------------------------------------------------------------------------------------------------ built-in
_CAGE2_KINDS = (T.RED_SLEEP, T.RED_BLINE, T.RED_MEANDER)
register(Attacker("B_lineAgent", rules._bline_choose, aliases=("b_line", "bline"), cyborg_class="B_lineAgent",
                  cage2=True, short="B_line"), kind=T.RED_BLINE)
register(Attacker("RedMeanderAgent", rules._meander_choose, aliases=("meander",), cyborg_class="RedMeanderAgent",
                  cage2=True, short="Meander"), kind=T.RED_MEANDER)
register(Attacker("SleepAgent", None, aliases=("sleep",), cyborg_class="SleepAgent", cage2=True, short="Sleep"),
         kind=T.RED_SLEEP)

# the attacker family (sim/family.py: their rules, and why each is in the family), kinds 3.. in this order; their
# CybORG twins are envs/cyborg_red.py's classes; compiled as calls, not inlined (Attacker.inline)
from workflow_rl.sim import family as _f  # noqa: E402

_TWIN = "workflow_rl.envs.cyborg_red:"
_FAMILY = tuple(register(dataclasses.replace(a, cyborg_class=_TWIN + a.name, inline=False)).name for a in (
    Attacker("DelayedB_line", _f.delayed_bline_choose, aliases=("delayed_bline", "delayed"), short="Delayed"),
    Attacker("RandomRed", _f.random_red_choose, aliases=("random_red",), helpers=_f.HELPERS, short="Random"),
    Attacker("EnterpriseRaider", _f.enterprise_raider_choose, aliases=("enterprise_raider", "raider"),
             helpers=_f.HELPERS, short="Raider"),
    Attacker("RestoreChaser", _f.restore_chaser_choose, aliases=("restore_chaser", "chaser"), helpers=_f.HELPERS,
             short="Chaser"),
    Attacker("UserHopper", _f.user_hopper_choose, aliases=("user_hopper", "hopper"), helpers=_f.HELPERS,
             short="Hopper"),
    Attacker("ImpactRush", _f.impact_rush_choose, aliases=("impact_rush", "rush"), helpers=_f.HELPERS,
             short="Rush"),
))
_BUILT_IN_KINDS = _CAGE2_KINDS + tuple(kind_of(n) for n in _FAMILY)


def cage2(attacking: bool = False) -> tuple[str, ...]:
    """The red agents CAGE2's evaluation plays, in listing order; ``attacking``: only those that attack (B_line and
    Meander: the default mixture, and the cells of the reports that compare defenders against CAGE2's attackers)."""
    return tuple(a.name for a in _REGISTRY if a.cage2 and (a.choose is not None or not attacking))


def family() -> tuple[str, ...]:
    """The attacker family's names (sim/family.py), in listing order: ``--red-agent family`` draws among them."""
    return _FAMILY


HELD_OUT = ("DelayedB_line", "UserHopper")
"""The held-out protocol (issue Y): attackers no recipe trains on and nothing is tuned against, so a defender's
return against them measures what it does against an attacker it never saw. Every other attacking built-in
attacker is the training set (:func:`training`). Why these two: DelayedB_line is the attacker the CAGE2 winner's
agent collapses against (-819 against -36 for B_line, real CybORG), and UserHopper is the family's only attacker
that changes its way in when blocked. Not RestoreChaser nor ImpactRush: against the shipped agent (and every
scripted defender but two) they play the same episodes -- they differ only once red holds Op_Server0 and blue
restores it -- so holding one out while training on the other would not hold it out. Fixed, not a setting: a
result "on the held-out attackers" means these."""


def held_out() -> tuple[str, ...]:
    """:data:`HELD_OUT`, in listing order: ``--red-agent held_out`` draws among them with equal odds."""
    return tuple(n for n in names() if n in HELD_OUT)


def training() -> tuple[str, ...]:
    """The protocol's training set: CAGE2's two attackers and the family's attackers not in :data:`HELD_OUT`, in
    listing order (``--red-agent training`` draws among them with equal odds; the ``robust`` recipe weights them,
    ``rl.recipes.training_mix``). An attacker a user
    registers joins neither side: the protocol stays the one its results were measured under."""
    return tuple(n for n in (*cage2(attacking=True), *family()) if n not in HELD_OUT)


__all__ = ["Attacker", "register", "unregister", "attackers", "names", "get", "kind_of", "n_kinds", "kind_names",
           "fingerprint", "version", "rule_namespace", "cage2", "family", "RESERVED",
           "HELD_OUT", "held_out", "training"]
