"""Exact loss injection with nftables.

A rule ``oifname IF [ip6 daddr DST] limit rate 1/day burst K packets counter drop`` in the forward
hook drops exactly the first K matching packets: the kernel's packet token bucket starts full
with K tokens and refills one token per day. This was checked with K = 1, 2, 3, 5, 7, 10, 100 and
1000 (counter == K and the receiver got N - K every time); without ``burst`` the default burst is
5, and a faster rate (e.g. 1/second) refills during the test and drops more than K.

The forward hook also sees SRv6 traffic, with the outer destination = the active SID: on the
ingress router after H.Encaps (first SID), on a transit router after End (next SID). The
counter counts skbs, so it is exact for traffic the kernel does not aggregate (GRO is off for
forwarded UDP on veth by default).

A VPP router's packets never meet the kernel's forward hook: VPP forwards them and sends them
through af_packet on the veth. There the same rule sits in a netdev egress chain of that veth
(:func:`add_egress_rule_script`), which sees them because VPP's af_packet goes through the
qdisc layer (``qdisc-bypass-disable``). It cannot ``drop``: af_packet treats a packet dropped on
transmit as congestion and sends the same frame again at its next send, so the packets would
come late, not go missing. It forwards them instead (``fwd``) to a veth of the namespace whose
far end is down (``drop_sink``, made by the lab for every VPP router), where they are gone.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from ipaddress import IPv6Address, IPv6Network
from typing import Any

TABLE = "srv6pm_lab"
CHAIN = "forward"
EGRESS_CHAIN = "egress-"  # + the veth's name: the netdev chain of a veth VPP sends on
IPV6_HEADER = 40
MAX_COUNT = 100_000  # (burst + 1) * ns-per-day (8.64e13) must fit the kernel's s64 tokens


@dataclass(frozen=True)
class DropRule:
    """One loss-injection rule; ``dropped`` is the rule's counter when it was read."""

    node: str
    handle: int
    interface: str
    count: int
    dst: str | None = None
    dropped: int = 0


def add_rule_script(
    interface: str,
    count: int,
    dst: IPv6Address | IPv6Network | None,
    min_length: int | None = None,
    every: int | None = None,
) -> str:
    """The ``nft -f`` script that creates the table/chain if needed and appends one drop rule.
    ``min_length`` spares shorter packets (e.g. a TCP handshake, to drop data segments only);
    ``every`` drops only each n-th matching packet (TCP recovers from spread losses quickly,
    from a burst only after timeouts)."""
    match = f'oifname "{interface}"'
    if dst is not None:
        match += f" ip6 daddr {dst}"
    if min_length is not None:
        match += f" meta length >= {min_length}"
    if every is not None:
        match += f" numgen inc mod {every} == {every - 1}"
    return (
        f"add table ip6 {TABLE}\n"
        f"add chain ip6 {TABLE} {CHAIN} "
        "{ type filter hook forward priority filter; policy accept; }\n"
        f"add rule ip6 {TABLE} {CHAIN} {match} "
        f"limit rate 1/day burst {count} packets counter drop\n"
    )


def add_egress_rule_script(
    interface: str,
    count: int,
    dst: IPv6Address | IPv6Network | None,
    min_length: int | None = None,
    every: int | None = None,
    sink: str = "drop_sink",
) -> str:
    """As :func:`add_rule_script`, for the packets a VPP router sends on ``interface``: a rule
    in that veth's netdev egress chain that sends the first ``count`` matching packets to
    ``sink`` (see the module's docstring)."""
    match = "meta protocol ip6"
    if dst is not None:
        match += f" ip6 daddr {dst}"
    if min_length is not None:  # the payload length: at egress `meta length` counts Ethernet's
        match += f" ip6 length >= {max(0, min_length - IPV6_HEADER)}"
    if every is not None:
        match += f" numgen inc mod {every} == {every - 1}"
    chain = f"{EGRESS_CHAIN}{interface}"
    return (
        f"add table netdev {TABLE}\n"
        f"add chain netdev {TABLE} {chain} "
        f'{{ type filter hook egress device "{interface}" priority filter; policy accept; }}\n'
        f"add rule netdev {TABLE} {chain} {match} "
        f'limit rate 1/day burst {count} packets counter fwd to "{sink}"\n'
    )


def parse_echo_handle(output: str) -> int:
    """The handle of the rule in ``nft --echo --handle`` output."""
    handles = re.findall(r"^add rule .*# handle (\d+)$", output, re.MULTILINE)
    if not handles:
        raise ValueError(f"no rule handle in nft output: {output!r}")
    return int(handles[-1])


def parse_rules(node: str, listing: str) -> dict[int, DropRule]:
    """Drop rules (by handle) from ``nft -j list table ip6 srv6pm_lab`` output, or from
    ``nft -j list table netdev srv6pm_lab`` (the egress chains of a VPP router's veths)."""
    rules: dict[int, DropRule] = {}
    for item in json.loads(listing).get("nftables", []):
        rule = item.get("rule")
        if rule is None:
            continue
        chain = str(rule.get("chain", ""))
        fields: dict[str, Any] = {
            "interface": chain.removeprefix(EGRESS_CHAIN) if chain.startswith(EGRESS_CHAIN) else "",
            "count": 0,
            "dst": None,
            "dropped": 0,
        }
        for expr in rule["expr"]:
            if "match" in expr:
                left, right = expr["match"]["left"], expr["match"]["right"]
                if left.get("meta", {}).get("key") == "oifname":
                    fields["interface"] = right
                elif left.get("payload", {}).get("field") == "daddr":
                    fields["dst"] = (
                        f"{right['prefix']['addr']}/{right['prefix']['len']}"
                        if isinstance(right, dict)
                        else str(right)
                    )
            elif "limit" in expr:
                fields["count"] = expr["limit"].get("burst", 0)
            elif "counter" in expr:
                fields["dropped"] = expr["counter"]["packets"]
        rules[rule["handle"]] = DropRule(node=node, handle=rule["handle"], **fields)
    return rules
