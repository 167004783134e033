"""Attach the programs on tc clsact hooks through netlink (pyroute2).

Our filters are told apart by their priority (HOOK_PRIO, REFLECT_PRIO) and a name that carries
the program version; filters of other owners on the same hooks are left alone. The monitor's
programs pass packets on (TC_ACT_UNSPEC), so the in-kernel reflector, a priority later on the
same ingress hook, sees a probe after it was counted.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netlink.rtnl import TC_H_CLSACT

from .bpftool import obj_get

HOOK_PRIO = 0x5336
REFLECT_PRIO = HOOK_PRIO + 1
INGRESS_PARENT = 0xFFFFFFF2  # TC_H_CLSACT | TC_H_MIN_INGRESS
EGRESS_PARENT = 0xFFFFFFF3  # TC_H_CLSACT | TC_H_MIN_EGRESS
ETH_P_ALL = 0x0003


MARK = "srv6pm_mark"  # egress of an ingress node: marks and counts
COUNT = "srv6pm_count"  # ingress of transit and egress nodes: counts
GUARD = "srv6pm_guard"  # ingress at the domain boundary: neutralises foreign marks
PROGRAMS = (MARK, COUNT, GUARD)
REFLECT = "srv6pm_reflect"  # ingress of a reflector node: the in-kernel STAMP reflector


@dataclass(frozen=True)
class Hook:
    ifname: str
    program: str  # one of PROGRAMS, or REFLECT

    @property
    def egress(self) -> bool:
        return self.program == MARK

    @property
    def prio(self) -> int:
        return REFLECT_PRIO if self.program == REFLECT else HOOK_PRIO

    @property
    def parent(self) -> int:
        return EGRESS_PARENT if self.egress else INGRESS_PARENT


class Hooks:
    def __init__(self, ipr: IPRoute) -> None:
        self._ipr = ipr

    def index(self, ifname: str) -> int | None:
        """The interface's index, or None when there is no such interface."""
        found = self._ipr.link_lookup(ifname=ifname)
        return int(found[0]) if found else None

    def attached(self, hook: Hook) -> str | None:
        """Name of our filter on `hook`, or None."""
        index = self.index(hook.ifname)
        if index is None:
            return None
        try:
            filters = self._ipr.get_filters(index=index, parent=hook.parent)
        except NetlinkError:
            return None
        for f in filters:
            if (f["info"] >> 16) == hook.prio and f.get("kind") == "bpf":
                options: Any = f.get("options")
                name = options.get("TCA_BPF_NAME") if options else None
                if name:
                    return str(name)
        return None

    def attach(self, hook: Hook, program: Path, name: str) -> None:
        """Attach (or atomically replace) our filter on `hook` with the pinned `program`."""
        index = self.index(hook.ifname)
        if index is None:
            raise ValueError(f"interface {hook.ifname!r} does not exist")
        try:
            self._ipr.tc("add", "clsact", index)
        except NetlinkError as e:
            if e.code != errno.EEXIST:
                raise
        fd = obj_get(program)
        try:
            self._ipr.tc(
                "replace-filter",
                "bpf",
                index,
                handle=1,
                fd=fd,
                name=name,
                parent=hook.parent,
                prio=hook.prio,
                protocol=ETH_P_ALL,
                classid=1,
                direct_action=True,
            )
        finally:
            os.close(fd)

    def detach(self, hook: Hook) -> None:
        index = self.index(hook.ifname)
        if index is None:
            return
        try:
            self._ipr.tc(
                "del-filter",
                "bpf",
                index,
                handle=1,
                parent=hook.parent,
                prio=hook.prio,
                protocol=ETH_P_ALL,
            )
        except NetlinkError as e:
            if e.code not in (errno.ENOENT, errno.EINVAL):
                raise


assert TC_H_CLSACT == 0xFFFFFFF1
