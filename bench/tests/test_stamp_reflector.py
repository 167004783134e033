"""bench/stamp_reflector.py's report: the data planes' reflectors against each other and against
stamp-suite, from one run's loss-free longer trials."""

from __future__ import annotations

from bench.reflectors import KERNEL, STAMP_SUITE
from bench.stamp_reflector import Search, Trial, parse_args, ratios
from bench.vpp_reflector import VPP


def trial(name: str, capacity: float, loss: float = 0.0) -> Trial:
    return Trial(
        reflector=name, rate=1000, duration_s=10.0, offered_pps=1000.0, reflected_pps=1000.0,
        sent=10_000, received=10_000, loss=loss, send_errors=0, schedule_resets=0,
        refl_cpu_ns_per_pkt=1.0, core_busy_ns_per_pkt=1.0, core_busy=0.5, core_steal=0.0,
        rcvbuf_errors=0, sndbuf_errors=0, backlog_drops=0, rtt_p50_us=1.0, rtt_p99_us=1.0,
        rtt_max_us=1.0, capacity_pps=capacity, gen_backlog_drops=0, gen_rcvbuf_errors=0,
        program={},
    )  # fmt: skip


def search(name: str, ndr: float) -> Search:
    return Search(name, 1, [], ndr, ndr, ndr, ndr)


def test_ratios_are_of_medians_and_leave_out_lossy_trials() -> None:
    confirm = {
        KERNEL: [trial(KERNEL, 400e3), trial(KERNEL, 600e3), trial(KERNEL, 900e3, loss=0.01)],
        VPP: [trial(VPP, 1000e3)],
        STAMP_SUITE: [trial(STAMP_SUITE, 100e3)],
    }
    searches = [search(STAMP_SUITE, 80e3), search(STAMP_SUITE, 120e3), search(STAMP_SUITE, 100e3)]
    assert ratios(searches, confirm) == [
        f"{KERNEL} capacity / {STAMP_SUITE} NDR (medians): 5.00",
        f"{KERNEL} capacity / {STAMP_SUITE} capacity (medians): 5.00",
        f"{VPP} capacity / {STAMP_SUITE} NDR (medians): 10.00",
        f"{VPP} capacity / {STAMP_SUITE} capacity (medians): 10.00",
        f"{VPP} capacity / {KERNEL} capacity (medians): 2.00",
    ]


def test_a_reflector_left_out_gives_no_ratio() -> None:
    assert ratios([search(STAMP_SUITE, 100e3)], {KERNEL: [trial(KERNEL, 500e3)]}) == [
        f"{KERNEL} capacity / {STAMP_SUITE} NDR (medians): 5.00"
    ]


def test_only_picks_reflectors_by_their_table_names() -> None:
    args = parse_args(["--only", KERNEL, VPP, "--no-vpp"])
    assert (args.only, args.vpp, args.kernel) == ([KERNEL, VPP], False, True)
