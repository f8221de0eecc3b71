"""solve_many on every kind of executor, failures kept per problem, and design sweeps on a Dask LocalCluster."""

from __future__ import annotations

import csv
import json
import os
import signal
import time
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

import spyreopt as so
from spyreopt.batch import Task, hardware_variants, solve_many, sweep_tasks, write_table

distributed = pytest.importorskip("distributed")

SMALL = ["softmax", "mlp", "rmsnorm"]


def graphs(names=SMALL):
    return [so.workloads.get(n) for n in names]


def test_inline_streams_every_result_and_keeps_failures():
    seen = []
    problems = [*graphs(), Task(so.workloads.get("mlp"), backend="no-such-backend", meta={"workload": "bad"})]
    results = list(solve_many(problems, progress=False, callback=seen.append, time_limit=5))
    assert [r.index for r in results] == [0, 1, 2, 3] and seen == results
    for r, g in zip(results[:3], graphs()):
        assert r.valid and r.error is None and r.cost_us == pytest.approx(so.solve(g, "greedy").cost_us)
        assert r.meta == {"workload": g.name} and r.solve_s > 0
    bad = results[3]
    assert (bad.status, bad.valid, bad.cost_us) == ("error", False, None)
    assert bad.error.startswith("SolverError: ") and "no-such-backend" in bad.error


def test_thread_pool_and_keep_plans():
    with ThreadPoolExecutor(2) as pool:
        results = sorted(solve_many(graphs(), pool, progress=False, keep_plans=True), key=lambda r: r.index)
    for r, g in zip(results, graphs()):
        r.plan.validate()
        assert r.plan.to_json() == so.solve(g, "greedy").to_json() and r.attempts == 1


class FlakyExecutor:
    """Loses the first submission of every task, as if its worker died."""

    def __init__(self, pool):
        self.pool, self.seen = pool, set()

    def submit(self, fn, task, *args):
        if task.meta["workload"] not in self.seen:
            self.seen.add(task.meta["workload"])
            f = Future()
            f.set_exception(RuntimeError("worker lost"))
            return f
        return self.pool.submit(fn, task, *args)


def test_lost_tasks_are_retried_then_reported():
    with ThreadPoolExecutor(2) as pool:
        results = list(solve_many(graphs(), FlakyExecutor(pool), progress=False, retries=1))
        assert len(results) == 3 and all(r.valid and r.attempts == 2 for r in results)
        results = list(solve_many(graphs(), FlakyExecutor(pool), progress=False, retries=0))
    assert all(r.status == "error" and r.error == "RuntimeError: worker lost" and r.attempts == 1 for r in results)


class NeverFuture:
    """A future type of its own (not concurrent.futures, not distributed) that never completes."""

    cancelled = 0

    def done(self):
        return False

    def result(self):
        raise AssertionError("never done")

    def cancel(self):
        NeverFuture.cancelled += 1
        return True


class HangingExecutor:
    def submit(self, fn, *args):
        return NeverFuture()


def test_a_task_that_never_returns_times_out_instead_of_hanging():
    start = time.monotonic()
    results = list(solve_many(graphs(), HangingExecutor(), progress=False, task_timeout=0.3, max_in_flight=3))
    assert time.monotonic() - start < 5
    assert len(results) == 3 and all(r.error.startswith("TaskTimeout") for r in results)
    assert NeverFuture.cancelled == 3


