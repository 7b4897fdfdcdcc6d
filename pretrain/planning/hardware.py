"""Accelerator specs in one place: memory, dense peak FLOP/s per precision and link bandwidths.

``pretrain plan`` sizes layouts with them and times each at the peak of its precision (``GPUSpec.peak``);
training divides achieved FLOP/s by the bf16 peak (``peak_flops``) to report MFU, for every precision: the
PaLM convention (H100/H200 989 TFLOP/s, A100 312 TFLOP/s), so runs in different precisions compare on one
scale. Peaks are dense (no 2:4 sparsity: half the datasheets' starred figures), from the vendors'
datasheets: NVIDIA H100 (SXM, PCIe, NVL), H200, HGX B200, A100, L40S, A10 and L4; AMD Instinct MI300X.
bf16 and fp16 run on tensor cores at the same rate; TF32 (fp32 storage, matmul inputs rounded to 10
mantissa bits) at half of it; plain fp32 on the CUDA cores (H100 SXM: 67 TFLOP/s, 6.8% of bf16; MI300X's
fp32 matrix cores: 163.4). A measured fp32 run without TF32 reached 4.2% of an H100's bf16 peak, 62% of
its fp32 peak (docs/gpu.md). The CPU entry has one figure for every precision.

Bandwidths are GB/s per GPU in one direction, as datasheets quote them halved: within a node, NVLink
(H100/H200 SXM: 18 NVLink-4 links, 900 GB/s bidirectional, so 450; A100: 600 -> 300; B200: 1800 -> 900;
MI300X: 7 Infinity Fabric links of 64 GB/s) or PCIe (Gen5 x16 ~64, Gen4 x16 ~32, less protocol overhead);
across nodes, the usual one NIC per GPU (DGX/HGX H100: 8 x 400 Gb/s InfiniBand NDR per 8-GPU node = 50
GB/s per GPU; A100: 8 x 200 Gb/s HDR = 25). These are assumptions about a typical cluster, not facts of
the chip: ``pretrain plan --intra-node-gbs/--inter-node-gbs`` override them.

Board power is the datasheets' maximum (TDP) of the SXM/OAM module or card, for a plan's energy
(``pretrain.planning.cost``): H100 and H200 SXM 700 W, H100 PCIe 350, H100 NVL 400, B200 1000, A100 SXM 400,
L40S 350, A10 150, L4 72, MI300X 750; ``--gpu-power-w`` overrides it.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace

from dataprep.core.errors import UsageError

PEAK_PRECISIONS = ("bf16", "fp16", "tf32", "fp32")  # GPUSpec.peak_flops_<precision>


@dataclass(frozen=True)
class GPUSpec:
    name: str
    memory_gb: float  # usable HBM as sold, decimal GB (80 GB = 80e9 bytes)
    peak_flops_bf16: float  # dense bf16 tensor-core FLOP/s
    peak_flops_fp16: float | None = None  # dense fp16 tensor-core FLOP/s (None: the bf16 figure)
    peak_flops_tf32: float | None = None  # dense TF32 tensor-core FLOP/s (None: the bf16 figure)
    peak_flops_fp32: float | None = None  # fp32 without tensor cores (None: the bf16 figure)
    intra_node_gbs: float = 450  # GB/s per GPU per direction to GPUs of its node (NVLink; PCIe cards less)
    inter_node_gbs: float = 50  # GB/s per GPU per direction to other nodes (its share of the node's NICs)
    gpus_per_node: int = 8  # usual server size; NVLink domain for tensor parallelism
    accelerator: bool = True  # False for the CPU entry: plans for it leave torch.compile off
    board_power_w: float | None = None  # the vendor's TDP (max board power), for a plan's energy; None: unknown

    @property
    def memory_bytes(self) -> float:
        return self.memory_gb * 1e9

    def peak(self, precision: str = "bf16") -> float:
        """Dense peak FLOP/s of matmuls in ``precision``: a step's time is its FLOPs over this x MFU."""
        if precision not in PEAK_PRECISIONS:
            raise UsageError(f"precision must be one of {', '.join(PEAK_PRECISIONS)}, got {precision!r}")
        value = getattr(self, f"peak_flops_{precision}")
        return self.peak_flops_bf16 if value is None else value

    def with_peak(self, precision: str, flops: float) -> GPUSpec:
        """This spec with ``precision``'s peak replaced (``--peak-flops``)."""
        self.peak(precision)  # validates the name
        return replace(self, **{f"peak_flops_{precision}": flops})

    def to_dict(self) -> dict:
        return asdict(self)


