"""The launcher's view of its environment (issue 58): which interface gloo uses under torchrun/srun, and
a launcher environment exported in part refused instead of becoming N independent jobs."""

from __future__ import annotations

import pytest

from asrtrain.distributed.runtime import launch, netif
from asrtrain.errors import AsrError

FULL = dict(RANK="1", WORLD_SIZE="16", LOCAL_RANK="1", MASTER_ADDR="node0", MASTER_PORT="29500")


def _clear(monkeypatch):
    for k in (*launch.LAUNCH_KEYS, "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(k, raising=False)


def test_gloo_interface_is_the_route_to_master_addr(monkeypatch):
    monkeypatch.setattr(netif, "source_address", lambda host, port: "10.1.2.3")
    monkeypatch.setattr(netif, "interface_addresses", lambda: {"lo": "127.0.0.1", "mgmt0": "192.168.0.7",
                                                               "ib0": "10.1.2.3"})
    env = dict(FULL)
    netif.choose_gloo_interface(env)
    assert env["GLOO_SOCKET_IFNAME"] == "ib0"


def test_gloo_never_binds_loopback_for_a_master_name_that_resolves_to_it(monkeypatch):
    """Debian's ``127.0.1.1 node0`` line on rank 0's node: the default route's interface, not lo."""
    monkeypatch.setattr(netif, "source_address", lambda host, port: "127.0.1.1")
    monkeypatch.setattr(netif, "default_route_interface", lambda: "eth0")
    env = dict(FULL)
    netif.choose_gloo_interface(env)
    assert env["GLOO_SOCKET_IFNAME"] == "eth0"


def test_gloo_interface_real_route_and_user_choice(monkeypatch):
    env = dict(FULL, MASTER_ADDR="127.0.0.1")
    netif.choose_gloo_interface(env)  # the real kernel route
    assert env["GLOO_SOCKET_IFNAME"] == netif.loopback_interface()
    env = dict(FULL, GLOO_SOCKET_IFNAME="ens5")
    netif.choose_gloo_interface(env)
    assert env["GLOO_SOCKET_IFNAME"] == "ens5"


def test_default_route_interface_from_the_route_table(tmp_path):
    table = tmp_path / "route"
    table.write_text("Iface\tDestination\tGateway\n"
                     "ib0\t0000010A\t00000000\neth1\t00000000\t010200C0\n")
    assert netif.default_route_interface(str(table)) == "eth1"


@pytest.mark.parametrize("drop", [("MASTER_ADDR",), ("LOCAL_RANK", "MASTER_PORT"), ("RANK", "WORLD_SIZE")])
def test_launcher_environment_exported_in_part_is_refused(monkeypatch, drop):
    _clear(monkeypatch)
    for k, v in FULL.items():
        if k not in drop:
            monkeypatch.setenv(k, v)
    with pytest.raises(AsrError) as err:
        launch.in_launched_group()
    assert all(k in str(err.value) for k in drop)
    assert "\n" not in err.value.render()


def test_srun_step_of_several_tasks_without_the_variables_is_refused(monkeypatch):
    _clear(monkeypatch)
    monkeypatch.setenv("SLURM_PROCID", "3")
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "16")
    with pytest.raises(AsrError, match="SLURM_STEP_NUM_TASKS=16"):
        launch.in_launched_group()
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "1")  # one task (sbatch's batch step) spawns its learners
    assert launch.in_launched_group() is False
    for k, v in FULL.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "16")
    assert launch.in_launched_group() is True


def test_collectives_outwait_the_hang_detector():
    """Issue 58/4: a group's timeout (NCCL's watchdog abort) comes after dist.hang_timeout_s."""
    assert launch.group_timeout_s(60, 900) >= 900 + launch.HANG_MARGIN_S
    assert launch.group_timeout_s(60, 0) == 60  # detector off: dist.timeout_s as given
    assert launch.group_timeout_s(3600, 900) == 3600


def _abort() -> None:
    import faulthandler
    import os
    import resource
    faulthandler.disable()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.abort()


@pytest.mark.slow
def test_parent_names_the_hung_learner_not_the_one_a_collective_timeout_aborted():
    """A healthy learner ended by SIGABRT (NCCL's watchdog) while a watch had named the hung one: the
    parent reports the watch's verdict."""
    import datetime
    import multiprocessing
    from asrtrain.distributed.runtime.peerwatch import set_verdict
    store = launch.local_store(datetime.timedelta(seconds=30))
    set_verdict(store, "learner rank 1 made no progress for 900 s (hung)")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_abort), ctx.Process(target=_abort)]
    for p in procs:
        p.start()
    with pytest.raises(AsrError) as err:
        launch._supervise(procs, 30.0, store)
    assert "rank 1 made no progress" in str(err.value), str(err.value)
    assert "SIGABRT" not in str(err.value)


def test_ddp_leaves_the_host_side_lengths_on_the_host(monkeypatch):
    """Issue 58/6: DDP with device_ids moves every forward argument to the GPU (torch's _pre_forward);
    ddp_sum passes device_ids=None for a module on its GPU, so the lengths stay host-side."""
    import torch
    import torch.nn.parallel as par
    from asrtrain.distributed import collective
    seen = {}

    class FakeDDP:
        def __init__(self, module, **kw):
            seen.update(kw)

        def register_comm_hook(self, *a):
            pass

    class OnGpu3:
        def parameters(self):
            return iter([type("P", (), {"device": torch.device("cuda", 3)})()])

    monkeypatch.setattr(par, "DistributedDataParallel", FakeDDP)
    collective.ddp_sum(OnGpu3())
    assert seen["device_ids"] is None


def test_torchrun_attempt_namespace_is_agreed_even_over_a_stale_id(monkeypatch):
    """Issue 58/3 on several nodes: the agent's store still holds the previous attempt's id (and its
    answered hello) when a learner of the next attempt starts before rank 0 does. The learner must not
    take the stale id: both end in rank 0's new namespace (TORCHELASTIC_RESTART_COUNT may differ per node,
    so it cannot name the attempt)."""
    import datetime
    import threading

    import torch.distributed as dist

    from asrtrain.distributed.runtime import attempt

    monkeypatch.setenv(attempt.PREFIX_ENV, "")  # join_attempt exports the namespace; undone after the test
    tmo = datetime.timedelta(seconds=30)
    server = dist.TCPStore("127.0.0.1", 0, None, True, timeout=tmo, wait_for_workers=False)
    server.set(attempt.ID_KEY, "old")  # the previous attempt, answered then
    got = {}

    def learner(rank):
        store = dist.TCPStore("127.0.0.1", server.port, None, False, timeout=tmo)
        got[rank] = attempt.join_attempt(store, rank, 2, tmo, poll_s=0.2)

    one = threading.Thread(target=learner, args=(1,))
    one.start()
    server.wait([f"{attempt.ID_KEY}/old/hello1"], tmo)  # rank 1 said hello under the stale id first
    zero = threading.Thread(target=learner, args=(0,))
    zero.start()
    for t in (zero, one):
        t.join(60)
    assert got[0] == got[1] and "old" not in got[0], got
