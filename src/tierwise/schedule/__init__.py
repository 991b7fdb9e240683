"""Job placement on a shared cluster's switch tree: state, jobs, policies, simulator, Slurm.

See docs/schedule.md. Layers: `state` (nodes on leaves/pods, down/drained) <- `policies`
(which nodes a job gets) <- `simulate` (event-driven, run time stretched by `slowdown`);
`slurm` emits and reads Slurm's topology/tree files and hostfiles.
"""
