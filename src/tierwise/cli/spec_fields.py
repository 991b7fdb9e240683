"""What each input field means, for fields whose pydantic model carries no description.

Keyed ``Model.field``; `tierwise.cli.specs` merges these into the JSON Schemas and reference
pages (a field's own ``Field(description=...)`` wins). A test requires every field of every
input format to be described here or there, and every key here to name a real field.
"""

from __future__ import annotations

FIELD_NOTES: dict[str, str] = {
    # cluster
    "ClusterSpec.name": "Name shown in outputs.",
    "ClusterSpec.gpu": "GPU: a catalog key (`tierwise catalog gpus`) or an inline GPU object.",
    "ClusterSpec.gpus_per_node": "GPUs in one server (node).",
    "ClusterSpec.nodes": "Servers in the cluster.",
    "ClusterSpec.nvlink_domain_gpus": (
        "GPUs sharing one NVLink (scale-up) domain; default gpus_per_node. A rack-scale "
        "system such as GB200 NVL72 has 72 over 18 nodes of 4."
    ),
    "ClusterSpec.intra": (
        "Intra-node link: a catalog key (`tierwise catalog links`: nvlink3, nvlink4, nvlink5, "
        "pcie4, pcie5, ...) or an inline link object."
    ),
    "ClusterSpec.inter": "Inter-node network: the NIC and how many per node.",
    "ClusterSpec.topology": "The switch tree above the nodes.",
    "ClusterSpec.in_network_reduction": (
        "Reduction inside the network: NVLink SHARP (nvls) in the NVSwitch, SHARP in the IB "
        "switches, both, or none."
    ),
    "ClusterSpec.calibration": (
        "Constants fitted by `tierwise calibrate`: per tier (intra/leaf/spine/core, from "
        "nccl-tests logs) they override the catalog's; `step` (from training logs) holds the "
        "cluster's compute_scale and overlap_interference for the step-time model."
    ),
    "ClusterSpec.price_per_gpu_hour": (
        "Price of one GPU hour in US dollars (tokens per dollar objective, the cost of a run "
        "with --train-tokens). Assumed: a typical 2024-25 H100 rental rate."
    ),
    "ClusterSpec.reliability": (
        "Node failures, restarts, checkpoint storage and spares (time to train: --train-tokens)."
    ),
    "ClusterSpec.power": "What the cluster draws: GPU and node power, PUE (energy of a run).",
    "ClusterSpec.fleet": (
        "Slow-node statistics of the fleet: a named fleet (well-run, the default: nothing "
        "added; megascale-nsdi24: 0.5% of nodes 10% slower) or the fields below. A step "
        "waits for its slowest rank: breakdown term straggler_s."
    ),
    "FleetSpec.name": (
        "Name of the fleet: a named fleet's name fills the fields left out (a field given must "
        "agree with it), or a name of your own (custom)."
    ),
    "InterSpec.nic": "NIC: a catalog key (`tierwise catalog nics`) or an inline NIC object.",
    "InterSpec.nics_per_node": "Compute NIC ports per node (0: a single node, no fabric).",
    "TopologySpec.kind": (
        "rail-optimized (a leaf per rail per group of nodes, a spine above), rail-only (each "
        "rail its own switches, nothing between rails: traffic between rails hops to the GPU "
        "on the destination's rail first, NCCL's PXN), fat-tree, spine-leaf or single-switch "
        "(every node under one switch)."
    ),
    "TopologySpec.nodes_per_leaf": "Nodes under one leaf switch group; default all nodes.",
    "TopologySpec.gpus_per_leaf": "The same in GPUs (whole nodes x planes), or nodes_per_leaf.",
    "TopologySpec.oversubscription": "Leaf downlink:uplink ratio (2.0 means 2:1); 1 = full.",
    "TopologySpec.leaves_per_pod": "Leaves under one pod (spine group); default one pod.",
    "TopologySpec.pod_oversubscription": "The same ratio one level up, pod to core.",
    "StepCalibration.compute_scale": (
        "Achieved compute rate over the model's (0.9: compute takes 1/0.9 of the modelled time)."
    ),
    "StepCalibration.overlap_interference": (
        "Share of hidden (overlapped) communication time still on the step; null: the model's."
    ),
    "TierCalibration.alpha_us": "Latency of one LL-protocol ring step on the tier, us.",
    "TierCalibration.beta_GBps": "Effective bandwidth per GPU per direction on the tier, GB/s.",
    "TierCalibration.overhead_us": (
        "Fixed extra time of one bandwidth-protocol (Simple/NVLS) collective on the tier, us."
    ),
    "GPU.key": "Catalog key (inline for a GPU given in the spec).",
    "GPU.name": "Human name.",
    "GPU.peak_bf16_tflops": "Dense BF16 tensor peak, TFLOP/s.",
    "GPU.peak_fp8_tflops": "Dense FP8 tensor peak, TFLOP/s; none when the GPU has no FP8.",
    "GPU.arch": (
        "Tensor-core generation: ampere, hopper, blackwell, blackwell-ultra, cdna3, ada or custom."
    ),
    "GPU.peak_mxfp8_tflops": (
        "Dense block-scaled FP8 (OCP MX) peak, TFLOP/s; none when the GPU has no MXFP8."
    ),
    "GPU.peak_nvfp4_tflops": "Dense NVFP4 peak, TFLOP/s; none when the GPU has no NVFP4.",
    "GPU.hbm_gib": "HBM capacity, GiB.",
    "GPU.hbm_tbps": "HBM bandwidth, TB/s.",
    "GPU.intra": "Catalog key of the GPU's own NVLink (or PCIe) generation.",
    "GPU.pcie": "Catalog key of its PCIe generation.",
    "GPU.host_GBps": "GB/s per direction to host memory (CPU activation offloading) where it "
    "is not the GPU's PCIe link: NVLink-C2C on Grace hosts; default the pcie link's rate.",
    "GPU.board_power_w": "Maximum board power (TDP), W, from the datasheet; none: not known.",
    "GPU.gemm_efficiency": (
        "Fixed fraction of peak a GEMM reaches; none: the calibrated shape-dependent curve."
    ),
    "Link.key": "Catalog key (inline for a link given in the spec).",
    "Link.name": "Human name.",
    "Link.kind": "nvlink, pcie, xgmi (AMD Infinity Fabric) or loopback (the lab).",
    "Link.bw_GBps": "Line rate per GPU per direction, GB/s.",
    "Link.efficiency": "Share of the line rate NCCL's Simple protocol reaches as ring busbw.",
    "Link.latency_us": "Per-hop latency NCCL's tuner uses for this link class, us.",
    "Link.switched": "All GPUs of the node reach each other through a switch (NVSwitch).",
    "Link.nvls": "The switch can reduce in the network (NVLink SHARP).",
    "NIC.key": "Catalog key (inline for a NIC given in the spec).",
    "NIC.name": "Human name.",
    "NIC.kind": "ib (InfiniBand), roce, eth, efa or veth (the lab).",
    "NIC.rate_Gbps": "Line rate of one port, Gb/s (bits).",
    "NIC.efficiency": "Share of the line rate (rate_Gbps / 8) nccl-tests reaches as busbw.",
    "NIC.latency_us": "One-way small-message latency through one switch, us.",
    "NIC.sharp": "The NIC and its switches support SHARP in-network reduction.",
    # model
    "ModelSpec.name": "Name shown in outputs.",
    "ModelSpec.layers": "Transformer layers.",
    "ModelSpec.hidden": "Hidden size (model dimension).",
    "ModelSpec.heads": "Attention (query) heads.",
    "ModelSpec.vocab": "Vocabulary size.",
    "ModelSpec.activation": (
        "MLP activation: swiglu or geglu (Gemma; 3 matmuls), gelu or squared-relu (2)."
    ),
    "ModelSpec.tied_embeddings": "The output layer shares the input embedding's weights.",
    "ModelSpec.moe": "Mixture-of-experts shape; none for a dense model.",
    "ModelSpec.norm": "rmsnorm or layernorm (layernorm has a bias per norm).",
    "ModelSpec.mla": "Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2); none: GQA/MHA.",
    "ModelSpec.local_attention": (
        "Sliding-window or chunked layers (GPT-OSS, Gemma, Llama 4); none: every layer global."
    ),
    "MLASpec.kv_lora_rank": "Rank of the compressed KV latent.",
    "MLASpec.qk_nope_head_dim": "Per-head query/key width without rotary embedding.",
    "MLASpec.qk_rope_head_dim": "Per-head rotary query/key width (one rotary key shared by heads).",
    "MLASpec.v_head_dim": "Per-head value width.",
    "LocalAttention.kind": "sliding (the last window tokens) or chunked (window-token blocks).",
    "LocalAttention.global_every": "Every N-th layer (N, 2N, ...) is global; none: all local.",
    # contract
    "Contract.name": "Name shown in outputs.",
    "Contract.description": "What the contract is for.",
    "Contract.checks": "The checks; each names an op, a metric and one limit.",
    "Contract.counters": "Limits on NIC counter deltas (with --counters-before/--counters-after).",
    "Check.name": "Unique name; default op.tier.metric.",
    "Check.op": "all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall, sendrecv.",
    "Check.tier": "intra, leaf or spine: the tier a log's group tops out on; none = every tier.",
    "Check.metric": (
        "busbw (min_GBps or min_pct_of_model, sizes >= min_size), latency (max_us, sizes <= "
        "max_size), p99_p50 (max_ratio), p99_drift (max_drift_pct, the sustained run)."
    ),
    "Check.min_size": "Smallest message size covered, bytes or 8, 1K, 64M, 1G (binary units).",
    "Check.max_size": "Largest message size covered, bytes or 8, 1K, 64M, 1G.",
    "Check.min_GBps": "busbw floor, GB/s.",
    "Check.min_pct_of_model": "busbw floor as % of tierwise's prediction for the same group.",
    "Check.max_us": "latency ceiling, us.",
    "Check.max_ratio": "Ceiling of p99/p50 of per-iteration latency.",
    "Check.max_drift_pct": "Ceiling of the sustained run's last-window p99 over its first, %.",
    "CounterLimits.drops": "Dropped packets allowed (a lossless fabric shows none).",
    "CounterLimits.errors": "Link or packet errors allowed.",
    "CounterLimits.retransmits": "Retransmissions allowed.",
    "CounterLimits.out_of_sequence": "Out-of-sequence packets allowed.",
    "CounterLimits.pause_storm_events": "Pause storms allowed.",
    "CounterLimits.congestion": "Congestion events (CNPs, ECN marks, xmit wait); none = unlimited.",
    "CounterLimits.pause_per_s": "PFC pause frames per second on one counter that make a storm.",
}

TRACE_COLUMNS: dict[str, str] = {
    "id": "Unique job name.",
    "arrival_s": "Submission time, seconds from the start of the trace.",
    "duration_s": "Run time at ideal placement (compact, alone on the fabric), seconds.",
    "model": (
        "A model preset, a model file, or a bare parameter count (7e9, 70B); a named model's "
        "layout is checked against it (tp divides the heads ...)."
    ),
    "tp": "Tensor-parallel degree.",
    "pp": "Pipeline stages.",
    "dp": "Data-parallel degree; the job wants tp*pp*dp GPUs, in whole nodes.",
    "compute_s": "Compute time of one training step per GPU at ideal placement, seconds.",
    "priority": "Higher starts first; default 0.",
    "gpus": "GPUs the job wants; if given it must equal tp*pp*dp.",
}
"""The job-trace CSV columns (`tierwise.schedule.jobs`), for its reference page."""
