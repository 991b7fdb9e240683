"""Two leaves routed over spine switches with the kernel's ECMP (`FabricConfig.spines` > 0).

Layout (``p`` = prefix)::

    p node<i>   (namespace)  p n<i>   192.0.2.(64 L + 2 + j)/26, default via the leaf
    p leaf<L>   (namespace)  bridge p br<L> 192.0.2.(64 L + 1)/26 holding the nodes' ports;
                             uplink p u<L><S> to spine S, 198.51.100.(4 (L spines + S) + 1)/30
    p spine<S>  (namespace)  downlink p d<S><L> to leaf L, the /30's + 2

Each leaf reaches the other leaf's /26 by one multipath route with a nexthop per spine
(``ip route add ... nexthop via A nexthop via B``); the kernel hashes every flow onto one of
them by ``net.ipv4.fib_multipath_hash_policy`` (0: source and destination address, so a node
pair always takes the same spine; 1: the 5-tuple). Uplinks and downlinks are shaped to
`FabricConfig.spine_link_rate_bit` each way. `spine_of` asks the leaf's routing table (``ip
route get``) which spine a flow from one node to another takes; `link_tx_bytes` reads what
every leaf-spine link has carried.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from tierwise.lab import netns, shaping

if TYPE_CHECKING:
    from tierwise.lab.fabric import FabricConfig

#: Addresses of the leaf-spine links: TEST-NET-2 (RFC 5737), one /30 per link.
LINK_NET = "198.51.100."
NODE_NET, NODE_BITS, LEAF_BLOCK = "192.0.2.", 26, 64


def leaf_ns(c: FabricConfig, leaf: int) -> str:
    """Namespace of leaf router ``leaf``."""
    return f"{c.prefix}leaf{leaf}"


def spine_ns(c: FabricConfig, spine: int) -> str:
    """Namespace of spine ``spine``."""
    return f"{c.prefix}spine{spine}"


def uplink_dev(c: FabricConfig, leaf: int, spine: int) -> str:
    """Leaf ``leaf``'s port towards spine ``spine`` (in the leaf's namespace)."""
    return f"{c.prefix}u{leaf}{spine}"


def downlink_dev(c: FabricConfig, spine: int, leaf: int) -> str:
    """Spine ``spine``'s port towards leaf ``leaf`` (in the spine's namespace)."""
    return f"{c.prefix}d{spine}{leaf}"


def node_addr(c: FabricConfig, node: int) -> str:
    """Address of ``node``: the ``j``-th host of its leaf's /26."""
    leaf, j = divmod(node, c.nodes_per_leaf)
    return f"{NODE_NET}{LEAF_BLOCK * leaf + 2 + j}"


def _gateway(leaf: int) -> str:
    return f"{NODE_NET}{LEAF_BLOCK * leaf + 1}"


def _subnet(leaf: int) -> str:
    return f"{NODE_NET}{LEAF_BLOCK * leaf}/{NODE_BITS}"


def _link_addr(c: FabricConfig, leaf: int, spine: int, side: int) -> str:
    """The leaf (side 1) or spine (side 2) end of the leaf-spine link."""
    return f"{LINK_NET}{4 * (leaf * c.spines + spine) + side}"


def _sysctl(ns: str, key: str, value: int) -> None:
    path = "/proc/sys/" + key.replace(".", "/")
    netns.run([*netns.exec_prefix(ns), "sh", "-c", f"echo {value} > {path}"])


def _router(ns: str, hash_policy: int | None = None) -> None:
    """Forward IPv4, accept asymmetric paths, and (leaves) hash flows by ``hash_policy``."""
    _sysctl(ns, "net.ipv4.ip_forward", 1)
    for scope in ("all", "default"):
        _sysctl(ns, f"net.ipv4.conf.{scope}.rp_filter", 0)
    if hash_policy is not None:
        _sysctl(ns, "net.ipv4.fib_multipath_hash_policy", hash_policy)


