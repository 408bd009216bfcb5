"""DOPPLER's dual policy: SEL picks the next ready op, PLC its device (Yao et al., ICLR 2026, Sec. 4).

Each head has its own MPNN encoder (shared with ``share_encoder=True``), run
once per episode. SEL scores every ready op from ``[projected node features
‖ embedding ‖ sum of embeddings along its longest path to an exit ‖ along its
longest path from an entry]``; PLC scores every device from ``[projected
device features ‖ projected node features of the op ‖ its embedding ‖ the sum
of embeddings of the ops already on the device]``; each MLP's softmax is the
head's distribution.

Everything SEL sees is fixed for the episode, so its logits are computed once.
PLC's first layer is linear, so its op and device-embedding-sum parts are
precomputed per op and only the device-feature part is evaluated per step.

With ``random_features`` the node features carry per-rollout noise columns; with
``affinity_features`` the bytes the op exchanges with its inputs and
co-parents on each device and the share of its component there (:mod:`.features`).

With ``place_rule_weight`` β > 0, PLC's logits add ``−β · (earliest start −
the earliest) / time scale`` per device (critical_path's device rule; with
``place_rule_scale="op"`` ÷ the op's compute time instead; with
``place_rule="affinity"`` the affinity cost − the cheapest instead of the
earliest start, :func:`.features.affinity_delay`), and with ``select_rule_weight``
α > 0 SEL's add ``α · bottom level / largest bottom level`` per op (its op
rule); the learned logits are then corrections to those rules.

With ``select_rule="earliest_start"`` SEL's term is ETF's op rule instead, per step
(:func:`.features.earliest_start_scores`): with PLC on ``earliest_start`` too, a fresh policy is the ``etf``
placer. With ``gate_rules`` a linear gate on the pooled node embeddings and :func:`.features.graph_statistics`
picks one ``select_rule/place_rule`` pair per placement (greedy: its argmax; sampled: a draw), which then
drives both terms; :meth:`DopplerPolicy.rule_policy` is the same policy fixed on one pair.

An ``encoded.plc_offset`` tensor ``(ops, devices)``, when set, is added to
PLC's logits (per-instance active search adapts only this table:
:mod:`.active_search`).

The paper's code (:meth:`~.policy_config.PolicyConfig.paper`, its bugs included) is a variant,
:class:`~.paper.PaperDopplerPolicy`: :func:`~.policy.make_policy` builds one for a config that turns on any
paper preset switch (:meth:`DopplerPolicy.for_config`), and it overrides the hooks of the section "what the
paper's variant changes"; the main model below reads none of those switches.

Ablations (``doppler_sel_only``, ``doppler_plc_only``): one head is replaced
by the critical-path teacher's rule (largest bottom level first;
earliest-start device) and only the other is learned.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn

from ..cluster import Devices
from ..graph import DataflowGraph
from ..placers.etf import EarliestPairs
from ..placers.list_scheduling import ReadyQueue
from ..placers.ties import TieBreak, TieRanks
from .choice import Chooser, Decisions, Rollout, as_numpy, finish_rollout, softmax
from .compiled_play import compiled_episode, compiled_head, compiled_scored_episode
from .env import PlacementState
from .features import (
    AFFINITY_FEATURES,
    DEVICE_FEATURES,
    GRAPH_STATISTICS,
    NODE_FEATURES,
    affinity_delay,
    affinity_features,
    earliest_start_scores,
    graph_statistics,
)
from .nets import Encoder, GraphTensors, ScoringHead, path_sum, sums_before
from .policy import LearnedPolicy, PolicyConfig, rule_pair

__all__ = ["DopplerPolicy", "encoder", "rule_queue"]

NEAR_LEVELS = 1e-12
"""Static levels closer than this, relatively, might round to one ETF rule score (:func:`rule_queue`)."""


def encoder(config: PolicyConfig) -> Encoder:
    """The MPNN encoder ``config`` describes."""
    return Encoder(
        config.width, config.message_passing_steps, config.edge_hidden, config.aggregator, config.zscore_graph_features, node_inputs(config)
    )


def node_inputs(config: PolicyConfig) -> int:
    """Columns of the node features: the static ones plus ``random_features`` noise columns."""
    return len(NODE_FEATURES) + config.random_features


def device_inputs(config: PolicyConfig) -> int:
    """Columns of PLC's device features: the dynamic ones plus, when switched on, the affinity ones."""
    return len(DEVICE_FEATURES) + (len(AFFINITY_FEATURES) if config.affinity_features else 0)


