"""NodeService over an in-memory driver: diffing, idempotence and the block read window.
The same behaviours are tested against the real kernel driver in tests/ (lab)."""

import itertools
import socket
from dataclasses import dataclass, field, replace

import pytest
from srv6pm.common.srv6 import Behaviour, EncapMode, MarkingMode, Role
from srv6pm.node_manager.adapters.journal import Journal
from srv6pm.node_manager.domain.errors import FailedPrecondition, NotFound
from srv6pm.node_manager.domain.model import (
    KernelReflection,
    LocalSid,
    Marking,
    MonitoredFlow,
    NodeState,
    Reflector,
    ReflectorSession,
    ReturnPath,
    SrPolicy,
)
from srv6pm.node_manager.drivers.base import Capabilities, ColourCount
from srv6pm.node_manager.service.kernel_reflection import kernel_reflection
from srv6pm.node_manager.service.node import NodeService
from srv6pm.node_manager.service.results import ResultsService
from srv6pm.node_manager.service.stamp import loss_probe_offset_ns
from srv6pm.twamp.error_estimate import clock_error_estimate

S = 1_000_000_000
FLOW = MonitoredFlow("f", ("fc00:0:2::e", "fc00:0:3::d6"), Role.INGRESS, ("r1-r2",), 1)


@dataclass
class MemoryDriver:
    pols: list = field(default_factory=list)
    sids: list = field(default_factory=list)
    monitored: list = field(default_factory=list)
    mark: Marking = field(default_factory=Marking)
    counts: dict = field(default_factory=dict)
    calls: int = 0
    reflection: KernelReflection | None = None
    published: list = field(default_factory=list)
    steering: list = field(default_factory=list)

    def capabilities(self):
        return Capabilities(
            "memory", frozenset(Behaviour) - {Behaviour.END_DT4}, frozenset(EncapMode), 100, 64
        )

    def interfaces(self):
        return frozenset({"lo", "r1-r2"})

    def policies(self):
        # as a kernel reads them back: no names, no protection; a single route has a device
        return [
            replace(
                p,
                name="",
                protection=False,
                device=p.device or ("" if p.segment_lists else "r1-r2"),
                segment_lists=tuple(replace(sl, name="") for sl in p.segment_lists),
            )
            for p in self.pols
        ]

    def probe_routes(self):
        return list(self.steering)

    def update_probe_routes(self, add, remove):
        self.calls += 1
        self.steering = [x for x in self.steering if x not in remove]
        for r in add:
            self.steering = [x for x in self.steering if (x.mark, x.address) != (r.mark, r.address)]
            self.steering.append(r)

    def add_policy(self, p):
        self.calls += 1
        self.pols = [x for x in self.pols if x.prefix != p.prefix] + [p]

    def remove_policy(self, p):
        self.calls += 1
        self.pols = [x for x in self.pols if x.prefix != p.prefix]

    def local_sids(self):
        return list(self.sids)

    def add_local_sid(self, s):
        self.calls += 1
        self.sids.append(s)

    def remove_local_sid(self, s):
        self.calls += 1
        self.sids.remove(s)

    def flows(self):
        return list(self.monitored)

    def flow_names(self):
        return {f.name for f in self.monitored}

    def update_flows(self, add, remove):
        self.calls += 1
        names = {f.name for f in remove}
        self.monitored = [f for f in self.monitored if f.name not in names] + list(add)
        for f in add:
            self.counts[f.name] = [0, 0]

    def marking(self):
        return self.mark

    def set_marking(self, m):
        self.mark = m

    def read_counters(self, names):
        return {
            n: tuple(ColourCount(self.counts[n][c], 100 * self.counts[n][c]) for c in (0, 1))
            for n in names
        }

    def local_addresses(self):
        return set()

    def add_local_address(self, address):
        pass

    def remove_local_address(self, address):
        pass

    def close(self):
        pass


@dataclass
class MemoryReflector:
    """The optional in-kernel reflector (drivers.base.KernelReflector), recording its calls."""

    answers_all = False

    driver: "ReflectingDriver"

    def apply(self, reflection):
        self.driver.reflection = reflection
        self.driver.calls += 1

    def refresh(self):
        pass

    def publish_block(self, block, counts):
        self.driver.published.append((block, dict(counts)))

    def next_sequence(self, sender, ssid):
        return None

    def stats(self):
        return {"answered": 3}


@dataclass
class ReflectingDriver(MemoryDriver):
    """A driver that offers both optional capabilities, as the linux one does."""

    def kernel_reflector(self):
        return MemoryReflector(self)

    def namespaced_sockets(self):
        return self

    def in_netns(self, fn):
        return fn()


