"""Which network interface a learner's gloo sockets use (``GLOO_SOCKET_IFNAME``).

Under torchrun/srun the interface whose address routes to MASTER_ADDR, unless the user chose one; for
learners spawned on one node, the loopback interface (see :func:`launch.keep_sockets_on_loopback`).
"""

from __future__ import annotations

import logging
import socket
from typing import Optional

log = logging.getLogger(__name__)


def choose_gloo_interface(env) -> None:
    """Under torchrun/srun, point gloo (``GLOO_SOCKET_IFNAME``) at the interface whose address routes to
    MASTER_ADDR, unless the user chose one. Left alone, gloo binds what ``gethostname()`` resolves to:
    127.0.1.1 on stock Debian/Ubuntu (no other host reaches it) or a slow management link.

    When MASTER_ADDR is a name that resolves to a loopback address on this host (rank 0's node under
    Debian's ``127.0.1.1 hostname`` line) but is not a loopback name itself, the interface of the default
    route, never the loopback one.
    """
    if env.get("GLOO_SOCKET_IFNAME"):
        return
    master = env["MASTER_ADDR"]
    addr = source_address(master, int(env.get("MASTER_PORT", "29500") or 29500))
    if addr is None:
        log.warning("no route to MASTER_ADDR=%s found; gloo picks its interface from the host name", master)
        return
    if addr.startswith("127.") and not _is_loopback_name(master):
        # MASTER_ADDR names this host through /etc/hosts' 127.0.1.1 line: the other nodes reach it by
        # its real address, which is on the interface of the default route.
        name = default_route_interface()
        if name is not None:
            env["GLOO_SOCKET_IFNAME"] = name
            log.debug("gloo uses interface %s (MASTER_ADDR=%s resolves to %s here)", name, master, addr)
            return
    name = interface_of(addr)
    if name is None:
        log.warning("no interface holds %s (the route to MASTER_ADDR=%s); gloo picks its own", addr, master)
        return
    env["GLOO_SOCKET_IFNAME"] = name
    log.debug("gloo uses interface %s (%s, the route to MASTER_ADDR=%s)", name, addr, master)


def default_route_interface(route_table: str = "/proc/net/route") -> Optional[str]:
    """The interface of the IPv4 default route (destination 0.0.0.0), or None."""
    try:
        with open(route_table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if len(fields) > 1 and fields[1] == "00000000":
                    return fields[0]
    except OSError:
        pass
    return None


def _is_loopback_name(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


def source_address(host: str, port: int) -> Optional[str]:
    """The local IPv4 address the kernel would send from to reach ``host`` (a UDP connect sends nothing)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect((host, port))
            return sock.getsockname()[0]
    except OSError:
        return None


def interface_addresses() -> dict:
    """{interface name: its IPv4 address} for the interfaces that have one (SIOCGIFADDR)."""
    import fcntl
    import struct
    out = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            try:
                raw = fcntl.ioctl(sock.fileno(), 0x8915, struct.pack("256s", name[:15].encode()))
            except OSError:  # no IPv4 address
                continue
            out[name] = socket.inet_ntoa(raw[20:24])
    return out


def interface_of(addr: str) -> Optional[str]:
    """The interface holding ``addr``; the loopback one for any 127.x address."""
    if addr.startswith("127."):
        return loopback_interface()
    for name, have in interface_addresses().items():
        if have == addr:
            return name
    return None


def loopback_interface() -> str:
    """The name of the loopback interface (``lo`` on Linux), for GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME."""
    try:
        for _, name in socket.if_nameindex():
            if name == "lo" or name.startswith("lo"):
                return name
    except OSError:
        pass
    return "lo"