class DopplerPolicy(LearnedPolicy):
    """SEL + PLC; ``select``/``place`` = ``"critical_path"`` replaces that head by the teacher's rule."""

    def __init__(self, config: PolicyConfig, select: str = "learned", place: str = "learned") -> None:
        super().__init__(config)
        for name, value in (("select", select), ("place", place)):
            if value not in ("learned", "critical_path"):
                raise ValueError(f"{name} must be 'learned' or 'critical_path', got {value!r}")
        self.learn_select = select == "learned"
        self.learn_place = place == "learned"
        w = config.width
        if self.learn_select:
            self.sel_encoder = encoder(config)
            self.sel_node = nn.Linear(node_inputs(config), w)
            self.sel_head = ScoringHead(
                {"node": w, "embedding": w, "down": w, "up": w}, config.head_hidden, config.activation, config.negative_slope
            )
        if self.learn_place:
            if not (config.share_encoder and self.learn_select):
                self.plc_encoder = encoder(config)
            self.plc_node = nn.Linear(node_inputs(config), w)
            self.plc_device = nn.Linear(device_inputs(config), w)
            self.plc_head = ScoringHead(
                {"device": w, "node": w, "embedding": w, "device_sum": w}, config.head_hidden, config.activation, config.negative_slope
            )
        self.rule_pairs = [rule_pair(rule) for rule in config.gate_rules] or [(config.select_rule, config.place_rule)]
        if config.gate_rules:
            self.gate_head = nn.Linear(2 * w + len(GRAPH_STATISTICS), len(self.rule_pairs))
            nn.init.zeros_(self.gate_head.weight)  # a fresh gate picks the first pair
            nn.init.zeros_(self.gate_head.bias)

    def decisions(self, graph: DataflowGraph) -> int:
        """Two per op, and the gate's choice after them."""
        return 2 * graph.num_nodes + bool(self.config.gate_rules)

    def rule_policy(self, pair: int) -> DopplerPolicy:
        """This policy without its gate, fixed on ``gate_rules[pair]``; it shares this policy's heads and encoders (not copies)."""
        if not self.config.gate_rules:
            raise ValueError("rule_policy needs a policy with gate_rules")
        select, place = self.rule_pairs[pair]
        config = dataclasses.replace(self.config, gate_rules=(), select_rule=select, place_rule=place)
        fixed = DopplerPolicy.for_config(config)(config, "learned" if self.learn_select else "critical_path", "learned")
        for name, module in self.named_children():
            if name != "gate_head":
                setattr(fixed, name, module)
        fixed.trained_for = self.trained_for
        return fixed

    def gate_input(self, encoded: SimpleNamespace, graph: DataflowGraph, devices: Devices) -> torch.Tensor:
        """What the gate reads for placing ``graph`` on ``devices``: mean and max pool of the node embeddings, graph statistics."""
        stats = torch.as_tensor(graph_statistics(graph, devices), dtype=encoded.gate_pool.dtype, device=encoded.gate_pool.device)
        return torch.cat([encoded.gate_pool, stats])

    # ------------------------------------------------------------ networks
    def select_logits(self, inputs: GraphTensors, embedding: torch.Tensor) -> torch.Tensor:
        """SEL's logit for every op ``(n,)``."""
        return self.sel_head(
            node=self.activate(self.sel_node(self.node_input(inputs))),
            embedding=embedding,
            down=path_sum(embedding, inputs.down_path),
            up=path_sum(embedding, inputs.up_path),
        )

    def place_parts(self, inputs: GraphTensors, embedding: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """PLC's first layer per op: its own part (bias included) and its contribution to its device's sum."""
        head = self.plc_head
        own = head.part("node", self.activate(self.plc_node(self.node_input(inputs)))) + head.part("embedding", embedding) + head.bias
        return own, head.part("device_sum", embedding)

    def place_logits(self, device_feats: torch.Tensor, own: torch.Tensor, device_sum: torch.Tensor) -> torch.Tensor:
        """PLC's logits ``(..., devices)`` from device features ``(..., devices, F)`` and the precomputed parts."""
        return self.plc_head.finish(self.plc_head.part("device", self.plc_device(device_feats)) + own.unsqueeze(-2) + device_sum)

    @property
    def reads_paths(self) -> bool:
        """SEL reads path sums; a policy whose SEL is a rule (``doppler_plc_only``) does not."""
        return self.learn_select

    # ---------------------------------------- what the paper's variant changes (:mod:`.paper`)
    @classmethod
    def for_config(cls, config: PolicyConfig) -> type[DopplerPolicy]:
        """:class:`~.paper.PaperDopplerPolicy` where ``config`` turns on a paper preset switch, else this class."""
        from .paper import PaperDopplerPolicy, paper_switches

        return PaperDopplerPolicy if cls is DopplerPolicy and paper_switches(config) else cls

    def activate(self, x: torch.Tensor) -> torch.Tensor:
        """What follows the encoders and the feature projections: nothing here (the paper: a LeakyReLU)."""
        return x

    def node_input(self, inputs: GraphTensors) -> torch.Tensor:
        """The node features the projections read."""
        return inputs.node

    @property
    def first_ready(self) -> bool:
        """Whether SEL's ``bottom_level`` rule takes the smallest ready id instead (the paper's ``critical_path_index_bug``)."""
        return False

    def encode_select(self, inputs: GraphTensors, embedding: torch.Tensor, e: SimpleNamespace) -> None:
        """What SEL needs for the episode: its logits, fixed for the episode."""
        e.sel_logits = self.select_logits(inputs, embedding)
        e.sel_np = as_numpy(e.sel_logits)

    def encode_place(self, inputs: GraphTensors, embedding: torch.Tensor, e: SimpleNamespace) -> None:
        """What PLC needs for the episode: each op's own part, its device-sum part, and the device projection, as numpy too."""
        e.own, e.device_part = self.place_parts(inputs, embedding)
        e.own_np, e.device_part_np = as_numpy(e.own), as_numpy(e.device_part)
        e.device_weight, e.device_bias = self.plc_head.numpy_projected_part("device", self.plc_device)
        e.finish = self.plc_head.numpy_finish()

    def select_paths(self, graph: DataflowGraph, e: SimpleNamespace) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The path sums SEL reads per step, when its logits are not fixed for the episode: none here."""
        return None, None

    def ready_scores(self, e: SimpleNamespace, ready: np.ndarray, down: np.ndarray | None, up: np.ndarray | None) -> np.ndarray:
        """SEL's learned logits for the ``ready`` ops at this step."""
        return e.sel_np[ready]

    def device_sum_rows(self, e: SimpleNamespace) -> np.ndarray:
        """Per op, what placing it adds to its device's row of PLC's per-device sums."""
        return e.device_part_np

    def step_place_logits(self, e: SimpleNamespace, feats: np.ndarray, device_sum: np.ndarray, op: int) -> np.ndarray:
        """PLC's logits for placing ``op`` from this step's device features and per-device sums."""
        return e.finish(feats @ e.device_weight + e.device_bias + e.own_np[op] + device_sum)

    def per_step_select_logits(
        self, e: SimpleNamespace, sel: Decisions, paths: tuple[torch.Tensor | None, torch.Tensor | None]
    ) -> torch.Tensor | None:
        """SEL's logits ``(steps, candidates)`` for its decisions ``sel``, where they depend on each step's ready set: never here
        (None: they are the episode's fixed logits)."""
        return None

    def batched_place_logits(self, e: SimpleNamespace, feats: torch.Tensor, order: torch.Tensor, devices: np.ndarray) -> torch.Tensor:
        """PLC's logits ``(steps, devices)`` for the episode's steps, batched, ``devices`` the chosen device per step."""
        return self.place_logits(feats, e.own[order], sums_before(e.device_part[order], devices, feats.shape[1]))

    # ------------------------------------------------------------- rollout
    def encode(self, inputs: GraphTensors) -> SimpleNamespace:
        encoded = SimpleNamespace()
        if self.learn_select:
            sel_embedding = self.activate(self.sel_encoder(inputs))
            self.encode_select(inputs, sel_embedding, encoded)
        if self.learn_place:
            plc_embedding = self.activate(self.plc_encoder(inputs)) if hasattr(self, "plc_encoder") else sel_embedding
            if self.config.gate_rules:  # the gate reads the embeddings but does not train the encoders
                pooled = (sel_embedding if self.learn_select else plc_embedding).detach()
                empty = pooled.new_zeros(2 * pooled.shape[1])
                # amax: the same maxima as max(0), a tenth of its time on a (100,000, 128) table
                encoded.gate_pool = torch.cat([pooled.mean(0), pooled.amax(0)]) if len(pooled) else empty
            self.encode_place(inputs, plc_embedding, encoded)
        return encoded

    def play(self, state: PlacementState, choose: Chooser, teacher: bool, encoded: SimpleNamespace) -> Rollout:
        e, config = encoded, self.config
        n, d = state.graph.num_nodes, state.num_devices
        feats: np.ndarray | None = None  # the device features of each step, with PLC learned
        select_rule_rows: list[np.ndarray] = []
        down, up = self.select_paths(state.graph, e)
        down_np, up_np = (None, None) if down is None or up is None else (as_numpy(down), as_numpy(up))
        scored = torch.is_grad_enabled() or teacher  # else only the placement is wanted: keep no per-step rows, skip the re-scoring
        rows = n if scored else 1  # per-step rows kept for the batched re-scoring; without it one row, rewritten each step
        if self.learn_place:
            sum_rows = self.device_sum_rows(e)
            device_sum = np.zeros((d, sum_rows.shape[1]))
            plc_feats = feats = np.zeros((rows, d, device_inputs(config)), dtype=np.float32)
        sel, plc = Decisions(), Decisions()
        pair = self._rule_pair(e, state, choose) if config.gate_rules else 0
        select_by, place_by = self.rule_pairs[pair]
        queue = None if self.learn_select else rule_queue(state, select_by, self.first_ready)
        if select_by == "earliest_start" and queue is None:
            static_level = state.graph.bottom_level(with_comm=False)
            arrival = np.full((n, d), np.nan)  # a ready op's input arrivals per device: fixed once it is ready
        select_rule = config.select_rule_weight * state.features.bottom_level / max(float(state.features.bottom_level.max()), 1e-300)
        place_rule = np.zeros((rows, d))
        rule_time = place_rule_times(state.graph.compute, state.features.time_scale, config.place_rule_scale)
        devices_chosen = np.zeros(n, dtype=np.int64)
        agree = 0
        all_devices = np.arange(d)
        offset_np = None if getattr(e, "plc_offset", None) is None else as_numpy(e.plc_offset)
        loop = self._compiled_loop(queue is not None, scored, teacher, choose, offset_np, select_by)
        if loop is not None:  # the same steps in one compiled loop
            if loop == "rule":
                rollout = self._compiled_play(e, state, choose, (select_by, place_by), rule_time)
            else:
                rollout = self._compiled_scored_play(e, state, choose, scored, place_by, (select_rule, rule_time), offset_np)
            return dataclasses.replace(rollout, rule=config.gate_rules[pair]) if config.gate_rules else rollout
        for t in range(n):
            k = t if scored else 0
            if queue is not None:  # SEL is its rule, kept in a queue: no scan of the ready ops
                op = queue.pop()
                teacher_ops = state.teacher_ops(state.ready_ops()) if teacher else None
            else:
                ready = state.ready_ops()
                teacher_ops = state.teacher_ops(ready) if teacher or not self.learn_select else None
                if select_by == "earliest_start":
                    for op in ready[np.isnan(arrival[ready, 0])].tolist():
                        arrival[op] = state.schedule.arrival_times(op)
                    starts = np.maximum(state.schedule.device_free, arrival[ready])  # each ready op's earliest_starts
                    rule_scores = earliest_start_scores(starts.min(axis=1), static_level[ready], state.features.time_scale)
                if self.learn_select:
                    sel_teacher = None if teacher_ops is None else np.isin(ready, teacher_ops)
                    scores = self.ready_scores(e, ready, down_np, up_np)
                    if select_by == "earliest_start":
                        select_rule_rows.append(config.select_rule_weight * rule_scores)
                        scores = scores + select_rule_rows[-1]
                    else:
                        scores = scores + select_rule[ready]
                    pos = choose(softmax(scores), 2 * t, sel_teacher)
                    sel.add(ready, pos, sel_teacher)
                    op = int(ready[pos])
                elif select_by == "earliest_start":
                    pos = int(np.argmax(rule_scores))
                    op = int(ready[pos])
                else:
                    assert teacher_ops is not None  # computed whenever SEL is not learned
                    op = int(ready[0] if self.first_ready else teacher_ops[0])
            earliest = starts[pos] if queue is None and select_by == "earliest_start" else state.schedule.earliest_starts(op)
            teacher_devices = state.teacher_devices(op, earliest) if teacher or not self.learn_place else None
            if self.learn_place:
                self._device_inputs(plc_feats[k], state, op, earliest)
                # with PLC learned, teacher_devices is computed exactly for a teacher rollout
                plc_teacher = np.isin(all_devices, teacher_devices) if teacher_devices is not None else None
                logits = self.step_place_logits(e, plc_feats[k], device_sum, op)
                if place_by == "affinity":
                    delay = affinity_delay(state.schedule, op, earliest)
                else:
                    delay = earliest - earliest.min()
                place_rule[k] = config.place_rule_weight * delay / rule_time[op]
                logits = logits - place_rule[k]
                if offset_np is not None:
                    logits = logits + offset_np[op]
                target = choose(softmax(logits), 2 * t + 1, plc_teacher)
                if scored:
                    plc.add(all_devices, target, plc_teacher)
                device_sum[target] += sum_rows[op]
            else:
                assert teacher_devices is not None  # computed whenever PLC is not learned
                target = int(teacher_devices[0])
            if teacher:
                assert teacher_ops is not None and teacher_devices is not None  # both computed for a teacher rollout
                agree += bool(op in teacher_ops and target in teacher_devices)
            devices_chosen[t] = target
            state.place(op, target, earliest)
            if queue is not None:
                queue.add(state.schedule.newly_ready)
        rules = (select_rule, select_rule_rows, place_rule)
        order = np.asarray(state.schedule.order)
        heads = self._rescored(e, order, sel, plc, select_by, rules, feats, devices_chosen, (down, up)) if scored else []
        rollout = finish_rollout(state.schedule.device, order, heads, teacher, agree, self.device, scored)
        return dataclasses.replace(rollout, rule=config.gate_rules[pair]) if config.gate_rules else rollout

    def _compiled_loop(
        self, has_queue: bool, scored: bool, teacher: bool, choose: Chooser, offset: np.ndarray | None, select_by: str
    ) -> str | None:
        """Which compiled loop can play the episode: this class's own hooks (not the paper's variant), PLC learned without
        affinity features, no teacher, ``Chooser``'s own greedy, sampled or (both learned) epsilon choices; then ``"rule"``
        (:func:`~.compiled_play.compiled_episode`: SEL a rule with a queue, ``has_queue``, unscored, no offset table) or ``"learned"``
        (:func:`~.compiled_play.compiled_scored_episode`: SEL learned with its bottom-level rule term); None: the Python loop."""
        if (
            type(self) is not DopplerPolicy
            or not self.learn_place
            or teacher
            or self.config.affinity_features
            or type(choose) is not Chooser  # a subclass may choose otherwise
            or choose.mode == "teacher"
            or compiled_head(self.plc_head) is None
        ):
            return None
        if self.learn_select:
            return "learned" if select_by == "bottom_level" else None
        return "rule" if has_queue and not scored and offset is None and choose.mode != "epsilon" else None

    def _compiled_play(
        self, e: SimpleNamespace, state: PlacementState, choose: Chooser, rules: tuple[str, str], rule_time: np.ndarray
    ) -> Rollout:
        """:meth:`play`'s episode by :func:`~.compiled_play.compiled_episode` (a ``"rule"`` loop), SEL and PLC on ``rules``."""
        select_by, place_by = rules
        n = state.graph.num_nodes
        if select_by == "bottom_level":
            priority = np.zeros(n) if self.first_ready else state.features.bottom_level
        else:
            priority = state.graph.bottom_level(with_comm=False)
        which = choose.draws[1 : 2 * n : 2, 1] if choose.mode == "sample" else None
        assignment, order = compiled_episode(
            state.schedule,
            select_by,
            priority,
            place_by,
            self._compiled_plc(e),
            self.config.place_rule_weight,
            rule_time,
            state.features.time_scale,
            which,
        )
        return finish_rollout(assignment, order, [], False, 0, self.device, False)

    def _compiled_scored_play(
        self,
        e: SimpleNamespace,
        state: PlacementState,
        choose: Chooser,
        scored: bool,
        place_by: str,
        rules: tuple[np.ndarray, np.ndarray],
        offset: np.ndarray | None,
    ) -> Rollout:
        """:meth:`play`'s episode by :func:`~.compiled_play.compiled_scored_episode` (both heads learned), then re-scored
        with gradients as the Python loop's (where ``scored``)."""
        select_rule, rule_time = rules
        rule = (self.config.place_rule_weight, rule_time, state.features.time_scale)
        choice = (choose.mode, choose.epsilon, choose.draws)
        device, order, ready_ptr, ready_ops, positions, targets, feats, place_rule = compiled_scored_episode(
            state.schedule, e.sel_np + select_rule, place_by, self._compiled_plc(e), rule, choice, offset
        )
        heads = []
        if scored:
            d = state.num_devices
            sel = Decisions.from_steps(ready_ptr, ready_ops, positions)
            plc = Decisions.from_steps(np.arange(0, d * (order.size + 1), d), np.tile(np.arange(d), order.size), targets)
            heads = self._rescored(e, order, sel, plc, "bottom_level", (select_rule, [], place_rule), feats, targets, (None, None))
        return finish_rollout(device, order, heads, False, 0, self.device, scored)

    def _compiled_plc(self, e: SimpleNamespace) -> tuple:
        """PLC as the compiled loops read it: its per-op parts, its device projection and its head after the first layer."""
        head = compiled_head(self.plc_head)
        assert head is not None  # _compiled_loop checked it
        return (e.own_np, self.device_sum_rows(e), e.device_weight, e.device_bias, *head)

    def _rule_pair(self, e: SimpleNamespace, state: PlacementState, choose: Chooser) -> int:
        """The gate's rule pair, the episode's last decision: a teacher replay takes the most probable pair."""
        probs = softmax(as_numpy(self.gate_head(self.gate_input(e, state.graph, state.schedule.cluster))))
        return int(probs.argmax()) if choose.mode == "teacher" else choose(probs, 2 * state.graph.num_nodes)

    def _device_inputs(self, row: np.ndarray, state: PlacementState, op: int, earliest: np.ndarray) -> None:
        """Fill ``row`` (devices × inputs) with PLC's inputs for placing ``op``: device features, then affinity."""
        row[:, : len(DEVICE_FEATURES)] = state.device_features(op, earliest)
        if self.config.affinity_features:
            row[:, row.shape[1] - len(AFFINITY_FEATURES) :] = affinity_features(state.schedule, op)

    def _rescored(
        self,
        e: SimpleNamespace,
        order_np: np.ndarray,
        sel: Decisions,
        plc: Decisions,
        select_by: str,
        rules: tuple[np.ndarray, list[np.ndarray], np.ndarray],
        feats: np.ndarray | None,
        devices_chosen: np.ndarray,
        paths: tuple[torch.Tensor | None, torch.Tensor | None],
    ) -> list:
        """The episode's decisions scored again in one batched pass with gradients: each head's log-probability terms."""
        select_rule, select_rule_rows, place_rule = rules
        device, offset = self.device, getattr(e, "plc_offset", None)
        heads = []
        per_step = self.per_step_select_logits(e, sel, paths) if self.learn_select else None
        if per_step is not None:
            heads.append(sel.terms_at(per_step))
        elif self.learn_select and select_by == "earliest_start":
            index, legal, _ = sel.padded()
            rule = np.zeros(index.shape)
            for row, values in zip(rule, select_rule_rows, strict=True):
                row[: values.size] = values
            scores = e.sel_logits[torch.from_numpy(index).to(device)] + torch.as_tensor(rule, dtype=e.sel_logits.dtype, device=device)
            heads.append(sel.terms_at(scores))
        elif self.learn_select:
            heads.append(sel.terms(e.sel_logits + torch.as_tensor(select_rule, dtype=e.sel_logits.dtype, device=device)))
        if self.learn_place:
            order = torch.as_tensor(order_np, dtype=torch.int64, device=device)
            feats_t = torch.from_numpy(feats).to(device)
            logits = self.batched_place_logits(e, feats_t, order, devices_chosen)
            logits = logits - torch.as_tensor(place_rule, dtype=logits.dtype, device=device)
            heads.append(plc.terms(logits if offset is None else logits + offset[order]))
        return heads


def place_rule_times(compute: np.ndarray, time_scale: float, scale: str) -> np.ndarray:
    """Per op, the time PLC's rule divides a device's delay by (``PolicyConfig.place_rule_scale``)."""
    if scale == "graph":
        return np.full(compute.shape, time_scale)
    positive = compute[compute > 0]
    return np.maximum(compute, positive.min() if positive.size else time_scale)


def rule_queue(state: PlacementState, select_rule: str, first_ready: bool) -> ReadyQueue | EarliestPairs | None:
    """The ready ops in the order SEL's rule ``select_rule`` takes them, kept as the schedule grows instead of scanned per step.

    ``pop()`` gives the next op; ``add(state.schedule.newly_ready)`` after each placement. ``bottom_level``: the largest
    bottom level, the smaller id on ties (``first_ready``: the smallest id, ``critical_path_index_bug``);
    ``earliest_start``: ETF's op (:class:`~workbench.placers.etf.EarliestPairs`), the argmax of
    :func:`~.features.earliest_start_scores`. Those scores divide static levels by the largest ready one, which can
    round two levels within a few ulps of each other to one score (then the smaller id wins, not the larger level),
    and so can a level so small against the largest that its score is subnormal: on such a graph this returns None
    and the caller scans the ready ops as the scores do.
    """
    if select_rule == "bottom_level":
        return ReadyQueue(state.schedule, np.zeros(state.graph.num_nodes) if first_ready else state.features.bottom_level)
    static_level = state.graph.bottom_level(with_comm=False)
    levels = np.unique(static_level)
    positive = levels[levels > 0]
    if positive.size and 0.5 * positive[0] / levels[-1] < np.finfo(float).tiny:
        return None  # the smallest score would be subnormal (or 0): distinct levels may share one
    if np.any(np.diff(levels) <= NEAR_LEVELS * levels[1:]):
        return None
    return EarliestPairs(state.schedule, TieRanks(static_level, TieBreak.of("id", state.graph.num_nodes, state.num_devices)))