class Clock:
    def __init__(self, now):
        self.now = now

    def __call__(self):
        return self.now


@pytest.fixture
def node(tmp_path):
    driver = ReflectingDriver()
    clock = Clock(1000 * S + S // 10)  # block 500 (T = 2 s), just after its start
    journal = Journal(tmp_path / "journal.db", 3600, 1 << 30)
    results = ResultsService(journal, "n1", 2 * S, clock=clock)
    service = NodeService(driver, results, tmp_path, 2 * S, S // 4, clock=clock)
    yield service, driver, clock
    service.stop()
    journal.close()


STATE = NodeState(
    policies=(SrPolicy("to-h2", "fd00:2::/64", FLOW.segments),),
    local_sids=(LocalSid("fc00:0:1::d6", Behaviour.END_DT6),),
    flows=(FLOW,),
)


def test_applying_the_same_state_twice_changes_nothing(node):
    service, driver, _ = node
    first = service.apply(STATE)
    assert (first.policies.added, first.local_sids.added, first.flows.added) == (1, 1, 1)
    calls = driver.calls
    second = service.apply(STATE)
    assert (second.policies.unchanged, second.local_sids.unchanged, second.flows.unchanged) == (
        1,
        1,
        1,
    )
    assert (second.policies.added, second.flows.added, second.flows.removed) == (0, 0, 0)
    assert driver.calls == calls


def test_dry_run_reports_without_changing(node):
    service, driver, _ = node
    result = service.apply(STATE, dry_run=True)
    assert result.flows.added == 1
    assert driver.calls == 0


def test_changing_the_marking_mode_installs_every_flow_again(node):
    service, driver, _ = node
    service.apply(STATE)
    result = service.apply(replace(STATE, marking=Marking(mode=MarkingMode.DSCP)))
    assert (result.flows.added, result.flows.removed, result.flows.unchanged) == (1, 1, 0)
    assert result.marking_changed and driver.mark.mode is MarkingMode.DSCP
    assert [f.name for f in driver.flows()] == ["f"]


def test_a_stamp_socket_that_cannot_be_bound_changes_nothing(node):
    service, driver, _ = node
    elsewhere = replace(STATE, reflector=Reflector(True, "2001:db8::77"))
    with pytest.raises(FailedPrecondition, match=r"cannot open a STAMP socket on \[2001:db8::77\]"):
        service.apply(elsewhere)
    assert driver.calls == 0 and service.state().reflector == Reflector()


def test_an_unauthenticated_reflector_is_handed_to_the_kernel_with_its_decapsulating_sids():
    state = replace(
        STATE,
        local_sids=(
            LocalSid("fc00:0:1::d6", Behaviour.END_DT6),
            LocalSid("fc00:0:1::d7", Behaviour.END_DT6, lookup_table=100),  # not into main
            LocalSid("fc00:0:1::e", Behaviour.END),
        ),
        reflector=Reflector(
            True,
            "2001:db8::3",
            862,
            stateful=True,
            sessions=(
                ReflectorSession(
                    7, "fwd", "rev", (ReturnPath("2001:db8::1", ("fc00:0:2::e", "fc00:0:1::d6")),)
                ),
            ),
        ),
    )
    assert kernel_reflection(state, True, 2 * S) == KernelReflection(
        "2001:db8::3",
        862,
        True,
        clock_error_estimate(True),
        ("fc00:0:1::d6",),
        2 * S,
        ((7, "fwd", "rev"),),
        (("2001:db8::1", 7, ("fc00:0:2::e", "fc00:0:1::d6")),),
    )
    authenticated = replace(state, reflector=replace(state.reflector, hmac_key=b"k" * 32))
    reflection = kernel_reflection(authenticated, True, 2 * S)
    assert reflection and reflection.hmac_key == b"k" * 32  # the Linux one leaves it to userspace
    assert kernel_reflection(replace(state, reflector=Reflector()), True, 2 * S) is None


def test_the_kernel_reflector_is_set_when_the_reflector_changes_only(node):
    service, driver, _ = node
    service.apply(STATE)
    assert driver.reflection is None
    calls = driver.calls
    service.apply(STATE)
    assert driver.calls == calls


def test_the_clocks_state_is_followed_once_per_block(tmp_path):
    # a time daemon that finds its source after the start: the S bit of every Error Estimate
    # the node sends (senders, userspace and kernel reflectors) follows it from the next block
    synced = [False]
    driver, clock = ReflectingDriver(), Clock(1000 * S + S // 10)
    journal = Journal(tmp_path / "journal.db", 3600, 1 << 30)
    results = ResultsService(journal, "n1", 2 * S, clock=clock)
    service = NodeService(
        driver, results, tmp_path, 2 * S, S // 4, clock=clock, clock_synchronised=lambda: synced[0]
    )
    try:
        service.apply(replace(STATE, reflector=Reflector(True, "::1", free_udp_port())))
        assert driver.reflection.error_estimate == clock_error_estimate(False)
        synced[0] = True
        clock.now = 1002 * S + S // 2  # block 501, past the guard after block 500
        service.periodic.closed_block()
        assert driver.reflection.error_estimate == clock_error_estimate(True)
        userspace = service.stamp._reflector
        assert userspace and userspace[0].config.error_estimate == clock_error_estimate(True)
    finally:
        service.stop()
        journal.close()


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as sock:
        sock.bind(("::1", 0))
        return int(sock.getsockname()[1])


def test_unsupported_behaviour_is_a_precondition_and_changes_nothing(node):
    service, driver, _ = node
    bad = NodeState(local_sids=(LocalSid("fc00::1", Behaviour.END_DT4),), flows=(FLOW,))
    with pytest.raises(FailedPrecondition, match=r"does not support End\.DT4"):
        service.apply(bad)
    with pytest.raises(FailedPrecondition, match=r"interface\(s\) eth9 do not exist"):
        service.apply(
            NodeState(flows=(MonitoredFlow("g", ("fc00::1",), Role.EGRESS, ("eth9",), 2),))
        )
    assert driver.calls == 0


def test_block_is_the_difference_of_snapshots_around_it(node):
    service, driver, clock = node
    service.apply(STATE)  # block 500: baseline zero for the flow
    clock.now = 1002 * S + S // 10  # block 501: colour 1 counts
    driver.counts["f"][1] += 7
    clock.now = 1004 * S + S // 2  # block 502, past the guard: block 501 is readable
    reading = service.read_block([], 501)
    assert (reading.colour, reading.counts) == (1, {"f": (7, 700)})


def test_a_block_still_counting_is_refused(node):
    service, _, clock = node
    service.apply(STATE)
    clock.now = 1002 * S + S // 10
    with pytest.raises(FailedPrecondition, match="block 501 is not readable yet"):
        service.read_block([], 501)
    clock.now = 1004 * S + S // 10  # inside the guard after the block's end
    with pytest.raises(FailedPrecondition, match="not readable yet"):
        service.read_block([], 501)


def test_a_block_without_baseline_is_refused(node):
    service, _, clock = node
    service.apply(STATE)
    clock.now = 1002 * S + S // 2
    with pytest.raises(FailedPrecondition, match="no baseline for block 500"):
        service.read_block([], 500)


def test_unknown_flow_is_not_found(node):
    service, _, _ = node
    with pytest.raises(NotFound, match="nope"):
        service.read_counters(["nope"])


def test_the_snapshot_thread_never_skips_a_block_it_woke_late_in(node):
    service, _, clock = node  # just after the start of block 500 (T = 2 s), nothing read yet
    assert service.reads.next_read() == 1001 * S  # this block's read point, not the next's
    clock.now = 1001 * S
    service.reads.snapshot()
    assert service.reads.next_read() == 1003 * S  # read: the next block's


def test_loss_probes_of_consecutive_ssids_spread_over_the_whole_window():
    # the read window of block k is [start(k+1) + guard, start(k+2)); probes go in [T/2, 3T/4)
    period = 10 * S
    offsets = sorted(loss_probe_offset_ns(period, ssid) for ssid in range(1, 1001))
    assert period // 2 <= offsets[0] and offsets[-1] < period * 3 // 4
    assert offsets[-1] - offsets[0] > 2.4 * S  # a run of SSIDs covers the window
    assert max(b - a for a, b in itertools.pairwise(offsets)) < 10_000_000  # no 10 ms gap


def test_a_driver_offering_only_the_base_protocol_runs_the_node(tmp_path):
    # a data plane without an in-kernel reflector or a namespace of its own (VPP): the
    # userspace reflector answers, sockets open where the node manager runs
    driver, clock = MemoryDriver(), Clock(1000 * S + S // 10)
    journal = Journal(tmp_path / "journal.db", 3600, 1 << 30)
    service = NodeService(
        driver,
        ResultsService(journal, "n1", 2 * S, clock=clock),
        tmp_path,
        2 * S,
        S // 4,
        clock=clock,
    )
    try:
        sessions = (ReflectorSession(7, "f", "f"),)
        service.apply(
            replace(STATE, reflector=Reflector(True, "::1", free_udp_port(), sessions=sessions))
        )
        assert service.stamp._reflector is not None
        clock.now = 1002 * S + S // 2
        service.periodic.tick()
        assert service.kernel_reflector_stats() == {}
    finally:
        service.stop()
        journal.close()
