"""The in-kernel STAMP Session-Reflector (bpf/reflector.c): loads and pins its program, writes
its configuration and the node's decapsulating SIDs, and reads its statistics.

The program answers unauthenticated 44-octet probes in place; everything else passes up to the
userspace reflector unchanged, so this only ever takes work off it.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import ipaddress
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from srv6pm.twamp.timestamps import TAI_UTC_OFFSET_S
from srv6pm.twamp.tlv import ReturnPath, encode_tlv

from ...domain.errors import FailedPrecondition
from ...domain.model import KernelReflection
from .bpftool import (
    Bpftool,
    ensure_bpffs,
    entries,
    hexbytes,
    lookup,
    possible_cpus,
    read_array,
    update,
)
from .hooks import REFLECT, Hook, Hooks
from .maps import CStruct

PROGRAM = "srv6pm_reflect"
CONFIG = "srv6pm_reflector_config"
DECAP = "srv6pm_reflector_decap"
SEQUENCES = "srv6pm_reflector_seq"
STATS = "srv6pm_reflector_stats"
BLOCKS = "srv6pm_reflector_blocks"
PATHS = "srv6pm_reflector_paths"
# the maps a restart reuses (srv6pm_reflector_scratch, per packet, starts anew)
ALL_MAPS = (CONFIG, DECAP, SEQUENCES, STATS, BLOCKS, PATHS)
# The maps' keys and values, as reflector.c lays them out (tests/test_contract_btf.py holds them
# against its BTF). Port and Error Estimate are in network order.
CONFIG_VALUE = CStruct(
    "reflector_config",
    [
        ("address", "16s"),
        ("tai_offset_ns", "Q"),
        ("period_ns", "Q"),
        ("ptp_offset_ns", "Q"),
        ("allowed_dscp", "Q"),
        ("port", "2s"),
        ("error_estimate", "2s"),
        ("enabled", "B"),
        ("stateful", "B"),
        ("pad", "2x"),
        ("reply_mark_base", "I"),
        ("pad2", "4x"),
    ],
)
ANY_DSCP = (1 << 64) - 1
# the blocks of slots 0 and 1, their forward and reverse counts
BLOCK_COUNTS = CStruct("block_counts", [("block", "2Q"), ("rx", "2I"), ("tx", "2I")])
# the sequence counters' key and the return paths' key: sender address, SSID (network order)
SESSION_KEY = CStruct("sequence_key", [("sender", "16s"), ("ssid", "2s"), ("pad", "2x")])
MAX_RETURN_PATH_LEN = 4 + 16 * 16
TLV_HLEN = 4
RETURN_PATH = CStruct("return_path", [("len", "I"), ("value", f"{MAX_RETURN_PATH_LEN}s")])
INDEX = struct.Struct("<I")  # the arrays' keys
SID = struct.Struct("<16s")  # srv6pm_reflector_decap's keys
PRESENT = struct.Struct("<B")  # and values
SEQUENCE = struct.Struct("<I")  # srv6pm_reflector_seq's values
SSID_KEY = struct.Struct("<I")  # srv6pm_reflector_blocks's keys (host order)
STAT = struct.Struct("<Q")  # srv6pm_reflector_stats's values (per CPU)


class Stat(enum.IntEnum):
    """Indexes of srv6pm_reflector_stats (enum reflector_stat in reflector.c)."""

    REFLECTED = 0
    PASSED_LENGTH = 1
    PASSED_HEADERS = 2
    PASSED_DISABLED = 3
    FAILED = 4
    PASSED_TLV = 5
    PASSED_COUNTS = 6
    PASSED_RETURN_PATH = 7
    PASSED_TIMESTAMP = 8


@dataclass(frozen=True)
class KernelReflectorConfig:
    address: str
    port: int = 862
    error_estimate: int = 0  # raw 16 bits (RFC 8762 section 4.2.1)
    stateful: bool = False
    tai_offset_ns: int = 0  # CLOCK_TAI - CLOCK_REALTIME
    period_ns: int = 0  # the marking period (0: no Direct Measurement in the kernel)
    enabled: bool = True
    allowed_dscp: tuple[int, ...] = ()  # Class of Service DSCP1 replies may take; (): any
    reply_mark_base: int = 0  # declared return paths' replies carry this + SSID


def _hooks(interfaces: Iterable[str]) -> list[Hook]:
    return [Hook(i, REFLECT) for i in sorted(interfaces) if i != "lo"]


def default_object() -> Path:
    return Path(str(resources.files("srv6pm.node_manager") / "bpf" / "reflector.o"))


def encode_config(config: KernelReflectorConfig) -> bytes:
    return CONFIG_VALUE.pack(
        ipaddress.IPv6Address(config.address).packed,
        config.tai_offset_ns,
        config.period_ns,
        TAI_UTC_OFFSET_S * 1_000_000_000,  # as the userspace reflector's PTP timestamps count
        sum(1 << d for d in config.allowed_dscp) if config.allowed_dscp else ANY_DSCP,
        config.port.to_bytes(2, "big"),
        config.error_estimate.to_bytes(2, "big"),
        int(config.enabled),
        int(config.stateful),
        config.reply_mark_base,
    )


class KernelReflector:
    """The program pinned under `bpf_dir`/reflector: maps in maps/, the program in
    progs/<version of the object>/ (a new object loads beside the old one)."""

    def __init__(
        self,
        bpf_dir: Path,
        bpf_object: Path | None = None,
        bpftool: Bpftool | None = None,
        hooks: Hooks | None = None,
    ) -> None:
        obj = bpf_object or default_object()
        if not obj.exists():
            raise FailedPrecondition(f"eBPF object {obj} is missing: run `make bpf`")
        version = hashlib.sha256(obj.read_bytes()).hexdigest()[:12]
        self._name = f"{PROGRAM}_{version}"
        self._hooks = hooks
        self._hooked: set[int] = set()  # indexes of the interfaces it was hooked on
        self._config: KernelReflectorConfig | None = None
        self._maps_dir = bpf_dir / "reflector" / "maps"
        self._progs_dir = bpf_dir / "reflector" / "progs" / version
        self._tool = bpftool or Bpftool()
        ensure_bpffs(bpf_dir)
        if not (self._progs_dir / PROGRAM).exists():
            self._load(obj)

    @property
    def program(self) -> Path:
        """The pinned program, for a tc hook."""
        return self._progs_dir / PROGRAM

    def _load(self, obj: Path) -> None:
        self._maps_dir.mkdir(parents=True, exist_ok=True)
        self._progs_dir.parent.mkdir(parents=True, exist_ok=True)
        args = ["prog", "loadall", str(obj), str(self._progs_dir), "type", "classifier"]
        if all((self._maps_dir / m).exists() for m in ALL_MAPS):
            for m in ALL_MAPS:  # a restart reuses the sequence counters and statistics
                args += ["map", "name", m, "pinned", str(self._maps_dir / m)]
        else:
            args += ["pinmaps", str(self._maps_dir)]
        self._tool.run(*args)

    def apply(
        self, reflection: KernelReflection | None, interfaces: Iterable[str], tai_offset_ns: int
    ) -> None:
        """Answer as `reflection` says on the ingress of every interface (None: pass all up)."""
        assert self._hooks is not None, "apply needs hooks"
        self._hooked.clear()  # every interface is checked again
        if reflection is None:
            self.configure(KernelReflectorConfig("::", enabled=False))
            for hook in _hooks(interfaces):
                self._hooks.detach(hook)
            return
        self.configure(
            KernelReflectorConfig(
                reflection.address,
                reflection.port,
                reflection.error_estimate,
                reflection.stateful,
                tai_offset_ns,
                reflection.period_ns,
                allowed_dscp=reflection.allowed_dscp,
                reply_mark_base=reflection.reply_mark_base,
            )
        )
        self.set_decap_sids(reflection.decap_sids)
        self.set_return_paths(
            {
                (sender, ssid): encode_tlv(ReturnPath(segments=segments))[TLV_HLEN:]
                for sender, ssid, segments in reflection.return_paths
            }
        )
        self.hook(interfaces)

    def hook(self, interfaces: Iterable[str]) -> None:
        """The program on the ingress of each of `interfaces` not seen since the last apply,
        while it answers: interfaces that appeared since (a new link, a peer's veth made
        again) get it too. One an operator took it off stays so until the next apply."""
        if self._hooks is None or self._config is None or not self._config.enabled:
            return
        for hook in _hooks(interfaces):
            index = self._hooks.index(hook.ifname)
            if index is None or index in self._hooked:
                continue
            if self._hooks.attached(hook) != self._name:
                try:
                    self._hooks.attach(hook, self.program, self._name)
                except ValueError:
                    continue  # gone since it was listed
            self._hooked.add(index)

    def configure(self, config: KernelReflectorConfig) -> None:
        value = encode_config(config)
        self._tool.run(*self._update(CONFIG, INDEX.pack(0), value))
        self._config = config

    def refresh_offset(self, tai_offset_ns: int) -> None:
        """Rewrite the configuration if the TAI-UTC offset moved (a leap second, a time daemon
        that set it after the start): T2 and T3 are CLOCK_TAI less it."""
        config = self._config
        if config is not None and config.enabled and config.tai_offset_ns != tai_offset_ns:
            self.configure(dataclasses.replace(config, tai_offset_ns=tai_offset_ns))

    def set_decap_sids(self, sids: Iterable[str]) -> None:
        """The node's End.DT6 SIDs: probes encapsulated for them are this node's."""
        wanted = {SID.pack(ipaddress.IPv6Address(s).packed) for s in sids}
        held = set(entries(self._maps_dir / DECAP, SID.size, PRESENT.size))
        commands = [
            ["map", "delete", "pinned", str(self._maps_dir / DECAP), "key", "hex", *hexbytes(k)]
            for k in held - wanted
        ]
        commands += [self._update(DECAP, k, PRESENT.pack(1)) for k in wanted - held]
        self._tool.batch(commands)

    def set_return_paths(self, paths: Mapping[tuple[str, int], bytes]) -> None:
        """The Return Path TLV value each (sender address, SSID) may send: the declared path."""
        wanted = {
            SESSION_KEY.pack(ipaddress.IPv6Address(sender).packed, ssid.to_bytes(2, "big")): value
            for (sender, ssid), value in paths.items()
        }
        target = self._maps_dir / PATHS
        held = set(entries(target, SESSION_KEY.size, RETURN_PATH.size))
        commands = [
            ["map", "delete", "pinned", str(target), "key", "hex", *hexbytes(k)]
            for k in held - set(wanted)
        ]
        commands += [self._update(PATHS, k, RETURN_PATH.pack(len(v), v)) for k, v in wanted.items()]
        self._tool.batch(commands)

    def publish_block(self, block: int, counts: Mapping[int, tuple[int, int]]) -> None:
        """Sessions' counts at this node of a closed block: SSID -> (forward, reverse)."""
        commands = []
        for ssid, (rx, tx) in counts.items():
            key = SSID_KEY.pack(ssid)
            held = lookup(self._maps_dir / BLOCKS, key, BLOCK_COUNTS.size)
            blocks, rxs, txs = [0, 0], [0, 0], [0, 0]
            if held:
                b0, b1, r0, r1, t0, t1 = BLOCK_COUNTS.unpack(held)
                blocks, rxs, txs = [b0, b1], [r0, r1], [t0, t1]
            slot = block & 1
            blocks[slot], rxs[slot], txs[slot] = block, rx & 0xFFFFFFFF, tx & 0xFFFFFFFF
            value = BLOCK_COUNTS.pack(*blocks, *rxs, *txs)
            commands.append(self._update(BLOCKS, key, value))
        self._tool.batch(commands)

    def next_sequence(self, sender: str, ssid: int) -> int:
        """The next stateful sequence number of (sender, SSID), from the counter the program
        uses: the userspace reflector answers some of a session's probes and the kernel the
        others, and the sender must see one sequence."""
        key = SESSION_KEY.pack(ipaddress.IPv6Address(sender).packed, ssid.to_bytes(2, "big"))
        held = lookup(self._maps_dir / SEQUENCES, key, SEQUENCE.size)
        seq: int = SEQUENCE.unpack(held)[0] if held else 0
        update(self._maps_dir / SEQUENCES, key, SEQUENCE.pack((seq + 1) & 0xFFFFFFFF))
        return seq

    def stats(self) -> dict[str, int]:
        """What the program did, summed over CPUs."""
        cpus = possible_cpus()
        raw = read_array(self._maps_dir / STATS, len(Stat), STAT.size, per_cpu=True)
        return {
            stat.name.lower(): sum(
                STAT.unpack_from(raw, (stat * cpus + c) * STAT.size)[0] for c in range(cpus)
            )
            for stat in Stat
        }

    def _update(self, name: str, key: bytes, value: bytes) -> list[str]:
        target = ["map", "update", "pinned", str(self._maps_dir / name)]
        return [*target, "key", "hex", *hexbytes(key), "value", "hex", *hexbytes(value)]
