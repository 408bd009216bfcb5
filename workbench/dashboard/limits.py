"""What one dashboard request may ask for: caps on the work it starts, and the allow-lists it is checked against.

Every request that starts work goes through a :class:`Limits`: Compare's
placements (:meth:`Limits.bound_compare`), the graphs the picker generates
or loads (:meth:`Limits.check_graph_size`), and Launch's jobs
(:meth:`Limits.check_launch_value`). A value beyond a cap is refused with a
:class:`LimitError` that names the cap and the option that raises it; nothing
is silently clipped.

Each cap has a documented default and is set when the dashboard starts,
``python app.py --max-budget 1000000`` or ``WORKBENCH_MAX_BUDGET=1000000``
(the command line wins); :meth:`Limits.add_arguments` and
:meth:`Limits.from_arguments` build that command line from the fields below.
"""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Limits", "LimitError", "LOCAL_HOSTS", "parse_host"]

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
"""Names of this machine that every allow-list of hosts contains."""


class LimitError(ValueError):
    """A request beyond a cap, or naming something that is not on an allow-list."""


def _option(env: str, help: str) -> dict[str, Any]:
    return {"env": env, "help": help}


@dataclass(frozen=True)
class Limits:
    """Caps and allow-lists of one dashboard server (defaults fit a laptop; raise them for a bigger machine)."""

    max_budget: int = field(
        default=200_000, metadata=_option("WORKBENCH_MAX_BUDGET", "simulator evaluations a search method may spend per placement")
    )
    max_time_limit: float = field(
        default=60.0,
        metadata=_option(
            "WORKBENCH_MAX_TIME_LIMIT",
            "seconds a placement may run (a Compare placement with no time limit is stopped with a message then)",
        ),
    )
    max_request_time: float = field(
        default=300.0,
        metadata=_option(
            "WORKBENCH_MAX_REQUEST_TIME",
            "seconds one Compare request may compute, its placements together (they run one after another); "
            "a method not placed by then is named in the summary",
        ),
    )
    max_nodes: int = field(
        default=20_000, metadata=_option("WORKBENCH_MAX_NODES", "ops of a graph the dashboard generates, loads or places")
    )
    max_edges: int = field(default=200_000, metadata=_option("WORKBENCH_MAX_EDGES", "edges of such a graph"))
    max_devices: int = field(
        default=64, metadata=_option("WORKBENCH_MAX_DEVICES", "devices of a placement, a training run or a calibration")
    )
    max_episodes: int = field(
        default=100_000, metadata=_option("WORKBENCH_MAX_EPISODES", "training episodes of a launched run, all stages together")
    )
    max_count: int = field(
        default=1_000,
        metadata=_option(
            "WORKBENCH_MAX_COUNT", "placements, repeats, search samples and threads of a launched command; workers also at most the cores"
        ),
    )
    max_graphs: int = field(
        default=256, metadata=_option("WORKBENCH_MAX_GRAPHS", "graphs a launched training run trains on, and graphs it evaluates")
    )
    max_work_memory_mb: int = field(
        default=2048,
        metadata=_option(
            "WORKBENCH_MAX_WORK_MEMORY_MB",
            "MiB of memory one computation (a placement, a polish, a drawing, an upload check, a PNG export) may add",
        ),
    )
    max_concurrent: int = field(
        default=2, metadata=_option("WORKBENCH_MAX_CONCURRENT", "placements and generations running at once, all clients together")
    )
    allow_hosts: tuple[str, ...] = field(
        default=(),
        metadata=_option(
            "WORKBENCH_ALLOW_HOSTS", "more names the browser may use in the Host header (beside the bound host and localhost)"
        ),
    )
    allow_oracles: tuple[str, ...] = field(
        default=("sim", "workbench.systems:LocalExecutor", "workbench.systems:SimulatorOracle"),
        metadata=_option("WORKBENCH_ALLOW_ORACLES", "oracle factories (module:factory) a launched training run may use"),
    )
    allow_engine_hosts: tuple[str, ...] = field(
        default=LOCAL_HOSTS, metadata=_option("WORKBENCH_ALLOW_ENGINE_HOSTS", "hosts a launched job may reach with --engine or --address")
    )

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.type in ("int", "float") and not value > 0:
                raise LimitError(f"{_flag(f.name)} must be > 0, got {value!r}")

    # ---------------------------------------------------------- building
    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Limits:
        """Defaults overridden by the ``WORKBENCH_*`` variables that are set (lists comma-separated)."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            text = environ.get(f.metadata["env"])
            if text is not None and text.strip():
                values[f.name] = _parse(f, text, f.metadata["env"])
        return cls(**values)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """``--max-budget N`` ... ``--allow-host NAME`` (repeatable) for every field."""
        group = parser.add_argument_group("limits on what a request may start (see docs/dashboard.md, Limits)")
        for f in dataclasses.fields(cls):
            text = f"{f.metadata['help']} (env {f.metadata['env']}; default {_shown(f.default)})"
            if f.type.startswith("tuple"):
                group.add_argument(
                    _flag(f.name), dest=f.name, action="append", metavar="VALUE", help=text + "; repeatable, adds to the default"
                )
            else:
                group.add_argument(_flag(f.name), dest=f.name, type=str, metavar="N", help=text)

    @classmethod
    def from_arguments(cls, args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Limits:
        """The environment's limits with the command line's on top (list options add to the list)."""
        base = cls.from_env(environ)
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            given = getattr(args, f.name, None)
            if given is None:
                continue
            if f.type.startswith("tuple"):
                values[f.name] = tuple(dict.fromkeys([*getattr(base, f.name), *(v.strip() for v in given if v.strip())]))
            else:
                values[f.name] = _parse(f, given, _flag(f.name))
        return dataclasses.replace(base, **values)

    # ---------------------------------------------------------- checking
    def check_devices(self, devices: int, what: str = "devices") -> int:
        if not 1 <= devices <= self.max_devices:
            raise LimitError(f"{what} must be from 1 to {self.max_devices} (got {devices}; the server's --max-devices)")
        return devices

    def check_graph_size(self, nodes: int, edges: int, what: str = "the graph") -> None:
        """Refuses a graph with more ops or edges than the caps."""
        if nodes > self.max_nodes:
            raise LimitError(f"{what} has {nodes:,} ops; this dashboard places at most {self.max_nodes:,} (the server's --max-nodes)")
        if edges > self.max_edges:
            raise LimitError(f"{what} has {edges:,} edges; this dashboard places at most {self.max_edges:,} (the server's --max-edges)")

    def bound_compare(self, graph: Any, devices: int, budget: int | None, time_limit: float | None) -> tuple[int | None, float | None]:
        """``(budget, time_limit)`` for a Compare request, refused beyond the caps.

        An empty time limit stays empty: no clock, as on the command line (the
        request is still stopped, with a message, after ``max_time_limit``).
        """
        self.check_devices(devices)
        self.check_graph_size(graph.num_nodes, graph.num_edges)
        if budget is not None and not 1 <= budget <= self.max_budget:
            raise LimitError(
                f"the search budget must be from 1 to {self.max_budget:,} evaluations (got {budget:,}; the server's --max-budget)"
            )
        if time_limit is None:
            return budget, None
        if not 0 < time_limit <= self.max_time_limit:
            raise LimitError(
                f"the time limit must be more than 0 and at most {self.max_time_limit:g} s "
                f"(got {time_limit:g}; the server's --max-time-limit)"
            )
        return budget, time_limit

    def check_graph_count(self, flag: str, count: int) -> None:
        """Refuses more than ``max_graphs`` graphs for one Launch argument."""
        if count > self.max_graphs:
            raise LimitError(f"{flag}: at most {self.max_graphs:,} graphs (got {count:,}; the server's --max-graphs)")

    def check_launch_value(self, dest: str, value: str) -> None:
        """Refuses one Launch argument (``dest`` as argparse names it) beyond a cap or off an allow-list.

        A number that does not parse is left to the command's own parser, which says so.
        """
        flag = "--" + dest.replace("_", "-")
        if dest == "devices" and (number := _maybe(value, int)) is not None:
            self.check_devices(number, flag)
        elif dest == "budget" and (number := _maybe(value, int)) is not None:
            if not 1 <= number <= self.max_budget:
                raise LimitError(f"{flag} must be from 1 to {self.max_budget:,} (got {value}; the server's --max-budget)")
        elif dest in ("time_limit", "timeout", "target_seconds") and (number := _maybe(value, float)) is not None:
            if not 0 < number <= self.max_time_limit:
                raise LimitError(
                    f"{flag} must be more than 0 and at most {self.max_time_limit:g} s (got {value}; the server's --max-time-limit)"
                )
        elif dest == "episodes":
            counts = [_maybe(part, int) for part in value.split(",")]
            if None not in counts and (any(c < 0 for c in counts) or sum(counts) > self.max_episodes):
                raise LimitError(
                    f"{flag}: at most {self.max_episodes:,} episodes in all stages together (got {value}; the server's --max-episodes)"
                )
        elif dest in COUNT_ARGUMENTS and (number := _maybe(value, int)) is not None:
            most = min(self.max_count, os.cpu_count() or 1) if dest == "workers" else self.max_count
            if not 1 <= number <= most:
                reason = "the server's --max-count" + (" and its cores" if dest == "workers" else "")
                raise LimitError(f"{flag} must be from 1 to {most:,} (got {value}; {reason})")
        elif dest == "oracle":
            if value not in self.allow_oracles:
                raise LimitError(
                    f"{flag} {value!r} is not allowed; this dashboard allows {', '.join(self.allow_oracles)} (the server's --allow-oracles)"
                )
        elif dest in ("engine", "address") and value not in ("serial", "local", "ray", "auto"):
            host = _host_of(value)
            if host is None:
                raise LimitError(f"{flag} {value!r} is not an address (HOST:PORT, [v6]:PORT or ray://HOST:PORT)")
            if host not in self.allow_engine_hosts:
                raise LimitError(
                    f"{flag} {value!r}: host {host!r} is not allowed; "
                    f"this dashboard allows {', '.join(self.allow_engine_hosts)} (the server's --allow-engine-hosts)"
                )

    def trusted_hosts(self, bound_host: str | None = None) -> list[str]:
        """The names a browser may send in the Host header: localhost, the bound host (unless a wildcard) and ``allow_hosts``."""
        names = [*LOCAL_HOSTS, *self.allow_hosts]
        if bound_host and bound_host not in ("0.0.0.0", "::", ""):
            names.append(bound_host)
        return list(dict.fromkeys(_canonical(name) for name in names))

    def host_allowed(self, headers: list[str], bound_host: str | None = None) -> bool:
        """True when the request's ``Host`` headers are one header (``name``, ``name:port``, ``[v6]:port``, parsed strictly by
        :func:`parse_host`) naming a trusted host (DNS rebinding defence)."""
        if len(headers) != 1:
            return False
        host = parse_host(headers[0])
        return host is not None and host in self.trusted_hosts(bound_host)


COUNT_ARGUMENTS = ("placements", "repeats", "samples", "search_samples", "selection_samples", "rollouts_per_update", "threads", "workers")
"""Launch arguments that multiply a command's work, capped by ``max_count`` (``workers`` also by the cores)."""


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _shown(default: Any) -> str:
    if default == ():
        return "none"
    return ",".join(default) if isinstance(default, tuple) else f"{default:g}" if isinstance(default, float) else str(default)


