"""The learner launcher's choices that need no spawned learner (asrtrain/distributed/runtime/launch.py):
the backend for a device, the refusals, and a rendezvous and sockets that stay on loopback."""

import os
import socket

import pytest
import torch

from asrtrain.errors import AsrError


def test_backend_follows_the_device():
    from asrtrain.distributed.runtime.backend import resolve_backend

    assert resolve_backend("auto", torch.device("cpu")) == "gloo"
    assert resolve_backend("auto", torch.device("cuda", 0)) == "nccl"
    assert resolve_backend("auto", torch.device("cuda", 0), shared_gpu=True) == "gloo"  # 2 ranks, 1 GPU
    with pytest.raises(AsrError):
        resolve_backend("nccl", torch.device("cpu"))


def test_nccl_for_learners_sharing_one_gpu_is_refused_in_one_line(monkeypatch):
    from asrtrain.distributed.runtime.backend import resolve_backend
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    gpu = torch.device("cuda", 0)  # a device object only: nothing runs on it
    assert resolve_backend("auto", gpu, shared_gpu=True) == "gloo"
    assert resolve_backend("auto", gpu, shared_gpu=False) == "nccl"
    with pytest.raises(AsrError, match="share one GPU"):
        resolve_backend("nccl", gpu, shared_gpu=True)


def _listening_addresses(port: int):
    """Local addresses with a listening TCP socket on ``port`` (from /proc/net/tcp and tcp6)."""
    found = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(name):
            continue
        for line in open(name).read().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            addr, p = local.rsplit(":", 1)
            if int(p, 16) == port and state == "0A":  # LISTEN
                found.append(addr)
    return found


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="needs Linux /proc/net/tcp")
def test_local_rendezvous_listens_on_loopback_only():
    import datetime

    from asrtrain.distributed.runtime.launch import local_store

    store = local_store(datetime.timedelta(seconds=5))
    try:
        addrs = _listening_addresses(store.port)
        assert addrs == ["0100007F"], addrs  # 127.0.0.1, nothing on 0.0.0.0 or ::
        client = socket.create_connection(("127.0.0.1", store.port), timeout=5)
        client.close()
    finally:
        del store


def test_spawned_learners_sockets_stay_on_loopback_unless_the_user_chose():
    from asrtrain.distributed.runtime.launch import keep_sockets_on_loopback, loopback_interface

    lo = loopback_interface()
    assert lo in [name for _, name in socket.if_nameindex()]
    env = {}
    keep_sockets_on_loopback(env)
    assert env == {"GLOO_SOCKET_IFNAME": lo, "NCCL_SOCKET_IFNAME": lo}
    env = {"NCCL_SOCKET_IFNAME": "ib0"}
    keep_sockets_on_loopback(env)
    assert env == {"GLOO_SOCKET_IFNAME": lo, "NCCL_SOCKET_IFNAME": "ib0"}
