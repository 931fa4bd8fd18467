"""The discrete-event engine against hand-computed schedules."""

import pytest

from echo_sim.errors import EchoError
from echo_sim.sim.engine import TaskGraph, run


def test_chain_on_one_resource_is_sum_of_durations():
    g = TaskGraph()
    cpu = g.resource("rank0/compute")
    a = g.task(10, [cpu])
    b = g.task(5, [cpu])
    g.edge(a, b)
    s = run(g)
    assert list(s.start_us) == [0, 10]
    assert s.makespan_us == 15
    assert s.busy_us[cpu] == 15


def test_independent_resources_overlap():
    g = TaskGraph()
    cpu, net = g.resource("c"), g.resource("n")
    a = g.task(10, [cpu])
    comm = g.task(30, [net])
    b = g.task(10, [cpu])
    g.edge(a, comm)
    g.edge(a, b)
    s = run(g)
    assert s.start_us[comm] == 10 and s.start_us[b] == 10
    assert s.makespan_us == 40


def test_collective_holding_two_ranks_waits_for_the_late_rank():
    g = TaskGraph()
    c0, c1 = g.resource("rank0/compute"), g.resource("rank1/compute")
    n0, n1 = g.resource("rank0/comm"), g.resource("rank1/comm")
    f0 = g.task(10, [c0])
    f1 = g.task(25, [c1])  # straggler
    ar = g.task(7, [n0, n1])
    g.edge(f0, ar)
    g.edge(f1, ar)
    s = run(g)
    assert s.start_us[ar] == 25 and s.end_us[ar] == 32


def test_busy_resource_delays_fifo_and_priority_breaks_ties():
    g = TaskGraph()
    r = g.resource("r")
    low = g.task(4, [r], priority=5, label="low")
    high = g.task(3, [r], priority=1, label="high")
    s = run(g)
    assert s.start_us[high] == 0 and s.start_us[low] == 3


def test_release_time_and_critical_predecessor():
    g = TaskGraph()
    r = g.resource("r")
    a = g.task(5, [r])
    b = g.task(5, [r], release_us=2)  # ready at 2, waits for a (resource) until 5
    c = g.task(1, [])
    g.edge(b, c)
    s = run(g)
    assert (s.start_us[b], s.end_us[c]) == (5, 11)
    crit = s.critical_predecessor(g)
    assert crit[c] == b and crit[b] == a and crit[a] == -1


def test_cycle_is_an_error_not_a_hang():
    g = TaskGraph()
    a, b = g.task(1), g.task(1)
    g.edge(a, b)
    g.edge(b, a)
    with pytest.raises(EchoError, match="cycle"):
        run(g)


def test_negative_duration_rejected():
    with pytest.raises(EchoError):
        TaskGraph().task(-1.0)