def build(c: FabricConfig) -> None:
    """Create the leaves, spines, nodes, routes and shaping of a spine fabric."""
    link_rate = c.spine_link_rate_bit
    for spine in range(c.spines):
        netns.add_namespace(spine_ns(c, spine))
        _router(spine_ns(c, spine))
    for leaf in range(c.leaves):
        ns = leaf_ns(c, leaf)
        netns.add_namespace(ns)
        _router(ns, c.hash_policy)
        netns.add_bridge(c.bridge(leaf), ns)
        netns.add_address(c.bridge(leaf), f"{_gateway(leaf)}/{NODE_BITS}", ns)
        for spine in range(c.spines):
            up, down, sns = (
                uplink_dev(c, leaf, spine),
                downlink_dev(c, spine, leaf),
                spine_ns(c, spine),
            )
            netns.add_veth(up, ns, down, sns)
            netns.add_address(up, f"{_link_addr(c, leaf, spine, 1)}/30", ns)
            netns.add_address(down, f"{_link_addr(c, leaf, spine, 2)}/30", sns)
            shaping.shape(ns, up, link_rate, c.qdisc)
            shaping.shape(sns, down, link_rate, c.qdisc)
            netns.ip("route", "add", _subnet(leaf), "via", _link_addr(c, leaf, spine, 1), ns=sns)
    for leaf in range(c.leaves):
        for other in range(c.leaves):
            if other != leaf:
                hops = []
                for spine in range(c.spines):
                    hops += ["nexthop", "via", _link_addr(c, leaf, spine, 2)]
                    hops += ["dev", uplink_dev(c, leaf, spine)]
                netns.ip("route", "add", _subnet(other), *hops, ns=leaf_ns(c, leaf))
    for node in range(c.nodes):
        ns, dev, port, leaf = c.node_ns(node), c.node_dev(node), c.port_dev(node), c.leaf_of(node)
        netns.add_namespace(ns)
        netns.add_veth(dev, ns, port, leaf_ns(c, leaf))
        netns.attach(port, c.bridge(leaf), leaf_ns(c, leaf))
        netns.add_address(dev, f"{node_addr(c, node)}/{NODE_BITS}", ns)
        netns.ip("route", "add", "default", "via", _gateway(leaf), ns=ns)
        shaping.shape(ns, dev, c.rate_bit, c.qdisc)
        shaping.shape(leaf_ns(c, leaf), port, c.rate_bit, c.qdisc)


_VIA_DEV = re.compile(r"\bdev (\S+)")


def spine_of(c: FabricConfig, src: int, dst: int) -> int | None:
    """The spine the kernel hashes a flow from node ``src`` to node ``dst`` onto (None when
    both sit under one leaf). Exact for hash policy 0; under policy 1 the ports decide."""
    leaf = c.leaf_of(src)
    if leaf == c.leaf_of(dst):
        return None
    out = netns.ip(
        "route", "get", node_addr(c, dst), "from", node_addr(c, src), "iif", c.bridge(leaf),
        ns=leaf_ns(c, leaf),
    )  # fmt: skip
    found = _VIA_DEV.search(out)
    if not found or not found.group(1).startswith(f"{c.prefix}u{leaf}"):
        raise netns.NetError(f"ip route get from node {src} to node {dst}: no spine in {out!r}")
    return int(found.group(1)[len(f"{c.prefix}u{leaf}") :])


def link_tx_bytes(c: FabricConfig) -> dict[tuple[Any, ...], int]:
    """Bytes each leaf-spine link has sent so far (frames, as its shaper counts them), keyed
    as `tierwise.lab.ecmp.link_loads`: (up, leaf, spine) and (down, spine, leaf)."""
    sent: dict[tuple[Any, ...], int] = {}
    for leaf in range(c.leaves):
        for spine in range(c.spines):
            up, down = uplink_dev(c, leaf, spine), downlink_dev(c, spine, leaf)
            sent["up", leaf, spine] = shaping.sent_bytes(leaf_ns(c, leaf), up)
            sent["down", spine, leaf] = shaping.sent_bytes(spine_ns(c, spine), down)
    return sent
