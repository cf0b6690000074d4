"""The model runner (the only owner of torch tensors and the model), CUDA graphs, device choice and
the paged-attention kernels."""
