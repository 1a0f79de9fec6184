"""Loopback ports for tests that must name a port before a server binds it."""
import random
import socket


def _ephemeral_floor() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def free_port() -> int:
    """A free port the kernel never hands out by itself: Ray's own services bind ephemeral ports
    (port 0) between this pick and Serve's bind, and once took this very port (CI: "Failed to bind
    to address"). Below the ephemeral range and above Ray's worker ports (10002-19999), only an
    explicit bind to the same number can collide."""
    floor = _ephemeral_floor()
    if floor > 20100:
        rng = random.Random()
        for _ in range(200):
            port = rng.randrange(20000, floor)
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
