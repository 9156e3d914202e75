"""The 64-VM pretraining spec with its data on Managed Lustre: the deployment that carries every
piece of node set-up (NVMe scratch, a Lustre mount, the health units). Shared by the provision
tests; examples/node_reboots.py builds the same from examples/pretrain-64vm.toml."""

from __future__ import annotations


def lustre_data_spec(name: str = "lustre-data") -> str:
    return f"""
name = "{name}"
[cluster]
vm_size = "ND96isr_H100_v5"
nodes = 64
[workload]
kind = "pretrain"
params = "70B"
tokens_per_s_per_gpu = 1000
seq_len = 4096
global_batch = 512
dataset_size = "200 TB"
sharding = "fsdp"
[data]
source = "az://pretrain/tokens/v1"
tier = "lustre"
[run]
length = "48 h"
"""


LUSTRE_DATA = lustre_data_spec()
