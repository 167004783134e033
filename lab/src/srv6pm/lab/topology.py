"""Lab topology: the YAML schema (pydantic models), its validation and derived facts.

The schema is documented at the top of ``topologies/default.yaml``.
"""

from __future__ import annotations

import io
import ipaddress
from collections import deque
from importlib import resources
from ipaddress import IPv6Address, IPv6Interface, IPv6Network
from pathlib import Path
from typing import Annotated, Any, Literal, Self

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PrivateAttr,
    StringConstraints,
    ValidationError,
    model_validator,
)

from .errors import LabError

IFNAMSIZ = 15  # longest Linux interface name (IFNAMSIZ - 1)

NodeName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,14}$")]
Prefix = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_-]{0,31}$")]


class TopologyError(LabError):
    """The topology file is missing, not YAML, or does not follow the schema."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Route(_Model):
    """A static route: ``dst`` via the on-link neighbour address ``via``."""

    dst: IPv6Network
    via: IPv6Address


class Router(_Model):
    """An SRv6 router; it gets one node manager listening on 127.0.0.1:``grpc_port``.

    ``driver`` is its data plane: ``linux`` (the kernel forwards) or ``vpp`` (a VPP process in
    the router's namespace drives its veths; see :mod:`srv6pm.lab.vpp_routers`)."""

    grpc_port: int = Field(ge=1, le=65535)
    driver: Literal["linux", "vpp"] = "linux"
    locator: IPv6Network | None = None
    routes: list[Route] = []


class Host(_Model):
    """An end host; its default route points at the router on its first router link."""

    routes: list[Route] = []


class Link(_Model):
    """A veth pair: node name -> that end's ``address/prefixlen`` (exactly two ends), and the
    MTU of both ends (the kernel's default when not given)."""

    ends: dict[NodeName, IPv6Interface]
    mtu: int | None = Field(default=None, ge=1280, le=65535)

    @model_validator(mode="after")
    def _two_ends(self) -> Self:
        if len(self.ends) != 2:
            raise ValueError(f"a link has exactly two ends, got {len(self.ends)}")
        a, b = self.ends.values()
        if a.network != b.network:
            raise ValueError(f"ends are in different subnets: {a} and {b}")
        if a.ip == b.ip:
            raise ValueError(f"both ends have address {a.ip}")
        return self


class Role(_Model):
    """Informational: which router plays which monitoring role for the flow src -> dst."""

    src: NodeName
    dst: NodeName
    ingress: NodeName
    transit: list[NodeName] = []
    egress: NodeName


class Topology(_Model):
    """A lab topology. Build it with :meth:`load` (file path or shipped name) or :meth:`parse`."""

    name: Prefix
    period_s: PositiveFloat = 10.0
    routers: dict[NodeName, Router]
    hosts: dict[NodeName, Host] = {}
    links: list[Link]
    roles: list[Role] = []

    _source: Path | None = PrivateAttr(default=None)

    # --- loading -------------------------------------------------------------------------

    @classmethod
    def load(cls, path_or_name: str | Path) -> Topology:
        """Load a topology from a YAML file, or a shipped one by name (e.g. ``"default"``)."""
        path = resolve_topology_path(path_or_name)
        try:
            text = path.read_text()
        except OSError as e:
            raise TopologyError(f"cannot read {path}: {e.strerror}") from e
        return cls.parse(text, source=path)

    @classmethod
    def parse(cls, text: str, source: Path | None = None) -> Topology:
        """Parse and validate YAML text; raises :class:`TopologyError` with a readable message."""
        where = str(source) if source else "<topology>"
        try:
            stream = io.StringIO(text)
            stream.name = where  # PyYAML quotes it in error marks
            data = yaml.load(stream, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
        except yaml.YAMLError as e:
            raise TopologyError(f"{where}: invalid YAML: {e}") from e
        if not isinstance(data, dict):
            raise TopologyError(f"{where}: the top level must be a mapping")
        try:
            topo = cls.model_validate(data)
        except ValidationError as e:
            raise TopologyError(f"{where}: invalid topology:\n{_format_errors(e)}") from e
        topo._source = source
        return topo

    @property
    def source(self) -> Path | None:
        """The file this topology was loaded from, if any."""
        return self._source

    # --- validation across fields --------------------------------------------------------

    @model_validator(mode="after")
    def _check(self) -> Self:
        errors: list[str] = []
        for name in self.routers.keys() & self.hosts.keys():
            errors.append(f"duplicate node name {name!r} (both a router and a host)")
        nodes = self.nodes
        pairs: set[frozenset[str]] = set()
        addresses: dict[IPv6Address, str] = {}
        for i, link in enumerate(self.links):
            for node, addr in link.ends.items():
                if node not in nodes:
                    errors.append(f"links.{i}: unknown node {node!r}")
                if addr.ip in addresses:
                    errors.append(
                        f"links.{i}: address {addr.ip} already used by {addresses[addr.ip]}"
                    )
                addresses[addr.ip] = node
            pair = frozenset(link.ends)
            if pair in pairs:
                errors.append(f"links.{i}: duplicate link between {' and '.join(sorted(pair))}")
            pairs.add(pair)
        ports: dict[int, str] = {}
        for name, router in self.routers.items():
            if router.grpc_port in ports:
                errors.append(
                    f"routers.{name}: grpc_port {router.grpc_port} already used by "
                    f"{ports[router.grpc_port]}"
                )
            ports[router.grpc_port] = name
        locators = [(n, r.locator) for n, r in self.routers.items() if r.locator is not None]
        for i, (n1, l1) in enumerate(locators):
            for n2, l2 in locators[i + 1 :]:
                if l1.overlaps(l2):
                    errors.append(f"routers.{n2}: locator {l2} overlaps {n1}'s {l1}")
        for node in nodes:
            ifnames: dict[str, str] = {}
            for peer in self.peers(node):
                ifname = interface_name(node, peer)
                if ifname in ifnames:
                    errors.append(
                        f"{node}: interface name {ifname!r} (truncated to {IFNAMSIZ} "
                        f"chars) clashes for peers {ifnames[ifname]} and {peer}"
                    )
                ifnames[ifname] = peer
        for host in self.hosts:
            if not any(p in self.routers for p in self.peers(host)):
                errors.append(f"hosts.{host}: not linked to any router")
        errors += self._check_roles()
        if errors:
            raise ValueError("\n  - ".join(errors))
        return self

    def _check_roles(self) -> list[str]:
        errors = []
        for i, role in enumerate(self.roles):
            for field in ("src", "dst"):
                if getattr(role, field) not in self.nodes:
                    errors.append(f"roles.{i}.{field}: unknown node {getattr(role, field)!r}")
            for router in [role.ingress, *role.transit, role.egress]:
                if router not in self.routers:
                    errors.append(f"roles.{i}: unknown router {router!r}")
        return errors

    # --- derived facts -------------------------------------------------------------------

    @property
    def nodes(self) -> list[str]:
        """All node names: routers in YAML order, then hosts."""
        return [*self.routers, *self.hosts]

    @property
    def vpp_routers(self) -> list[str]:
        """The routers whose data plane is VPP, in YAML order."""
        return [name for name, router in self.routers.items() if router.driver == "vpp"]

    def is_vpp(self, node: str) -> bool:
        """True if ``node`` is a router whose data plane is VPP."""
        router = self.routers.get(node)
        return router is not None and router.driver == "vpp"

    def mtu(self, node: str, peer: str) -> int | None:
        """The MTU of the link between ``node`` and ``peer`` (None: the kernel's default)."""
        for link in self.links:
            if node in link.ends and peer in link.ends:
                return link.mtu
        raise LabError(f"no link between {node} and {peer}")

    def peers(self, node: str) -> list[str]:
        """The nodes linked to ``node``, in link order."""
        return [p for link in self.links if node in link.ends for p in link.ends if p != node]

    def address(self, node: str, peer: str) -> IPv6Interface:
        """The address of ``node``'s end of the link to ``peer``."""
        for link in self.links:
            if node in link.ends and peer in link.ends:
                return link.ends[node]
        raise LabError(f"no link between {node} and {peer}")

    def routes(self, node: str) -> list[Route]:
        """Static routes to install on ``node``.

        Routers reach every other router's locator via the next hop of a shortest router-only
        path (ties broken by link order); hosts get a default route via their first router.
        Explicit ``routes`` from the YAML come last.
        """
        if node in self.hosts:
            gw = next(p for p in self.peers(node) if p in self.routers)
            default = Route(dst=IPv6Network("::/0"), via=self.address(gw, node).ip)
            return [default, *self.hosts[node].routes]
        first_hop = self._first_hops(node)
        out = []
        for name, router in self.routers.items():
            if name != node and router.locator is not None and name in first_hop:
                hop = first_hop[name]
                out.append(Route(dst=router.locator, via=self.address(hop, node).ip))
        return [*out, *self.routers[node].routes]

    def _first_hops(self, src: str) -> dict[str, str]:
        """Router -> the neighbour of ``src`` on a shortest router-only path to it (BFS)."""
        first: dict[str, str] = {}
        queue = deque([src])
        seen = {src}
        while queue:
            cur = queue.popleft()
            for peer in self.peers(cur):
                if peer in self.routers and peer not in seen:
                    seen.add(peer)
                    first[peer] = peer if cur == src else first[cur]
                    queue.append(peer)
        return first


def interface_name(node: str, peer: str) -> str:
    """Name of ``node``'s interface toward ``peer``: ``<node>-<peer>`` cut to 15 characters."""
    return f"{node}-{peer}"[:IFNAMSIZ]


def shipped_topologies() -> list[str]:
    """Names of the topologies shipped with the package."""
    folder = resources.files("srv6pm.lab") / "topologies"
    return sorted(
        p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml")
    )


def resolve_topology_path(path_or_name: str | Path) -> Path:
    """A file path as is, else the shipped topology of that name (``default``, ``default.yaml``)."""
    path = Path(path_or_name)
    if path.is_file():
        return path
    name = str(path_or_name).removesuffix(".yaml")
    if "/" not in name and name in shipped_topologies():
        return Path(str(resources.files("srv6pm.lab") / "topologies" / f"{name}.yaml"))
    raise TopologyError(
        f"no such topology file or shipped topology: {str(path_or_name)!r} "
        f"(shipped: {', '.join(shipped_topologies())})"
    )


def parse_ipv6_dst(value: str) -> IPv6Address | IPv6Network:
    """An IPv6 address or prefix (for drop rules); raises :class:`LabError` if neither."""
    try:
        return IPv6Address(value) if "/" not in value else IPv6Network(value, strict=False)
    except ipaddress.AddressValueError as e:
        raise LabError(f"not an IPv6 address or prefix: {value!r}") from e
    except ValueError as e:
        raise LabError(f"not an IPv6 address or prefix: {value!r} ({e})") from e


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys (plain PyYAML keeps the last one)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:  # unhashable key: let PyYAML report it
                continue
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _format_errors(e: ValidationError) -> str:
    lines = []
    for err in e.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if loc:
            msg = f"{loc}: {msg}"
        if err["type"] not in ("value_error", "missing") and "input" in err:
            msg += f" (got {err['input']!r})"
        lines.append(f"  - {msg}")
    return "\n".join(lines)