def _parse(f: dataclasses.Field, text: str, where: str) -> Any:
    if f.type.startswith("tuple"):
        return tuple(part.strip() for part in text.split(",") if part.strip())
    return _number(text, where, int if f.type == "int" else float)


def _number(text: str, where: str, kind: type) -> Any:
    try:
        value = kind(str(text).strip())
    except ValueError:
        raise LimitError(f"{where}: {text!r} is not {'a whole number' if kind is int else 'a number'}") from None
    if kind is float and not abs(value) < float("inf"):
        raise LimitError(f"{where}: {text!r} is not a finite number")
    return value


def _maybe(text: str, kind: type) -> Any:
    """``kind(text)``, or ``None`` when it does not parse."""
    try:
        return kind(str(text).strip())
    except ValueError:
        return None


_PORT = r"(?::[0-9]{1,5})?"
_HOST_FORMS = (
    re.compile(r"\[([0-9A-Fa-f:.]+)\]" + _PORT),  # [v6] or [v6]:port
    re.compile(r"([A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?)" + _PORT),  # a name or IPv4 address, then :port
)


def parse_host(text: str | None) -> str | None:
    """The host named by ``HOST``, ``HOST:PORT`` or ``[v6]:PORT`` (lower case), ``None`` when the text is anything else.

    Strict (RFC 3986's ``host [":" port]``): a second ``:``, a ``@``, a comma (two Host headers joined) or any other
    character makes it ``None``, so ``127.0.0.1:8097@evil.example.com`` or ``localhost:evil.example.com`` names no host.
    """
    if text is None:
        return None
    for form in _HOST_FORMS:
        match = form.fullmatch(text)
        if match:
            host = match[1]
            try:
                return str(ipaddress.ip_address(host))
            except ValueError:
                return None if form is _HOST_FORMS[0] else host.lower()
    return None


def _canonical(name: str) -> str:
    """A host name in lower case, an IP address in its standard form (``::1``, not ``0::1``)."""
    try:
        return str(ipaddress.ip_address(name.strip("[]")))
    except ValueError:
        return name.lower()


def _host_of(address: str) -> str | None:
    """The host of ``HOST:PORT``, ``[v6]:PORT``, ``ray://HOST:PORT`` or a bare host (lower case), ``None`` when malformed."""
    scheme, sep, rest = address.strip().partition("://")
    return parse_host((rest if sep else scheme).split("/", 1)[0])
