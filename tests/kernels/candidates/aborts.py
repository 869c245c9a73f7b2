import os


def custom_kernel(A):
    os.abort()