def test_hardware_variants_and_table(tmp_path):
    variants = hardware_variants(lx_bytes=[1 << 20, 4 << 20], cores=[16, 32])
    assert [v.label for v in variants] == [
        "lx_bytes=1048576,cores=16", "lx_bytes=1048576,cores=32", "lx_bytes=4194304,cores=16", "lx_bytes=4194304,cores=32",
    ]  # fmt: skip
    assert variants[1].hardware.cores == 32 and variants[1].hardware.lx_bytes == 1 << 20
    assert hardware_variants(planner_fraction=[0.5])[0].hardware.planner_lx_bytes < so.HardwareSpec().planner_lx_bytes
    tasks = sweep_tasks({"mlp": so.workloads.get("mlp")}, variants, ["greedy"])
    rows = write_table(solve_many(tasks, progress=False), tmp_path / "t.csv", tmp_path / "t.json")
    assert [r["hardware"] for r in rows] == [v.label for v in variants]
    with open(tmp_path / "t.csv") as fh:
        assert list(csv.DictReader(fh))[0].keys() >= {
            "workload",
            "hardware",
            "backend",
            "status",
            "cost_us",
            "solve_s",
            "valid",
            "error",
        }
    assert json.loads((tmp_path / "t.json").read_text()) == rows


# ---- Dask ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, host="127.0.0.1"
    )
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def grid():
    variants = hardware_variants(lx_bytes=[1 << 20, 2 << 20, 4 << 20], cores=[16, 32])
    graphs_ = {name: so.workloads.get(name) for name in so.workloads.names()}
    return sweep_tasks(graphs_, variants, ["greedy"])


def check_rows(results, tasks):
    rows = write_table(results)
    assert len(rows) == len(tasks) and [r["workload"] for r in rows] == [t.meta["workload"] for t in tasks]
    for row in rows:
        assert row["valid"] or row["error"], row
    return rows


@pytest.mark.timeout(170)
def test_sweep_of_every_workload_on_a_local_cluster(client):
    tasks = grid()
    rows = check_rows(list(solve_many(tasks, client, progress=False, time_limit=10, task_timeout=120)), tasks)
    assert all(r["valid"] for r in rows)
    assert {r["hardware"] for r in rows} == {
        v.label for v in hardware_variants(lx_bytes=[1 << 20, 2 << 20, 4 << 20], cores=[16, 32])
    }
    # the same grid in this process gives the same plans
    inline = {(r.meta["workload"], r.meta["hardware"]): r.cost_us for r in solve_many(tasks[:6], progress=False)}
    assert all(inline[(r["workload"], r["hardware"])] == pytest.approx(r["cost_us"]) for r in rows[:6])


@pytest.mark.timeout(170)
def test_killing_a_worker_mid_sweep_still_returns_every_row(client):
    tasks = grid()
    results, killed = [], None
    for r in solve_many(tasks, client, progress=False, time_limit=10, task_timeout=120, max_in_flight=8):
        results.append(r)
        if killed is None:
            busy = [addr for addr, keys in client.processing().items() if keys]
            assert busy, "no worker had a task when the kill was due"
            pid = client.run(os.getpid, workers=[busy[0]])[busy[0]]
            os.kill(pid, signal.SIGKILL)
            killed = pid
    check_rows(results, tasks)
    assert killed not in client.run(os.getpid).values()  # that worker process is gone (its nanny restarted one)


# ---- command line --------------------------------------------------------------------------------


def run_cli(argv):
    from spyreopt.cli import main

    return main(argv)


def test_cli_sweep_locally_and_on_a_scheduler(client, tmp_path, capsys):
    base = ["sweep", "--workloads", "softmax,mlp", "--lx-bytes", "1MiB,2MiB", "--cores", "16,32", "--no-progress"]
    assert run_cli([*base, "--csv", str(tmp_path / "a.csv")]) == 0
    assert run_cli([*base, "--json", str(tmp_path / "b.json"), "--scheduler", client.scheduler.address]) == 0
    with open(tmp_path / "a.csv") as fh:
        local = list(csv.DictReader(fh))
    remote = json.loads((tmp_path / "b.json").read_text())
    assert len(local) == len(remote) == 8
    assert [r["hardware"] for r in local] == [r["hardware"] for r in remote]
    assert [float(r["cost_us"]) for r in local] == pytest.approx([r["cost_us"] for r in remote])
    assert "lx_bytes=1048576,cores=16" in capsys.readouterr().out
