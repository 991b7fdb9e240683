"""Job placement on a shared cluster's switch tree: state, jobs, policies, simulator, Slurm.

See docs/schedule.md. Layers: `state` (nodes on leaves/pods, down/drained) <- `policies`
(which nodes a job gets) <- `simulate` (event-driven, run time stretched by `slowdown`, whose
step time comes from `step_time`: `tierwise.perf` on the actual placement, or the DP
all-reduce alone); `slurm` names nodes and writes hostfiles; topology.conf is read and written
by `tierwise.hardware.ingest.slurm_topology`.
"""
