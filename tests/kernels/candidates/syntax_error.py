def custom_kernel(A)
    return A
