import not_a_real_module_qrsearch


def custom_kernel(A):
    return A
