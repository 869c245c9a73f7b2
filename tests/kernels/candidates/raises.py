def custom_kernel(A):
    raise RuntimeError("kernel exploded")
