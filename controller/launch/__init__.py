"""``mlfabric launch``: a user's own job, one process per emulated GPU, on an emulated fabric."""
