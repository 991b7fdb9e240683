"""Real collectives on torch.distributed (extra ``[runtime]``): hierarchical algorithms,
the `tierwise bench` loop, launchers and fault handling.

torch is imported only by `mesh`, `hierarchical` and `bench`; `placement`, `options`,
`launch`, `faults`, `results` and `worker` are plain Python so launchers need no torch.
"""
