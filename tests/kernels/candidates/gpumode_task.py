# A submission written for GPU MODE's runner, unchanged: it imports its task's type names.
import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    return torch.geqrf(data)
