"""The emulated fabric lab: network namespaces as nodes, a bridge as the leaf switch, tc as NICs.

Needs Linux, root and iproute2 (``ip``, ``tc``); runs real torch.distributed (gloo) collectives
on it. See docs/lab.md.
"""
