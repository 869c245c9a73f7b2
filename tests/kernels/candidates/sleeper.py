import time

import torch


def custom_kernel(A):
    time.sleep(600)
    return torch.geqrf(A)