# key -> spec. Keys are what users type (--gpu h100); names are what datasheets call them. Peaks, dense
# FLOP/s: bf16, fp16, tf32, fp32 (module doc).
GPUS: dict[str, GPUSpec] = {
    "h100": GPUSpec("NVIDIA H100 SXM 80GB", 80, 989e12, 989e12, 494.5e12, 67e12, board_power_w=700),
    "h100-pcie": GPUSpec(
        "NVIDIA H100 PCIe 80GB",
        80,
        756e12,
        756e12,
        378e12,
        51e12,
        intra_node_gbs=64,
        inter_node_gbs=25,
        board_power_w=350,
    ),
    "h100-nvl": GPUSpec(
        "NVIDIA H100 NVL 94GB",
        94,
        835e12,
        835e12,
        417.5e12,
        60e12,
        intra_node_gbs=64,
        inter_node_gbs=25,
        board_power_w=400,
    ),
    "h200": GPUSpec("NVIDIA H200 SXM 141GB", 141, 989e12, 989e12, 494.5e12, 67e12, board_power_w=700),
    "b200": GPUSpec("NVIDIA B200 180GB", 180, 2250e12, 2250e12, 1100e12, 75e12, intra_node_gbs=900, board_power_w=1000),
    "a100-80gb": GPUSpec(
        "NVIDIA A100 80GB",
        80,
        312e12,
        312e12,
        156e12,
        19.5e12,
        intra_node_gbs=300,
        inter_node_gbs=25,
        board_power_w=400,
    ),
    "a100-40gb": GPUSpec(
        "NVIDIA A100 40GB",
        40,
        312e12,
        312e12,
        156e12,
        19.5e12,
        intra_node_gbs=300,
        inter_node_gbs=25,
        board_power_w=400,
    ),
    "l40s": GPUSpec(
        "NVIDIA L40S 48GB",
        48,
        362e12,
        362e12,
        183e12,
        91.6e12,
        intra_node_gbs=32,
        inter_node_gbs=12.5,
        board_power_w=350,
    ),
    "a10": GPUSpec(
        "NVIDIA A10 24GB",
        24,
        125e12,
        125e12,
        62.5e12,
        31.2e12,
        intra_node_gbs=32,
        inter_node_gbs=12.5,
        gpus_per_node=4,
        board_power_w=150,
    ),
    "l4": GPUSpec(
        "NVIDIA L4 24GB",
        24,
        121e12,
        121e12,
        60e12,
        30.3e12,
        intra_node_gbs=32,
        inter_node_gbs=12.5,
        gpus_per_node=4,
        board_power_w=72,
    ),
    "mi300x": GPUSpec(
        "AMD Instinct MI300X 192GB", 192, 1307e12, 1307e12, 653.7e12, 163.4e12, intra_node_gbs=448, board_power_w=750
    ),
    # Plans for CPU-only runs (tests, the demo): a small node's cores, one figure for every precision;
    # override --peak-flops/--gpu-memory-gb.
    "cpu": GPUSpec(
        "CPU cores (fp32)", 16, 1e11, intra_node_gbs=10, inter_node_gbs=1.25, gpus_per_node=1, accelerator=False
    ),
}

ALIASES = {"h100-sxm": "h100", "a100": "a100-80gb", "a100-sxm": "a100-80gb"}

# torch.cuda.get_device_name() strings -> key, first match wins (so "H100 PCIe" before "H100"); a model
# number never matches the start of a longer one ("H1000" is no H100).
_DEVICE_PATTERNS = [
    (r"H100(?!\d).*PCIE", "h100-pcie"),
    (r"H100(?!\d).*NVL", "h100-nvl"),
    (r"H100(?!\d)", "h100"),
    (r"H200(?!\d)", "h200"),
    (r"B200(?!\d)", "b200"),
    (r"A100(?!\d).*40\s*GB", "a100-40gb"),
    (r"A100(?!\d)", "a100-80gb"),
    (r"L40S", "l40s"),
    (r"\bL4\b", "l4"),
    (r"\bA10\b", "a10"),
    (r"MI300X", "mi300x"),
]


def match_device(device_name: str) -> GPUSpec | None:
    """The spec for a device name such as 'NVIDIA H100 80GB HBM3', or None if it is not in the table."""
    upper = device_name.upper()
    for pattern, key in _DEVICE_PATTERNS:
        if re.search(pattern, upper):
            return GPUS[key]
    return None


def peak_flops(device_name: str, precision: str = "bf16") -> float | None:
    """Dense peak FLOP/s for an accelerator name (None if unknown: MFU is then not reported); training's
    MFU uses the bf16 peak for every precision (module doc)."""
    spec = match_device(device_name)
    return spec.peak(precision) if spec else None


def get_gpu(name: str) -> GPUSpec:
    """Look up a table key ('h100', 'a100-40gb'), an alias or a device name; ValueError if unknown."""
    key = name.strip().lower().replace("_", "-").replace(" ", "-")
    key = ALIASES.get(key, key)
    if key in GPUS:
        return GPUS[key]
    spec = match_device(name)
    if spec is None:
        from dataprep.core.validation import did_you_mean

        raise UsageError(
            f"unknown GPU {name!r}{did_you_mean(key, [*GPUS, *ALIASES])} (known: {', '.join(GPUS)}; "
            "or give memory and peak FLOP/s)"
        )
    return spec
